"""Judging while the model generates (``judge_stream``, on by default).

An entry that may stream (``may_stream``: an online judge, no dry run, filters that read one response
at a time, and with a budget a known bound on every answer) has the lm-eval cache key of each of its
generations registered (``watch``). As the model reports each finished generation
(``compat.watch_generations``), the entry's filter pipelines are applied to that one response and its
judge requests start at once in the run's ``schedule.Early`` calls, through the same ``judge_one``
(cache, limits, retries, stats); the pass (``run.py``) later takes each such key's outcome from its
call instead of asking again (``early``), so it only waits for what is in flight.

With a budget, the first streamed generation first prices the worst case: every judged task of the
run (the ones lm-eval built, streamed or not) with each answer at its longest (``max_gen_toks``), and
the judge audits that follow. Within ``judge_budget_usd`` nothing the run can ask goes over it; above
it, the run is judged after generation and the budget decides on the real answers, exactly as with
``judge_stream=false`` (a refusal there costs nothing either).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

from .. import compat
from ..calls import stop
from ..calls.progress import Meter
from ..core.types import JudgeRequest, clean_text
from ..cost import budget, spend
from ..cost.ledger import spent_so_far
from ..cost.spend import Part
from ..judging import schedule
from ..judging.members import width
from . import entry as entries
from .entry import Entry
from .render import as_text

log = logging.getLogger(__name__)

EARLY_STOP_KEY = "early judge calls"
_LOCK = threading.Lock()
_STREAMED: dict[str, list[_Target]] = {}  # generation key -> the instances that stream its generations
# The run's early judge calls: one, once the first generation arrived (None: the budget said no streaming).
_EARLY: list[schedule.Early | None] = []
_EXPECTED = [0]  # the judge requests the watched generations will ask, for the judging line's first total
_FIRST = threading.Lock()  # held while the first streamed generation decides whether the run streams


def may_stream(entry: Entry) -> bool:
    """Judged as the generations arrive (``judge_stream``) where that changes nothing: an online judge,
    no dry run (it estimates the real answers and sends nothing), filters that read one response at a
    time (``compat.per_response``; with k samples each sample is judged as it arrives). With a budget,
    the run prices the worst case before the first streamed call (``_within_budget``); that needs a
    known answer length and text answers (an answer that names media has no size until it exists), and
    one rank (over several, the budget is decided on every rank together, after generation)."""
    if not entry.plan.options.stream or entry.judge is None or entry.judge.batch_mode:
        return False
    settings = entry.settings()
    if any(s.dry_run for s in settings):
        return False
    if budget.budget_of(settings) is not None and (
            entry.world.size > 1 or entry.plan.judge.name == "vlm" or entry.longest is None):
        return False
    try:
        return compat.per_response(entry.ensembles)
    except Exception:  # noqa: BLE001 - a filter we cannot inspect: judge after generation, as always
        log.debug("%s: filters not inspectable; judged after generation", entry.name, exc_info=True)
        return False


def watch(entry: Entry) -> None:
    """Judge this entry's samples as their generations arrive (it may: ``may_stream``)."""
    budgeted = budget.budget_of(entry.settings()) is not None
    keys = [compat.generation_key(inst.args) if getattr(inst, "request_type", None) == "generate_until" else None
            for inst in entry.instances]
    with _LOCK:
        if not _STREAMED and not _EARLY:  # the run's first watched task: a count of an earlier run is over
            _EXPECTED[0] = 0
        for i, key in enumerate(keys):
            if key is not None:  # k samples (repeats): the model reports k generations under one key
                repeats = entry.instances[i].repeats or 1
                _EXPECTED[0] += repeats * max(1, len(entry.ensembles))  # a request per filter's view
                _STREAMED.setdefault(key, []).append(_Target(weakref.ref(entry), i, repeats, repeats, budgeted))
    compat.watch_generations(_arrived)


@dataclass
class _Target:
    """An instance waiting for its generations: ``left`` of its ``repeats`` still to come."""
    entry: weakref.ref
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
        targets = [(t.entry, t.index) for t in waiting if t.left > 0]
        for t in waiting:
            t.left -= 1
        if waiting and all(t.left <= 0 for t in waiting):
            del _STREAMED[key]
    for ref, index in targets:
        entry = ref()
        if entry is None or entry.judge is None:
            continue
        early = _early_calls(entry.judge)
        if early is None:  # the budget could not cover the worst case: the pass judges these, after generation
            return
        for judge_key, request in requests_of(entry, index, result):
            early.start(entry.judge, judge_key, request)


def requests_of(entry: Entry, index: int, response: str) -> list[tuple[str, JudgeRequest]]:
    """The (key, request) of each filter's view of one instance's fresh response, exactly as the pass
    will render them once all responses are in."""
    inst = entry.instances[index]
    # k samples: the filters expect k responses (take_first_k checks), so they get this one k times; what
    # they keep of it is this sample's view (every filter here reads one response at a time)
    copies = entry.plan.k.k if entry.plan.k is not None else 1
    requests = []
    for value in compat.filter_one(entry.ensembles, [clean_text(response)] * copies, inst.doc).values():
        built = entry.renderer(inst.doc, as_text(value))
        if isinstance(built, JudgeRequest):
            requests.append((entry.judge.key(built), built))
    return requests


def _early_calls(judge: Any) -> schedule.Early | None:
    """The run's early calls, made by the first streamed generation; None when the budget decides on the
    real answers instead (``_within_budget``), for the rest of the run."""
    with _FIRST:  # one thread decides; the others wait for its decision
        with _LOCK:
            if _EARLY:
                return _EARLY[0]
        allowed = _within_budget()
        meter, clients = _line() if allowed else (None, ())
        with _LOCK:
            if not allowed:
                _STREAMED.clear()  # every task is judged by its pass, budget first, as without streaming
                _EARLY.append(None)
                return None
            _EARLY.append(schedule.Early(width([judge]), meter, clients))
            # a stop waits, bounded, for the replies of these calls too: every reply paid for is cached
            stop.guard(EARLY_STOP_KEY, _drain_early)
            return _EARLY[0]


def _line() -> tuple[Meter, list]:
    """The run's judging line, from this first streamed call on, and the judges whose spend it shows. Its
    total so far: the requests the watched generations will ask (one per sample and filter); the pass
    makes it exact."""
    with _LOCK:
        expected = _EXPECTED[0]
    judged = [e for e in entries.registered() if e.judged and e.judge is not None]
    clients = list(dict.fromkeys(c for e in judged for c in e.clients))
    meter = Meter(expected, "judging (streamed)", spend=spent_so_far(clients))
    for entry in judged:
        entry.judge.set_bar(meter)  # retries are summarised on the line
    return meter, clients


def _within_budget() -> bool:
    """Before the first streamed call: may the run start judging before its last answer exists?"""
    judged = [e for e in entries.registered() if e.judged and e.judge is not None]
    if budget.budget_of(s for e in judged for s in e.settings()) is None:
        return True
    parts = [worst_case_parts(e) for e in judged]
    unbounded = [e.name for e, p in zip(judged, parts) if p is None]
    fits, worst = (False, None) if unbounded else spend.worst_case([part for p in parts for part in p])
    if not fits:
        priced = worst is not None and worst.usd is not None and not worst.unpriced
        cost = (f"has no bound ({', '.join(unbounded)}: answers of unknown length or media)" if unbounded
                else f"could cost {worst.usd:.4f} USD" if priced else "has no price")
        log.warning("judge_stream: judged after generation: with every answer at its longest the judge %s, above "
                    "judge_budget_usd or not comparable with it; the budget is checked on the real answers", cost)
    return fits


def worst_case_parts(entry: Entry) -> list[Part] | None:
    """What an entry's judges could be asked whatever the model answers: every sample's request with its
    answer at the longest the model may write (max_gen_toks), and the judge audit. None when there is no
    such bound: answers of unknown length, or answers that may name media (the VLM judge)."""
    if not entry.judged or entry.judge is None:
        return []
    if entry.longest is None or entry.plan.judge.name == "vlm":
        return None
    samples = [(inst.doc, entry.plan.k.k if entry.plan.k is not None else 1) for inst in entry.instances
               if getattr(inst, "request_type", None) == "generate_until"]

    def requests():
        for doc, k in samples:
            built = entry.renderer(doc, "")  # the answer's own tokens are counted by answer_tokens
            if isinstance(built, JudgeRequest):
                yield from [built] * k  # k different answers: k calls

    parts = entry.parts(requests)
    return [dataclasses.replace(part, answer_tokens=entry.longest) for part in parts] + entry.audit_parts()


def claimed(chosen: Sequence[Entry]) -> None:
    """These entries' generation is over: what was not reported by now is judged by their pass."""
    with _LOCK:
        ids = {id(e) for e in chosen}
        for key in [k for k, targets in _STREAMED.items() if any(id(t.entry()) in ids for t in targets)]:
            kept = [t for t in _STREAMED[key] if id(t.entry()) not in ids]
            if kept:
                _STREAMED[key] = kept
            else:
                del _STREAMED[key]


def early() -> schedule.Early | None:
    """The run's early calls, if the first streamed generation started them."""
    with _LOCK:
        return _EARLY[0] if _EARLY else None


def _drain_early() -> None:
    calls = early()
    if calls is not None:
        calls.drain()


def end_early() -> None:
    """Every streamed generation has been judged or handed to a pass: the early calls' threads go."""
    with _LOCK:
        if _STREAMED or not _EARLY:
            return
        calls = _EARLY.pop()
    if calls is not None:
        calls.close()
        if calls.meter is not None:
            calls.meter.close()
        stop.release(EARLY_STOP_KEY)
