"""Whole-run judging: every judged task of an ``lm_eval`` call through one pool.

lm-eval generates for every task first, then calls each task's ``apply_filters``
one task after another (0.4.12/0.4.13: ``evaluate``; 0.5.0.dev1: each task's
``process_instances``). Judged task by task, each task would wait for its own
slowest call before the next task's first call. So the first judged task's
``apply_filters`` judges every pending task here: each task's filters run, its
requests are keyed, and the unique requests of all tasks (several
``JudgeClient``s, possibly different backends) go through ONE
``workers.run_bounded`` with one progress bar, the next request always from the task
with the most work left (``Schedule``). Each task's own ``apply_filters``
then only reads its outcomes back (``JudgedTask._finish_job``), so scores,
samples files, ``judge_failed``, per-task stats and a transport failure stay
per task: a task raises for its own samples only, when lm-eval reaches it.

Streaming: a request is rendered to compute its key, then dropped; a worker
renders it again right before its call. What stays per sample is a key (and an
outcome once judged), not a prompt, so memory does not grow with prompt size.

Pending tasks are the ones ``register``ed when they built their requests,
whose every instance has a response and that have not been judged yet. A task
judged by a panel or a cascade keeps its own path (``judge_all`` in its own
``apply_filters``). ``LM_EVAL_MATHJUDGE_TASK_BY_TASK=1`` judges task by task (the bench's
"before").
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from ..calls.workers import run_bounded
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome, clean_text
from ..cost import spend
from ..cost.spend import Part
from ..cost.ledger import Ledger
from ..judging.client import JudgeClient
from . import recovery

log = logging.getLogger(__name__)

# "1": judge task by task (the before of bench/ten_tasks.py). Outside the MATHJUDGE_ namespace, whose
# variables config.py validates as judge settings; this is a measuring switch, not a setting.
TASK_BY_TASK_ENV = "LM_EVAL_MATHJUDGE_TASK_BY_TASK"

_PENDING: list[weakref.ref] = []  # registered tasks, in lm-eval's order (weak: finished tasks go)
_LOCK = threading.Lock()


def register(task: Any) -> None:
    """A task built its requests: it takes part in the next whole-run judge pass."""
    with _LOCK:
        _PENDING[:] = [ref for ref in _PENDING if ref() is not None and ref() is not task]
        _PENDING.append(weakref.ref(task))


def whole_run() -> bool:
    return os.environ.get(TASK_BY_TASK_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


@dataclass
class Job:
    """One task's share of a judge pass.

    ``keys[i]`` is slot i's request key, or None when slot i is not judged (its
    outcome is then in ``skipped``); ``render(i)`` rebuilds slot i's request.
    """
    name: str
    client: JudgeClient
    keys: list[str | None]
    skipped: dict[int, Outcome]
    render: Callable[[int], JudgeRequest | Outcome]
    first_slot: dict[str, int] = field(default_factory=dict)  # unique key -> the slot that renders it
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    error: BaseException | None = None  # an unexpected error while judging this task (raised by it)
    cost: dict[str, Any] | None = None

    @classmethod
    def build(cls, name: str, client: JudgeClient, slots: int,
              render: Callable[[int], JudgeRequest | Outcome]) -> "Job":
        """Render each slot once to key it; keep the key, drop the request."""
        job = cls(name=name, client=client, keys=[], skipped={}, render=render)
        for i in range(slots):
            built = render(i)
            if isinstance(built, Outcome):
                job.keys.append(None)
                job.skipped[i] = built
                continue
            key = client.key(built)
            job.keys.append(key)
            job.first_slot.setdefault(key, i)
        client.count_requests(len(job.keys) - len(job.skipped), len(job.first_slot))
        return job

    def requests(self) -> Iterator[tuple[str, JudgeRequest]]:
        """The unique (key, request) items, rendered one at a time."""
        for key, slot in self.first_slot.items():
            request = self.render(slot)
            if isinstance(request, JudgeRequest):
                yield key, request

    def outcome(self, slot: int) -> Outcome:
        key = self.keys[slot]
        return self.skipped[slot] if key is None else self.outcomes[key]

    def failed(self) -> int:
        """Samples without a verdict so far (a task that broke off counts what it has)."""
        judged = (self.skipped.get(i) if key is None else self.outcomes.get(key) for i, key in enumerate(self.keys))
        return sum(1 for outcome in judged if outcome is not None and outcome.failure)


def pending(first: Any) -> list[Any]:
    """The tasks the pass started by ``first`` judges (``first`` included), claimed once."""
    if not whole_run():
        return [first]
    with _LOCK:
        tasks = [t for t in (ref() for ref in _PENDING) if t is not None]
        chosen = [t for t in tasks if t is first or t._joins_run()]
        _PENDING[:] = [ref for ref in _PENDING if ref() is not None and ref() not in chosen]
    return chosen if first in chosen else [first, *chosen]


def judge(jobs: Sequence[Job], desc: str, progress: bool = True) -> None:
    """Judge every job's unique requests through one bounded pool; outcomes land in each job.

    The pool runs one slot per unique request; each slot takes the next request from ``Schedule``
    when a worker is free, so the order adapts to how long each task's calls take.
    """
    schedule = Schedule(jobs)
    concurrency = max((job.client.concurrency for job in jobs), default=1)

    def one(_slot: int) -> None:
        job, key = schedule.next()
        if job.error is not None:
            return
        started = time.monotonic()
        try:
            request = job.render(job.first_slot[key])
            # Rendered differently the second time (a media file changed meanwhile): that outcome stands.
            outcome = request if isinstance(request, Outcome) else job.client.judge_one(key, request)
        except Exception as exc:  # noqa: BLE001 - this task fails alone, when lm-eval reaches it
            log.debug("%s: judging failed", job.name, exc_info=True)
            job.error = job.error or exc
            return
        schedule.done(job, time.monotonic() - started)
        job.outcomes[key] = outcome  # one writer per key: each key is handed out once

    def on_bar(bar: Any) -> None:
        for job in jobs:
            job.client.set_bar(bar)

    run_bounded(range(schedule.total), one, concurrency=concurrency, desc=desc, progress=progress, on_bar=on_bar)
    for job in jobs:
        job.client.set_bar(None)
        job.client.finish(job.outcomes.values())


class Schedule:
    """Hands out the run's requests, next from the task with the most work left.

    Work left = requests left x that task's mean call time so far (the mean over every task
    before it has its own, 1 s before any call). A task whose calls are slow is started early
    instead of stretching the end of the pass; equal tasks are taken in turn.
    """

    def __init__(self, jobs: Sequence[Job]):
        self._left = [(job, deque(job.first_slot)) for job in jobs]
        self._time = {id(job): [0.0, 0] for job in jobs}  # seconds spent, calls timed
        self._lock = threading.Lock()
        self.total = sum(len(keys) for _, keys in self._left)

    def next(self) -> tuple[Job, str]:
        with self._lock:
            spent = sum(t for t, _ in self._time.values())
            timed = sum(n for _, n in self._time.values())
            default = spent / timed if timed else 1.0

            def work(entry: tuple[Job, deque]) -> float:
                seconds, n = self._time[id(entry[0])]
                return len(entry[1]) * (seconds / n if n else default)
            job, keys = max((e for e in self._left if e[1]), key=work)
            return job, keys.popleft()

    def done(self, job: Job, seconds: float) -> None:
        with self._lock:
            record = self._time[id(job)]
            record[0] += seconds
            record[1] += 1


def failure_message(job: Job) -> str:
    return f"{job.name}: judging failed: {redact(clean_text(str(job.error)))}."


def run_pass(first: Any) -> None:
    """Judge ``first`` and every other pending task in one pool; each task keeps its ``Job``.

    ``first`` fails alone when it cannot start (its filters, its requests); another
    task that cannot start is left to judge itself when lm-eval reaches it.
    """
    started: list[tuple[Any, Job]] = []
    for task in pending(first):
        try:
            started.append((task, task._start_job()))
        except Exception:
            if task is first:
                raise
            log.debug("%s: left to judge itself", task.config.task, exc_info=True)
    jobs = [job for _, job in started]
    audits: dict[str, list[Part]] = {}  # judge_audit=true: each judge's audit is estimated too, once
    for task, _ in started:
        if task.options.audit:
            audits.setdefault(task._audit_key(), task._audit_parts())
    check_spend(parts_of(jobs) + [part for parts in audits.values() for part in parts],
                first._settings.resolved_cache_dir())  # dry run / budget: before any call
    submit_all_batches(jobs)
    names = [job.name for job in jobs]
    desc = f"judging {names[0]}" if len(names) == 1 else f"judging {len(names)} tasks"
    judge(jobs, desc)
    summarise(jobs)
    for task, job in started:
        task._job = job


def submit_all_batches(jobs: Sequence[Job]) -> None:
    """Batch mode: every task's job is submitted (or collected) before the run stops for any of them.

    With ``batch_wait=false`` each task's pre-fill stops with ``BatchPending``; stopping at the
    first would leave the other tasks unsubmitted, and the rerun would wait for them one by one.
    """
    batched = [job for job in jobs if job.client.batch_mode]
    if not batched:
        return
    from ..batch.base import BatchPending  # lazy: online runs never load the batch package

    pending: list[tuple[str, BatchPending]] = []
    for job in batched:
        try:
            job.client.prefill(list(job.requests()))
        except BatchPending as exc:
            pending.append((job.name, exc))
    if pending:  # every live task's generations are kept, so the rerun that collects regenerates nothing
        saved = recovery.keep_generations(batched[0].client.settings.resolved_cache_dir())
        text = str(pending[0][1]) if len(pending) == 1 else "; ".join(f"{name}: {exc}" for name, exc in pending)
        raise BatchPending(f"{text} {saved}", job_ids=[i for _, exc in pending for i in exc.job_ids])


# ---------------------------------------------------------------------- cost (cost/: estimate, ledger, budget, spend)
def parts_of(jobs: Sequence[Job]) -> list[Part]:
    return [Part(job.name, job.client, job.requests) for job in jobs]


def check_spend(parts: Sequence[Part], cache_dir: str) -> None:
    """The dry run and the budget (``cost.spend``); a stop saves every live task's generations and says where."""
    spend.check_spend(parts, saved=functools.partial(recovery.keep_generations, cache_dir))


def summarise_members(task: str, clients: Sequence[JudgeClient]) -> dict[str, Any]:
    """A panel's or a cascade's task (its own path): its cost block, one line per member judge; printed."""
    ledger = Ledger()
    for client in clients:
        ledger.record_stats(task, client.settings, client.stats)
    print(ledger.table(), file=sys.stderr, flush=True)
    return {"cost": ledger.task_dict(task)}


def summarise(jobs: Sequence[Job]) -> None:
    """One cost table for the run; each job gets its task's block and the run's totals."""
    ledger = Ledger()
    for job in jobs:
        ledger.record_stats(job.name, job.client.settings, job.client.stats, failed=job.failed())
    print(ledger.table(), file=sys.stderr, flush=True)
    run_block = ledger.as_dict()
    run_block = {**{k: v for k, v in run_block.items() if k != "tasks"}, "tasks": list(run_block["tasks"])}
    for job in jobs:
        job.cost = {"cost": ledger.task_dict(job.name), "run_cost": run_block}
