"""A long-running vendor job (a video render) seen across attempts and across runs.

The job id is written to the media store the moment the vendor accepts the
request, so a retry after a failed poll, or a rerun after a crash, polls the
same job instead of paying for a new one. The poll deadline is set at the
first wait and kept across retries, so ``poll_timeout`` bounds the whole wait.
A stop (``stop.py``) ends the wait at its next tick; the job stays recorded.
A job that renders several samples of one prompt at once (Veo's sampleCount) is
one job for all their keys: recorded, resumed and forgotten together.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence, TypeVar

from ..calls import stop
from ..core.errors import GenerationFailure
from .settings import GeneratorSettings
from .store import MediaStore

T = TypeVar("T")
log = logging.getLogger(__name__)


class Job:
    def __init__(self, store: MediaStore, key: str | Sequence[str], label: str, settings: GeneratorSettings,
                 on_start: Callable[[], None] = lambda: None,
                 sleep: Callable[[float], None] = stop.sleep, clock: Callable[[], float] = time.monotonic):
        self.keys: tuple[str, ...] = (key,) if isinstance(key, str) else tuple(key)
        self.key = self.keys[0]
        self._store, self._label, self._settings = store, label, settings
        self._on_start, self._sleep, self._clock = on_start, sleep, clock
        self.id: str | None = store.job(self.key)
        self.resumed = self.id is not None  # started by an earlier, interrupted run
        self._deadline: float | None = None

    def started(self, job_id: str) -> None:
        """Record a job the vendor just accepted (persisted before the first poll)."""
        if not self._store.record_job(self.keys, job_id, self._label):  # a full disk: the id must be in the log
            log.warning("%s: job %s is not recorded (the disk refused it): if this run stops before it "
                        "finishes, a rerun cannot resume it", self._label, job_id)
        self.id = job_id
        self._on_start()

    def forget(self) -> None:
        """The job failed or the vendor no longer knows it: the next attempt starts a new one."""
        self._store.forget_job(self.keys)
        self.id = None

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
