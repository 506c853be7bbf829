"""Anthropic's Message Batches through the real anthropic SDK and the batch runner, against a loopback
server that speaks the Message Batches API (create, retrieve, JSONL results, delete)."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge import backends
from lm_eval_mathjudge.batch import base
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.prompts import load
from lm_eval_mathjudge.core.types import JudgeRequest
from lm_eval_mathjudge.judging.cache import ReplyCache, request_key
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from tests.loopback import AnthropicServer

CANARY = "sk-ant-canary-0123456789abcdef"


def grader(body: dict) -> str:
    """Correct when the prompt's last number is even (a deterministic judge both modes share)."""
    number = int(body["messages"][-1]["content"].split()[-1])
    return (f"Error Analysis: the answer {number} is {'even' if number % 2 == 0 else 'odd'}.\n"
            f"Final Verdict: {'Correct' if number % 2 == 0 else 'Incorrect'}")


@pytest.fixture(autouse=True)
def keys(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "no-profiles"))
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _settings(server, tmp_path, **extra) -> JudgeSettings:
    return JudgeSettings(**{"backend": "anthropic", "model": "claude-sonnet-4-6", "base_url": server.url,
                            "mode": "batch", "cache_dir": str(tmp_path / "cache"), "max_retries": 0,
                            "batch_poll_seconds": 0.05, "preflight": False, **extra})


def _requests(n: int) -> list[JudgeRequest]:
    return [JudgeRequest(prompt=f"Is this even? {i}") for i in range(n)]


def _judge(server, tmp_path, requests, **extra):
    s = _settings(server, tmp_path, **extra)
    backend = backends.build(s, "exact_match")
    cache = ReplyCache(s.resolved_cache_dir())
    client = JudgeClient(backend, parse_exact_match, s, load("exact_match").version, cache, progress=False)
    try:
        return client, client.judge_all(requests), backend
    finally:
        client.close()


def test_one_batch_answers_every_request_with_the_online_body_and_is_deleted_after(tmp_path):
    requests = _requests(6)
    with AnthropicServer(grader) as server:
        client, outcomes, backend = _judge(server, tmp_path, requests)
        assert [o.verdict.correct for o in outcomes] == [i % 2 == 0 for i in range(6)]
        assert server.batches_created == 1 and server.call_count == 0  # no online call at all
        [create] = [r for r in server.requests if r.method == "POST"]
        sent = {r["custom_id"]: r["params"] for r in create.body["requests"]}
        assert sorted(sent.values(), key=str) == sorted((backend.request_body(r) for r in requests), key=str)
        assert all(len(key) <= 64 for key in sent)  # the API's custom_id limit
        assert server.deleted and not server.batches  # cleanup deleted the ended batch
        batch = client.stats.batch
        assert batch["submitted"] == 6 and batch["succeeded"] == 6
        assert client.stats.batch_usage["prompt_tokens"] > 0
        again, outcomes, _ = _judge(server, tmp_path, requests, mode="online")
        assert all(o.cached for o in outcomes) and server.call_count == 0  # the batch filled the cache


@pytest.mark.parametrize("fallback, online_calls, failures", [
    ("online", 3, {}),
    ("fail", 0, {0: "batch_expired", 1: "batch_failed", 2: "batch_failed"}),  # errored: its 400 named inside
])
def test_items_the_batch_did_not_answer_follow_the_fallback(tmp_path, fallback, online_calls, failures):
    fates = {0: "expired", 1: "errored", 2: "canceled"}
    with AnthropicServer(grader, fate=lambda i, params: fates.get(i)) as server:
        client, outcomes, _ = _judge(server, tmp_path, _requests(6), batch_fallback=fallback)
        assert server.call_count == online_calls
    assert {i: o.failure for i, o in enumerate(outcomes) if o.failure} == failures
    assert all(o.verdict.correct == (i % 2 == 0) for i, o in enumerate(outcomes) if i not in failures)
    assert client.stats.batch["expired"] == 1 and client.stats.batch["failed"] == 2


def test_a_result_line_over_the_reply_cap_is_skipped_and_its_item_asked_online(tmp_path):
    def long_for_one(body: dict) -> str:
        if body["messages"][-1]["content"].endswith(" 3"):
            return "Error Analysis: " + "x" * (base.RESULT_OVERHEAD + 4096) + "\nFinal Verdict: Incorrect"
        return grader(body)

    with AnthropicServer(long_for_one) as server:
        client, outcomes, _ = _judge(server, tmp_path, _requests(4), max_reply_bytes=2048)
        assert server.call_count == 1  # only the skipped item went online, where its reply is over the cap too
    assert outcomes[3].failure == "reply_too_large"
    assert [o.verdict.correct for o in outcomes[:3]] == [True, False, True]


def test_the_provider_maps_job_states_and_counts(tmp_path):
    with AnthropicServer(grader, polls_in_progress=2) as server:
        s = _settings(server, tmp_path)
        backend = backends.build(s, "exact_match")
        provider = backends.batch_provider(backend, "anthropic")
        try:
            job = provider.submit([(request_key({"i": i}), r) for i, r in enumerate(_requests(3))])
            seen = [provider.status(job) for _ in range(3)]
            results = dict(provider.results(job))
        finally:
            backend.close()
    assert [st.state for st in seen] == [base.RUNNING, base.RUNNING, base.COMPLETED]
    assert seen[-1].done == seen[-1].total == 3 and seen[0].raw_state == "in_progress"
    assert sorted(r.text.endswith("Correct") for r in results.values()) == [False, True, True]
