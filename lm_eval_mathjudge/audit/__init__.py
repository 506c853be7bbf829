"""The judge audit: how often does the configured judge credit an answer written to game it?

A fixed, versioned battery of adversarial answers (``battery.py``,
``battery_v<N>.json``) is paired with real problems of each task's data set
and judged by the task's own judge, exactly as its samples would be (a
``Target``: a fresh copy of the task's judge and its own way of rendering a
request, so the same settings, template, cache, limits, retries, batch mode,
panel or cascade; dry run and budget first, then every audited task's answers
through one pool, ``judging/schedule.py``). The outcomes
become false-positive rates per attack family with Wilson intervals, control
accuracies and judge failures (``score.py``), and the calls go into the cost
ledger (``cost.Ledger``).

Two entry points: ``mathjudge audit`` (``reports/audit.py``) audits the tasks
it loads; ``judge_audit=true`` in a run (``in_run``) audits each judge once per
process and records the summary in the task's ``metadata.judge.audit``.
Answers already judged are cached like any other request, so a rerun is free.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .battery import Item, build, load
from .score import Row, breaches, summarise, table

__all__ = ["Item", "Target", "audit_tasks", "breaches", "build", "in_run", "load", "table"]

RECHECK = "counterfactual"  # the report's block of rates with the re-check (judging/counterfactual.py)
_DONE: dict[str, dict[str, Any]] = {}  # judge key -> the record of the audit made for it in this process


@dataclass(frozen=True)
class Target:
    """What the audit needs of a judged task (``harness.plan.JudgePlan.audit_target`` makes one)."""
    name: str  # the task
    docs: Any  # its eval docs: the battery's answers are paired with its problems
    judge: Any  # its judge (core/judges.py): scores and describes a verdict
    limit: int  # answers per attack family (judge_audit_limit)
    label: str  # its judging pipeline (settings.schema.pipeline_label)
    open_judge: Callable[[], tuple[Any, list]]  # a fresh copy of its judge and the member clients; caller closes
    render: Callable[[Any, str], Any]  # (doc, answer) -> the judge request, as the task renders its samples


def ledger_name(task: str) -> str:
    return f"audit:{task}"


def audit_tasks(tasks: Sequence[Target], limit: int | None = None, ledger: Any = None,
                saved: str | Callable[[], str] = "") -> dict[str, Any]:
    """Audit each judged task's judge on its own problems; the report (JSON-able, with every item).

    ``limit``: answers per family and task (default: each task's ``judge_audit_limit``). Every judge is
    opened and the dry run and budget are checked over all tasks before the first call; ``saved`` says
    where generations were kept when either stops the run.
    """
    from ..cost.ledger import Ledger
    from ..cost.spend import check_spend
    from ..judging import schedule

    battery = load()
    ledger = Ledger() if ledger is None else ledger
    plans: list[tuple[Any, list[Item], Any, list]] = []  # (task, items, its job, member clients)
    try:
        for task in tasks:
            items = build(task.name, list(task.docs), limit or task.limit, battery)
            client, members = task.open_judge()
            try:
                built = [task.render(i.doc, i.response) for i in items]
                job = schedule.Job.build(ledger_name(task.name), client, len(built), built.__getitem__, members)
            except BaseException:
                client.close()
                raise
            plans.append((task, items, job, members))
        jobs = [job for _, _, job, _ in plans]
        check_spend(schedule.parts_of(jobs), saved)
        schedule.submit_all_batches(jobs, saved if callable(saved) else lambda: saved)
        names = [job.name for job in jobs]
        schedule.judge(jobs, f"judging {names[0]}" if len(names) == 1 else f"judging {len(names)} audits")
        results = [(task, items, job.slot_outcomes()) for task, items, job, _ in plans]
    finally:
        for task, _, job, members in plans:
            for member in members:
                ledger.record_stats(ledger_name(task.name), member.settings, member.stats)
            job.client.close()
    return _report(battery, results, limit, ledger)


def _report(battery: Any, results: list, limit: int | None, ledger: Any) -> dict[str, Any]:
    per_task: dict[str, dict[str, Any]] = {}
    every: list[Row] = []
    details: list[dict[str, Any]] = []
    checked: list[Row] = []
    for task, items, outcomes in results:
        judge = task.judge
        rows = [(item, o, judge.credits(o.verdict)) for item, o in zip(items, outcomes)]
        before = [_without_recheck(row, judge) for row in rows]
        per_task[task.name] = {"judge": task.label, "metric": judge.metric_names[0],
                               "limit": limit or task.limit, **summarise(before), **_rechecked(rows)}
        every += before
        checked += rows
        details += [_detail(row, judge, first) for row, (_, _, first) in zip(rows, before)]
    return {"battery": battery.describe(), "tasks": per_task,
            "overall": {"judges": sorted({t["judge"] for t in per_task.values()}), **summarise(every),
                        **_rechecked(checked)},
            "cost": ledger.as_dict(), "items": details}


_PRIMARY_FIELD = {"exact_match": "correct", "vlm": "final_correct"}  # the verdict field a credit reads


def _without_recheck(row: Row, judge: Any) -> Row:
    """The row as the judge decided it before the counterfactual re-check withheld a credit (a panel: by
    the majority of its members' first asks)."""
    item, outcome, credited = row
    if credited or not _credited_first(outcome.detail, _PRIMARY_FIELD.get(judge.name, "correct")):
        return row
    return item, dataclasses.replace(outcome, failure=None, transport=False, verdict=True), True


def _credited_first(detail: Any, field: str) -> bool:
    if not isinstance(detail, dict):
        return False
    if "credited" in (detail.get(RECHECK) or {}):
        return True
    members = detail.get("panel") or []
    votes = [True if "credited" in (m.get(RECHECK) or {}) else
             None if m.get("verdict") is None else bool(m["verdict"].get(field)) for m in members]
    answered = [v for v in votes if v is not None]
    quorum = len(members) // 2 + 1  # the default quorum: a panel_min is not in the record
    return (any("credited" in (m.get(RECHECK) or {}) for m in members) and len(answered) >= quorum
            and 2 * sum(answered) > len(answered))


def _has_recheck(detail: Any) -> bool:
    members = detail.get("panel") or () if isinstance(detail, dict) else ()
    return isinstance(detail, dict) and (RECHECK in detail or any(RECHECK in m for m in members))


def _rechecked(rows: list[Row]) -> dict[str, Any]:
    """The rates with the counterfactual re-check (``counterfactual``), when the judge made it."""
    if not any(_has_recheck(o.detail) for _, o, _ in rows):
        return {}
    return {RECHECK: summarise(rows)}


def in_run(task: Target, key: str) -> dict[str, Any]:
    """``judge_audit=true``: the audit record of this task's judge, audited once per process."""
    key = f"{load().sha256}:{key}"
    if key not in _DONE:
        from ..cost.ledger import Ledger

        ledger = Ledger()
        report = audit_tasks([task], ledger=ledger)
        name = task.name
        print(f"judge audit of {report['tasks'][name]['judge']} on {name} (battery v{report['battery']['version']}):\n"
              f"{table(report['tasks'][name])}\n{ledger.table()}", file=sys.stderr, flush=True)
        _DONE[key] = {k: v for k, v in report.items() if k != "items"}
    return _DONE[key]


def pending_pairs(task: Target, key: str) -> list[tuple[Any, str]]:
    """The (doc, answer) pairs ``in_run`` would judge for this task; none once its judge is audited."""
    if f"{load().sha256}:{key}" in _DONE:
        return []
    items = build(task.name, list(task.docs), task.limit)
    return [(item.doc, item.response) for item in items]


def _detail(row: Row, judge: Any, first: bool) -> dict[str, Any]:
    """One answer of the report: ``credited`` by the judge's first ask; with the re-check, whether the credit
    survived it (``credited_with_recheck``) and the re-check's record."""
    item, outcome, credited = row
    record = outcome.detail.get(RECHECK) if isinstance(outcome.detail, dict) else None
    checked = {RECHECK: record, "credited_with_recheck": credited} if _has_recheck(outcome.detail) else {}
    return {**item.as_dict(), "credited": first, **checked,
            "verdict": None if outcome.verdict is None else judge.describe(outcome.verdict),
            "failure": outcome.failure, "error": outcome.error, "raw_reply": outcome.raw_reply,
            "cached": outcome.cached}

