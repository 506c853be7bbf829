"""Wire-level: the real openai SDK inside OpenAIChatBackend + JudgeClient, against a loopback server.

Nothing here mocks the SDK: requests travel over HTTP to ChatCompletionsServer on
127.0.0.1, which replies like api.openai.com (error bodies, Retry-After, usage).
"""

from __future__ import annotations

import functools
import json
import re

import pytest

from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import FatalJudgeError, TransientJudgeError
from lm_eval_mathjudge.core.judges import EXACT_MATCH
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.prompts import load
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import Reply
from tests._helpers import side_by_side, wire_faults
from tests.e2e import THREAD_WAIT_S
from tests.loopback import ChatCompletionsServer

CANARY = "sk-canary-0123456789abcdef"
MODEL = "gpt-4-turbo-2024-04-09"

DOC = {
    "mj_question": ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes "
                    "muffins for her friends every day with four. She sells the remainder at the farmers' "
                    "market daily for $2 per fresh duck egg. How much in dollars does she make every day at "
                    "the farmers' market?"),
    "mj_reference": ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
                     "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18"),
    "mj_answer": "18",
}


def student(answer: int, variant: int = 0) -> str:
    return (f"Janet has 16 - 3 - 4 = 9 eggs left to sell (attempt {variant}).\n"
            f"She makes 9 * 2 = {answer} dollars.\nThe answer is $\\boxed{{{answer}}}$.")


def request(answer: int = 18, variant: int = 0):
    return EXACT_MATCH.request(DOC, student(answer, variant))


_SECTION = re.compile(r"### Student's solution\n(?P<student>.*?)\n\n### How to grade", re.S)


def judge_like_gpt4(body: dict) -> str:
    """A judge that reads the rendered prompt and answers in the contract's two lines."""
    prompt = body["messages"][0]["content"]
    answer = re.findall(r"\d+", _SECTION.search(prompt)["student"])[-1]
    if answer == "18":
        return ("Error Analysis: The student's final answer of 18 matches the reference answer of 18.\n"
                "Final Verdict: Correct")
    return (f"Error Analysis: The student's final answer of {answer} does not match the reference "
            "answer of 18.\nFinal Verdict: Incorrect")


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "HTTP_PROXY", "HTTPS_PROXY",
                 "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    # JudgeClient builds RetryPolicy(max_retries=...) itself: keep the backoff short.
    # (Retry-After still wins over it, as in production.)
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.01))


@pytest.fixture
def server():
    with ChatCompletionsServer(responder=judge_like_gpt4) as srv:
        yield srv


def settings(server: ChatCompletionsServer, **overrides) -> JudgeSettings:
    base = {"backend": "openai", "model": MODEL, "base_url": server.url, "cache": False,
            "concurrency": 4, "max_retries": 3, "timeout": 10.0}
    return JudgeSettings(**{**base, **overrides})


def judge(server, requests, store=None, **overrides):
    backend = OpenAIChatBackend(settings(server, **overrides))
    client = JudgeClient(backend, parse_exact_match, settings(server, **overrides),
                         load("exact_match").version, store, progress=False)
    try:
        return client, client.judge_all(requests)
    finally:
        backend.close()


def texts(client, outcomes) -> str:
    """Every message a user could see from this run."""
    parts = [str(client.fatal_error or "")] + [o.error or "" for o in outcomes]
    return "\n".join(parts)


# ------------------------------------------------------------------------- happy path

def test_request_on_the_wire(server):
    req = request(18)
    client, [outcome] = judge(server, [req])
    assert outcome.verdict.correct is True
    assert "matches the reference answer of 18" in outcome.verdict.analysis
    assert server.call_count == 1
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {CANARY}"
    assert sent.body["model"] == MODEL
    assert sent.body["temperature"] == 0
    assert sent.body["max_tokens"] == 1024
    assert sent.body["messages"] == [{"role": "user", "content": req.prompt}]
    assert "She makes 9 * 2 = 18 dollars." in req.prompt and "#### 18" in req.prompt
    assert CANARY not in json.dumps(client.identity)
    assert client.identity["endpoint"] == server.url


def test_verdicts_and_usage(server):
    requests = [request(18, 0), request(16, 1), request(18, 2)]
    client, outcomes = judge(server, requests)
    assert [o.verdict.correct for o in outcomes] == [True, False, True]
    assert all(o.usage["total_tokens"] == o.usage["prompt_tokens"] + o.usage["completion_tokens"] > 0
               for o in outcomes)
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert client.stats.usage[name] == sum(o.usage[name] for o in outcomes)
    assert client.stats.calls == 3


def test_usage_reported_by_the_server_is_summed(server):
    server.responder = lambda body: {"content": judge_like_gpt4(body),
                                     "usage": {"prompt_tokens": 411, "completion_tokens": 24, "total_tokens": 435}}
    client, _ = judge(server, [request(18, i) for i in range(5)])
    assert client.stats.usage == {"prompt_tokens": 5 * 411, "completion_tokens": 5 * 24, "total_tokens": 5 * 435}


def test_second_run_is_served_from_the_cache(server, tmp_path):
    requests = [request(18, i) for i in range(6)]
    cache = ReplyCache(str(tmp_path))
    try:
        judge(server, requests, cache, cache=True, cache_dir=str(tmp_path))
        server.reset()
        client, outcomes = judge(server, requests, cache, cache=True, cache_dir=str(tmp_path))
    finally:
        cache.close()
    assert server.call_count == 0
    assert all(o.cached and o.verdict.correct for o in outcomes)


# --------------------------------------------------------------------- transient faults

def test_429_honours_retry_after(server, retry_waits):
    server.inject(status=429, headers={"Retry-After": "1"})
    client, [outcome] = judge(server, [request(18)])
    assert outcome.verdict.correct is True
    assert server.call_count == 2
    assert client.stats.retries == 1
    assert retry_waits == [1.0]  # waited what the server asked, not the 0.01 s backoff


def test_500_twice_then_success(server):
    server.inject(status=500, times=2)
    client, [outcome] = judge(server, [request(16)])
    assert outcome.verdict.correct is False
    assert server.call_count == 3
    assert client.stats.retries == 2


def test_slow_reply_is_retried_as_a_timeout(server, caplog):
    caplog.set_level("DEBUG", logger="lm_eval_mathjudge")  # retries are logged at debug (the bar shows a summary)
    server.inject(delay=20)  # far beyond the time-out, which the next (prompt) attempt never nears
    client, [outcome] = judge(server, [request(18)], timeout=2.0)
    assert outcome.verdict.correct is True
    assert server.call_count == 2  # gave up on the slow attempt instead of waiting for its reply
    assert client.stats.retries == 1
    assert any("timed out after 2s" in r.getMessage() for r in caplog.records)


def test_garbage_200_is_retried_as_bad_response(server, caplog):
    caplog.set_level("DEBUG", logger="lm_eval_mathjudge")  # retries are logged at debug (the bar shows a summary)
    server.inject(garbage=True)
    client, [outcome] = judge(server, [request(18)])
    assert outcome.verdict.correct is True
    assert server.call_count == 2
    assert client.stats.retries == 1
    assert any("no choices" in r.getMessage() or "malformed" in r.getMessage() for r in caplog.records)


def test_retries_exhausted_is_a_transport_failure(server):
    server.inject(status=503, times=10)
    client, [outcome] = judge(server, [request(18)], max_retries=2)
    assert server.call_count == 3
    assert outcome.transport_failed and outcome.failure == "http_503"
    assert "HTTP 503" in outcome.error
    assert client.fatal_error is None


# ------------------------------------------------------------------------ fatal faults

def test_401_stops_the_run_after_one_round_of_calls(server):
    server.latency = 0.05
    server.responder = lambda body: {"status": 401, "content": f"Incorrect API key provided: {CANARY}. You can "
                                     "find your API key at https://platform.openai.com/account/api-keys."}
    client, outcomes = judge(server, [request(18, i) for i in range(20)], concurrency=4)
    assert 1 <= server.call_count <= 4  # at most the calls already in flight
    assert isinstance(client.fatal_error, FatalJudgeError)
    assert client.fatal_error.status == 401
    assert client.stats.retries == 0
    failures = [o.failure for o in outcomes]
    assert set(failures) <= {"http_401", "aborted"}
    assert failures.count("aborted") >= 16
    message = texts(client, outcomes)
    assert "401" in str(client.fatal_error)
    assert "check the API key variable" in str(client.fatal_error)
    assert CANARY not in message
    assert "0123456789abcdef" not in message
    assert "Incorrect API key provided: ***" in str(client.fatal_error)


def test_partially_masked_key_in_server_message_is_redacted(server):
    # What api.openai.com actually sends: the key with its middle starred out.
    server.responder = lambda body: {"status": 401,
                                     "content": "Incorrect API key provided: sk-canar*************cdef."}
    client, outcomes = judge(server, [request(18)])
    assert "sk-canar" not in texts(client, outcomes)
    assert "cdef" not in texts(client, outcomes)


def test_404_unknown_model_fails_fast(server, retry_waits):
    server.responder = lambda body: {"status": 404, "content": f"The model `{body['model']}` does not exist "
                                     "or you do not have access to it."}
    client, outcomes = judge(server, [request(18, i) for i in range(5)], concurrency=1)
    assert server.call_count == 1
    assert retry_waits == [] and client.stats.retries == 0
    assert [o.failure for o in outcomes] == ["http_404"] + ["aborted"] * 4
    assert MODEL in outcomes[0].error
    assert "check the judge model name" in outcomes[0].error


# ---------------------------------------------------------------- backend error mapping

BACKEND_FAULTS = wire_faults(timeout_delay=20) + [
    # OpenAI's own: Retry-After in milliseconds, and 502
    pytest.param({"status": 429, "headers": {"retry-after-ms": "250"}}, TransientJudgeError, "rate_limited", 429,
                 0.25, id="429-retry-after-ms"),
    pytest.param({"status": 502}, TransientJudgeError, "http_502", 502, None, id="502"),
]


@pytest.mark.parametrize("fault, error_class, kind, status, retry_after", BACKEND_FAULTS)
def test_backend_maps_wire_faults(server, fault, error_class, kind, status, retry_after):
    server.inject(**fault)
    backend = OpenAIChatBackend(settings(server, timeout=2.0))
    try:
        with pytest.raises(error_class) as caught:
            backend.complete(request(18))
        assert backend.complete(request(18)).text.endswith("Final Verdict: Correct")  # fault consumed
    finally:
        backend.close()
    assert caught.value.kind == kind
    assert caught.value.status == status
    assert caught.value.retry_after == (pytest.approx(retry_after) if retry_after is not None else None)
    assert server.call_count == 2  # no hidden SDK retries
    if status:
        assert str(status) in str(caught.value)
    assert CANARY not in str(caught.value)


# ------------------------------------------------------------------------ concurrency

def test_concurrent_calls_overlap_up_to_the_limit(server):
    server.responder = side_by_side(16, judge_like_gpt4)  # each call waits for 15 others to be in flight
    client, outcomes = judge(server, [request(18 if i % 3 else 17, i) for i in range(32)], concurrency=16,
                             timeout=THREAD_WAIT_S)
    assert server.call_count == 32
    assert server.max_in_flight == 16
    assert [o.verdict.correct for o in outcomes] == [bool(i % 3) for i in range(32)]
    assert client.stats.usage["total_tokens"] == sum(o.usage["total_tokens"] for o in outcomes)


# ------------------------------------------------------------------------- VLM judge on an OpenAI vision model

def _vlm_client(server):
    from lm_eval_mathjudge.core.parsing import parse_vlm

    s = settings(server)
    backend = OpenAIChatBackend(s)
    return backend, JudgeClient(backend, parse_vlm, s, load("vlm_judge").version, None, progress=False)


def test_vlm_judge_sends_images_as_image_parts_and_refuses_video(server, tmp_path):
    from lm_eval_mathjudge.core.judges import VLM
    from tests import media_fixtures as fx

    server.responder = lambda body: ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
                                     "EXPLANATION: The written steps match.")
    (tmp_path / "a.png").write_bytes(fx.png())
    (tmp_path / "b.mp4").write_bytes(fx.mp4())
    doc = {"mj_question": "q", "mj_reference": "x = 5", "mj_answer": "5"}
    folders = [str(tmp_path)]  # where the media were made: only there are they attached from
    requests = [VLM.request(doc, str(tmp_path / "a.png"), folders), VLM.request(doc, str(tmp_path / "b.mp4"), folders),
                VLM.request(doc, "x = 5, so \\boxed{5}")]
    backend, client = _vlm_client(server)
    try:
        image, video, text = client.judge_all(requests)
    finally:
        backend.close()
    assert image.verdict.final_correct == 1 and text.verdict.final_correct == 1
    assert video.failure == "media" and "cannot watch video" in video.error and str(tmp_path / "b.mp4") in video.error
    assert server.call_count == 2  # the video never left the machine
    bodies = [r.body for r in server.requests if r.body]
    image_parts = [p for b in bodies for p in b["messages"][0]["content"] if p.get("type") == "image_url"]
    assert len(image_parts) == 1
    assert image_parts[0]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    text_parts = [b["messages"][0]["content"] for b in bodies if all(p["type"] == "text" for p in b["messages"][0]["content"])]
    assert text_parts and text_parts[0][1]["text"] == requests[2].output_text  # the fenced answer, as its own part
    assert text_parts[0][1]["text"].split("\n")[1] == "x = 5, so \\boxed{5}"


def test_azure_backend_uses_the_deployment_route_and_its_own_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-canary-key-123456")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    client, [outcome] = judge(server, [request(18)], backend="azure", model="my-gpt4-deployment",
                                 base_url=server.origin)
    assert outcome.verdict.correct is True
    [recorded] = [r for r in server.requests if r.body]
    assert recorded.path.startswith("/openai/deployments/my-gpt4-deployment/chat/completions?api-version=2024-10-21")
    assert recorded.headers["api-key"] == "azure-canary-key-123456"
    assert client.identity["backend"] == "azure" and "azure-canary" not in json.dumps(client.identity)


@pytest.mark.parametrize("reply, kind", [
    pytest.param({"content": "Error Analysis: The student's answer of 18 matches", "finish_reason": "length"},
                 "max_tokens", id="truncated-at-max-tokens"),
    pytest.param({"content": None, "finish_reason": "content_filter"}, "content_filter", id="filtered-reply"),
    pytest.param({"status": 400, "raw_body": json.dumps({"error": {
        "message": "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}})}, "context_length",
        id="response-too-long-for-the-judge"),
    pytest.param({"status": 400, "raw_body": json.dumps({"error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
        "type": None, "code": "content_filter"}})}, "content_filter", id="azure-prompt-filter"),
])
def test_per_request_refusals_fail_one_sample_and_the_run_goes_on(server, reply, kind):
    first = request(18, variant=1)
    server.responder = lambda body: reply if body["messages"][0]["content"] == first.prompt else judge_like_gpt4(body)
    client, outcomes = judge(server, [first, request(18, variant=2), request(17, variant=3)])
    assert outcomes[0].failure == kind and not outcomes[0].transport_failed
    assert [o.verdict.correct for o in outcomes[1:]] == [True, False]
    assert client.fatal_error is None


# A reply cut short whose only full verdict line is the judge quoting the student (issue 14).
QUOTED_THEN_CUT = ("Error Analysis: The student ended with\nFinal Verdict: Correct\n"
                   "but their answer 41 differs from 42.\nFinal Verd")


@pytest.mark.parametrize("reply, calls, kind", [
    pytest.param({"content": QUOTED_THEN_CUT, "finish_reason": "length"}, 1, "max_tokens", id="length-reported"),
    pytest.param({"content": "Error Analysis: The student's answer 18 matches.\nFinal Verdict: Correct",
                  "finish_reason": "length"}, 1, "max_tokens", id="length-reported-after-a-full-verdict"),
    pytest.param({"content": QUOTED_THEN_CUT, "finish_reason": "stop"}, 2, "unparseable",
                 id="cut-label-without-finish-reason"),
])
def test_a_reply_cut_short_is_a_counted_failure_never_its_earlier_verdict(server, tmp_path, reply, calls, kind):
    server.responder = lambda body: dict(reply)
    store = ReplyCache(str(tmp_path))
    try:
        client, [outcome] = judge(server, [request(18)], store)
        stored = len(store)
    finally:
        store.close()
    assert outcome.verdict is None and outcome.failure == kind and not outcome.transport_failed
    assert server.call_count == calls  # a cut label is asked again once; a reported cut is not
    assert stored == (calls if kind == "unparseable" else 0)  # a refusal is never cached
    assert client.fatal_error is None


def test_a_cached_reply_cut_at_its_token_limit_is_asked_again(server, tmp_path):
    store = ReplyCache(str(tmp_path))
    try:
        backend = OpenAIChatBackend(settings(server))
        client = JudgeClient(backend, parse_exact_match, settings(server), load("exact_match").version, store,
                             progress=False)
        first = request(17)
        store.put(client.key(first), Reply(text="Error Analysis: 17 matches 18.\nFinal Verdict: Correct",
                                           finish_reason="length"), "openai:older-version")
        [outcome] = client.judge_all([first])
        backend.close()
    finally:
        store.close()
    assert server.call_count == 1 and outcome.verdict.correct is False  # the new reply, not the cut one


# ------------------------------------------------------------------- long waits, unsendable requests

@pytest.mark.parametrize("headers", [
    pytest.param({"Retry-After": "3600"}, id="seconds"),
    pytest.param({"retry-after-ms": "3600000"}, id="milliseconds"),
])
def test_hour_long_retry_after_fails_the_call_without_waiting(server, headers, retry_waits):
    server.inject(status=429, headers=headers, times=10)
    client, [outcome] = judge(server, [request(18)])
    assert server.call_count == 1 and client.stats.retries == 0  # not retried every 60 s
    assert retry_waits == []
    assert outcome.transport_failed and outcome.failure == "retry_after_too_long"  # never scored
    assert "asked to wait 60 min" in outcome.error and "Rerun later" in outcome.error


def test_text_the_wire_cannot_carry_fails_that_sample_only_and_is_never_sent(server):
    # Through the backend and the retry layer only: the client's cache key of such text is the client's matter.
    from lm_eval_mathjudge.core.errors import UnsendableRequest
    from lm_eval_mathjudge.calls.retry import call_with_retries

    broken = EXACT_MATCH.request(DOC, "The answer is \udc80 \\boxed{18}")  # a lone surrogate
    backend = OpenAIChatBackend(settings(server))
    try:
        with pytest.raises(UnsendableRequest) as caught:
            call_with_retries(lambda: backend.complete(broken), RetryPolicy(max_retries=5, base_delay=0.01))
        assert backend.complete(request(18)).text.endswith("Final Verdict: Correct")
    finally:
        backend.close()
    assert caught.value.kind == "invalid_text" and "'\\udc80'" in str(caught.value)
    assert server.call_count == 1  # only the good request went out; the broken one was never sent nor retried


def test_a_request_that_cannot_be_built_is_that_samples_failure(server):
    from lm_eval_mathjudge.core.errors import UnsendableRequest
    from lm_eval_mathjudge.calls.retry import call_with_retries
    from lm_eval_mathjudge.core.types import JudgeRequest, Media

    lost = Media(source="data URL", mime_type="image/png", sha256="0" * 64, size=10)  # neither bytes nor path
    backend = OpenAIChatBackend(settings(server))
    try:
        with pytest.raises(UnsendableRequest) as caught:
            call_with_retries(lambda: backend.complete(JudgeRequest(prompt="Grade this.", media=(lost,))),
                              RetryPolicy(max_retries=5, base_delay=0.01))
    finally:
        backend.close()
    assert caught.value.kind == "bad_request" and "cannot build the judge request: TypeError" in str(caught.value)
    assert server.call_count == 0


# --------------------------------------------------------------------------- reasoning judges

@pytest.mark.parametrize("model, reasoning", [
    ("o1", True), ("o1-mini", True), ("o3", True), ("o3-mini-2025-01-31", True), ("o4-mini", True),
    ("gpt-5", True), ("gpt-5-mini", True), ("gpt-5.1", True), ("openai/o3", True),
    ("gpt-5-chat-latest", False), ("gpt-4-turbo-2024-04-09", False), ("gpt-4o", False),
    ("omni-judge", False), ("Qwen/Qwen2.5-72B-Instruct", False), ("llama-o1", False),
])
def test_is_reasoning_model(model, reasoning):
    from lm_eval_mathjudge.settings.models import is_reasoning_model

    assert is_reasoning_model(model) is reasoning


@pytest.mark.parametrize("effort", [None, "low"])
def test_reasoning_judge_gets_max_completion_tokens_and_no_temperature(server, effort):
    server.responder = lambda body: {"content": judge_like_gpt4(body),
                                     "usage": {"completion_tokens_details": {"reasoning_tokens": 320}}}
    client, [outcome] = judge(server, [request(18)], model="o3-mini", max_tokens=4096, reasoning_effort=effort)
    assert outcome.verdict.correct is True
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 4096
    assert "max_tokens" not in body and "temperature" not in body
    assert body.get("reasoning_effort") == effort
    assert outcome.usage["reasoning_tokens"] == 320
    assert client.identity.get("reasoning_effort") == effort


def test_chat_judge_keeps_max_tokens_and_temperature(server):
    judge(server, [request(18)], model="gpt-4o", reasoning_effort="low")
    body = server.requests[0].body
    assert (body["max_tokens"], body["temperature"]) == (1024, 0)
    assert "max_completion_tokens" not in body and "reasoning_effort" not in body


# --------------------------------------------------------------------------------- preflight

def preflight(server_or_url, **overrides):
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.url
    backend = OpenAIChatBackend(JudgeSettings(**{"backend": "openai", "model": MODEL, "base_url": url,
                                                 "max_retries": 3, "timeout": 10.0, **overrides}))
    try:
        backend.preflight()
    finally:
        backend.close()


def model_gets(server) -> list[str]:
    return [r.path for r in server.requests if r.method == "GET"]


def test_preflight_looks_the_model_up_once_and_sends_no_completion(server):
    server.models = [MODEL]
    preflight(server)
    assert model_gets(server) == [f"/v1/models/{MODEL}"] and server.call_count == 0


@pytest.mark.parametrize("status, model, hint", [
    pytest.param(401, MODEL, "check the API key variable", id="bad-key"),
    pytest.param(403, MODEL, "lack access", id="no-access"),
    pytest.param(None, "gpt-4-turbo-2024-04-9", "check the judge model name", id="unknown-model"),
])
def test_preflight_failure_names_the_endpoint_and_what_to_check(server, status, model, hint):
    server.models, server.models_status = [MODEL], status
    with pytest.raises(FatalJudgeError) as caught:
        preflight(server, model=model)
    message = str(caught.value)
    assert message.startswith(f"preflight: the openai judge at {server.url}") and hint in message
    assert "judge_preflight=false" in message and CANARY not in message
    assert len(model_gets(server)) == 1  # a fatal answer is not retried


def test_preflight_on_a_server_with_only_the_model_list(server):
    server.models, server.model_routes = ["Qwen/Qwen2.5-72B-Instruct", MODEL], "list"  # like vLLM
    preflight(server)
    assert model_gets(server) == [f"/v1/models/{MODEL}", "/v1/models"]
    with pytest.raises(FatalJudgeError, match=r"does not serve model 'gpt-4o'; it lists Qwen/Qwen2.5-72B-Instruct"):
        preflight(server, model="gpt-4o")


def test_preflight_on_a_server_without_model_routes_warns_and_goes_on(server, caplog):
    server.model_routes = "none"  # a proxy that only forwards chat completions
    preflight(server)
    assert model_gets(server) == [f"/v1/models/{MODEL}", "/v1/models"]
    assert any("has no models route" in r.getMessage() and server.url in r.getMessage() for r in caplog.records)


def test_preflight_of_an_unreachable_endpoint_is_bounded_and_names_it(retry_waits):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    with pytest.raises(FatalJudgeError) as caught:
        preflight(url, max_retries=1)
    assert len(retry_waits) == 1 and retry_waits[0] <= 1.0  # one retry with a 1 s backoff at most, not 30 retries
    assert f"cannot reach the judge at {url}" in str(caught.value)


def test_preflight_on_azure_checks_endpoint_and_key_with_the_model_list(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-canary-key-123456")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    preflight(server.origin, backend="azure", model="my-gpt4-deployment")
    [get] = [r for r in server.requests if r.method == "GET"]
    assert get.path == "/openai/models?api-version=2024-10-21" and get.headers["api-key"] == "azure-canary-key-123456"
    server.models_status = 401
    with pytest.raises(FatalJudgeError, match=r"preflight: the azure judge at .*HTTP 401"):
        preflight(server.origin, backend="azure", model="my-gpt4-deployment")
