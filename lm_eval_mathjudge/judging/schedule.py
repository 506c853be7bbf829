"""The run's one pool of judge requests: every task's requests, whatever its judge, through one bounded pool.

A task's share of a pass is a ``Job`` (its name, its judge, the clients that make calls, how each
of its slots renders a request). Its judge is anything with ``key``/``judge_one``: one
``JudgeClient``, or a panel or a cascade (``panel.py``, ``cascade.py``), which judge one request
through their member clients' ``judge_one``. So the unique requests of every task go through ONE
``workers.run_bounded`` with one progress bar, the next request always from the task with the most
work left (``Schedule``), and one cost table covers every member client. The pool is as wide as its
widest judge (``members.width``; ``judge_concurrency`` takes effect in the judge's client).

Early calls (``Early``): with ``judge_stream`` a task's requests start as the model finishes each
generation, through the same ``judge_one`` (cache, limits, retries, stats); the pass then takes
each such key's outcome from its call instead of asking again, so it only waits for what is in flight.

Identical requests are judged once, and counted (``duplicate_requests``): within a task by their
key (each unique key is handed out once), and across the tasks of a pass by ``Flights``: a key
another task of the pass already judged, or is judging, is taken from that task instead of asked
again.

Streaming: a request is rendered to compute its key, then dropped; a worker renders it again right
before its call. What stays per sample is a key (and an outcome once judged), not a prompt, so
memory does not grow with prompt size.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..calls import stop
from ..calls.progress import Meter
from ..calls.workers import run_bounded
from ..core.ranks import World, add_up
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome, clean_text
from ..cost.ledger import Ledger, spent_so_far
from ..cost.spend import Part
from .cascade import Cascade
from .counterfactual import rechecks
from .flights import Flights, wait_limit
from .members import width

log = logging.getLogger(__name__)

EARLY = "early"  # the judging line's tag for the calls started while the model generates


@dataclass
class Job:
    """One task's share of a judge pass.

    ``keys[i]`` is slot i's request key, or None when slot i is not judged (its
    outcome is then in ``skipped``); ``render(i)`` rebuilds slot i's request.
    """
    name: str
    client: Any  # the task's judge: a JudgeClient, a Panel or a Cascade
    keys: list[str | None]
    skipped: dict[int, Outcome]
    render: Callable[[int], JudgeRequest | Outcome]
    members: tuple[Any, ...] = ()
    first_slot: dict[str, int] = field(default_factory=dict)  # unique key -> the slot that renders it
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    error: BaseException | None = None  # an unexpected error while judging this task (raised by it)
    cost: dict[str, Any] | None = None
    run_stats: dict[str, Any] | None = None  # the judge's stats, failures per sample, summed over every rank
    duplicates: int = 0  # requests that repeat another word for word (this task's, or another task's in the pass)

    @classmethod
    def build(cls, name: str, client: Any, slots: int, render: Callable[[int], JudgeRequest | Outcome],
              members: Sequence[Any] | None = None) -> Job:
        """Render each slot once to key it; keep the key, drop the request."""
        job = cls(name=name, client=client, keys=[], skipped={}, render=render,
                  members=tuple(members) if members is not None else (client,))
        for i in range(slots):
            built = render(i)
            if isinstance(built, Outcome):
                job.keys.append(None)
                job.skipped[i] = built
                continue
            key = client.key(built)
            job.keys.append(key)
            job.first_slot.setdefault(key, i)
        judged = len(job.keys) - len(job.skipped)
        job.duplicates = judged - len(job.first_slot)
        client.count_requests(judged, len(job.first_slot))
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

    def slot_outcomes(self) -> list[Outcome]:
        return [self.outcome(i) for i in range(len(self.keys))]

    def failures(self) -> Counter:
        """Samples without a verdict so far, per failure kind (a task that broke off counts what it has):
        the one count the cost table, the stats and the failure message read."""
        judged = (self.skipped.get(i) if key is None else self.outcomes.get(key) for i, key in enumerate(self.keys))
        return Counter(outcome.failure for outcome in judged if outcome is not None and outcome.failure)

    def failed(self) -> int:
        return sum(self.failures().values())

    def parts(self) -> list[Part]:
        return parts_for(self.name, self.members, lambda: (request for _, request in self.requests()))


class Early:
    """Judge calls started while the model still generates, one per key, at most ``width`` at once.

    ``start`` is called from the model's thread as each generation arrives; the pass ``take``s each
    key's call and waits for its outcome. A stop starts nothing more (``stop.check`` in the worker).
    ``meter``: the run's judging line, which counts each early call as it finishes (the pass goes on
    on the same line); ``clients``: the judges whose spend it shows.
    """

    def __init__(self, width: int, meter: Meter | None = None, clients: Sequence[Any] = ()):
        self.width = width
        self.meter = meter
        self.clients = tuple(clients)
        self._pool = ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="mathjudge-early")
        self._calls: dict[str, Future] = {}
        self._lock = threading.Lock()
        self.started = 0  # every early call ever started (a taken one stays counted)

    def start(self, client: Any, key: str, request: JudgeRequest) -> None:
        with self._lock:
            if key in self._calls:
                return
            call = self._calls[key] = self._pool.submit(_early_call, client, key, request)
            self.started += 1
        if self.meter is not None:
            call.add_done_callback(self._counted)

    def _counted(self, call: Future) -> None:
        if call.cancelled():  # never started: the pass judges its key (and counts it)
            return
        # an error is raised by the pass, for its task
        counted(self.meter, call.result() if call.exception() is None else None, tag=EARLY)

    def keys(self) -> set[str]:
        """The keys whose early calls the pass has not taken yet (and will take: not cancelled)."""
        with self._lock:
            return {key for key, call in self._calls.items() if not call.cancelled()}

    def take(self, key: str) -> Future | None:
        with self._lock:
            return self._calls.pop(key, None)

    def close(self) -> None:
        """Cancel calls not started (nothing was paid for them); the ones running finish on their own.
        (The line is closed by the run, never here: a stop's signal handler calls this.)"""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def drain(self) -> None:
        """A stop: start nothing more, and give the calls in flight ``stop.GRACE_S`` to store their replies."""
        self.close()
        with self._lock:
            running = [call for call in self._calls.values() if not call.done()]
        wait(running, timeout=stop.GRACE_S)


def counted(meter: Meter, outcome: Outcome | None, tag: str | None = None) -> None:
    """A request finished, on the judging line: its real calls, cached or not, failed or not (None: it ended
    without an outcome, no call counted: an error, or a task that broke off)."""
    if outcome is None:
        meter.finished(calls=0, failed=True, tag=tag)
    else:
        meter.finished(calls=outcome.calls, cached=outcome.cached, failed=bool(outcome.failure), tag=tag)


def _early_call(client: Any, key: str, request: JudgeRequest) -> Outcome:
    stop.check()
    return client.judge_one(key, request)


def judge(jobs: Sequence[Job], desc: str, progress: bool = True, early: Early | None = None) -> None:
    """Judge every job's unique requests through one bounded pool; outcomes land in each job.

    The pool runs one slot per unique request; each slot takes the next request from ``Schedule``
    when a worker is free, so the order adapts to how long each task's calls take.
    """
    schedule = Schedule(jobs)
    judged = Flights(keep=True)  # a key is judged once in the pass, whichever task asks first
    meter = _line(jobs, schedule, desc, progress, early)

    def one(_slot: int) -> None:
        job, key = schedule.next()
        call = early.take(key) if early is not None else None
        # started as its generation arrived: wait for it (it is counted on the line as it finishes)
        early_call = call if call is not None and not call.cancelled() else None
        if job.error is not None:  # the task broke off: its requests are not asked
            if early_call is None:
                counted(meter, None)
            return
        started = time.monotonic()
        try:
            outcome, shared = judged.run(key, (lambda: early_call.result()) if early_call is not None
                                         else (lambda: _judge_slot(job, key)), _wait_limit(job))
            if shared:  # another task of the pass judged this very request: taken, not asked again
                outcome = dataclasses.replace(outcome, cached=True, calls=0)
                with lock:
                    job.duplicates += 1
        except Exception as exc:  # noqa: BLE001 - this task fails alone, when lm-eval reaches it
            log.debug("%s: judging failed", job.name, exc_info=True)
            job.error = job.error or exc
            if early_call is None:
                counted(meter, None)
            return
        schedule.done(job, time.monotonic() - started)
        job.outcomes[key] = outcome  # one writer per key: each key is handed out once
        if early_call is None:  # an early call was counted as it finished
            counted(meter, outcome)

    lock = threading.Lock()

    def on_bar(bar: Any) -> None:
        for job in jobs:
            job.client.set_bar(bar)

    try:
        run_bounded(range(schedule.total), one, concurrency=width(job.client for job in jobs), desc=desc,
                    progress=progress, on_bar=on_bar, bar=meter)
    finally:
        meter.close()  # the cost table comes next; early calls still running go on counting, undrawn
        for job in jobs:
            job.client.set_bar(None)
            job.client.finish(job.outcomes.values())


def _line(jobs: Sequence[Job], schedule: Schedule, desc: str, progress: bool, early: Early | None) -> Meter:
    """The pass's judging line: the early calls' line drawn again, or a line of its own.

    On the early calls' line the total becomes exact: what it counted besides early calls (an earlier
    pass's), every early call (counted as each finishes), and each request of this pass that no early
    call answers."""
    members = [m for job in jobs for m in job.members]
    if early is None or early.meter is None:
        return Meter(schedule.total, desc, progress, spend=spent_so_far(dict.fromkeys(members)))
    meter = early.meter
    answered = early.keys() & {key for job in jobs for key in job.first_slot}
    meter.spend = spent_so_far(dict.fromkeys([*early.clients, *members]))
    meter.expect(lambda m: m.done - m.tagged[EARLY] + early.started + schedule.total - len(answered))
    meter.reopen(desc)  # lm-eval's bar is gone: the line goes on at the top
    return meter


def _judge_slot(job: Job, key: str) -> Outcome:
    request = job.render(job.first_slot[key])
    # Rendered differently the second time (a media file changed meanwhile): that outcome stands.
    return request if isinstance(request, Outcome) else job.client.judge_one(key, request)


def _wait_limit(job: Job) -> float:
    """How long a task waits for another task's call of the same request: the longest its judge can take."""
    return sum(wait_limit(member) for member in job.members) * (2 if rechecks(job.client) else 1)


def judge_all(client: Any, requests: Sequence[JudgeRequest], desc: str = "judging", progress: bool = True,
              name: str = "judging") -> list[Outcome]:
    """One outcome per request, in input order, for any judge (a client, a panel, a cascade):
    one job through the same pool, pre-filled first in batch mode."""
    job = Job.build(name, client, len(requests), requests.__getitem__)
    submit_all_batches([job])
    judge([job], desc, progress=progress)
    return job.slot_outcomes()


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


def _deciding(job: Job, members: list) -> list:
    """The member lines a task's duplicate requests are counted on: a cascade's LLM stage (its rule stage
    is free), else every member."""
    return members[-1:] if isinstance(job.client, Cascade) else members


def failure_message(job: Job) -> str:
    return f"{job.name}: judging failed: {redact(clean_text(str(job.error)))}."


def submit_all_batches(jobs: Sequence[Job], saved: Callable[[], str] = lambda: "") -> None:
    """Batch mode: every task's job is submitted (or collected) before the run stops for any of them.

    With ``batch_wait=false`` each task's pre-fill stops with ``BatchPending``; stopping at the
    first would leave the other tasks unsubmitted, and the rerun would wait for them one by one.
    ``saved`` says where the generations were kept (called only when the run stops).
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
        text = str(pending[0][1]) if len(pending) == 1 else "; ".join(f"{name}: {exc}" for name, exc in pending)
        raise BatchPending(f"{text} {saved()}".rstrip(), job_ids=[i for _, exc in pending for i in exc.job_ids])


def parts_of(jobs: Sequence[Job]) -> list[Part]:
    return [part for job in jobs for part in job.parts()]


def parts_for(name: str, members: Sequence[Any], requests: Callable[[], Iterable[JudgeRequest]]) -> list[Part]:
    """What each member client would be asked, for the dry run and the budget (``cost.spend``); a
    cascade's LLM stage is estimated on every request, and with ``judge_counterfactual`` each LLM judge on
    every request's re-check too: the most they can be asked."""
    return [Part(name, member, lambda m=member: ((m.key(r), r) for r in _asked(m, requests()))) for member in members]


def _asked(member: Any, requests: Iterable[JudgeRequest]) -> Iterator[JudgeRequest]:
    """Each request, then its counterfactual re-check (asked at most once, after a credit; never by the rule)."""
    for request in requests:
        yield request
        check = request.recheck
        if check is not None and check.request is not None and member.settings.backend != "local":
            yield check.request


def summarise(jobs: Sequence[Job], world: World = World()) -> None:
    """One cost table for the run, one line per member judge of each task; each job gets its task's
    block and the run's totals, and its judge's stats (``run_stats``).

    In a run of several ranks each rank judged its own share: the stats of every rank are gathered
    (a collective: every rank calls this once per pass), so the block, the stats and the table (printed
    by rank 0 only) cover the whole run, the same on every rank."""
    mine = [(job.name, [(m.settings, m.stats) for m in job.members], job.failures(),
             {**job.client.stats.as_dict(), "duplicate_requests": job.duplicates}) for job in jobs]
    ranks = world.gather(mine)
    ledger = Ledger()
    for rank in ranks:
        for job, (_name, members, failures, stats_) in zip(jobs, rank):
            single = len(job.members) == 1 and job.members[0] is job.client
            for settings, stats in members:  # a plain task's failures are per sample; a member's are its own
                ledger.record_stats(job.name, settings, stats, failed=sum(failures.values()) if single else None)
            # the task's requests judged once (word for word), on its deciding judges' lines
            for settings, _ in _deciding(job, members):
                ledger.record(job.name, settings, duplicates=stats_["duplicate_requests"])
    if world.first:
        print(ledger.table(), file=sys.stderr, flush=True)
    run_block = ledger.as_dict()
    run_block = {**{k: v for k, v in run_block.items() if k != "tasks"}, "tasks": list(run_block["tasks"])}
    for i, job in enumerate(jobs):
        job.cost = {"cost": ledger.task_dict(job.name), "run_cost": run_block}
        job.run_stats = {**add_up(rank[i][3] for rank in ranks),
                         "failures": dict(add_up(rank[i][2] for rank in ranks))}
        if world.size > 1:
            job.run_stats["ranks"] = world.size
