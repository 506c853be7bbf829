"""``mathjudge audit``: how gullible is the judge a run would use?

The tasks are loaded by lm-eval's own ``TaskManager`` with the given metadata,
exactly as ``lm_eval --tasks ... --metadata ...`` loads them: the judge
settings come from the same layers (YAML, ``MATHJUDGE_*``, ``--metadata``), the
docs from the same loader (``MATHJUDGE_DATA_DIR`` or the hub). Each task's judge
then judges the audit battery (``lm_eval_mathjudge.audit``).

Exit codes: 0 the audit is complete and no false-positive rate is above
``--max-false-positive``; 1 some rate is above it; 2 an error (bad input,
a judge that cannot be used); 3 the audit is incomplete (a dry run, a batch
still pending, or answers the judge could not be reached for; rerun: what was
judged is cached).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ..core import data_sets
from .rejudge import FAMILIES, task_paths
from .runs import ReportError

EXIT_OK, EXIT_ABOVE, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2, 3
DEFAULT_TASKS = "gpt4em"


def task_names(spec: str | None) -> list[str]:
    """Comma-separated plugin tasks; a judge family (``gpt4em``, ``vlmjudge``) names its task on every data set."""
    names: list[str] = []
    known = data_sets.names()
    for part in (p.strip() for p in (spec or DEFAULT_TASKS).split(",")):
        if part in FAMILIES:
            names += [f"{d}_{part}" for d in known]
        elif part.rsplit("_", 1)[0] in known and part.rsplit("_", 1)[-1] in FAMILIES:
            names.append(part)
        elif part:
            raise ReportError(f"--tasks {part!r}: not a task of this plugin; give <dataset>_<judge> with dataset one "
                              f"of {', '.join(known)} and judge one of {', '.join(FAMILIES)}, or a judge alone "
                              f"({', '.join(FAMILIES)}) for every data set")
    if not names:
        raise ReportError("--tasks names no task")
    return list(dict.fromkeys(names))


def load_tasks(names: list[str], metadata: dict[str, Any]) -> list[Any]:
    """The judged tasks as lm-eval builds them for ``--tasks names --metadata metadata``, as the audit's targets."""
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=task_paths(), include_defaults=False, metadata=metadata)
    loaded = manager.load(names)["tasks"]
    by_name = {str(key).split("::")[-1]: task for key, task in loaded.items()}
    # The counterfactual re-check is made, so the report has each rate with and without it; a panel's rate
    # without it is known exactly only when no member was re-checked, so a panel is re-checked only when
    # its settings ask for it (judge_counterfactual=true).
    return [task.plan.audit_target(task.config.task, task.eval_docs, recheck=None if task.plan.options.panel else True)
            for task in (by_name[n] for n in names)]


def gated_on_recheck(metadata: dict[str, Any]) -> bool:
    """--max-false-positive gates the rates a run with these settings would credit: with the re-check when
    they turn judge_counterfactual on, else without it."""
    from ..settings.layers import resolve_run_options

    return resolve_run_options("exact_match", None, metadata).counterfactual


def run(args: Any, metadata: dict[str, Any]) -> int:
    from ..audit import audit_tasks
    from ..batch.base import BatchPending
    from ..cost.budget import DryRunDone
    from ..cost.ledger import Ledger

    if args.limit is not None and args.limit < 1:
        raise ReportError("--limit must be at least 1 (answers per attack family and task)")
    if args.max_false_positive is not None and not 0.0 <= args.max_false_positive <= 1.0:
        raise ReportError("--max-false-positive is a rate between 0 and 1 (e.g. 0.05)")
    tasks = load_tasks(task_names(args.tasks), metadata)
    ledger = Ledger()
    try:
        report = audit_tasks(tasks, args.limit, ledger)
    except (DryRunDone, BatchPending) as exc:
        print(f"mathjudge audit: not audited yet: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    if args.output:
        _write(args.output, report)
    print(ledger.table(), file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(render(report))
    return _verdict(report, args.max_false_positive, gated_on_recheck(metadata))


def render(report: dict[str, Any]) -> str:
    from ..audit import table

    battery = report["battery"]
    parts = [f"judge audit, battery v{battery['version']} ({battery['sha256'][:12]})"]
    for name, block in report["tasks"].items():
        parts += ["", f"## {name}: {block['judge']} ({block['metric']}, up to {block['limit']} answers per family)",
                  "", table(block)]
    if len(report["tasks"]) > 1:
        parts += ["", f"## all tasks: {', '.join(report['overall']['judges'])}", "", table(report["overall"])]
    cost = report["cost"]["total"]
    usd = f"USD {cost['usd']:.4f}" if cost["usd"] is not None else "USD unknown (no price; see judge_prices)"
    parts += ["", f"cost: {cost['calls']} judge calls, {cost['cached']} answered from the cache, {usd}"]
    return "\n".join(parts)


def _verdict(report: dict[str, Any], threshold: float | None, recheck: bool = False) -> int:
    from ..audit import breaches

    above = []
    if threshold is not None:
        blocks = list(report["tasks"].items())
        if len(blocks) > 1:
            blocks.append(("all tasks", report["overall"]))
        above = [f"{name} {family} {rate:.3f}" for name, block in blocks
                 for family, rate in breaches(block, threshold, recheck)]
    if above:
        which = "with" if recheck else "without"
        print(f"mathjudge audit: false-positive rate above {threshold:g} ({which} the counterfactual re-check): "
              f"{'; '.join(above)}", file=sys.stderr)
        return EXIT_ABOVE
    if not report["overall"]["complete"]:
        unreached = report["overall"]["failures"]["unreached"]
        print(f"mathjudge audit: incomplete: {unreached} answer(s) got no verdict because the judge could not be "
              "reached; rerun the same command (what was judged is cached)", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_OK


def _write(path: str, report: dict[str, Any]) -> None:
    from ..core.files import write_atomic

    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_atomic(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")  # whole or absent
    except OSError as exc:
        raise ReportError(f"cannot write {path} ({exc.strerror}); choose another --output (the judge replies are "
                          "cached: rerunning costs nothing)") from None
