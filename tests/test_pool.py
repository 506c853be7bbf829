"""run_bounded: input order, the bound on calls in flight, the bound on work queued ahead, errors."""

from __future__ import annotations

import threading

import pytest

from lm_eval_mathjudge.calls.workers import WINDOW_PER_WORKER, run_bounded
from tests.e2e import THREAD_WAIT_S


class Tracked(list):
    """A list that records how far iteration has gone (how many items the pool has taken)."""

    def __init__(self, values):
        super().__init__(values)
        self.taken = 0

    def __iter__(self):
        for value in super().__iter__():
            self.taken += 1
            yield value


@pytest.mark.parametrize("n, concurrency", [(0, 4), (1, 4), (7, 3), (200, 8), (50, 64)])
def test_results_come_back_in_input_order(n, concurrency):
    assert run_bounded(list(range(n)), lambda x: x * x, concurrency=concurrency, desc="t", progress=False) \
        == [x * x for x in range(n)]


def test_calls_in_flight_never_exceed_the_concurrency_and_reach_it():
    lock, state = threading.Lock(), {"now": 0, "peak": 0}
    barrier = threading.Barrier(4, timeout=THREAD_WAIT_S)

    def fn(x):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        if x < 4:
            barrier.wait()  # the first four meet: four must be in flight together
        with lock:
            state["now"] -= 1
        return x

    run_bounded(list(range(40)), fn, concurrency=4, desc="t", progress=False)
    assert state["peak"] == 4


def test_items_are_taken_a_window_ahead_not_all_at_once():
    items = Tracked(range(10_000))
    release, seen = threading.Event(), []

    def fn(x):
        if x == 0:  # the first call holds the run up while the others finish: what was taken by then?
            release.wait(THREAD_WAIT_S)
            seen.append(items.taken)
        else:
            if items.taken >= 3 * WINDOW_PER_WORKER * 2 and not release.is_set():
                release.set()
        return x

    out = run_bounded(items, fn, concurrency=2, desc="t", progress=False)
    assert out == list(range(10_000))
    assert seen and seen[0] < 10_000 // 2  # never the whole list of futures up front
    assert items.taken == 10_000


def test_an_escaped_error_is_raised_after_the_calls_in_flight_and_stops_new_ones():
    started, finished = [], []
    lock = threading.Lock()

    def fn(x):
        with lock:
            started.append(x)
        if x == 3:
            raise RuntimeError("boom")
        with lock:
            finished.append(x)
        return x

    with pytest.raises(RuntimeError, match="boom"):
        run_bounded(list(range(10_000)), fn, concurrency=2, desc="t", progress=False)
    assert len(started) < 10_000  # nothing new started once the error was seen (bounded by the window)
    assert set(finished) == set(started) - {3}  # every call that started ran to its end
