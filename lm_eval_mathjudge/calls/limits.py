"""How fast each backend may be called: rpm/tpm windows, the adaptive gate, the learned rate, one per backend.

``backend_limits(identity, ...)`` returns the one ``BackendLimits`` of a
backend (endpoint + model) in this process, shared by every thread and every
client that talks to it. Each attempt on the wire goes through it::

    permit = limits.start(tokens=estimate, retry=...)   # waits: gate, then requests/min, tokens/min
    ... the HTTP call ...
    permit.done(outcome, tokens=real usage)   # "ok", "limited" (a 429), "failed", "unsent"

* requests per minute (``rpm``) and tokens per minute (``tpm``) are sliding
  windows (``WindowLimiter``) over the start times of the attempts the provider
  counted. A 429 gives its place back: the provider did not serve it, so its
  retry takes the one place that sample holds, never a second one. A call's
  tokens are estimated when it starts and corrected by the reply's usage.
* the adaptive gate (``AdaptiveGate``) caps the attempts in flight: one 429
  lowers the cap multiplicatively (once per round of calls started under the
  old cap), successes raise it additively, between 1 and ``concurrency``. A
  retry waits its Retry-After outside the gate, then enters before fresh calls.
"""

from __future__ import annotations

import json
import math
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import stop

# A limiter stays this much under the limit it is given: the provider counts arrivals, we count
# starts, and the time between the two varies by a few ms (thread wake-ups, the SDK's own work).
# Without it, jitter alone draws 429s at a limit set exactly at the provider's.
WINDOW_MARGIN = 0.02
TPM_WINDOW = 10.0  # seconds: tpm/6 tokens per 10 s, so no minute ever holds more than tpm
GATE_DECREASE = 0.7  # the gate's cap after a 429, as a fraction of the cap before it (gentler than TCP's 0.5:
# a provider's limit is a rate, so a deep cut leaves it idle; bench/rate_limit.py)
CHARS_PER_TOKEN = 4.0  # rough English/LaTeX average; the reply's usage corrects it
# The learned rate (adaptive, see BackendLimits): a 429 sets the backend's request rate to the rate
# at which the calls it served were started over the last LEARN_WINDOW seconds; once no 429 has come
# for LEARN_WINDOW seconds, each success raises it by RATE_RECOVERY, so a provider that allows more
# is found again, one 429 at a time.
LEARN_WINDOW = 5.0
RATE_RECOVERY = 0.01
MEDIA_TOKENS = 1000  # an attachment's guess (an image is ~260-1,100 tokens); corrected likewise


class _Entry:
    __slots__ = ("time", "weight")

    def __init__(self, time_: float, weight: float):
        self.time, self.weight = time_, weight


class WindowLimiter:
    """At most ``capacity`` units started in any ``window`` seconds, over all threads.

    A sliding log of (start time, weight) reservations. ``acquire`` reserves the earliest
    start that keeps every window within capacity and sleeps until then (callers are served
    in order, so none starves). One item heavier than the whole capacity starts alone in an
    empty window. ``settle`` replaces an estimated weight by the real one; ``refund`` removes
    a start the provider did not count (a 429).
    """

    def __init__(self, capacity: float, window: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = stop.sleep):
        if capacity <= 0 or window <= 0:
            raise ValueError("capacity and window must be positive")
        self.capacity, self.window = float(capacity), float(window)
        self._log: list[_Entry] = []
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    @classmethod
    def per_minute(cls, rate: float, *, unit_window: float = 0.0, **kwargs: Any) -> WindowLimiter:
        """``rate`` per minute as ``rate/60 * w`` per ``w`` seconds, ``w`` = ``unit_window`` or the time
        of one unit if longer, stretched by ``WINDOW_MARGIN``. The default (one unit per window)
        spaces starts evenly, which suits a provider's window of any length; never a minute's burst."""
        per_second = rate / 60.0
        window = max(unit_window, 1.0 / per_second)
        return cls(per_second * window, window * (1 + WINDOW_MARGIN), **kwargs)

    def retune(self, rate: float) -> None:
        """A new per-minute ``rate`` for a limiter made by ``per_minute`` (one unit per window), in place:
        the reservations already made keep their times, so no burst slips in while it changes."""
        with self._lock:
            self.capacity, self.window = 1.0, 60.0 / rate * (1 + WINDOW_MARGIN)

    def acquire(self, weight: float = 1.0) -> _Entry:
        with self._lock:
            now = self._clock()
            log = self._log
            while log and log[0].time <= now - self.window:
                log.pop(0)
            start = max(now, log[-1].time) if log else now  # in order: after every earlier reservation
            first = 0  # log[first:] is inside the window ending at `start`; by index, not by float compare
            while first < len(log) and log[first].time + self.window <= start:
                first += 1
            while True:
                used = sum(e.weight for e in log[first:])
                if used <= 0 or used + weight <= self.capacity * (1 + 1e-9):
                    break
                # Start when enough of the oldest reservations have left the window (all of them
                # for an item heavier than the capacity).
                need, freed = used + weight - self.capacity, 0.0
                while first < len(log):
                    freed += log[first].weight
                    first += 1
                    if freed >= need * (1 - 1e-9):
                        break
                start = max(start, log[first - 1].time + self.window)
                while first < len(log) and log[first].time + self.window <= start:
                    first += 1
            entry = _Entry(start, weight)
            log.append(entry)
        if start > now:
            self._sleep(start - now)
        return entry

    def settle(self, entry: _Entry, weight: float) -> None:
        with self._lock:
            entry.weight = max(0.0, weight)

    def refund(self, entry: _Entry) -> None:
        self.settle(entry, 0.0)

    def used(self) -> float:
        """Units in the window ending now (for tests and progress lines)."""
        with self._lock:
            now = self._clock()
            return sum(e.weight for e in self._log if now - self.window < e.time <= now)


class AdaptiveGate:
    """Caps the attempts in flight for one backend; with ``adaptive``, lowers the cap on 429s.

    Attempts are grouped in rounds, a round ending at each decrease. The first 429 of the current
    round multiplies the cap by ``GATE_DECREASE`` and starts a new round; a 429 from an attempt
    started in an older round says nothing new (27 simultaneous 429s lower the cap once, not 27
    times). Additive increase: +1 per ``cap`` successes while the cap is what holds calls back.
    Never below 1, never above ``maximum``. A retry (after its Retry-After, waited outside the
    gate) enters before fresh calls, so no sample is starved into running out of retries.
    """

    def __init__(self, maximum: int, adaptive: bool = True, wait: float = 5.0):
        self.maximum = max(1, int(maximum))
        self.adaptive = adaptive
        self._cap = float(self.maximum)
        self._in_flight = 0
        self._retries_waiting = 0
        self._round = 0
        self._cond = threading.Condition()
        self._wait = wait  # a waiter re-checks at least this often (a Condition wait is always bounded)

    @property
    def cap(self) -> int:
        return max(1, int(self._cap))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def round(self) -> int:
        """Rounds end at each decrease: a 429 from an attempt of an older round says nothing new."""
        return self._round

    def acquire(self, retry: bool = False) -> int:
        """Wait for a place; returns the round it started in (give it back to ``release``)."""
        with self._cond:
            if retry:
                self._retries_waiting += 1
            try:
                while self._in_flight >= self.cap or (not retry and self._retries_waiting):
                    stop.check()
                    self._cond.wait(self._wait)
                stop.check()  # after a stop no call starts (the releases of the calls in flight wake us)
            finally:
                if retry:
                    self._retries_waiting -= 1
            self._in_flight += 1
            return self._round

    def release(self, started_round: int, outcome: str) -> None:
        """``outcome``: "ok" (may raise the cap), "limited" (a 429: lowers it), else neither."""
        with self._cond:
            was_full = self._in_flight >= self.cap
            self._in_flight -= 1
            if self.adaptive and outcome == "limited" and started_round == self._round:
                self._cap = max(1.0, self._cap * GATE_DECREASE)
                self._round += 1
            elif self.adaptive and outcome == "ok" and was_full and self._cap < self.maximum:
                self._cap = min(float(self.maximum), self._cap + 1.0 / self._cap)
            self._cond.notify_all()

    def widen(self, maximum: int) -> None:
        """Another client of the same backend asks for more calls in flight."""
        with self._cond:
            if maximum > self.maximum:
                self._cap += maximum - self.maximum
                self.maximum = int(maximum)
                self._cond.notify_all()


@dataclass
class Permit:
    """One attempt's places in its backend's limits; ``done`` gives them back exactly once."""
    limits: BackendLimits
    started_round: int
    request: _Entry | None
    tokens: _Entry | None
    started_at: float = 0.0
    finished: bool = False

    def done(self, outcome: str, tokens: float | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        self.limits._finish(self, outcome, tokens)


class BackendLimits:
    """Requests/min, tokens/min and the adaptive gate of one backend, for the whole process."""

    def __init__(self, *, rpm: float, tpm: float, concurrency: int, adaptive: bool,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = stop.sleep):
        self._clock, self._sleep = clock, sleep
        self.rpm, self.tpm = 0.0, 0.0
        self.requests: WindowLimiter | None = None
        self.tokens: WindowLimiter | None = None
        self.gate = AdaptiveGate(concurrency, adaptive)
        self.limited = 0  # 429s seen by this backend's callers
        self.learned_rpm = 0.0  # adaptive: the rate the provider was seen to serve when it answered 429
        self._served: list[float] = []  # start times of served calls in the last LEARN_WINDOW seconds
        self._last_limited = float("-inf")
        self._lock = threading.Lock()
        self.join(rpm=rpm, tpm=tpm, concurrency=concurrency)

    def join(self, *, rpm: float, tpm: float, concurrency: int) -> None:
        """A client joins: the stricter of two rates wins, the larger concurrency."""
        with self._lock:
            if rpm > 0 and (self.rpm <= 0 or rpm < self.rpm):
                self.rpm = rpm
                self.requests = WindowLimiter.per_minute(rpm, clock=self._clock, sleep=self._sleep)
            if tpm > 0 and (self.tpm <= 0 or tpm < self.tpm):
                self.tpm = tpm
                self.tokens = WindowLimiter.per_minute(tpm, unit_window=TPM_WINDOW, clock=self._clock,
                                                       sleep=self._sleep)
            self.gate.widen(concurrency)

    def start(self, tokens: float = 0.0, retry: bool = False) -> Permit:
        round_ = self.gate.acquire(retry)
        try:
            request = self.requests.acquire(1.0) if self.requests is not None else None
            token_entry = self.tokens.acquire(tokens) if self.tokens is not None else None
        except BaseException:
            self.gate.release(round_, "failed")
            raise
        return Permit(self, round_, request, token_entry, started_at=self._clock())

    def _finish(self, permit: Permit, outcome: str, tokens: float | None) -> None:
        if outcome == "limited":
            with self._lock:
                self.limited += 1
                if self.gate.adaptive and permit.started_round == self.gate.round:
                    self._learn_rate()
        elif outcome == "ok" and self.gate.adaptive:
            with self._lock:
                self._note_served(permit.started_at)
        if outcome in ("limited", "unsent"):
            # The provider did not serve it: neither the request nor its tokens count.
            if permit.request is not None and self.requests is not None:
                self.requests.refund(permit.request)
            if permit.tokens is not None and self.tokens is not None:
                self.tokens.refund(permit.tokens)
        elif tokens is not None and permit.tokens is not None and self.tokens is not None:
            self.tokens.settle(permit.tokens, tokens)
        self.gate.release(permit.started_round, outcome)

    def _note_served(self, started_at: float) -> None:
        """A served call: remember when it started; after a quiet spell a learned rate creeps up."""
        now = self._clock()
        self._served = [t for t in self._served if t > now - LEARN_WINDOW] + [started_at]
        if self.learned_rpm and now - self._last_limited > LEARN_WINDOW:
            self.learned_rpm *= 1 + RATE_RECOVERY
            if self.rpm and self.learned_rpm >= self.rpm:  # back at the user's own limit
                self.learned_rpm = 0.0
                self.requests.retune(self.rpm)
            else:
                self.requests.retune(self.learned_rpm)

    def _learn_rate(self) -> None:
        """A 429: the provider serves about what it served over the last few seconds; hold to that.

        Concurrency alone (the gate) cannot express a rate: at R requests/s and latency L the right
        cap is R x L, usually not a whole number, so the gate swings around it and each swing upward
        draws 429s. A rate limiter set to the rate the served calls started at does not swing.
        """
        now = self._clock()
        self._last_limited = now
        starts = sorted(t for t in self._served if t > now - LEARN_WINDOW)
        if len(starts) < 3 or starts[-1] - starts[0] < 1.0:  # no evidence yet (the first burst): the gate backs off
            return
        rpm = (len(starts) - 1) / (starts[-1] - starts[0]) * 60.0
        if self.rpm and rpm >= self.rpm:
            return
        self.learned_rpm = rpm
        if self.requests is None:
            self.requests = WindowLimiter.per_minute(rpm, clock=self._clock, sleep=self._sleep)
        else:
            self.requests.retune(rpm)


# Weak: a backend's limits live as long as a client holds them, so what one run (or test) learnt
# about a provider does not outlive every client of it.
_LIMITS: weakref.WeakValueDictionary[str, BackendLimits] = weakref.WeakValueDictionary()
_LIMITS_LOCK = threading.Lock()


def backend_limits(identity: Mapping[str, Any], *, rpm: float = 0.0, tpm: float = 0.0, concurrency: int = 16,
                   adaptive: bool = True) -> BackendLimits:
    """The process-wide limits of the backend ``identity`` names (only its endpoint and model
    matter, plus the backend kind, which fixes the key's environment variable)."""
    key = json.dumps({k: identity.get(k) for k in ("backend", "endpoint", "model")}, sort_keys=True, default=str)
    with _LIMITS_LOCK:
        limits = _LIMITS.get(key)
        if limits is None:
            limits = BackendLimits(rpm=rpm, tpm=tpm, concurrency=concurrency, adaptive=adaptive)
            _LIMITS[key] = limits
            return limits
    limits.join(rpm=rpm, tpm=tpm, concurrency=concurrency)
    return limits


def estimate_tokens(text_chars: int, attachments: int, completion: int) -> float:
    """A call's tokens before it is sent: prompt characters / CHARS_PER_TOKEN, a guess per
    attachment, and the completion it may produce (what providers reserve at the start)."""
    return math.ceil(text_chars / CHARS_PER_TOKEN) + attachments * MEDIA_TOKENS + completion
