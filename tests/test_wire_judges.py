"""The judges through their real SDKs (openai, google-genai, anthropic) and the JudgeClient, against loopback judges
that drip, flood, bomb and redirect: every bound ends in a named, counted failure, never cached.

Deadlines run on a counting clock (``transport.CLOCK``: each reading advances it one second), so what is
asserted is how calls end and how many were made, never how long they took.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from lm_eval_mathjudge.backends.anthropic.messages import AnthropicBackend
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
from lm_eval_mathjudge.backends.wire import transport
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.errors import FatalJudgeError
from lm_eval_mathjudge.core.judges import EXACT_MATCH
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from tests._helpers import isolate_gemini_sdk
from tests.loopback import AnthropicServer, ChatCompletionsServer, GeminiServer
from tests.loopback import wire_faults as faults

VERDICT = "Error Analysis: The final answer 18 matches the reference.\nFinal Verdict: Correct"
DOC = {"mj_question": "Janet's ducks lay 16 eggs a day; she eats 3 and bakes with 4. She sells the rest at $2. "
                      "How much does she make?",
       "mj_reference": "16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n#### 18", "mj_answer": "18"}
MiB = 1 << 20


@dataclass(frozen=True)
class Judge:
    name: str
    server: type
    backend: type
    call_path: str  # a part of the model call's path
    models_path: str  # a part of the preflight's model lookup path
    settings: dict

    def build(self, srv, **overrides) -> tuple[Any, JudgeSettings]:
        url = srv.url if self.name == "openai" else srv.origin
        config = JudgeSettings(**{**self.settings, "base_url": url, "cache": False, "concurrency": 4,
                                  "max_retries": 1, "timeout": 20.0, **overrides})
        return self.backend(config), config


JUDGES = [
    Judge("openai", ChatCompletionsServer, OpenAIChatBackend, "/chat/completions", "/models",
          {"backend": "openai", "model": "gpt-4-turbo-2024-04-09"}),
    Judge("gemini", GeminiServer, GeminiBackend, ":generateContent", "/models/",
          {"backend": "gemini", "model": "gemini-2.5-pro", "max_tokens": 1024}),
    Judge("anthropic", AnthropicServer, AnthropicBackend, "/v1/messages", "/v1/models/",
          {"backend": "anthropic", "model": "claude-sonnet-4-6"}),
]
CALL_PATHS = {"openai": "/v1/chat/completions", "gemini": "/v1/models/gemini-2.5-pro:generateContent",
              "anthropic": "/v1/messages"}


@pytest.fixture(params=JUDGES, ids=[j.name for j in JUDGES])
def kind(request, monkeypatch) -> Judge:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789abcdef")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary-0123456789abcdef")
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    isolate_gemini_sdk(monkeypatch, "AIza-canary-0123456789abcdefXYZ")
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.0))
    return request.param


@pytest.fixture
def clock(monkeypatch):
    readings = {"n": 0}

    def tick() -> float:
        readings["n"] += 1
        return float(readings["n"])

    monkeypatch.setattr(transport, "CLOCK", tick)
    return readings


def judge_once(kind: Judge, responder: Callable[[dict], Any], tmp_path, **overrides):
    """One request through a JudgeClient with a cache: (client, outcome, cache, model calls, server)."""
    request = EXACT_MATCH.request(DOC, "9 eggs are left and 9 * 2 = 18, so she makes $\\boxed{18}$.")
    cache = ReplyCache(str(tmp_path / "cache"))
    with kind.server(responder) as srv:
        backend, config = kind.build(srv, cache=True, **overrides)
        client = JudgeClient(backend, parse_exact_match, config, "test-template", cache, progress=False)
        try:
            [outcome] = client.judge_all([request])
        finally:
            backend.close()
        calls = [r for r in srv.requests if kind.call_path in r.path]
    stored = cache.get(client.key(request))
    return client, outcome, stored, len(calls)


FLOODS = {
    "flood-declared": lambda: faults.flood(100 * MiB),
    "flood-chunked": lambda: faults.flood(100 * MiB, declare=False),
    "gzip-bomb": lambda: faults.bomb(1 << 30),
    "nested-gzip-bomb": lambda: faults.bomb(1 << 30, 2),
}


@pytest.mark.parametrize("fault", FLOODS)
def test_a_reply_over_the_cap_is_a_counted_failure_never_retried_nor_cached(kind, fault, tmp_path):
    client, outcome, stored, calls = judge_once(kind, lambda body: {"wire": FLOODS[fault]()}, tmp_path)
    assert outcome.failure == "reply_too_large" and not outcome.transport  # scored: judge_failed 1
    assert outcome.verdict is None and outcome.raw_reply is None and len(outcome.error) < 600
    assert "judge_max_reply_bytes" in outcome.error
    assert calls == 1 and client.stats.retries == 0  # asking again would get the same flood
    assert stored is None  # never cached


def test_a_dripping_judge_times_out_each_attempt_and_the_call_ends(kind, clock, tmp_path):
    def dripping(body):
        return {"wire": faults.drip({"choices": [], "candidates": []}, 0.001)}

    client, outcome, stored, calls = judge_once(kind, dripping, tmp_path, max_retries=2)
    assert outcome.failure == "timeout" and outcome.transport  # not scored: the run says how to resume
    assert "timed out after 20s" in outcome.error and "judge_timeout" in outcome.error
    assert calls == 3 and client.stats.retries == 2  # every attempt bounded; retries counted apart
    assert stored is None


def test_a_redirect_to_another_origin_stops_the_judge_and_sends_nothing_there(kind, tmp_path):
    with kind.server(lambda body: VERDICT) as elsewhere:
        target = elsewhere.url if kind.name == "openai" else elsewhere.origin

        def redirecting(body):
            return {"wire": faults.redirect(307, target + ("/v1/chat/completions" if kind.name == "openai"
                                                           else CALL_PATHS[kind.name]))}

        client, outcome, stored, calls = judge_once(kind, redirecting, tmp_path)
        assert elsewhere.requests == []  # the prompt (and the model's answer in it) never went there
    assert outcome.failure == "redirect" and outcome.transport and calls == 1 and stored is None
    assert isinstance(client.fatal_error, FatalJudgeError) and client.fatal_error.kind == "redirect"
    assert "judge_base_url" in outcome.error


def test_a_redirect_within_the_origin_is_followed(kind, tmp_path):
    first = {"done": False}

    def once_moved(body):
        if not first["done"]:
            first["done"] = True
            return {"wire": faults.redirect(307, CALL_PATHS[kind.name] + "?moved=1")}
        return VERDICT

    _, outcome, stored, calls = judge_once(kind, once_moved, tmp_path)
    assert outcome.verdict is not None and outcome.verdict.correct and calls == 2
    assert stored is not None


def test_the_preflight_refuses_a_redirect_to_another_origin(kind):
    with kind.server(lambda body: VERDICT) as srv, kind.server(lambda body: VERDICT) as elsewhere:
        srv.misbehave(kind.models_path, faults.redirect(308, elsewhere.origin + "/v1/models"), times=5)
        backend, _ = kind.build(srv)
        try:
            with pytest.raises(FatalJudgeError) as caught:
                backend.preflight()
        finally:
            backend.close()
        assert elsewhere.requests == []
    assert caught.value.kind == "preflight"
    assert "redirected the request (HTTP 308) to another origin" in str(caught.value)


def test_a_model_list_larger_than_one_reply_still_passes_the_preflight(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789abcdef")
    models = [f"loopback-model-{i:05d}" for i in range(4000)] + ["gpt-4-turbo-2024-04-09"]
    with ChatCompletionsServer(lambda body: VERDICT, models=models) as srv:
        srv.model_routes = "list"  # as vLLM: no single-model route, the preflight reads the list
        backend, _ = JUDGES[0].build(srv, max_reply_bytes=64 * 1024)
        try:
            backend.preflight()  # the list is ~300 KB, over this judge's 64 KiB reply cap
        finally:
            backend.close()
        assert [r.path for r in srv.requests] == ["/v1/models/gpt-4-turbo-2024-04-09", "/v1/models"]
