"""Wires the judged tasks of one ``lm_eval`` call to the run's one pool (``judging/schedule.py``).

lm-eval generates for every task first, then calls each task's ``apply_filters``
one task after another (0.4.12/0.4.13: ``evaluate``; 0.5.0.dev1: each task's
``process_instances``). Judged task by task, each task would wait for its own
slowest call before the next task's first call. So the first judged task's
``apply_filters`` judges every pending task here: each task hands over its
``TaskSpec`` (plain judge, panel or cascade alike), the dry run and the budget
cover every member of every task (and the judge audits that follow), batch jobs
are all submitted, and the unique requests of all tasks go through ONE pool
with one progress bar and one cost table. Each task gets its judged ``Job`` back
through its spec and, in its own ``apply_filters``, raises for its own samples
only, when lm-eval reaches it.

Pending tasks are the ones ``register``ed when they built their requests, whose
every instance has a response and that have not been judged yet.
``LM_EVAL_MATHJUDGE_TASK_BY_TASK=1`` judges task by task (the bench's "before").

Streaming (``judge_stream``, on by default): a task that may (``JudgedTask.streams``: online judge,
no dry run, filters that read one response at a time) registers its generation keys with
``stream``; as the model reports each finished generation (``compat.watch_generations``), its
judge requests start at once in the run's ``schedule.Early`` calls, and the pass above takes their
outcomes instead of asking again. With a budget, the first streamed generation first checks the
worst case (every answer at max_gen_toks); above the budget the run is judged after generation.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

from .. import compat
from ..calls import stop
from ..cost import budget, spend
from ..judging import schedule
from ..judging.schedule import Job, TaskSpec
from . import provenance, recovery

log = logging.getLogger(__name__)

# "1": judge task by task (the before of bench/ten_tasks.py). Outside the MATHJUDGE_ namespace, whose
# variables config.py validates as judge settings; this is a measuring switch, not a setting.
TASK_BY_TASK_ENV = "LM_EVAL_MATHJUDGE_TASK_BY_TASK"

_PENDING: list[weakref.ref] = []  # registered tasks, in lm-eval's order (weak: finished tasks go)
_LOCK = threading.Lock()
EARLY_STOP_KEY = "early judge calls"
_STREAMED: dict[str, list["_Target"]] = {}  # generation key -> the instances that stream its generations
# The run's early judge calls: one, once the first generation arrived (None: the budget said no streaming).
_EARLY: list[schedule.Early | None] = []
_FIRST = threading.Lock()  # held while the first streamed generation decides whether the run streams


def register(task: Any) -> None:
    """A task built its requests: it takes part in the next whole-run judge pass."""
    with _LOCK:
        _PENDING[:] = [ref for ref in _PENDING if ref() is not None and ref() is not task]
        _PENDING.append(weakref.ref(task))


def stream(task: Any, budgeted: bool = False) -> None:
    """Judge this task's samples as their generations arrive (the task said it may: ``streams``);
    ``budgeted``: its judge has a budget (checked on the worst case before the first streamed call)."""
    instances = getattr(task, "_instances", None) or []
    keys = [compat.generation_key(inst.args) if getattr(inst, "request_type", None) == "generate_until" else None
            for inst in instances]
    with _LOCK:
        for i, key in enumerate(keys):
            if key is not None:  # k samples (repeats): the model reports k generations under one key
                repeats = instances[i].repeats or 1
                _STREAMED.setdefault(key, []).append(_Target(weakref.ref(task), i, repeats, repeats, budgeted))
    compat.watch_generations(_arrived)


@dataclass
class _Target:
    """An instance waiting for its generations: ``left`` of its ``repeats`` still to come."""
    task: weakref.ref
    index: int
    repeats: int
    left: int
    budgeted: bool  # its judge has a budget: every early call must be one the worst case counted


def _streams_shared(waiting: list[_Target]) -> bool:
    """May one generation key that several instances wait on (two tasks with one prompt) be streamed?

    Which task's generation an arrival is, lm-eval says only at the end (in request order, while
    arrivals come as they finish). Every waiting task takes the first arrival: right when the model
    answers a prompt the same way each time (greedy), and at most one call more per task when it
    does not. That extra call is outside a budget's worst case, and with k samples each task would
    take every arrival: then the pass judges this key, after generation.
    """
    return len(waiting) <= 1 or not any(t.budgeted or t.repeats > 1 for t in waiting)


def _arrived(attr: str, args: Any, result: Any) -> None:
    """One finished generation: the judge requests of the instances that asked for it start now."""
    if attr != "generate_until" or not _STREAMED or not isinstance(result, str):
        return
    key = compat.generation_key(args)
    with _LOCK:  # each instance asking for this key takes one sample (two tasks with one prompt: both)
        waiting = _STREAMED.get(key, [])
        if not _streams_shared(waiting):
            del _STREAMED[key]  # judged by the pass, on each task's own generations
            return
        targets = [(t.task, t.index) for t in waiting if t.left > 0]
        for t in waiting:
            t.left -= 1
        if waiting and all(t.left <= 0 for t in waiting):
            del _STREAMED[key]
    for ref, index in targets:
        task = ref()
        if task is None:
            continue
        client, requests = task.stream_requests(index, result)
        early = _early_calls(client)
        if early is None:  # the budget could not cover the worst case: the pass judges these, after generation
            return
        for judge_key, request in requests:
            early.start(client, judge_key, request)


def _early_calls(client: Any) -> schedule.Early | None:
    """The run's early calls, made by the first streamed generation; None when the budget decides on the
    real answers instead (``_within_budget``), for the rest of the run."""
    with _FIRST:  # one thread decides; the others wait for its decision
        with _LOCK:
            if _EARLY:
                return _EARLY[0]
        allowed = _within_budget()
        with _LOCK:
            if not allowed:
                _STREAMED.clear()  # every task is judged by its pass, budget first, as without streaming
                _EARLY.append(None)
                return None
            _EARLY.append(schedule.Early(client.concurrency))
            # a stop waits, bounded, for the replies of these calls too: every reply paid for is cached
            stop.guard(EARLY_STOP_KEY, _drain_early)
            return _EARLY[0]


def _within_budget() -> bool:
    """Before the first streamed call: may the run start judging before its last answer exists?

    Every judged task of the run (the ones lm-eval built, streamed or not) with each answer at its
    longest: within judge_budget_usd, nothing the run can ask goes over it, so streaming is safe.
    Above it, the run is judged after generation and the budget decides on the real answers, exactly as
    with judge_stream=false (a refusal there costs nothing either).
    """
    with _LOCK:
        tasks = [t for t in (ref() for ref in _PENDING) if t is not None]
    if budget.budget_of(s for task in tasks for s in task.judge_settings()) is None:
        return True
    parts = [task.worst_case_parts() for task in tasks]
    unbounded = [task.config.task for task, p in zip(tasks, parts) if p is None]
    fits, worst = (False, None) if unbounded else spend.worst_case([part for p in parts for part in p])
    if not fits:
        priced = worst is not None and worst.usd is not None and not worst.unpriced
        cost = (f"has no bound ({', '.join(unbounded)}: answers of unknown length or media)" if unbounded
                else f"could cost {worst.usd:.4f} USD" if priced else "has no price")
        log.warning("judge_stream: judged after generation: with every answer at its longest the judge %s, above "
                    "judge_budget_usd or not comparable with it; the budget is checked on the real answers", cost)
    return fits


def _drain_early() -> None:
    early = _early()
    if early is not None:
        early.drain()


def _early() -> schedule.Early | None:
    with _LOCK:
        return _EARLY[0] if _EARLY else None


def _end_early() -> None:
    """Every streamed generation has been judged or handed to a pass: the early calls' threads go."""
    with _LOCK:
        if _STREAMED or not _EARLY:
            return
        early = _EARLY.pop()
    if early is not None:
        early.close()
        stop.release(EARLY_STOP_KEY)


def whole_run() -> bool:
    return os.environ.get(TASK_BY_TASK_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


def pending(first: Any) -> list[Any]:
    """The tasks the pass started by ``first`` judges (``first`` included), claimed once."""
    if not whole_run():
        return [first]
    with _LOCK:
        tasks = [t for t in (ref() for ref in _PENDING) if t is not None]
        chosen = [t for t in tasks if t is first or t.joins_run()]
        _PENDING[:] = [ref for ref in _PENDING if ref() is not None and ref() not in chosen]
    return chosen if first in chosen else [first, *chosen]


def run_pass(first: Any) -> None:
    """Judge ``first`` and every other pending task in one pool; each task's spec gets its ``Job``.

    ``first`` fails alone when it cannot start (its filters, its requests); another
    task that cannot start is left to judge itself when lm-eval reaches it.
    """
    started: list[tuple[TaskSpec, Job]] = []
    tasks = pending(first)
    with _LOCK:  # their generation is over: what was not reported by now is judged by the pass
        ids = {id(task) for task in tasks}
        for key in [k for k, targets in _STREAMED.items() if any(id(t.task()) in ids for t in targets)]:
            kept = [t for t in _STREAMED[key] if id(t.task()) not in ids]
            if kept:
                _STREAMED[key] = kept
            else:
                del _STREAMED[key]
    try:
        for task in tasks:
            try:
                spec = task.judge_spec()
                started.append((spec, Job.of(spec)))
            except Exception:
                if task is first:
                    raise
                log.debug("%s: left to judge itself", task.config.task, exc_info=True)
        judge_specs(started)
    finally:  # whatever stopped the pass (a budget, a task that cannot start): the next run decides anew
        _end_early()


def judge_specs(started: Sequence[tuple[TaskSpec, Job]]) -> None:
    """Dry run and budget, batch submission, one pool, one cost table; then each spec records its job."""
    jobs = [job for _, job in started]
    audits = dict(spec.audit for spec, _ in started if spec.audit is not None)  # each judge's audit, once
    world = started[0][0].world  # every rank takes part in each step below (core/ranks.py)
    saved = functools.partial(recovery.keep_generations, started[0][0].cache_dir)
    spend.check_spend(schedule.parts_of(jobs) + [part for parts in audits.values() for part in parts()],
                      saved=saved, world=world)  # before any call, on the whole run's estimate
    schedule.submit_all_batches(jobs, saved)
    names = [job.name for job in jobs]
    schedule.judge(jobs, f"judging {names[0]}" if len(names) == 1 else f"judging {len(names)} tasks", early=_early())
    _end_early()  # before the cost table: the early calls' threads are done
    schedule.summarise(jobs, world)
    provenance.warn_aliases(dict.fromkeys(m for spec, _ in started for m in spec.members))
    for spec, job in started:
        spec.record(job)

