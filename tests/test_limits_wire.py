"""The limits on the wire: a judge that answers 429 above R requests per second, through the real
``openai`` SDK and through the real ``lm_eval`` CLI, at concurrency 32 and no ``judge_rpm``.

Without the adaptive gate such a run loses samples (their retries run out: bench/rate_limit.py
measures 15 of 100 lost, 453 429s); with it every sample gets a verdict and the 429s stay few.
"""

from __future__ import annotations

import functools
import json

import pytest

from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.parsing import parse_exact_match
from lm_eval_mathjudge.core.prompts import load
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import JudgeRequest
from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
from tests.loopback import ChatCompletionsServer

RATE = 10  # requests the judge serves per second
N = 60


def _judge(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    verdict = "Correct" if prompt.endswith("The answer is 18.") else "Incorrect"
    return f"Error Analysis: the student's final answer is compared with 18.\nFinal Verdict: {verdict}"


@pytest.fixture
def limited_server():
    with ChatCompletionsServer(responder=_judge, latency=0.3) as server:
        server.rate_limit = RATE
        yield server


def test_a_rate_limited_judge_at_concurrency_32_loses_no_sample(limited_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # The backoff of non-429 errors only; Retry-After (1 s, from the server) is honoured as in production.
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.01))
    settings = JudgeSettings(backend="openai", model="gpt-4-turbo-2024-04-09", base_url=limited_server.url,
                             cache=False, concurrency=32, timeout=20.0, preflight=False)
    backend = OpenAIChatBackend(settings)
    client = JudgeClient(backend, parse_exact_match, settings, load("exact_match").version, None, progress=False)
    requests = [JudgeRequest(prompt=f"Problem {i}: ... The answer is {18 if i % 2 else 16}.") for i in range(N)]
    try:
        outcomes = client.judge_all(requests)
    finally:
        client.close()

    assert [o.verdict.correct if o.verdict else None for o in outcomes] == [bool(i % 2) for i in range(N)]
    refused = limited_server.rate_limited
    assert refused > 0, "the run must actually hit the limit, or this test shows nothing"
    assert refused < 2 * N, f"{refused} 429s for {N} samples: the gate did not back off (without it: ~4.5 per sample)"
    assert client.stats.rate_limited == refused  # every 429 was seen, and retried
    assert limited_server.call_count == N + refused  # nothing sent twice beyond the refused attempts
    assert limited_server.max_in_flight <= 32


@pytest.mark.e2e
def test_lm_eval_run_against_a_rate_limited_judge_scores_every_sample(limited_server, data_slice, tmp_path):
    data_dir = data_slice(40)
    replay = data_dir / "replay.jsonl"
    rows = [json.loads(line) for line in (data_dir / "gsm8k" / "test.jsonl").read_text().splitlines()]
    with open(replay, "w", encoding="utf-8") as fh:  # every response right: the boxed gold answer
        for i, row in enumerate(rows):
            gold = row["answer"].split("####")[-1].strip().replace(",", "")
            fh.write(json.dumps({"doc_id": i, "question": row["question"],
                                 "response": f"Working it out.\n\\boxed{{{gold}}}"}) + "\n")
    limited_server.responder = exact_match_judge
    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", "gsm8k_gpt4em",
                       "--limit", "40", "--log_samples", "--metadata",
                       json.dumps({"judge_base_url": limited_server.url, "judge_concurrency": 32})],
                      {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                       "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = run.results()["results"]["gsm8k_gpt4em"]
    assert metrics["gpt4_exact_match,none"] == 1.0
    assert metrics["judge_failed,none"] == 0
    assert len(run.samples("gsm8k_gpt4em")) == 40
    refused = limited_server.rate_limited
    stats = run.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["run"]
    assert 0 < refused < 2 * 40, refused  # the first round alone: 32 started, about 10 served
    assert stats["rate_limited"] == refused and stats["judge_calls"] == 40 + refused
    assert CANARY_KEY not in run.stdout + run.stderr


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_the_429_above_rate_option_of_the_loopback_servers(kind):
    """The servers' own option, checked on raw HTTP: R calls served per window, the rest refused at
    once with Retry-After and counted; other routes (model lookups) are never limited."""
    import urllib.error
    import urllib.request

    from tests.loopback import GeminiServer

    server = ChatCompletionsServer(responder=_judge) if kind == "openai" else GeminiServer(responder=lambda b: "ok")
    with server:
        server.rate_limit, server.rate_window = 0.05, 60.0  # 3 per 60 s: no call leaves the window meanwhile
        if kind == "openai":
            call, body = f"{server.url}/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            lookup = f"{server.url}/models"
        else:
            call, body = f"{server.url}/v1beta/models/gemini-2.5-pro:generateContent", {"contents": [{"parts": [{"text": "x"}]}]}
            lookup = f"{server.url}/v1beta/models/gemini-2.5-pro"
        statuses, retry_after = [], []
        for _ in range(5):
            request = urllib.request.Request(call, data=json.dumps(body).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    statuses.append(reply.status)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
                retry_after.append(exc.headers.get("Retry-After"))
                error = json.loads(exc.read())["error"]
                assert (error.get("code") == "rate_limit_exceeded") if kind == "openai" else \
                    (error["status"] == "RESOURCE_EXHAUSTED" and error["details"][0]["retryDelay"] == "1s")
        with urllib.request.urlopen(lookup, timeout=10) as reply:
            assert reply.status == 200
        assert statuses == [200, 200, 200, 429, 429]
        assert retry_after == ["1", "1"] and server.rate_limited == 2
        server.reset()
        assert server.rate_limited == 0
