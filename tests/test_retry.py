"""Table tests for the retry policy: pure functions, a frozen clock and a fake sleep."""

from __future__ import annotations

from email.utils import format_datetime
from datetime import datetime, timezone

import pytest

from lm_eval_mathjudge.core.errors import FatalJudgeError, JudgeCallError, TransientJudgeError, UnparseableReply
from lm_eval_mathjudge.calls.retry import (MAX_DELAY, RetryPolicy, backoff_delay, call_with_retries, next_delay,
                                           parse_retry_after)

# A frozen "now": Wed, 21 Oct 2015 07:28:00 GMT (the RFC 9110 example date).
NOW = datetime(2015, 10, 21, 7, 28, 0, tzinfo=timezone.utc).timestamp()


def http_date(offset: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + offset, tz=timezone.utc), usegmt=True)


# ------------------------------------------------------------------ parse_retry_after

RETRY_AFTER = [
    pytest.param("1", 1.0, id="seconds"),
    pytest.param("120", 120.0, id="seconds-large"),
    pytest.param("  7 ", 7.0, id="seconds-padded"),
    pytest.param("0", 0.0, id="zero"),
    pytest.param("1.5", 1.5, id="float"),
    pytest.param("0.25", 0.25, id="float-below-one"),
    pytest.param(http_date(30), 30.0, id="http-date-30s-ahead"),
    pytest.param("Wed, 21 Oct 2015 07:30:00 GMT", 120.0, id="http-date-literal"),
    pytest.param(http_date(-30), 0.0, id="http-date-in-the-past"),
    pytest.param("-5", 0.0, id="negative-clamped"),
    pytest.param("-0.5", 0.0, id="negative-float-clamped"),
    pytest.param("soon", None, id="garbage-word"),
    pytest.param("Wed, 99 Foo 2015", None, id="garbage-date"),
    pytest.param("1s", None, id="seconds-with-unit"),
    pytest.param("", None, id="empty"),
    pytest.param("   ", None, id="blank"),
    pytest.param(None, None, id="missing"),
]


@pytest.mark.parametrize("value, expected", RETRY_AFTER)
def test_parse_retry_after(value, expected):
    got = parse_retry_after(value, now=NOW)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-6)


def test_parse_retry_after_date_uses_the_clock_when_now_is_not_given():
    # A date far in the past is always 0 s away, whatever time it is.
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


# ----------------------------------------------------------------------- backoff_delay

POLICY = RetryPolicy(max_retries=10, base_delay=1.0, max_delay=60.0)

BACKOFF = [
    # retry, rand(), expected delay
    pytest.param(0, 1.0, 1.0, id="first-retry-full-jitter-top"),
    pytest.param(1, 1.0, 2.0, id="doubles"),
    pytest.param(2, 1.0, 4.0, id="doubles-again"),
    pytest.param(5, 1.0, 32.0, id="below-cap"),
    pytest.param(6, 1.0, 60.0, id="capped"),
    pytest.param(30, 1.0, 60.0, id="far-past-cap"),
    pytest.param(3, 0.5, 4.0, id="jitter-half"),
    pytest.param(6, 0.5, 30.0, id="jitter-scales-the-cap"),
    pytest.param(4, 0.0, 0.0, id="jitter-zero"),
]


@pytest.mark.parametrize("retry, rand, expected", BACKOFF)
def test_backoff_delay(retry, rand, expected):
    assert backoff_delay(retry, POLICY, rand=lambda: rand) == pytest.approx(expected)


def test_backoff_delay_grows_monotonically_until_the_cap():
    delays = [backoff_delay(r, POLICY, rand=lambda: 1.0) for r in range(10)]
    assert delays == sorted(delays)
    assert max(delays) == POLICY.max_delay


def test_backoff_delay_default_jitter_stays_in_range():
    for retry in range(8):
        for _ in range(50):
            assert 0.0 <= backoff_delay(retry, POLICY) <= min(60.0, 2.0 ** retry)


# ------------------------------------------------------------------------- next_delay

def transient(retry_after: float | None = None) -> TransientJudgeError:
    return TransientJudgeError("judge returned HTTP 429: Rate limit reached for gpt-4-turbo",
                               kind="rate_limited", status=429, retry_after=retry_after)


NEXT_DELAY = [
    # retry_after, retry, rand, expected
    pytest.param(None, 0, 1.0, 1.0, id="no-header-backoff"),
    pytest.param(None, 3, 0.5, 4.0, id="no-header-backoff-later-retry"),
    pytest.param(5.0, 0, 1.0, 5.0, id="header-wins-over-backoff"),
    pytest.param(5.0, 9, 0.0, 5.0, id="header-ignores-jitter-and-retry"),
    pytest.param(0.0, 4, 1.0, 0.0, id="header-zero-means-now"),
    pytest.param(600.0, 0, 1.0, 60.0, id="header-capped"),
    pytest.param(float("inf"), 0, 1.0, 60.0, id="hostile-infinite-header-capped"),
]


@pytest.mark.parametrize("retry_after, retry, rand, expected", NEXT_DELAY)
def test_next_delay(retry_after, retry, rand, expected):
    assert next_delay(transient(retry_after), retry, POLICY, rand=lambda: rand) == pytest.approx(expected)


def test_default_policy_caps_retry_after_at_max_delay():
    assert next_delay(transient(3600.0), 0, RetryPolicy()) == MAX_DELAY


def test_hostile_header_end_to_end_is_capped():
    parsed = parse_retry_after("86400", now=NOW)  # "come back tomorrow"
    assert next_delay(transient(parsed), 0, POLICY) == 60.0


# ------------------------------------------------------------------ call_with_retries

class Script:
    """A callable that raises the scripted errors in order, then returns `result`."""

    def __init__(self, errors, result="Error Analysis: 18 matches 18.\nFinal Verdict: Correct"):
        self.errors = list(errors)
        self.result = result
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.mark.parametrize("failures", [0, 1, 2, 3])
def test_succeeds_after_transient_failures(failures):
    fn = Script([transient(retry_after=0.5 + i) for i in range(failures)])
    sleeps, seen = Sleeps(), []
    result = call_with_retries(fn, RetryPolicy(max_retries=3), sleep=sleeps,
                               on_retry=lambda err, delay: seen.append((err.kind, delay)))
    assert result == fn.result
    assert fn.calls == failures + 1
    assert sleeps == [0.5 + i for i in range(failures)]  # Retry-After honoured, in order
    assert seen == [("rate_limited", 0.5 + i) for i in range(failures)]


def test_backoff_delays_without_retry_after_are_bounded_and_jittered():
    errors = [TransientJudgeError("judge returned HTTP 503: overloaded", kind="http_503", status=503)
              for _ in range(4)]
    sleeps = Sleeps()
    call_with_retries(Script(errors), RetryPolicy(max_retries=4, base_delay=0.1, max_delay=0.3), sleep=sleeps)
    assert len(sleeps) == 4
    for retry, delay in enumerate(sleeps):
        assert 0.0 <= delay <= min(0.3, 0.1 * 2 ** retry)


@pytest.mark.parametrize("max_retries", [0, 1, 3, 6])
def test_gives_up_after_max_retries_and_reraises_the_last_error(max_retries):
    errors = [transient(retry_after=0.0) for _ in range(max_retries + 5)]
    last = errors[max_retries]
    fn, sleeps = Script(errors), Sleeps()
    with pytest.raises(TransientJudgeError) as caught:
        call_with_retries(fn, RetryPolicy(max_retries=max_retries), sleep=sleeps)
    assert caught.value is last
    assert fn.calls == max_retries + 1
    assert len(sleeps) == max_retries


NEVER_RETRIED = [
    pytest.param(FatalJudgeError("judge returned HTTP 401: Incorrect API key provided",
                                 kind="http_401", status=401), id="fatal-401"),
    pytest.param(FatalJudgeError("judge returned HTTP 404: model not found", kind="http_404", status=404),
                 id="fatal-404"),
    pytest.param(JudgeCallError("judge call failed", kind="error"), id="base-call-error"),
    pytest.param(UnparseableReply("no 'Final Verdict' line in the reply"), id="unparseable"),
    pytest.param(ValueError("bad value"), id="value-error"),
    pytest.param(KeyError("choices"), id="key-error"),
    pytest.param(RuntimeError("boom"), id="runtime-error"),
]


@pytest.mark.parametrize("error", NEVER_RETRIED)
def test_never_retries_anything_but_transient_errors(error):
    fn, sleeps = Script([error, error]), Sleeps()
    with pytest.raises(type(error)) as caught:
        call_with_retries(fn, RetryPolicy(max_retries=5), sleep=sleeps)
    assert caught.value is error
    assert fn.calls == 1
    assert sleeps == []


def test_fatal_after_transient_stops_at_once():
    fatal = FatalJudgeError("judge returned HTTP 403: forbidden", kind="http_403", status=403)
    fn, sleeps = Script([transient(retry_after=0.0), fatal, transient()]), Sleeps()
    with pytest.raises(FatalJudgeError):
        call_with_retries(fn, RetryPolicy(max_retries=5), sleep=sleeps)
    assert fn.calls == 2
    assert sleeps == [0.0]


# ------------------------------------------------------------ waits longer than the cap

LONG_WAITS = [
    # retry_after, max_delay, stops at once, wait named in the message
    pytest.param(3600.0, 60.0, True, "60 min", id="an-hour"),
    pytest.param(86400.0, 60.0, True, "24.0 h", id="tomorrow"),
    pytest.param(float("inf"), 60.0, True, "forever", id="infinite"),
    pytest.param(61.0, 60.0, True, "61s", id="just-over-the-cap"),
    pytest.param(60.0, 60.0, False, None, id="at-the-cap-waits"),
    pytest.param(5.0, 60.0, False, None, id="short-waits"),
]


@pytest.mark.parametrize("retry_after, max_delay, stops, named", LONG_WAITS)
def test_a_retry_after_beyond_the_cap_is_not_retried_blindly(retry_after, max_delay, stops, named):
    error = transient(retry_after=retry_after)
    fn, sleeps = Script([error]), Sleeps()
    policy = RetryPolicy(max_retries=6, max_delay=max_delay)
    if not stops:
        call_with_retries(fn, policy, sleep=sleeps)
        assert sleeps == [retry_after] and fn.calls == 2
        return
    with pytest.raises(TransientJudgeError) as caught:
        call_with_retries(fn, policy, sleep=sleeps)
    assert fn.calls == 1 and sleeps == []  # no sleep at all, no second call
    failure = caught.value
    assert failure.kind == "retry_after_too_long" and failure.status == 429 and failure.retry_after == retry_after
    assert f"asked to wait {named} before retrying" in str(failure)
    assert str(error) in str(failure)  # the server's own words are kept


def test_a_long_wait_after_short_ones_stops_there():
    fn, sleeps = Script([transient(1.0), transient(2.0), transient(7200.0)]), Sleeps()
    with pytest.raises(TransientJudgeError, match="2.0 h"):
        call_with_retries(fn, RetryPolicy(max_retries=6), sleep=sleeps)
    assert sleeps == [1.0, 2.0] and fn.calls == 3
