"""The one bounded worker pool and the one progress bar, shared by judging, batch mode and generation.

``run_bounded`` runs a function over every item with at most ``concurrency``
calls in flight and returns the results in input order; a stop (``stop.py``)
ends it with a grace period for the calls in flight. ``progress_bar`` is the bar
every long wait shows (tqdm on stderr), or a silent stand-in that still counts; judging draws its own
line (``progress.Meter``), which the pool is handed instead.
"""

from __future__ import annotations

import itertools
import sys
import time
from contextlib import nullcontext
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence, TypeVar

from . import stop

T = TypeVar("T")
R = TypeVar("R")

WINDOW_PER_WORKER = 4  # items submitted ahead of the workers (each waiting future costs ~1.6 KiB)


def run_bounded(items: Sequence[T], fn: Callable[[T], R], *, concurrency: int, desc: str,
                progress: bool = True, unit: str = "req", thread_name: str = "mathjudge",
                on_bar: Callable[[object], None] | None = None, bar: Any = None) -> list[R]:
    """``[fn(item) for item in items]`` with at most ``concurrency`` calls at once, in input order.

    ``on_bar`` receives the progress bar before the first call, so callers can show
    a running summary on it (``set_postfix``). ``bar``: an open bar the caller owns and counts
    on (the judging line, ``progress.Meter``), used instead of a bar of the pool's own.
    ``fn`` should catch its own errors: one that escapes is re-raised here once
    every call already started has finished, so no paid result is dropped mid-flight.
    A stop (``stop.py``) submits nothing more and cancels what has not started; the calls
    in flight get ``stop.GRACE_S`` to finish (a countdown on the bar), then ``Stopped`` is raised.
    """
    results: list = [None] * len(items)
    if not items:
        return results
    workers = max(1, min(concurrency, len(items)))
    window = WINDOW_PER_WORKER * workers  # futures alive at once: memory flat in the number of items
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name)
    try:
        with (nullcontext(bar) if bar is not None else progress_bar(len(items), desc, progress, unit)) as shown, \
                stop.polling():
            if on_bar is not None:
                on_bar(shown)
            _drive(pool, iter(enumerate(items)), fn, results, window, shown, count=bar is None)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # calls a stop gave up on must not hold the exit up
        raise
    pool.shutdown(wait=True)
    return results


def _drive(pool: ThreadPoolExecutor, todo, fn, results: list, window: int, bar, count: bool = True) -> None:
    """Submit and collect until every item is done; then raise what escaped ``fn``, or ``Stopped``.

    Calls are left running only when a stop's grace ran out.
    """
    running: dict = {}
    error: BaseException | None = None
    deadline: float | None = None  # set by a stop: the calls in flight may run until then
    while True:
        if error is None and deadline is None:  # after an escaped error or a stop nothing new starts
            for i, item in itertools.islice(todo, window - len(running)):
                running[pool.submit(_unless_stopped, fn, item)] = i
        if deadline is None and stop.requested():
            deadline = time.monotonic() + stop.GRACE_S
            for future in [f for f in running if f.cancel()]:  # queued, never started: nothing was paid
                running.pop(future)
        if not running:
            break
        if deadline is not None:
            left = deadline - time.monotonic()
            bar.set_postfix_str(f"stopping: {len(running)} in flight, {max(0.0, left):.0f}s left", refresh=True)
            if left <= 0:
                raise stop.stopped()
        done, _ = wait(running, timeout=stop.TICK_S, return_when=FIRST_COMPLETED)
        for future in done:
            i = running.pop(future)
            try:
                results[i] = future.result()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, once the calls in flight end
                error = error or exc
            if count:
                bar.update(1)
    if deadline is not None:
        raise stop.stopped()
    if error is not None:
        raise error


def _unless_stopped(fn: Callable[[T], R], item: T) -> R:
    stop.check()  # a worker taking queued work after a stop starts nothing (the main thread cancels the rest)
    return fn(item)


class _NullBar:
    """A bar that shows nothing and counts (``n``), for runs with the progress bar off."""
    n = 0

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix(self, **values: Any) -> None:
        pass

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        pass

    def __enter__(self) -> _NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def notice(text: str) -> None:
    """A line of ours on stderr that starts on a line of its own even while a progress bar (lm-eval's
    or ours) is drawn there: the bars are cleared, the line written, the bars drawn again below it."""
    try:
        from tqdm import tqdm
    except ImportError:  # no bar can be drawing without tqdm
        print(text, file=sys.stderr, flush=True)
        return
    tqdm.write(text, file=sys.stderr)
    sys.stderr.flush()


def progress_bar(total: int | None, desc: str, enabled: bool = True, unit: str = "req") -> Any:
    """tqdm's bar (``total`` None: a counter without an end), or ``_NullBar`` when disabled."""
    if not enabled:
        return _NullBar()
    from tqdm import tqdm  # lazy: a run without a bar never imports it

    return tqdm(total=total, desc=desc, unit=unit)
