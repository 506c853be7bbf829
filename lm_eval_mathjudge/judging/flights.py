"""Identical requests asked at once are sent once: the first caller makes the call, the others wait for it.

The cache's leases keep two processes from paying twice for one key, but a lease belongs to one
open cache, so two threads of one client (or two clients without a cache) asking for the same key
at the same moment would both miss the cache and both pay. ``Flights`` closes that gap inside the
process: per key, one call runs; a caller that finds it in flight waits for its result, bounded,
and on a timeout or a failure of the first call asks itself (the cache and its lease still apply).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, TimeoutError as FutureTimeout
from typing import Any, Callable

DEFAULT_WAIT_S = 600.0  # the wait for a judge that does not say how long its calls can take (a stand-in judge)


def wait_limit(judge: Any) -> float:
    """How long an identical request waits for ``judge``'s call in flight: the longest that call can take."""
    return getattr(judge, "wait_limit", DEFAULT_WAIT_S)


class Flights:
    """One call per key at a time; ``keep=True`` also keeps each finished result (one judge pass)."""

    def __init__(self, keep: bool = False):
        self._keep = keep
        self._lock = threading.Lock()
        self._calls: dict[str, Future] = {}

    def run(self, key: str, call: Callable[[], Any], wait_s: float) -> tuple[Any, bool]:
        """(result, shared): ``shared`` is True when another caller's call for ``key`` gave the result."""
        with self._lock:
            first = self._calls.get(key)
            if first is None:
                mine: Future = Future()
                self._calls[key] = mine
        if first is not None:
            try:
                return first.result(timeout=wait_s), True
            except (FutureTimeout, Exception):  # noqa: BLE001 - the first call failed or is stuck: ask ourselves
                return call(), False
        try:
            result = call()
        except BaseException as exc:
            mine.set_exception(exc)
            self._forget(key, mine)
            raise
        mine.set_result(result)
        if not self._keep:
            self._forget(key, mine)
        return result, False

    def _forget(self, key: str, future: Future) -> None:
        with self._lock:
            if self._calls.get(key) is future:
                del self._calls[key]
