"""The run's one pool of judge requests: every task's requests, whatever its judge, through one bounded pool.

A judged task hands over a ``TaskSpec`` (its name, its judge, the clients that make calls, its
requests, and where its outcomes go). Its judge is anything with ``key``/``judge_one``: one
``JudgeClient``, or a panel or a cascade (``panel.py``, ``cascade.py``), which judge one request
through their member clients' ``judge_one``. So the unique requests of every task go through ONE
``workers.run_bounded`` with one progress bar and one width, the next request always from the task
with the most work left (``Schedule``), and one cost table covers every member client.

Early calls (``Early``): with ``judge_stream`` a task's requests start as the model finishes each
generation, through the same ``judge_one`` (cache, limits, retries, stats); the pass then takes
each such key's outcome from its call instead of asking again, so it only waits for what is in flight.

Identical requests are judged once, and counted (``duplicate_requests``): within a task by their
key (each unique key is handed out once), and across the tasks of a pass by ``Flights``: a key
another task of the pass already judged, or is judging, is taken from that task instead of asked
again. A task may also name slots that share another slot's verdict (``TaskSpec.shares``:
``judge_dedupe=answer``, harness/task.py): such a slot takes its leader's key, so only the leader
is judged (``calls_saved_by_dedupe``), and the dry run and the budget count only the leader. A judge
with ``share`` (the cascade) decides itself what it shares: its rule stage still looks at every slot.

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
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..calls import stop
from ..calls.workers import run_bounded
from ..core.ranks import World, add_up
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome, clean_text
from ..cost.ledger import Ledger
from ..cost.spend import Part
from .flights import Flights, wait_limit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskSpec:
    """What the pool needs from one judged task.

    ``judge`` answers ``key``/``judge_one`` (a client, a panel or a cascade); ``members`` are the
    clients that make calls (for the dry run, the budget and the cost table); ``render(i)`` builds
    slot i's request (or the Outcome of a slot that is not judged); ``record`` receives the judged
    ``Job`` once the pass is over (or broke off for this task: ``job.error``). ``audit``: the judge
    audit the task runs afterwards (``judge_audit=true``), estimated with the run, once per key.
    """
    name: str
    judge: Any
    members: tuple[Any, ...]
    slots: int
    render: Callable[[int], JudgeRequest | Outcome]
    record: Callable[["Job"], None]
    cache_dir: str = ""  # where a stop says the generations were kept
    audit: tuple[str, Callable[[], list[Part]]] | None = None  # (key, parts) of the judge audit run after it
    world: World = World()  # the ranks lm-eval sharded the docs over (core/ranks.py)
    shares: Mapping[int, int] = field(default_factory=dict)  # slot -> the earlier slot whose verdict it shares


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
    saved: int = 0  # calls saved by sharing a leader's verdict (TaskSpec.shares)
    shared: dict[int, int] = field(default_factory=dict)  # slot -> the slot whose verdict it took
    followers: set[int] = field(default_factory=set)  # slots a ``share``-ing judge (the cascade) may share

    @classmethod
    def build(cls, name: str, client: Any, slots: int, render: Callable[[int], JudgeRequest | Outcome],
              members: Sequence[Any] | None = None, shares: Mapping[int, int] | None = None) -> "Job":
        """Render each slot once to key it; keep the key, drop the request. A slot of ``shares`` takes its
        leader's key (both judged requests), or, for a judge that shares itself, is handed to it."""
        job = cls(name=name, client=client, keys=[], skipped={}, render=render,
                  members=tuple(members) if members is not None else (client,))
        own: set[str] = set()
        for i in range(slots):
            built = render(i)
            if isinstance(built, Outcome):
                job.keys.append(None)
                job.skipped[i] = built
                continue
            key = client.key(built)
            own.add(key)
            leader = (shares or {}).get(i)
            if leader is not None and leader < i and job.keys[leader] is not None and job.keys[leader] != key:
                if hasattr(client, "share"):  # the cascade: its rule stage judges this slot first
                    client.share(built, job.render, leader)
                    job.followers.add(i)
                else:
                    key = job.keys[leader]
                    job.shared[i] = leader
            job.keys.append(key)
            job.first_slot.setdefault(key, i)
        judged = len(job.keys) - len(job.skipped)
        job.duplicates, job.saved = judged - len(own), len(own) - len(job.first_slot)
        client.count_requests(judged, len(job.first_slot))
        return job

    @classmethod
    def of(cls, spec: TaskSpec) -> "Job":
        return cls.build(spec.name, spec.judge, spec.slots, spec.render, spec.members, spec.shares)

    def calls_saved(self) -> int:
        """Calls saved by shared verdicts: the leaders' keys taken, and what a sharing judge saved."""
        return self.saved + getattr(self.client, "saved_by_sharing", 0)

    def requests(self) -> Iterator[tuple[str, JudgeRequest]]:
        """The unique (key, request) items, rendered one at a time (a slot that may share its leader's
        verdict is left out: its leader is the request that is sent)."""
        for key, slot in self.first_slot.items():
            if slot in self.followers:
                continue
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
    """

    def __init__(self, width: int):
        self.width = width
        self._pool = ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="mathjudge-early")
        self._calls: dict[str, Future] = {}
        self._lock = threading.Lock()

    def start(self, client: Any, key: str, request: JudgeRequest) -> None:
        with self._lock:
            if key not in self._calls:
                self._calls[key] = self._pool.submit(_early_call, client, key, request)

    def take(self, key: str) -> Future | None:
        with self._lock:
            return self._calls.pop(key, None)

    def close(self) -> None:
        """Cancel calls not started (nothing was paid for them); the ones running finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def drain(self) -> None:
        """A stop: start nothing more, and give the calls in flight ``stop.GRACE_S`` to store their replies."""
        self.close()
        with self._lock:
            running = [call for call in self._calls.values() if not call.done()]
        wait(running, timeout=stop.GRACE_S)


def _early_call(client: Any, key: str, request: JudgeRequest) -> Outcome:
    stop.check()
    return client.judge_one(key, request)


def judge(jobs: Sequence[Job], desc: str, progress: bool = True, early: Early | None = None) -> None:
    """Judge every job's unique requests through one bounded pool; outcomes land in each job.

    The pool runs one slot per unique request; each slot takes the next request from ``Schedule``
    when a worker is free, so the order adapts to how long each task's calls take.
    """
    schedule = Schedule(jobs)
    concurrency = max((job.client.concurrency for job in jobs), default=1)
    judged = Flights(keep=True)  # a key is judged once in the pass, whichever task asks first

    def one(_slot: int) -> None:
        job, key = schedule.next()
        if job.error is not None:
            return
        started = time.monotonic()
        call = early.take(key) if early is not None else None
        # started as its generation arrived: wait for it
        early_call = call if call is not None and not call.cancelled() else None
        # a follower's outcome depends on this task's sharing: never handed to another task
        flight = key if job.first_slot[key] not in job.followers else f"{id(job)}:{key}"
        try:
            outcome, shared = judged.run(flight, (lambda: early_call.result()) if early_call is not None
                                         else (lambda: _judge_slot(job, key)), _wait_limit(job))
            if shared:  # another task of the pass judged this very request: taken, not asked again
                outcome = dataclasses.replace(outcome, cached=True, calls=0)
                with lock:
                    job.duplicates += 1
        except Exception as exc:  # noqa: BLE001 - this task fails alone, when lm-eval reaches it
            log.debug("%s: judging failed", job.name, exc_info=True)
            job.error = job.error or exc
            return
        schedule.done(job, time.monotonic() - started)
        job.outcomes[key] = outcome  # one writer per key: each key is handed out once

    lock = threading.Lock()

    def on_bar(bar: Any) -> None:
        for job in jobs:
            job.client.set_bar(bar)

    try:
        run_bounded(range(schedule.total), one, concurrency=concurrency, desc=desc, progress=progress, on_bar=on_bar)
        alone = _unshared_after_failures(jobs)
        if alone:  # a failed judgement is no verdict of an equivalent answer: these samples get their own
            def own(item: tuple[Job, str]) -> None:
                job, key = item
                job.outcomes[key] = _judge_slot(job, key)

            run_bounded(alone, own, concurrency=concurrency, desc=f"{desc} (samples whose shared verdict failed)",
                        progress=progress, on_bar=on_bar)
    finally:
        for job in jobs:
            job.client.set_bar(None)
            job.client.finish(job.outcomes.values())


def _unshared_after_failures(jobs: Sequence[Job]) -> list[tuple[Job, str]]:
    """judge_dedupe=answer: the samples that took a leader's verdict whose judgement failed (no verdict,
    an unparseable reply, a transport failure) take their own request back: (job, key) to judge."""
    todo = []
    for job in jobs:
        if job.error is not None:
            continue
        for slot, leader in sorted(job.shared.items()):
            led = job.outcomes.get(job.keys[leader])
            request = job.render(slot)
            if led is None or led.failure is None or not isinstance(request, JudgeRequest):
                continue
            key = job.client.key(request)
            del job.shared[slot]
            job.keys[slot] = key
            if key not in job.first_slot:
                job.first_slot[key] = slot
                job.saved -= 1
                job.client.count_requests(0, 1)
                todo.append((job, key))
    return todo


def _judge_slot(job: Job, key: str) -> Outcome:
    request = job.render(job.first_slot[key])
    # Rendered differently the second time (a media file changed meanwhile): that outcome stands.
    return request if isinstance(request, Outcome) else job.client.judge_one(key, request)


def _wait_limit(job: Job) -> float:
    """How long a task waits for another task's call of the same request: the longest its judge can take."""
    return sum(wait_limit(member) for member in job.members)


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
    cascade's LLM stage is estimated on every request: the most it can be asked."""
    return [Part(name, member, lambda m=member: ((m.key(r), r) for r in requests())) for member in members]


def summarise(jobs: Sequence[Job], world: World = World()) -> None:
    """One cost table for the run, one line per member judge of each task; each job gets its task's
    block and the run's totals, and its judge's stats (``run_stats``).

    In a run of several ranks each rank judged its own share: the stats of every rank are gathered
    (a collective: every rank calls this once per pass), so the block, the stats and the table (printed
    by rank 0 only) cover the whole run, the same on every rank."""
    mine = [(job.name, [(m.settings, m.stats) for m in job.members], job.failures(),
             {**job.client.stats.as_dict(), "duplicate_requests": job.duplicates,
              "calls_saved_by_dedupe": job.calls_saved()}) for job in jobs]
    ranks = world.gather(mine)
    ledger = Ledger()
    for rank in ranks:
        for job, (_name, members, failures, stats_) in zip(jobs, rank):
            single = len(job.members) == 1 and job.members[0] is job.client
            for settings, stats in members:  # a plain task's failures are per sample; a member's are its own
                ledger.record_stats(job.name, settings, stats, failed=sum(failures.values()) if single else None)
            # the task's requests judged once (word for word) or sharing a verdict, on its deciding judges' lines
            deciding = members[-1:] if hasattr(job.client, "share") else members  # a cascade: its LLM stage
            for settings, _ in deciding:
                ledger.record(job.name, settings, duplicates=stats_["duplicate_requests"],
                              saved=stats_["calls_saved_by_dedupe"])
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
