"""JudgeClient at our own seam: a fake in-process Backend, the real parser and cache."""

from __future__ import annotations

import functools
import random
import threading
import time
import weakref
from typing import Any, Callable

import pytest

from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.judging.cache import Reply, ReplyCache, request_key
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import FatalJudgeError, TransientJudgeError
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import JudgeRequest
from lm_eval_mathjudge.calls import limits
from tests._helpers import REPLY_CORRECT, REPLY_INCORRECT, REPLY_OFF_CONTRACT, side_by_side
from tests.e2e import THREAD_WAIT_S

TEMPLATE = "exact_match@test0000"


class FakeBackend:
    """Implements the Backend protocol; `script(request, attempt)` returns reply text or raises.

    `attempt` counts calls for that prompt (0 for the first). Tracks in-flight calls.
    """

    def __init__(self, script: Callable[[JudgeRequest, int], str] | None = None, delay: float = 0.0,
                 jitter: float = 0.0):
        self.script = script or (lambda request, attempt: verdict_for(request.prompt))
        self.delay, self.jitter = delay, jitter
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.in_flight = self.max_in_flight = 0
        self.closed = False

    def identity(self) -> dict[str, Any]:
        return {"backend": "fake", "model": "fake-judge-1", "temperature": 0.0}

    def complete(self, request: JudgeRequest) -> Reply:
        with self.lock:
            attempt = self.calls.count(request.prompt)
            self.calls.append(request.prompt)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay + random.uniform(0, self.jitter))
            text = self.script(request, attempt)
        finally:
            with self.lock:
                self.in_flight -= 1
        return Reply(text=text, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                     finish_reason="stop")

    def close(self) -> None:
        self.closed = True


def problem(i: int, answer: int | None = None) -> JudgeRequest:
    """Odd problems get the right answer (18), even ones a wrong one (16)."""
    answer = answer if answer is not None else (18 if i % 2 else 16)
    prompt = (f"### Problem\nProblem {i}: Janet's ducks lay 16 eggs per day...\n### Reference solution\n#### 18\n"
              f"### Student's solution\nSo she makes {answer} dollars. The answer is {answer}.")
    return JudgeRequest(prompt=prompt, fields={"answer": "18", "response": f"The answer is {answer}."})


def verdict_for(prompt: str) -> str:
    return REPLY_CORRECT if prompt.endswith("The answer is 18.") else REPLY_INCORRECT


def settings(**overrides) -> JudgeSettings:
    return JudgeSettings(**{"backend": "openai", "model": "fake-judge-1", "concurrency": 4, **overrides})


def _wait_for(condition) -> None:
    deadline = time.monotonic() + THREAD_WAIT_S  # a safety net: the condition is sure to come
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.001)


def make_client(backend, cache: ReplyCache | None = None, **overrides) -> JudgeClient:
    return JudgeClient(backend, parse_exact_match, settings(**overrides), TEMPLATE, cache, progress=False)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    """JudgeClient builds RetryPolicy(max_retries=...) itself: shrink the backoff it gets."""
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.001))


@pytest.fixture
def cache(tmp_path):
    store = ReplyCache(str(tmp_path))
    yield store
    store.close()


# ------------------------------------------------------------------ order and dedup

def test_results_keep_input_order():
    backend = FakeBackend(jitter=0.02)  # random latencies: completion order differs from input order
    requests = [problem(i) for i in range(24)]
    outcomes = make_client(backend, concurrency=8).judge_all(requests)
    assert [o.verdict.correct for o in outcomes] == [i % 2 == 1 for i in range(24)]
    assert all(o.failure is None and o.calls == 1 and not o.cached for o in outcomes)
    assert [o.raw_reply for o in outcomes] == [verdict_for(r.prompt) for r in requests]
    assert "matches the reference answer of 18" in outcomes[1].verdict.analysis


def test_duplicate_requests_are_judged_once():
    backend = FakeBackend(delay=0.01)
    a, b, c = problem(1), problem(2), problem(3)
    client = make_client(backend)
    outcomes = client.judge_all([a, b, a, a, c, b])
    assert sorted(backend.calls) == sorted([a.prompt, b.prompt, c.prompt])
    assert [o.verdict.correct for o in outcomes] == [True, False, True, True, True, False]
    assert outcomes[0] == outcomes[2] == outcomes[3]
    assert (client.stats.requests, client.stats.unique, client.stats.calls) == (6, 3, 3)


def test_empty_input():
    backend = FakeBackend()
    assert make_client(backend).judge_all([]) == []
    assert backend.calls == []


# ----------------------------------------------------------------------- concurrency

@pytest.mark.parametrize("concurrency", [1, 4, 8])
def test_concurrency_is_bounded_by_settings(concurrency):
    # each call waits until `concurrency` calls are in flight together: the pool fills its places, no more
    backend = FakeBackend(side_by_side(concurrency, lambda request, attempt: verdict_for(request.prompt)))
    outcomes = make_client(backend, concurrency=concurrency).judge_all([problem(i) for i in range(24)])
    assert len(backend.calls) == 24 and all(o.failure is None for o in outcomes)
    assert backend.max_in_flight == concurrency


# ---------------------------------------------------------------------------- cache

def test_second_run_with_the_same_cache_makes_no_calls(tmp_path):
    requests = [problem(i) for i in range(10)] + [problem(3)]
    first_cache = ReplyCache(str(tmp_path))
    first = make_client(FakeBackend(), first_cache)
    before = first.judge_all(requests)
    first_cache.close()

    second_backend = FakeBackend()
    second_cache = ReplyCache(str(tmp_path))  # a new process would open a new instance
    second = make_client(second_backend, second_cache)
    after = second.judge_all(requests)
    second_cache.close()

    assert second_backend.calls == []
    assert [o.verdict for o in after] == [o.verdict for o in before]
    assert all(o.cached and o.calls == 0 for o in after)
    assert all(o.usage == {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120} for o in after)
    assert (second.stats.cache_hits, second.stats.calls) == (10, 0)


def test_a_new_template_version_misses_the_cache(cache):
    make_client(FakeBackend(), cache).judge_all([problem(1)])
    backend = FakeBackend()
    JudgeClient(backend, parse_exact_match, settings(), "exact_match@changed", cache, progress=False
                ).judge_all([problem(1)])
    assert len(backend.calls) == 1


def test_transport_failures_are_not_cached(cache):
    def down(request, attempt):
        raise TransientJudgeError("judge returned HTTP 503: The server is overloaded", kind="http_503", status=503)

    failed = make_client(FakeBackend(down), cache, max_retries=1).judge_all([problem(1)])
    assert failed[0].failure == "http_503"
    assert len(cache) == 0
    backend = FakeBackend()
    again = make_client(backend, cache).judge_all([problem(1)])
    assert again[0].verdict.correct and len(backend.calls) == 1


# ---------------------------------------------------------------- off-contract replies

def test_unparseable_reply_is_asked_again_once_then_counted():
    backend = FakeBackend(lambda request, attempt: REPLY_OFF_CONTRACT)
    client = make_client(backend)
    [outcome] = client.judge_all([problem(1)])
    assert len(backend.calls) == 2  # first ask + exactly one re-ask
    assert outcome.verdict is None
    assert outcome.failure == "unparseable"
    assert not outcome.transport_failed
    assert outcome.raw_reply == REPLY_OFF_CONTRACT
    assert "Final Verdict" in outcome.error
    assert outcome.calls == 2
    assert client.stats.failures == {"unparseable": 1}


def test_reask_that_parses_gives_a_verdict():
    backend = FakeBackend(lambda request, attempt: REPLY_OFF_CONTRACT if attempt == 0 else REPLY_CORRECT)
    client = make_client(backend)
    [outcome] = client.judge_all([problem(1)])
    assert outcome.verdict.correct is True
    assert (outcome.calls, outcome.failure, outcome.raw_reply) == (2, None, REPLY_CORRECT)
    assert client.stats.failures == {}


def test_unparseable_cached_reply_is_reasked_not_served(cache):
    request = problem(1)
    backend = FakeBackend()
    client = make_client(backend, cache)
    key = request_key({**client.identity, **request.key_payload()})
    cache.put(key, Reply(text=REPLY_OFF_CONTRACT), "fake:fake-judge-1")  # e.g. stored under an older parser

    [outcome] = client.judge_all([request])
    assert backend.calls == [request.prompt]
    assert outcome.verdict.correct is True
    assert not outcome.cached
    assert cache.get(key).text == REPLY_CORRECT  # the good reply replaces the bad one
    assert client.stats.cache_hits == 0


def test_a_successful_reask_is_reused_on_the_next_run(cache):
    # Run 1: off-contract first reply, good re-ask. Run 2 must reuse the re-ask, not pay again.
    backend = FakeBackend(lambda request, attempt: REPLY_OFF_CONTRACT if attempt == 0 else REPLY_CORRECT)
    [first] = make_client(backend, cache).judge_all([problem(1)])
    assert first.verdict.correct is True and len(backend.calls) == 2

    rerun_backend = FakeBackend()
    rerun = make_client(rerun_backend, cache)
    [second] = rerun.judge_all([problem(1)])
    assert rerun_backend.calls == []
    assert second.cached and second.verdict.correct is True and rerun.stats.cache_hits == 1


def test_parseable_cached_reply_is_reparsed(cache):
    # The cache stores raw text, so the verdict always comes from today's parser.
    request = problem(2)
    client = make_client(FakeBackend(), cache)
    key = request_key({**client.identity, **request.key_payload()})
    cache.put(key, Reply(text="**Error Analysis:** 16 is not 18.\n**Final Verdict:** **Incorrect**"), "x")
    [outcome] = client.judge_all([request])
    assert outcome.cached and outcome.verdict.correct is False


# ---------------------------------------------------------------- transport failures

def test_transient_errors_exhausting_retries_are_a_transport_failure():
    def overloaded(request, attempt):
        raise TransientJudgeError("judge returned HTTP 503: The server is overloaded", kind="http_503", status=503)

    backend = FakeBackend(overloaded)
    client = make_client(backend, max_retries=2)
    outcomes = client.judge_all([problem(1), problem(2)])
    assert len(backend.calls) == 2 * 3  # first attempt + 2 retries, per request
    for outcome in outcomes:
        assert outcome.transport_failed
        assert outcome.failure == "http_503"
        assert outcome.verdict is None and outcome.raw_reply is None
        assert "503" in outcome.error
    assert client.stats.retries == 4
    assert client.stats.failures == {"http_503": 2}
    assert client.fatal_error is None


def test_transient_errors_then_success():
    def flaky(request, attempt):
        if attempt < 2:
            raise TransientJudgeError("judge request timed out after 120s", kind="timeout")
        return REPLY_CORRECT

    backend = FakeBackend(flaky)
    client = make_client(backend, max_retries=3)
    [outcome] = client.judge_all([problem(1)])
    assert outcome.verdict.correct and outcome.calls == 1
    assert len(backend.calls) == 3
    assert client.stats.retries == 2


def _timing_out(request, attempt):
    raise TransientJudgeError("judge request timed out after 10s", kind="timeout")


def test_an_endpoint_that_stopped_answering_gets_no_more_calls():
    """Calls in a row that time out on every attempt: the endpoint is down; what is left is not sent."""
    backend = FakeBackend(_timing_out)
    client = make_client(backend, concurrency=1, max_retries=1)
    outcomes = client.judge_all([problem(i) for i in range(10)])
    assert len(backend.calls) == client_module.UNRESPONSIVE_CALLS * 2  # those calls' attempt and retry, no more
    assert [o.failure for o in outcomes] == ["timeout"] * 10  # counted, never scored as wrong
    assert all(o.transport_failed and o.verdict is None for o in outcomes)
    assert all(o.calls == 0 for o in outcomes)
    unsent = outcomes[-1].error
    assert "not sent" in unsent and "stopped answering" in unsent and "rerun the same command" in unsent


@pytest.mark.parametrize("pattern", ["every other", "every third"])
def test_timeouts_between_replies_never_stop_the_judge(pattern):
    """A slow request now and then (a reply in between) is its own failure; the rest are judged."""
    step = 2 if pattern == "every other" else 3

    def sometimes(request, attempt):
        number = int(request.prompt.split("Problem ")[1].split(":")[0])
        if number % step == 0:
            raise TransientJudgeError("judge request timed out after 10s", kind="timeout")
        return verdict_for(request.prompt)

    backend = FakeBackend(sometimes)
    client = make_client(backend, concurrency=1, max_retries=1)
    outcomes = client.judge_all([problem(i) for i in range(12)])
    assert [o.failure for o in outcomes] == ["timeout" if i % step == 0 else None for i in range(12)]
    assert len(backend.calls) == 12 + 12 // step  # each timed-out request: its attempt and retry


def test_fatal_error_stops_further_calls():
    def bad_key(request, attempt):
        raise FatalJudgeError("judge returned HTTP 401: Incorrect API key provided: *** "
                              "(check the API key variable; not retried)", kind="http_401", status=401)

    backend = FakeBackend(bad_key, delay=0.02)
    client = make_client(backend, concurrency=4)
    outcomes = client.judge_all([problem(i) for i in range(40)])
    assert len(backend.calls) <= 4  # only calls already in flight when the first 401 came back
    failures = [o.failure for o in outcomes]
    assert set(failures) <= {"http_401", "aborted"}
    assert failures.count("http_401") == len(backend.calls)
    assert failures.count("aborted") >= 36
    assert all(o.transport_failed and o.verdict is None for o in outcomes)
    assert isinstance(client.fatal_error, FatalJudgeError)
    assert client.fatal_error.status == 401
    aborted = next(o for o in outcomes if o.failure == "aborted")
    assert "not sent" in aborted.error and "401" in aborted.error


def test_fatal_error_midway_aborts_the_rest():
    def forbidden_after_three(request, attempt):
        if len(backend.calls) > 3:
            raise FatalJudgeError("judge returned HTTP 403: the key may lack access", kind="http_403", status=403)
        return verdict_for(request.prompt)

    backend = FakeBackend(forbidden_after_three)
    client = make_client(backend, concurrency=1)
    outcomes = client.judge_all([problem(i) for i in range(10)])
    assert len(backend.calls) == 4
    assert [o.failure for o in outcomes] == [None] * 3 + ["http_403"] + ["aborted"] * 6
    assert client.fatal_error.kind == "http_403"


def test_fatal_error_during_retries_aborts_the_retrying_requests():
    # Request A keeps hitting 503s; request B gets a 401. A's next attempt must not be sent.
    a, b = problem(1), problem(2)

    def script(request, attempt):
        if request.prompt == b.prompt:
            raise FatalJudgeError("judge returned HTTP 401: bad key", kind="http_401", status=401)
        _wait_for(lambda: client.fatal_error is not None)  # A's 503 comes once B's 401 has been seen
        raise TransientJudgeError("judge returned HTTP 503: overloaded", kind="http_503", status=503)

    backend = FakeBackend(script)
    client = make_client(backend, concurrency=2, max_retries=6)
    outcomes = client.judge_all([a, b])
    assert backend.calls.count(a.prompt) == 1
    assert [o.failure for o in outcomes] == ["aborted", "http_401"]


# --------------------------------------------------------------------------- stats

def test_usage_is_summed_in_stats():
    client = make_client(FakeBackend())
    client.judge_all([problem(i) for i in range(5)])
    client.judge_all([problem(i) for i in range(5, 8)])
    assert client.stats.usage == {"prompt_tokens": 800, "completion_tokens": 160, "total_tokens": 960}
    stats = client.stats.as_dict()
    assert (stats["requests"], stats["unique_requests"], stats["judge_calls"]) == (8, 8, 8)


# ---------------------------------------------------------------------- rate limit

def test_client_applies_rpm_across_threads(monkeypatch):
    # The limits' clock stands still and their sleep only records: each call then waits exactly until
    # the start the limiter gave it, counted from 0.
    waits: list[float] = []
    monkeypatch.setattr(limits, "_LIMITS", weakref.WeakValueDictionary())  # this test's own, with its clock
    monkeypatch.setitem(limits.BackendLimits.__init__.__kwdefaults__, "clock", lambda: 0.0)
    monkeypatch.setitem(limits.BackendLimits.__init__.__kwdefaults__, "sleep", waits.append)
    make_client(FakeBackend(), concurrency=4, rpm=600).judge_all([problem(i) for i in range(5)])
    # 600 rpm = one start every 0.1 s (and the limiter's margin), whatever the concurrency
    assert sorted(waits) == pytest.approx([k * 0.1 * (1 + limits.WINDOW_MARGIN) for k in range(1, 5)])


# ---------------------------------------------------------------- judge-level refusals
def test_a_400_on_attached_media_fails_that_sample_only():
    from lm_eval_mathjudge.core.types import Media

    video = Media(source="/runs/q1.mp4", mime_type="video/mp4", sha256="ab" * 32, size=10, data=b"0" * 10)

    def script(request, attempt):
        if request.media:
            raise FatalJudgeError("judge returned HTTP 400: Unsupported MIME type", kind="http_400", status=400)
        return verdict_for(request.prompt)

    backend = FakeBackend(script)
    client = make_client(backend)
    with_media = JudgeRequest(prompt="grade this video", media=(video,))
    outcomes = client.judge_all([with_media, problem(1), problem(3)])
    assert outcomes[0].failure == "media_rejected" and not outcomes[0].transport_failed
    assert "Unsupported MIME type" in outcomes[0].error
    assert [o.verdict.correct for o in outcomes[1:]] == [True, True]
    assert client.fatal_error is None


def test_a_refusal_is_counted_not_retried_and_not_cached(cache):
    from lm_eval_mathjudge.core.errors import JudgeRefusal

    def script(request, attempt):
        raise JudgeRefusal("the judge stopped: finish reason SAFETY", kind="safety")

    backend = FakeBackend(script)
    client = make_client(backend, cache)
    [outcome] = client.judge_all([problem(1)])
    assert (outcome.failure, outcome.transport_failed, outcome.calls) == ("safety", False, 1)
    assert len(backend.calls) == 1 and len(cache) == 0
    assert client.stats.failures == {"safety": 1}


def test_a_rerun_of_an_off_contract_sample_makes_no_call(cache):
    backend = FakeBackend(lambda request, attempt: REPLY_OFF_CONTRACT)
    [first] = make_client(backend, cache).judge_all([problem(1)])
    assert first.failure == "unparseable" and len(backend.calls) == 2

    rerun_backend = FakeBackend()
    [second] = make_client(rerun_backend, cache).judge_all([problem(1)])
    assert rerun_backend.calls == []
    assert (second.failure, second.cached, second.raw_reply) == ("unparseable", True, REPLY_OFF_CONTRACT)
