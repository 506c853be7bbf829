"""Wire-level: the real anthropic SDK inside AnthropicBackend + JudgeClient, against a loopback server
speaking the Messages API (POST /v1/messages, GET /v1/models/{id}, its error bodies and statuses).

Nothing here mocks the SDK. What is asserted is how calls end and how many were made (the server
counts them), never how long they took.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re

import pytest

from lm_eval_mathjudge import backends
from lm_eval_mathjudge.backends.anthropic.errors import TEMPERATURE_HINT
from lm_eval_mathjudge.backends.anthropic.messages import AnthropicBackend
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.errors import ConfigError, FatalJudgeError, JudgeRefusal, TransientJudgeError
from lm_eval_mathjudge.core.judges import EXACT_MATCH, VLM
from lm_eval_mathjudge.core.parsing import parse_exact_match, parse_vlm
from lm_eval_mathjudge.core.prompts import load
from lm_eval_mathjudge.cost import ledger
from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.layers import resolve_settings
from lm_eval_mathjudge.settings.schema import JudgeSettings
from tests import media_fixtures as fx
from tests._helpers import list_prices
from tests.loopback import AnthropicServer

CANARY = "sk-ant-canary-0123456789abcdef"
MODEL = "claude-sonnet-4-6"
DOC = {"mj_question": "Janet's ducks lay 16 eggs a day; she eats 3 and bakes with 4 and sells the rest at $2 each. "
                      "How much does she make?",
       "mj_reference": "16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n#### 18", "mj_answer": "18"}
_STUDENT = re.compile(r"boxed\{(\d+)\}")


def request(answer: int = 18, variant: int = 0):
    return EXACT_MATCH.request(DOC, f"Attempt {variant}: 9 eggs are left, 9 * 2 = {answer}, so $\\boxed{{{answer}}}$.")


def judge_like_claude(body: dict) -> str:
    """Reads the student's boxed answer from the rendered prompt and answers in the contract's two lines."""
    content = body["messages"][0]["content"]
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    answer = _STUDENT.findall(text)[-1]
    verdict = "Correct" if answer == "18" else "Incorrect"
    return f"Error Analysis: The student's final answer is {answer} and the reference answer is 18.\nFinal Verdict: {verdict}"


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CUSTOM_HEADERS",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "no-profiles"))  # the SDK finds no profile on disk
    # The backoff of errors without Retry-After only; a Retry-After from the server is honoured as in production.
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.01))


@pytest.fixture
def server():
    with AnthropicServer(responder=judge_like_claude) as srv:
        yield srv


def settings(server, **overrides) -> JudgeSettings:
    base = {"backend": "anthropic", "model": MODEL, "base_url": server.url, "cache": False, "concurrency": 4,
            "max_retries": 3, "timeout": 10.0}
    return JudgeSettings(**{**base, **overrides})


def judge(server, requests, store=None, parse=parse_exact_match, template="exact_match", **overrides):
    s = settings(server, **overrides)
    backend = AnthropicBackend(s)
    client = JudgeClient(backend, parse, s, load(template).version, store, progress=False)
    try:
        return client, client.judge_all(requests)
    finally:
        backend.close()


def posts(server):
    return [r for r in server.requests if r.method == "POST"]


# ------------------------------------------------------------------------- the exchange

def test_request_and_reply_on_the_wire(server):
    req = request(18)
    client, [outcome] = judge(server, [req])
    assert outcome.verdict.correct is True and "reference answer is 18" in outcome.verdict.analysis
    [sent] = posts(server)
    assert sent.path == "/v1/messages"
    # The key from ANTHROPIC_API_KEY, as the SDK sends it (x-api-key, or a bearer token in SDK 2.x).
    assert CANARY in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "").removeprefix("Bearer "))
    assert sent.headers["anthropic-version"]
    assert sent.headers.get("x-stainless-retry-count") == "0"  # the SDK's own retries are off
    assert sent.body == {"model": MODEL, "max_tokens": 1024, "temperature": 0.0,
                         "messages": [{"role": "user", "content": req.prompt}]}
    assert client.identity["endpoint"] == server.url and CANARY not in json.dumps(client.identity)
    usage = outcome.usage
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_usage_with_cache_reads_and_a_thinking_block_is_read_and_priced(server):
    server.responder = lambda body: {"content": judge_like_claude(body), "thinking": "Compare 18 with 18.",
                                     "usage": {"input_tokens": 400, "cache_read_input_tokens": 100,
                                               "cache_creation_input_tokens": 20, "output_tokens": 30}}
    client, [outcome] = judge(server, [request(18)])
    assert outcome.raw_reply.startswith("Error Analysis") and "Compare" not in outcome.raw_reply
    assert dict(outcome.usage) == {"prompt_tokens": 520, "cached_tokens": 100, "completion_tokens": 30,
                                   "total_tokens": 550}
    assert ledger.cost_of(outcome.usage, None, settings(server)).online is None  # a loopback server: no list price
    cost = ledger.cost_of(outcome.usage, None, settings(server, prices=list_prices(MODEL)))
    assert cost.online == pytest.approx((420 * 3.00 + 100 * 0.30 + 30 * 15.00) / 1e6)  # claude-sonnet-4-6's row


# (responder reply, error class, kind, what the message says)
STATUSES = [
    pytest.param({"status": 400, "content": "messages.0.content.0: unexpected block"}, FatalJudgeError, "http_400",
                 "invalid_request_error", id="400"),
    pytest.param({"status": 400, "content": "prompt is too long: 215000 tokens > 200000 maximum"}, JudgeRefusal,
                 "context_length", "context window", id="400-prompt-too-long"),
    pytest.param({"status": 401, "content": "invalid x-api-key"}, FatalJudgeError, "http_401", "ANTHROPIC_API_KEY",
                 id="401"),
    pytest.param({"status": 403, "content": "Your API key does not have permission"}, FatalJudgeError, "http_403",
                 "may lack access", id="403"),
    pytest.param({"status": 404, "content": "model: claude-nope"}, FatalJudgeError, "http_404",
                 "check the judge model name", id="404"),
    pytest.param({"status": 413, "content": "Request exceeds the maximum allowed number of bytes"}, FatalJudgeError,
                 "http_413", "larger than the endpoint accepts", id="413"),
    pytest.param({"status": 429, "content": "Number of request tokens has exceeded your per-minute rate limit",
                  "headers": {"retry-after": "7"}}, TransientJudgeError, "rate_limited", "rate_limit_error",
                 id="429-retry-after"),
    pytest.param({"status": 500, "content": "Internal server error"}, TransientJudgeError, "http_500", "api_error",
                 id="500"),
    pytest.param({"status": 529, "content": "Overloaded"}, TransientJudgeError, "http_529", "overloaded_error",
                 id="529-overloaded"),
]


@pytest.mark.parametrize("reply, error_class, kind, says", STATUSES)
def test_each_status_of_the_messages_api_lands_on_the_error_tree(server, reply, error_class, kind, says):
    server.responder = lambda body: reply
    backend = AnthropicBackend(settings(server))
    try:
        with pytest.raises(error_class) as caught:
            backend.complete(request(18))
    finally:
        backend.close()
    assert type(caught.value) is error_class and caught.value.kind == kind
    assert says in str(caught.value) and CANARY not in str(caught.value)
    assert server.call_count == 1  # no hidden SDK retries
    if kind == "rate_limited":
        assert caught.value.retry_after == 7.0


def test_transient_errors_are_retried_by_the_one_retry_layer(server):
    server.inject(status=529, times=2)
    client, [outcome] = judge(server, [request(16)])
    assert outcome.verdict.correct is False
    assert server.call_count == 3 and client.stats.retries == 2
    assert {r.headers.get("x-stainless-retry-count") for r in posts(server)} == {"0"}


def test_a_429_storm_is_absorbed_by_the_one_retry_layer_and_loses_no_sample(server):
    server.rate_limit = 4  # requests per second; the rest get 429 with Retry-After: 1
    n = 24
    client, outcomes = judge(server, [request(18 if i % 3 else 16, i) for i in range(n)], concurrency=12, max_retries=6)
    assert [o.verdict.correct if o.verdict else None for o in outcomes] == [bool(i % 3) for i in range(n)]
    refused = server.rate_limited
    assert refused > 0, "the run must actually hit the limit, or this test shows nothing"
    assert client.stats.rate_limited == refused  # every 429 was seen by our layer, and retried there
    assert server.call_count == n + refused
    assert {r.headers.get("x-stainless-retry-count") for r in posts(server)} == {"0"}


def test_401_stops_the_run_and_the_key_reaches_no_message_and_no_file(server, tmp_path):
    server.responder = lambda body: {"status": 401, "content": f"invalid x-api-key: {CANARY}"}
    cache = ReplyCache(str(tmp_path / "cache"))
    try:
        client, outcomes = judge(server, [request(18, i) for i in range(12)], cache, cache=True,
                                 cache_dir=str(tmp_path / "cache"), concurrency=2)
    finally:
        cache.close()
    assert isinstance(client.fatal_error, FatalJudgeError) and client.fatal_error.status == 401
    assert server.call_count <= 2 and client.stats.retries == 0
    seen = "\n".join([str(client.fatal_error)] + [o.error or "" for o in outcomes])
    assert "ANTHROPIC_API_KEY" in seen and CANARY not in seen
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


# ------------------------------------------------------------------------- what the reply says

def test_a_verdict_cut_at_max_tokens_is_a_counted_failure_never_cached(server, tmp_path):
    server.responder = lambda body: "Error Analysis: " + "the student wrote a long derivation " * 40 + \
        "\nFinal Verdict: Correct"
    cache = ReplyCache(str(tmp_path / "cache"))
    try:
        client, [outcome] = judge(server, [request(18)], cache, cache=True, cache_dir=str(tmp_path / "cache"),
                                  max_tokens=50)
        assert cache.get(client.key(request(18))) is None
    finally:
        cache.close()
    assert outcome.failure == "max_tokens" and not outcome.transport and outcome.verdict is None
    assert "judge_max_tokens" in outcome.error
    [sent] = posts(server)[:1]
    assert sent.body["max_tokens"] == 50


@pytest.mark.parametrize("reply, kind", [
    pytest.param({"content": "", "stop_reason": "refusal"}, "content_filter", id="refusal"),
    pytest.param({"content": None, "thinking": "Let me think."}, "empty_reply", id="thinking-only"),
    pytest.param({"content": "partial", "stop_reason": "model_context_window_exceeded"}, "context_length",
                 id="context-window"),
])
def test_replies_without_a_verdict_fail_that_sample_and_the_run_goes_on(server, reply, kind):
    server.responder = lambda body: reply if "Attempt 0" in json.dumps(body) else judge_like_claude(body)
    client, outcomes = judge(server, [request(18, 0), request(18, 1)])
    assert outcomes[0].failure == kind and not outcomes[0].transport
    assert outcomes[1].verdict.correct is True and client.fatal_error is None


# ------------------------------------------------------------------------- models, temperature, thinking

@pytest.mark.parametrize("model, budget, max_tokens, sent, absent", [
    pytest.param("claude-sonnet-4-6", None, None, {"temperature": 0.0}, ("thinking",), id="4.6-temperature-0"),
    pytest.param("claude-sonnet-4-6", 2048, 8192, {"thinking": {"type": "enabled", "budget_tokens": 2048}},
                 ("temperature",), id="4.6-thinking-budget"),
    pytest.param("claude-sonnet-4-6", 0, None, {"thinking": {"type": "disabled"}, "temperature": 0.0}, (),
                 id="4.6-thinking-off"),
    pytest.param("claude-opus-4-7", None, None, {"max_tokens": 1024}, ("temperature", "thinking"),
                 id="4.7-no-temperature"),
    pytest.param("claude-sonnet-5", -1, None, {"thinking": {"type": "adaptive"}, "max_tokens": 25000},
                 ("temperature",), id="5-adaptive-with-room"),
])
def test_each_model_gets_the_parameters_it_takes(server, model, budget, max_tokens, sent, absent):
    values = {"judge_backend": "anthropic", "judge_model": model, "judge_base_url": server.url, "judge_cache": False}
    values.update({"judge_thinking_budget": budget} if budget is not None else {})
    values.update({"judge_max_tokens": max_tokens} if max_tokens is not None else {})
    s = resolve_settings("exact_match", None, values, environ={})
    backend = AnthropicBackend(s)
    try:
        assert parse_exact_match(backend.complete(request(18)).text).correct is True  # the server took the body
    finally:
        backend.close()
    [body] = [r.body for r in posts(server)]
    assert {k: body[k] for k in sent} == sent and not set(absent) & set(body)


def test_a_model_whose_name_hides_that_it_takes_no_temperature_gets_a_hint(server):
    server.no_sampling = ("gateway-opus",)
    backend = AnthropicBackend(settings(server, model="gateway-opus"))
    try:
        with pytest.raises(FatalJudgeError) as caught:
            backend.complete(request(18))
    finally:
        backend.close()
    assert TEMPERATURE_HINT in str(caught.value) and "deprecated for this model" in str(caught.value)


@pytest.mark.parametrize("overrides, phrase", [
    ({"model": "claude-opus-4-7", "thinking_budget": 4096, "max_tokens": 8192}, "takes no thinking budget"),
    ({"thinking_budget": 512, "max_tokens": 8192}, "at least 1024"),
    ({"thinking_budget": 4096, "max_tokens": 4096}, "must be below judge_max_tokens"),
    ({"temperature": 1.5}, "takes 0..1"),
])
def test_settings_the_api_would_refuse_stop_before_any_call(server, overrides, phrase):
    with pytest.raises(ConfigError, match=phrase):
        AnthropicBackend(settings(server, **overrides))
    assert server.requests == []


# ------------------------------------------------------------------------- the VLM judge on images

def test_vlm_judge_sends_images_as_image_blocks_and_refuses_video_and_other_formats(server, tmp_path):
    server.responder = lambda body: ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
                                     "EXPLANATION: The written steps match the reference.")
    (tmp_path / "a.png").write_bytes(fx.png())
    (tmp_path / "b.webp").write_bytes(fx.webp())
    (tmp_path / "c.mp4").write_bytes(fx.mp4())
    doc, folders = {"mj_question": "q", "mj_reference": "x = 5", "mj_answer": "5"}, [str(tmp_path)]
    requests = [VLM.request(doc, str(tmp_path / name), folders) for name in ("a.png", "b.webp", "c.mp4")]
    client, (png, webp, video) = judge(server, requests, parse=parse_vlm, template="vlm_judge")
    assert png.verdict.final_correct == 1 and webp.verdict.final_correct == 1
    assert video.failure == "media" and "cannot watch video" in video.error
    assert server.call_count == 2  # the video never left the machine
    blocks = [b for r in posts(server) for b in r.body["messages"][0]["content"] if b["type"] == "image"]
    assert sorted(b["source"]["media_type"] for b in blocks) == ["image/png", "image/webp"]
    assert any(b["source"]["data"].startswith("iVBORw0KGgo") for b in blocks)  # the PNG's own bytes


# ------------------------------------------------------------------------- preflight, endpoint, install

def test_preflight_looks_the_model_up_and_sends_no_message(server):
    backend = AnthropicBackend(settings(server))
    try:
        backend.preflight()
    finally:
        backend.close()
    assert [(r.method, r.path) for r in server.requests] == [("GET", f"/v1/models/{MODEL}")]


@pytest.mark.parametrize("model, status, says", [
    ("claude-nope", None, "model: claude-nope"),
    (MODEL, 401, "ANTHROPIC_API_KEY"),
])
def test_a_preflight_that_fails_names_the_endpoint_and_what_to_check(model, status, says):
    with AnthropicServer(judge_like_claude, models=[MODEL]) as srv:
        srv.models_status = status
        backend = AnthropicBackend(settings(srv, model=model))
        try:
            with pytest.raises(FatalJudgeError) as caught:
                backend.preflight()
        finally:
            backend.close()
        message = str(caught.value)
        assert caught.value.kind == "preflight" and says in message and srv.url in message
    assert "ANTHROPIC_BASE_URL" in message and CANARY not in message


def test_a_preflight_retries_an_overloaded_api_then_passes(server):
    server.misbehave("/v1/models/", _overloaded(server), times=2)
    backend = AnthropicBackend(settings(server))
    try:
        backend.preflight()
    finally:
        backend.close()
    assert len(server.requests) == 3


def _overloaded(server):
    from tests.loopback._base import Reply

    return Reply(529, server.error_body(529, "Overloaded", {}))


def test_a_gateway_without_the_models_route_is_let_through_with_a_warning(server, caplog):
    from tests.loopback._base import Reply

    server.misbehave("/v1/models/", Reply(404, {"detail": "Not Found"}))
    backend = AnthropicBackend(settings(server))
    try:
        backend.preflight()
    finally:
        backend.close()
    assert "has no models route" in caplog.text


@pytest.mark.parametrize("base_url, env, expected", [
    (None, {}, "https://api.anthropic.com"),
    (None, {"ANTHROPIC_BASE_URL": "https://gateway.example/anthropic/"}, "https://gateway.example/anthropic"),
    ("http://127.0.0.1:9", {"ANTHROPIC_BASE_URL": "https://gateway.example"}, "http://127.0.0.1:9"),
])
def test_the_endpoint_named_without_the_sdk_is_where_the_sdk_sends(monkeypatch, base_url, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    backend = AnthropicBackend(JudgeSettings(backend="anthropic", model=MODEL, base_url=base_url))
    try:
        assert backend.identity()["endpoint"] == expected
        assert str(backend.sdk.base_url).rstrip("/") == expected  # the SDK client, built without a call
    finally:
        backend.close()


def test_a_missing_sdk_stops_the_run_before_generation_saying_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "anthropic" else real(name, *a))
    with pytest.raises(ConfigError) as caught:
        backends.build(JudgeSettings(backend="anthropic", model=MODEL), "exact_match")
    assert "pip install 'lm-eval-mathjudge[anthropic]'" in str(caught.value)
