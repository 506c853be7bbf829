"""A long-running vendor job (a video render) seen across attempts and across runs.

The job id is written to the media store the moment the vendor accepts the
request, so a retry after a failed poll, or a rerun after a crash, polls the
same job instead of paying for a new one. The poll deadline is set at the
first wait and kept across retries, so ``poll_timeout`` bounds the whole wait.
A stop (``stop.py``) ends the wait at its next tick; the job stays recorded.
A job that renders several samples of one prompt at once (Veo's sampleCount) is
one job for all their keys: recorded, resumed and forgotten together. Each key
also records which of the job's outputs is its own (``positions``), so a resume
after only some of them were stored gives each remaining sample its own output;
a key whose position cannot be known (``resumable_positions``) leaves the job and
is made by a new one rather than risk a copy of another sample's output.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Callable, Sequence, TypeVar

from ..calls import stop
from ..core.errors import GenerationFailure
from .settings import GeneratorSettings
from .store import MediaStore

T = TypeVar("T")
log = logging.getLogger(__name__)


def resumable_positions(recorded: Sequence[int | None]) -> list[int | None]:
    """The output each key of a recorded job takes (in key order), None where it cannot be known.

    Rows from before positions were recorded (all None) take the order of the keys, as they always did.
    Otherwise a key without a position, or one claiming an output another key claims too, is unknown.
    """
    if all(position is None for position in recorded):
        return list(range(len(recorded)))
    claims = Counter(recorded)
    return [p if p is not None and p >= 0 and claims[p] == 1 else None for p in recorded]


class Job:
    def __init__(self, store: MediaStore, key: str | Sequence[str], label: str, settings: GeneratorSettings,
                 on_start: Callable[[], None] = lambda: None,
                 sleep: Callable[[float], None] = stop.sleep, clock: Callable[[], float] = time.monotonic,
                 resume: bool = True):
        self.keys: tuple[str, ...] = (key,) if isinstance(key, str) else tuple(key)
        self.key = self.keys[0]
        self._store, self._label, self._settings = store, label, settings
        self._on_start, self._sleep, self._clock = on_start, sleep, clock
        self.id: str | None = None
        self.positions: tuple[int | None, ...] = self._in_order()  # keys[i] takes outputs[positions[i]]
        if resume:
            self._resume()
        self.resumed = self.id is not None  # started by an earlier, interrupted run
        self._deadline: float | None = None

    def _resume(self) -> None:
        """Take up the job recorded for these keys, for the keys whose output in it is known."""
        rows = self._store.jobs(self.keys)
        job_id = next((rows[k][0] for k in self.keys if k in rows), None)
        mine = [k for k in self.keys if k in rows and rows[k][0] == job_id]
        known = dict(zip(mine, resumable_positions([rows[k][1] for k in mine])))
        unknown = tuple(k for k in mine if known[k] is None)
        if unknown:
            log.warning("%s: job %s does not say which of its outputs %d sample(s) take; a new job makes them",
                        self._label, job_id, len(unknown))
            self._store.forget_job(unknown)
        if len(unknown) < len(mine):
            self.id = job_id
            self.positions = tuple(known.get(k) for k in self.keys)

    def started(self, job_id: str) -> None:
        """Record a job the vendor just accepted (persisted before the first poll)."""
        if not self._store.record_job(self.keys, job_id, self._label):  # a full disk: the id must be in the log
            log.warning("%s: job %s is not recorded (the disk refused it): if this run stops before it "
                        "finishes, a rerun cannot resume it", self._label, job_id)
        self.id = job_id
        self.positions = self._in_order()
        self._on_start()

    def forget(self) -> None:
        """The job failed or the vendor no longer knows it: the next attempt starts a new one."""
        self._store.forget_job(self.keys)
        self.id = None
        self.positions = self._in_order()  # for the job the next attempt starts

    def _in_order(self) -> tuple[int, ...]:
        return tuple(range(len(self.keys)))

    def wait(self, check: Callable[[], T | None], what: str) -> T:
        """Call ``check`` every poll_interval until it returns a result; GenerationFailure at poll_timeout."""
        if self._deadline is None:
            self._deadline = self._clock() + self._settings.poll_timeout
        while True:
            result = check()
            if result is not None:
                return result
            if self._clock() >= self._deadline:
                raise GenerationFailure(
                    f"{what} still running after {self._settings.poll_timeout:g}s (poll_timeout); it stays "
                    "recorded, so rerunning the same command resumes polling it without paying again",
                    kind="timeout", remember=False)
            self._sleep(self._settings.poll_interval)
