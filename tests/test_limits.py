"""Unit tests of the per-backend limits (pool.py): sliding windows, the adaptive gate, sharing.

A fake clock drives every wait, so no test depends on the machine's speed (speed is measured in
bench/rate_limit.py). The client-level tests use a fake backend at our own seam; the wire tests are
in test_limits_wire.py.
"""

from __future__ import annotations

import functools
import gc
import threading
import time

import pytest

from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.calls import limits as pool
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import TransientJudgeError
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.calls.limits import AdaptiveGate, BackendLimits, WindowLimiter, backend_limits
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import JudgeRequest, Reply
from tests._helpers import REPLY_CORRECT
from tests.e2e import THREAD_WAIT_S

MARGIN = 1 + pool.WINDOW_MARGIN


class FakeClock:
    def __init__(self, advance_on_sleep: bool = True):
        self.now, self.advance = 500.0, advance_on_sleep
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.advance:
            self.now += seconds


def limiter(capacity: float, window: float, advance: bool = True) -> tuple[WindowLimiter, FakeClock]:
    clock = FakeClock(advance)
    return WindowLimiter(capacity, window, clock=clock, sleep=clock.sleep), clock


# ------------------------------------------------------------------------ requests per minute
@pytest.mark.parametrize("rpm, gap", [(60, 1.0), (300, 0.2), (600, 0.1), (1.5, 40.0)])
def test_rpm_spaces_starts_evenly_a_little_under_the_limit(rpm, gap):
    clock = FakeClock()
    lim = WindowLimiter.per_minute(rpm, clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(6):
        lim.acquire()
        starts.append(clock.now)
    assert [b - a for a, b in zip(starts, starts[1:])] == pytest.approx([gap * MARGIN] * 5)
    # however the starts fall, no window of the provider's length holds more than its share
    assert all(b - a >= gap for a, b in zip(starts, starts[1:]))


def test_simultaneous_callers_queue_in_order():
    clock = FakeClock(advance_on_sleep=False)  # every caller arrives at the same instant
    lim = WindowLimiter.per_minute(60, clock=clock, sleep=clock.sleep)
    for _ in range(4):
        lim.acquire()
    assert clock.sleeps == pytest.approx([1 * MARGIN, 2 * MARGIN, 3 * MARGIN])


def test_idle_time_is_not_banked_into_a_burst():
    lim, clock = limiter(1, 1.0)
    lim.acquire()
    clock.now += 30
    lim.acquire()
    lim.acquire()
    assert clock.sleeps == pytest.approx([1.0])


@pytest.mark.parametrize("capacity, window, n, expected_sleeps", [
    (3, 1.0, 4, [1.0]),             # three at once, the fourth when the first leaves the window
    (3, 1.0, 7, [1.0, 1.0]),        # 3 + 3 + 1: one wait per full window
    (5, 2.0, 5, []),                # within capacity: no wait
])
def test_a_sliding_window_admits_capacity_per_window(capacity, window, n, expected_sleeps):
    lim, clock = limiter(capacity, window)
    for _ in range(n):
        lim.acquire()
    assert clock.sleeps == pytest.approx(expected_sleeps)


def test_a_429_gives_its_place_back_so_the_retry_takes_the_only_place():
    lim, clock = limiter(1, 1.0, advance=False)
    first = lim.acquire()
    lim.refund(first)  # the provider refused it: it did not count
    lim.acquire()      # the retry
    assert clock.sleeps == []  # not queued behind a place nobody used
    assert lim.used() == 1


def test_without_a_refund_the_next_call_waits():
    lim, clock = limiter(1, 1.0, advance=False)
    lim.acquire()
    lim.acquire()
    assert clock.sleeps == pytest.approx([1.0])


# ------------------------------------------------------------------------ tokens per minute
@pytest.mark.parametrize("weights, expected_sleeps", [
    ([600, 300], []),                 # 900 of 1,000: both start at once
    ([600, 300, 200], [10.0]),        # 1,100: the third waits for the first to leave the window
    ([1500], []),                     # heavier than the capacity: starts alone in an empty window...
    ([1500, 10], [10.0]),             # ...and the window is full until it leaves
    ([0, 0, 1000], []),               # nothing counted yet
])
def test_tokens_window(weights, expected_sleeps):
    lim, clock = limiter(1000, 10.0)
    for w in weights:
        lim.acquire(w)
    assert clock.sleeps == pytest.approx(expected_sleeps)


def test_the_real_usage_replaces_the_estimate():
    lim, clock = limiter(1000, 10.0)
    entry = lim.acquire(900)  # 200 prompt tokens + max_tokens 700 reserved
    lim.settle(entry, 230)    # the reply used 230
    lim.acquire(700)
    assert clock.sleeps == []
    assert lim.used() == 930


def test_tpm_window_keeps_every_minute_under_the_limit():
    clock = FakeClock()
    lim = WindowLimiter.per_minute(60_000, unit_window=pool.TPM_WINDOW, clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(40):
        lim.acquire(2_000)
        starts.append(clock.now)
    for i, t in enumerate(starts):  # tokens started in any 60 s from each start
        assert sum(2_000 for u in starts[i:] if u < t + 60) <= 60_000


def test_estimate_counts_prompt_characters_media_and_the_completion():
    assert pool.estimate_tokens(4000, 0, 1024) == 1000 + 1024
    assert pool.estimate_tokens(10, 2, 0) == 3 + 2 * pool.MEDIA_TOKENS


# ------------------------------------------------------------------------ adaptive gate
def _events(gate: AdaptiveGate, script: str) -> list[int]:
    """Run a script: 'a' acquire (fresh), 'r' acquire (retry), 'o'/'l'/'f' release the oldest
    attempt as ok / limited (429) / failed, 'L' release the newest as limited; returns the cap
    after each step. (One thread: a script never acquires past the cap.)"""
    held: list[int] = []
    caps = []
    for step in script:
        if step in "ar":
            assert gate.in_flight < gate.cap, "the script would block"
            held.append(gate.acquire(retry=step == "r"))
        elif step == "L":
            gate.release(held.pop(), "limited")
        else:
            gate.release(held.pop(0), {"o": "ok", "l": "limited", "f": "failed"}[step])
        caps.append(gate.cap)
    return caps


@pytest.mark.parametrize("maximum, script, expected_cap", [
    (32, "a" * 32 + "l" * 27, 22),         # 27 simultaneous 429s of one round: one decrease (32 * 0.7)
    (32, "a" * 32 + "l" * 27 + "aL", 15),  # a 429 from the new round lowers it again (22.4 * 0.7)
    (4, "a" * 4 + "l" * 4 + "aL" * 5, 1),   # every new round refused: down to 1, never 0
    (8, "aaaa" + "oa" * 4, 8),               # successes while the cap is not reached: unchanged
    (1, "a" + "oa" * 10, 1),                # never above the maximum
    (8, "a" * 8 + "f" * 8, 8),               # a failure that is not a 429 leaves the cap alone
])
def test_gate_cap(maximum, script, expected_cap):
    gate = AdaptiveGate(maximum)
    assert _events(gate, script)[-1] == expected_cap


def test_gate_recovers_additively_after_a_429():
    gate = AdaptiveGate(10)
    held = [gate.acquire() for _ in range(10)]
    gate.release(held.pop(), "limited")
    assert gate.cap == 7
    while gate.in_flight > gate.cap:  # the other attempts of that round end (not with a 429)
        gate.release(held.pop(0), "failed")
    caps = []
    for _ in range(30):  # keep the gate full: each success frees a place that is taken at once
        gate.release(held.pop(0), "ok")
        while gate.in_flight < gate.cap:
            held.append(gate.acquire())
        caps.append(gate.cap)
    assert caps == sorted(caps) and caps[-1] == 10  # rises step by step back to the maximum
    assert caps.index(8) in range(6, 9)  # +1 after about `cap` successes, not at once


def test_gate_without_adaptive_keeps_its_cap():
    gate = AdaptiveGate(16, adaptive=False)
    assert _events(gate, "a" * 16 + "l" * 16)[-1] == 16


def test_a_retry_enters_the_gate_before_fresh_calls():
    gate = AdaptiveGate(1)
    first = gate.acquire()
    order: list[str] = []

    def enter(name: str, retry: bool) -> None:
        held = gate.acquire(retry=retry)
        order.append(name)
        gate.release(held, "ok")

    fresh = threading.Thread(target=enter, args=("fresh", False))
    fresh.start()
    _wait_until(lambda: fresh.is_alive())
    retry = threading.Thread(target=enter, args=("retry", True))
    retry.start()
    _wait_until(lambda: gate._retries_waiting == 1)
    gate.release(first, "ok")
    fresh.join(THREAD_WAIT_S)
    retry.join(THREAD_WAIT_S)
    assert order == ["retry", "fresh"]


def _wait_until(condition, limit: float = THREAD_WAIT_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.01)


# ------------------------------------------------------------------------ one set of limits per backend
IDENT = {"backend": "openai", "endpoint": "https://api.example.test/v1", "model": "gpt-4-turbo-2024-04-09"}


@pytest.mark.parametrize("other, shared", [
    ({**IDENT, "temperature": 0.7}, True),       # other judge settings: the same provider quota
    ({**IDENT, "max_tokens": 50}, True),
    ({**IDENT, "model": "gpt-4o-2024-08-06"}, False),
    ({**IDENT, "endpoint": "https://other.example.test/v1"}, False),
    ({**IDENT, "backend": "azure"}, False),       # another key variable, another quota
])
def test_clients_of_one_backend_share_its_limits(other, shared):
    first = backend_limits(IDENT, rpm=60)
    second = backend_limits(other, rpm=60)
    assert (first is second) == shared


def test_the_stricter_rate_and_the_larger_concurrency_win():
    first = backend_limits(IDENT, rpm=600, tpm=0, concurrency=8)
    second = backend_limits(IDENT, rpm=300, tpm=90_000, concurrency=32)
    assert second is first
    assert (first.rpm, first.tpm, first.gate.maximum) == (300, 90_000, 32)
    backend_limits(IDENT, rpm=0, tpm=0, concurrency=4)  # unlimited asks for nothing stricter
    assert (first.rpm, first.tpm, first.gate.maximum) == (300, 90_000, 32)


def test_limits_last_as_long_as_a_client_holds_them():
    first = backend_limits(IDENT, rpm=60)
    first_id = id(first)
    del first
    gc.collect()
    again = backend_limits(IDENT, rpm=0)
    assert again.requests is None, f"a new object, not the one at {first_id} with its rpm"


def test_a_permit_is_given_back_once_and_a_429_counts_neither_request_nor_tokens():
    clock = FakeClock(advance_on_sleep=False)
    limits = BackendLimits(rpm=60, tpm=60_000, concurrency=2, adaptive=True, clock=clock, sleep=clock.sleep)
    permit = limits.start(tokens=900)
    assert (limits.gate.in_flight, limits.tokens.used()) == (1, 900)
    permit.done("limited")
    permit.done("limited")  # idempotent: one attempt, one release
    assert (limits.gate.in_flight, limits.limited, limits.tokens.used()) == (0, 1, 0)
    again = limits.start(tokens=900, retry=True)
    assert clock.sleeps == []  # the retry took the place the 429 gave back
    again.done("ok", tokens=250)
    assert limits.tokens.used() == 250


# ------------------------------------------------------------------------ JudgeClient._call
class RateLimitedBackend:
    """Refuses the first attempt of every request with a 429 (Retry-After 0), then answers."""

    def __init__(self, model: str):
        self.model = model
        self.lock = threading.Lock()
        self.attempts: dict[str, int] = {}

    def identity(self):
        return {"backend": "fake", "endpoint": "loopback://limits", "model": self.model}

    def complete(self, request: JudgeRequest) -> Reply:
        with self.lock:
            n = self.attempts[request.prompt] = self.attempts.get(request.prompt, 0) + 1
        if n == 1:
            raise TransientJudgeError("judge returned HTTP 429: slow down", kind="rate_limited", status=429,
                                      retry_after=0.0)
        return Reply(text=REPLY_CORRECT, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})

    def close(self):
        pass


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.001))


def _client(backend, **overrides) -> JudgeClient:
    s = JudgeSettings(backend="openai", model=backend.model, cache=False, concurrency=8, **overrides)
    return JudgeClient(backend, parse_exact_match, s, "t", None, progress=False)


def test_a_client_judges_every_sample_through_429s_and_lowers_the_shared_gate():
    backend = RateLimitedBackend("limits-model-a")
    client = _client(backend, tpm=1_000_000)
    outcomes = client.judge_all([JudgeRequest(prompt=f"problem {i}") for i in range(20)])
    assert all(o.verdict is not None for o in outcomes)
    assert client.stats.rate_limited == 20 and client.stats.calls == 40
    limits = client._limits
    assert limits.limited == 20
    assert limits.gate.cap < 8  # lowered by the 429s (and shared: see below)
    assert limits.tokens.used() == 20 * 120  # refused attempts count nothing, answers their real usage
    other = _client(RateLimitedBackend("limits-model-a"))  # another client of the same backend
    assert other._limits is limits


def test_retries_ask_the_gate_as_retries(monkeypatch):
    backend = RateLimitedBackend("limits-model-b")
    client = _client(backend)
    seen: list[bool] = []
    real_start = client._limits.start

    def spy(tokens=0.0, retry=False):
        seen.append(retry)
        return real_start(tokens, retry)

    monkeypatch.setattr(client._limits, "start", spy)
    client.judge_all([JudgeRequest(prompt=f"problem {i}") for i in range(5)])
    assert sorted(seen) == [False] * 5 + [True] * 5


# ---------------------------------------------------------------- the learned rate (adaptive)
def _serve(limits, clock, count, every):
    """``count`` calls, one started every ``every`` seconds, each served."""
    for _ in range(count):
        limits.start().done("ok")
        clock.now += every


@pytest.mark.parametrize("served_per_s", [5.0, 2.0, 40.0])
def test_a_429_holds_the_backend_to_the_rate_it_was_seen_to_serve(served_per_s):
    clock = FakeClock()
    limits = BackendLimits(rpm=0, tpm=0, concurrency=64, adaptive=True, clock=clock, sleep=clock.sleep)
    _serve(limits, clock, int(served_per_s * 4), 1.0 / served_per_s)  # four seconds of service
    limits.start().done("limited")
    assert limits.learned_rpm == pytest.approx(served_per_s * 60, rel=0.01)
    clock.sleeps.clear()
    for _ in range(4):  # from now on starts are spaced by the learned rate (2% under it)
        limits.start()
    assert clock.sleeps[-1] == pytest.approx(1.0 / served_per_s * 1.02, rel=0.01)


def test_no_rate_is_learned_from_the_first_burst_and_none_without_adaptive():
    clock = FakeClock()
    limits = BackendLimits(rpm=0, tpm=0, concurrency=64, adaptive=True, clock=clock, sleep=clock.sleep)
    for _ in range(10):  # ten at once, nothing served yet: no evidence of a rate
        limits.start().done("limited")
    assert limits.learned_rpm == 0 and limits.requests is None
    fixed = BackendLimits(rpm=0, tpm=0, concurrency=64, adaptive=False, clock=clock, sleep=clock.sleep)
    _serve(fixed, clock, 20, 0.2)
    fixed.start().done("limited")
    assert fixed.learned_rpm == 0 and fixed.requests is None


def test_the_learned_rate_recovers_after_a_quiet_spell_and_gives_way_to_the_users_rpm():
    clock = FakeClock()
    limits = BackendLimits(rpm=400, tpm=0, concurrency=64, adaptive=True, clock=clock, sleep=clock.sleep)
    _serve(limits, clock, 20, 0.2)  # 300/min served, under the user's 400
    limits.start().done("limited")
    learned = limits.learned_rpm
    assert learned == pytest.approx(300, rel=0.03)
    limits.start().done("ok")  # within LEARN_WINDOW of the 429: no increase yet
    assert limits.learned_rpm == learned
    clock.now += 6.0
    _serve(limits, clock, 10, 0.0)
    assert limits.learned_rpm > learned  # it creeps up after the quiet spell
    _serve(limits, clock, 200, 0.0)
    assert limits.learned_rpm == 0 and limits.rpm == 400  # back at the user's own limit
