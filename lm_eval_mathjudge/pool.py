"""The one bounded worker pool and rate limiter, shared by judging and generation.

``run_bounded`` runs a function over every item with at most ``concurrency``
calls in flight and returns the results in input order. ``RateLimiter``
spaces call starts evenly over all threads. The judge client and the
generators both go through these two, so the limits behave the same way
whether a run is paying for verdicts or for images.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class RateLimiter:
    """Spaces call starts evenly: at most ``rpm`` per minute over all threads."""

    def __init__(self, rpm: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self._interval = 60.0 / rpm if rpm > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def acquire(self) -> None:
        if not self._interval:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self._interval
        if start > now:
            self._sleep(start - now)


def run_bounded(items: Sequence[T], fn: Callable[[T], R], *, concurrency: int, desc: str,
                progress: bool = True, unit: str = "req", thread_name: str = "mathjudge",
                on_bar: Callable[[object], None] | None = None) -> list[R]:
    """``[fn(item) for item in items]`` with at most ``concurrency`` calls at once, in input order.

    ``on_bar`` receives the progress bar before the first call, so callers can show
    a running summary on it (``set_postfix``).
    ``fn`` should catch its own errors: one that escapes is re-raised here once
    every call already started has finished, so no paid result is dropped mid-flight.
    """
    results: list = [None] * len(items)
    if not items:
        return results
    workers = max(1, min(concurrency, len(items)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name) as pool, \
            _progress_bar(len(items), desc, progress, unit) as bar:
        if on_bar is not None:
            on_bar(bar)
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            bar.update(1)
    return results


class _NullBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **values) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _progress_bar(total: int, desc: str, enabled: bool, unit: str):
    if not enabled:
        return _NullBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit)
