"""Batch mode as a cache pre-fill, the same for every provider.

``prefill(backend, cache, settings, items, ...)`` runs right after the client removed duplicate
requests (``JudgeClient.prefill``, which adds the report to its stats):

    pending = items whose first ask is not cached
    resume every unfinished job (from the job table) that holds a pending key:
        jobs and requests are matched by the requests' cache keys, so a rerun whose
        generations changed for some samples takes the first job's replies for the
        others and submits only the changed ones
    submit the rest in jobs within the provider's limits; record each job id
        in the job table BEFORE waiting (a killed run resumes the same job)
    adopt the other unfinished jobs of this provider that no live process polls (an
        earlier run stopped before collecting them): polled along, their replies stored
    batch_wait=false and a job still running: stop (BatchPending); rerun collects
    poll every batch_poll_seconds (progress bar), at most batch_max_hours after
        the oldest job was created
    store every reply in the cache under the key an online call would use,
        then delete the job's files and mark the job collected

The online pass that follows finds those replies as cache hits, so verdicts,
re-asks of off-contract replies and reruns are exactly those of online mode.
Items the job failed or let expire are left uncached (``batch_fallback=online``:
the online pass calls them) or settled as counted failures (``fail``). A
refusal (max_tokens, content filter) is the judge's answer: settled at once, as
online mode would score it. Items the provider could not encode get no result
and go to the online pass, which fails them the online way without a call.

Job ids live in two tables of the cache's own SQLite file (``jobs.py``).
Processes sharing the cache submit one at a time (a cache lease), so two
processes starting on the same requests make one job; a process holds a lease
on each job it polls, so no other process adopts it. A stop (``stop.py``) ends
the wait at its next tick and says which jobs keep running (the resume command
collects them).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from .. import vendors
from ..calls import stop
from ..calls.retry import RetryPolicy, call_with_retries
from ..calls.workers import progress_bar
from ..core.errors import ConfigError, FatalJudgeError, JudgeCallError, JudgeRefusal
from ..core.types import Reply, clean_reply
from ..batch.base import (CANCELLED, EXPIRED, FAILED, ITEM_EXPIRED, ITEM_FAILED, BatchPending, BatchProvider, BatchUnavailable,
                   Item, JobStatus, chunks, item_error, scored_failure)
from ..batch.jobs import JobStore

log = logging.getLogger(__name__)

SUBMIT_LEASE_S = 3600.0  # how long one process may hold the submit lease (a dead holder loses it at once)
SUBMIT_ROUNDS = 3
JOB_LEASE = "batch-job:"  # + job id: the lease a process holds on each job it polls


@dataclass
class BatchReport:
    """What one prefill did; ``settled`` maps keys to the error their sample ends with (no online call)."""
    submitted: int = 0
    succeeded: int = 0
    failed: int = 0
    expired: int = 0
    refused: int = 0
    missing: int = 0  # in no job's results (could not be encoded, or lost): left to the online pass
    jobs: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)  # earlier runs' jobs holding none of these requests
    adopted_replies: int = 0
    settled: dict[str, JudgeCallError] = field(default_factory=dict)
    usage: Counter = field(default_factory=Counter)

    def counts(self) -> dict[str, int]:
        return {"submitted": self.submitted, "succeeded": self.succeeded, "failed": self.failed,
                "expired": self.expired, "refused": self.refused, "missing": self.missing,
                "jobs": len(self.jobs), "resumed": len(self.resumed), "adopted": len(self.adopted),
                "adopted_replies": self.adopted_replies}


ONLINE_ONLY = ("local",)  # no API and no price: batch mode judges these the online way


def check(backend: Any, settings: Any, cache: Any) -> None:
    """Refuse, before any generation, a batch mode that cannot work (called when the client is built)."""
    from .. import backends

    if settings.backend in ONLINE_ONLY:
        return
    if cache is None:
        raise ConfigError("judge_mode=batch stores the batch's replies in the judge cache, and judge_cache is "
                          "false; set judge_cache=true (or judge_mode=online)")
    if not backends.has_batch(settings.backend):
        raise BatchUnavailable(f"judge_mode=batch: the {settings.backend} judge has no batch API here; use "
                               f"judge_mode=online for it (batch mode works with the "
                               f"{vendors.listed(vendors.names(batch=True), 'and')} judges)")
    backends.batch_provider(backend, settings.backend)  # one that cannot be built (Gemini on Vertex AI) fails now


def prefill(backend: Any, cache: Any, settings: Any, items: Sequence[Item], *, label: str,
            progress: bool = True) -> BatchReport:
    """Pre-fill ``cache`` with batch replies for ``items`` from ``backend``'s batch API; the report."""
    from .. import backends

    check(backend, settings, cache)
    if settings.backend in ONLINE_ONLY:  # e.g. the rule stage of a cascade: free, judged online
        return BatchReport()
    provider = backends.batch_provider(backend, settings.backend)
    return BatchRun(provider, cache, settings, label=label, progress=progress, clean=clean_reply).run(items)


class BatchRun:
    """One prefill against one provider (the parts tests drive directly, with a fake clock)."""

    def __init__(self, provider: BatchProvider, cache: Any, settings: Any, *, label: str, progress: bool = True,
                 clean: Callable[[Reply], Reply] = lambda r: r, now: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = stop.sleep):
        self.provider, self.cache, self.settings = provider, cache, settings
        self.label, self.progress, self.clean = label, progress, clean
        self.now, self.sleep = now, sleep
        self.policy = RetryPolicy(max_retries=settings.max_retries)
        self.report = BatchReport()

    def run(self, items: Sequence[Item]) -> BatchReport:
        pending = {key: request for key, request in items if self.cache.get(key) is None}
        if not pending:
            return self.report
        with JobStore(self.cache.path) as store:
            with self._submit_lock():
                pending = {k: r for k, r in pending.items() if self.cache.get(k) is None}  # another process's?
                jobs = self._resume(store, pending)
                self._submit(store, pending, jobs)
                adopted = self._adopt(store, jobs) if pending and jobs else []
            self.report.jobs = list(jobs)
            if not pending:
                return self.report
            if not jobs:
                self.report.missing += len(pending)
                return self.report
            with self._polling([*jobs, *adopted]):
                statuses = self._wait(store, jobs, adopted)
                for job in jobs:
                    self._collect(store, job, statuses[job], pending)
                for job in adopted:
                    if statuses[job].finished:
                        self.report.adopted_replies += self._collect(store, job, statuses[job], {}, counted=False)
                    else:
                        log.info("batch: job %s of an earlier run is still %s; a later run collects it", job,
                                 statuses[job].raw_state or statuses[job].state)
        self._settle()
        return self.report

    # ------------------------------------------------------------------ steps
    def _resume(self, store: JobStore, pending: dict) -> list[str]:
        jobs = []
        for job in store.open_jobs(self.provider.name, pending):
            try:
                self._status(job)
            except FatalJudgeError as exc:
                if exc.status != 404:
                    raise
                # Deleted at the provider (or made with another account): a stale row must not block every rerun.
                log.warning("batch: job %s is unknown to %s (%s); its requests are submitted again", job,
                            self.provider.name, exc)
                store.finish(job, "unknown")
                continue
            jobs.append(job)
        if jobs:
            log.info("batch: resuming job(s) %s submitted earlier (not paying twice)", ", ".join(jobs))
        self.report.resumed = list(jobs)
        return jobs

    def _submit(self, store: JobStore, pending: dict, jobs: list[str]) -> None:
        covered = {key for job in jobs for key in store.keys(job)}
        for chunk in chunks([(k, r) for k, r in pending.items() if k not in covered], self.provider.limits):
            job = self._retrying(lambda: self.provider.submit(chunk))  # noqa: B023 (called in this iteration)
            if not job:  # nothing in this chunk could be encoded: the online pass fails those samples
                continue
            store.save(job, self.provider.name, [key for key, _ in chunk], self.now())
            log.info("batch: submitted job %s (%d requests) to %s", job, len(chunk), self.provider.name)
            jobs.append(job)
            self.report.submitted += len(chunk)

    def _adopt(self, store: JobStore, jobs: list[str]) -> list[str]:
        """Unfinished jobs of this provider outside ``jobs`` that no live process polls: an earlier run
        stopped (or was killed) before collecting them, and the requests of this run are others (its
        generations changed). Their replies are paid: polled along with this run's jobs and stored."""
        adopted = []
        for job in store.uncollected(self.provider.name):
            if job in jobs or not self.cache.claim(JOB_LEASE + job, self._job_lease_s):
                continue  # this run's own, or polled by a live process
            try:
                self._status(job)
            except FatalJudgeError as exc:
                self.cache.release(JOB_LEASE + job)
                if exc.status != 404:
                    raise
                store.finish(job, "unknown")
                continue
            adopted.append(job)
        if adopted:
            log.info("batch: collecting job(s) %s that an earlier run left uncollected", ", ".join(adopted))
        self.report.adopted = list(adopted)
        return adopted

    @contextmanager
    def _polling(self, jobs: list[str]) -> Iterator[None]:
        """While this run waits: a lease on each job (so no other process adopts it), and the sentence a
        stop says about them."""
        held = [job for job in jobs if self.cache.claim(JOB_LEASE + job, self._job_lease_s)]
        note = f"batch:{self.provider.name}:{id(self)}"
        stop.guard(note, lambda: (f"The batch job(s) {', '.join(jobs)} keep running at {self.provider.name}; "
                                  f"their ids are kept in {self.cache.path}, so the resume command collects "
                                  "them instead of submitting again."))
        try:
            yield
        finally:
            stop.release(note)
            for job in held:
                self.cache.release(JOB_LEASE + job)

    @property
    def _job_lease_s(self) -> float:
        return self.settings.batch_max_hours * 3600 + SUBMIT_LEASE_S

    @contextmanager
    def _submit_lock(self) -> Iterator[None]:
        """One process at a time reads the job table and submits (a cache lease), so two processes
        starting on the same requests make one job: the second finds the first's job and resumes it."""
        name = f"batch-submit:{self.provider.name}"
        for _ in range(SUBMIT_ROUNDS):  # bounded: each round takes the lease or waits out one holder
            if self.cache.claim(name, SUBMIT_LEASE_S):
                break
            self.cache.wait_for(name, SUBMIT_LEASE_S)
        else:
            log.warning("batch: another process kept the submit lease; submitting without it")
        try:
            yield
        finally:
            self.cache.release(name)

    def _wait(self, store: JobStore, jobs: list[str], adopted: Sequence[str] = ()) -> dict[str, JobStatus]:
        """Poll until every job of this run finished (bounded by batch_max_hours from the oldest one's
        creation); adopted jobs are polled along, not waited for."""
        statuses = {job: self._status(job) for job in [*jobs, *adopted]}
        mine = {job: statuses[job] for job in jobs}
        if not self.settings.batch_wait and not all(s.finished for s in mine.values()):
            raise self._pending(mine, "judge_batch_wait=false: the batch is submitted and the run stops here. "
                                "Rerun the same command (later) to collect the results; nothing is submitted twice")
        deadline = store.oldest(jobs) + self.settings.batch_max_hours * 3600
        with progress_bar(sum(s.total for s in mine.values()) or None, f"batch {self.provider.name}",
                          self.progress) as bar:
            while True:
                mine = {job: statuses[job] for job in jobs}
                self._show(bar, mine)
                if all(s.finished for s in mine.values()):
                    return statuses
                if self.now() >= deadline:
                    raise self._pending(mine, f"the batch is still running {self.settings.batch_max_hours:g} h "
                                        "after it was submitted (judge_batch_max_hours). Rerun the same command "
                                        "later to collect it")
                self.sleep(min(self.settings.batch_poll_seconds, max(0.0, deadline - self.now())))
                for job, status in statuses.items():
                    if not status.finished:
                        statuses[job] = self._status(job)

    def _collect(self, store: JobStore, job: str, status: JobStatus, pending: dict, counted: bool = True) -> int:
        """Store every reply of a finished job; count what it did for ``pending`` (``counted``: this run's
        job). Returns the number of replies stored."""
        expected = set(store.keys(job)) & set(pending)
        stored = 0
        answered: set[str] = set()
        if status.state == FAILED:
            why = status.message or status.raw_state or "no reason given"
            errors = {key: item_error(ITEM_FAILED, f"batch job {job} failed as a whole: {why}") for key in expected}
        else:
            errors = {}
            for key, result in self.provider.results(job):
                answered.add(key)
                if isinstance(result, Reply):
                    stored += self._store(key, result, counted)
                elif key in pending:
                    errors[key] = result
            if status.state in (EXPIRED, CANCELLED):  # a provider may keep nothing of an unfinished item
                kind = ITEM_EXPIRED if status.state == EXPIRED else ITEM_FAILED
                errors.update({key: item_error(kind, f"batch job {job} was {status.raw_state or status.state} "
                                               "before this request was answered")
                               for key in expected - answered})
        for key, error in errors.items():
            self._count_error(key, error)
        self.report.missing += len(expected - answered - set(errors))
        self.provider.cleanup(job)
        store.finish(job, status.state)
        log.info("batch: job %s %s; %s", job, status.raw_state or status.state, self.report.counts())
        return stored

    def _settle(self) -> None:
        if self.settings.batch_fallback != "fail":
            return
        for key, error in list(self.report.settled.items()):
            self.report.settled[key] = scored_failure(error)

    # ------------------------------------------------------------------ pieces
    def _store(self, key: str, reply: Reply, counted: bool = True) -> bool:
        reply = self.clean(reply)
        try:
            self.cache.put(key, reply, self.label)
        except sqlite3.Error as exc:  # the online pass asks again; the batch copy is lost, not the sample
            log.warning("could not store a batch reply in the cache (%s); that sample is asked online", exc)
            return False
        if counted:
            self.report.succeeded += 1
            self.report.usage.update({k: v for k, v in reply.usage.items() if isinstance(v, int)})
        return True

    def _count_error(self, key: str, error: JudgeCallError) -> None:
        if isinstance(error, JudgeRefusal):  # the judge's own answer: online mode would score it the same way
            self.report.refused += 1
            self.report.settled[key] = error
            return
        if error.kind == ITEM_EXPIRED:
            self.report.expired += 1
        else:
            self.report.failed += 1
        if self.settings.batch_fallback == "fail":
            self.report.settled[key] = error

    def _status(self, job: str) -> JobStatus:
        return self._retrying(lambda: self.provider.status(job))

    def _retrying(self, fn: Callable[[], Any]) -> Any:
        return call_with_retries(fn, self.policy)

    def _show(self, bar: Any, statuses: dict[str, JobStatus]) -> None:
        done = sum(s.done for s in statuses.values())
        bar.update(max(0, done - bar.n))
        states = Counter(s.raw_state or s.state for s in statuses.values())
        bar.set_postfix_str(", ".join(f"{k}: {n}" for k, n in sorted(states.items())), refresh=False)

    def _pending(self, statuses: dict[str, JobStatus], why: str) -> BatchPending:
        jobs = ", ".join(f"{job} ({s.raw_state or s.state}, {s.done}/{s.total} done)" for job, s in statuses.items())
        return BatchPending(f"{why}. Batch job(s) at {self.provider.name}: {jobs}; their ids are kept in "
                            f"{self.cache.path}.", job_ids=list(statuses))


__all__ = ["BatchReport", "BatchRun", "JobStore", "prefill"]
