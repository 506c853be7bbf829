"""The one retry layer: bounded exponential backoff with full jitter.

Only ``TransientJudgeError`` is retried. A server's Retry-After (already
parsed by the backend into ``error.retry_after``) replaces the backoff when it
is present. A Retry-After longer than ``max_delay`` (a quota that resets in an
hour, a hostile header) is not waited out and not retried every ``max_delay``
seconds either: that call fails at once with a message naming the wait, so the
run ends with its resume advice and nothing is scored. The SDKs' own retries
are switched off by the backends, so attempts never multiply. A stop (``stop.py``)
ends a backoff wait at once: no retry starts after it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Callable, TypeVar

from ..core.errors import TransientJudgeError
from . import stop

T = TypeVar("T")

BASE_DELAY = 1.0  # seconds before the first retry, before jitter
MAX_DELAY = 60.0  # cap on one wait, Retry-After included


# Server errors that say the request itself can never succeed here: asking again gets the same answer.
NEVER_TRANSIENT = frozenset({501, 505, 506, 508, 510, 511})  # not implemented, HTTP version, loops, ...


def transient_status(code: int) -> bool:
    """HTTP statuses worth retrying: timeouts, conflicts, rate limits, server errors that may pass."""
    return code in (408, 409, 425, 429) or (code >= 500 and code not in NEVER_TRANSIENT)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    base_delay: float = BASE_DELAY
    max_delay: float = MAX_DELAY


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After (or retry-after-ms) value: delta-seconds or HTTP date."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff_delay(retry: int, policy: RetryPolicy, rand: Callable[[], float] = random.random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**retry)] for retry 0, 1, ..."""
    return rand() * min(policy.max_delay, policy.base_delay * (2 ** min(retry, 32)))


def wait_too_long(error: TransientJudgeError, policy: RetryPolicy) -> bool:
    """The server asked for a longer wait than this run is willing to make."""
    return error.retry_after is not None and error.retry_after > policy.max_delay


def too_long_error(error: TransientJudgeError, policy: RetryPolicy) -> TransientJudgeError:
    """The failure reported instead of retrying: names the wait the server asked for."""
    return TransientJudgeError(
        f"{error} -- the server asked to wait {describe_wait(error.retry_after)} before retrying, longer than "
        f"the {policy.max_delay:g}s this run waits between attempts; not retried. Rerun later (when the "
        "quota or outage is over) to judge what is missing",
        kind="retry_after_too_long", status=error.status, retry_after=error.retry_after)


def describe_wait(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):  # nan / inf from a hostile header
        return "forever"
    if seconds < 120:
        return f"{seconds:g}s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def next_delay(error: TransientJudgeError, retry: int, policy: RetryPolicy,
               rand: Callable[[], float] = random.random) -> float:
    if error.retry_after is not None:
        return min(policy.max_delay, error.retry_after)
    return backoff_delay(retry, policy, rand)


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *,
                      sleep: Callable[[float], None] = stop.sleep,
                      on_retry: Callable[[TransientJudgeError, float], None] | None = None) -> T:
    """Call ``fn``; retry transient failures at most ``policy.max_retries`` times."""
    for retry in range(policy.max_retries + 1):
        try:
            return fn()
        except TransientJudgeError as error:
            if wait_too_long(error, policy):
                raise too_long_error(error, policy) from None
            if retry == policy.max_retries:
                raise
            delay = next_delay(error, retry, policy)
            if on_retry is not None:
                on_retry(error, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises
