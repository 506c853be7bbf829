"""Real wire: usage recorded through the real openai / google-genai SDKs prices as expected.

The loopback servers answer real GSM8K judge requests with usage blocks the way
the providers do (OpenAI: reasoning tokens inside completion_tokens, in
completion_tokens_details; Gemini: thoughtsTokenCount beside candidatesTokenCount).
The expected dollars are computed from what the servers sent, independently of
the backends' usage readers; a rerun from the cache costs nothing. A loopback
server is a custom endpoint, where no list price holds: the judges are given the
table's rows as judge_prices, as a user pricing such a server would.
"""

from __future__ import annotations

import functools

import pytest

from lm_eval_mathjudge.judging import client as client_module
from lm_eval_mathjudge.cost import ledger as cost
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.backends.openai.chat import OpenAIChatBackend
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.judges import JUDGES
from lm_eval_mathjudge.calls.retry import RetryPolicy
from tests._helpers import list_prices
from tests.conftest import SHARED_DATA, read_jsonl
from tests.loopback import ChatCompletionsServer, GeminiServer
from tests.loopback._base import count_words
from tests.loopback.gemini_server import _prompt_tokens as gemini_prompt_words

OPENAI_KEY = "sk-canary-cost-0123456789abcdef"
GEMINI_KEY = "AIza-canary-cost-0123456789abcdef"
EM_REPLY = "Error Analysis: The student's final answer matches the reference answer.\nFinal Verdict: Correct"
VLM_REPLY = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
             "EXPLANATION: The steps and the final answer agree with the reference solution.")


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "GOOGLE_API_KEY",
                 "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                 "GOOGLE_GEMINI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(client_module, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.01))


@pytest.fixture(scope="module")
def docs():
    """The first GSM8K test docs, normalised as the tasks do, with real GPT-3 outputs."""
    import datasets

    from lm_eval_mathjudge.core import data_sets

    rows = read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")[:6]
    outputs = read_jsonl(SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl")[:6]
    return list(zip(data_sets.get("gsm8k").process_docs(datasets.Dataset.from_list(rows)), (o["response"] for o in outputs)))


def openai_usage(body: dict) -> tuple[int, int, int]:
    """(prompt, completion, reasoning) the loopback OpenAI judge bills for one request body."""
    prompt = len(body["messages"][0]["content"]) // 4
    reasoning = 200 + prompt % 97
    return prompt, count_words(EM_REPLY) + reasoning, reasoning


def gemini_thoughts(body: dict) -> str:
    return " ".join(["weighing"] * (300 + gemini_prompt_words(body) % 41))


def run(client: JudgeClient, requests):
    try:
        return client.judge_all(requests)
    finally:
        client.close()


def test_openai_reasoning_judge_usage_prices_through_the_sdk(docs, tmp_path):
    def respond(body):
        prompt, completion, reasoning = openai_usage(body)
        return {"content": EM_REPLY, "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                               "total_tokens": prompt + completion,
                                               "completion_tokens_details": {"reasoning_tokens": reasoning}}}
    with ChatCompletionsServer(responder=respond) as server:
        settings = JudgeSettings(backend="openai", model="o4-mini-2025-04-16", base_url=server.url,
                                 max_tokens=25000, cache_dir=str(tmp_path), prices=list_prices("o4-mini"))
        requests = [JUDGES["exact_match"].request(doc, response) for doc, response in docs]

        def client():
            return JudgeClient(OpenAIChatBackend(settings), JUDGES["exact_match"].parse, settings, "em-cost-test",
                               ReplyCache(str(tmp_path)), progress=False)
        first = client()
        outcomes = run(first, requests)
        assert all(o.verdict is not None and o.verdict.correct for o in outcomes)
        sent = [r.body for r in server.requests if r.method == "POST"]
        assert len(sent) == len(requests)
        assert all("max_completion_tokens" in b for b in sent)  # a reasoning model on the wire
        billed = [openai_usage(b) for b in sent]
        expected = sum(p * 1.10 + c * 4.40 for p, c, _ in billed) / 1e6  # o4-mini: reasoning billed once
        got = cost.cost_of(first.stats.usage, None, settings)
        assert got.online == pytest.approx(expected) and got.batch == 0.0
        assert first.stats.usage["reasoning_tokens"] == sum(r for _, _, r in billed)

        ledger = cost.Ledger()
        row = ledger.record_stats("mathjudge_gsm8k_gpt4em", settings, first.stats)
        assert row.thinking_tokens == sum(r for _, _, r in billed)
        assert row.completion_tokens == sum(c - r for _, c, r in billed)  # the visible verdicts only
        assert row.usd == pytest.approx(expected)

        again = client()  # a rerun: every verdict from the cache, nothing spent
        run(again, requests)
        assert server.call_count == len(requests)
        rerun = ledger.record_stats("mathjudge_gsm8k_gpt4em", settings, again.stats)
        assert (rerun.calls, rerun.cached, rerun.usd) == (0, len(requests), 0.0)
        assert ledger.task_row("mathjudge_gsm8k_gpt4em").usd == pytest.approx(expected)


def test_gemini_thinking_judge_usage_prices_through_the_sdk(docs):
    with GeminiServer(responder=lambda body: {"text": VLM_REPLY, "thoughts": gemini_thoughts(body)}) as server:
        settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=server.url, max_tokens=8192,
                                 cache=False, prices=list_prices("gemini-2.5-pro"))
        requests = [JUDGES["vlm"].request(doc, response) for doc, response in docs]
        client = JudgeClient(GeminiBackend(settings), JUDGES["vlm"].parse, settings, "vlm-cost-test", None,
                             progress=False)
        outcomes = run(client, requests)
        assert all(o.verdict is not None for o in outcomes)
        sent = [r.body for r in server.requests if r.method == "POST" and "generateContent" in r.path]
        assert len(sent) == len(requests)
        prompt = sum(gemini_prompt_words(b) for b in sent)
        thoughts = sum(count_words(gemini_thoughts(b)) for b in sent)
        answer = count_words(VLM_REPLY) * len(sent)
        expected = (prompt * 1.25 + (answer + thoughts) * 10.0) / 1e6  # thoughts billed on top, as output
        got = cost.cost_of(client.stats.usage, None, settings)
        assert got.online == pytest.approx(expected)
        batch_priced = cost.cost_of(None, client.stats.usage, settings)  # the same replies from a batch job
        assert batch_priced.batch == pytest.approx(expected / 2) and batch_priced.online == 0.0
        row = cost.Ledger().record_stats("mathjudge_gsm8k_vlmjudge", settings, client.stats)
        assert (row.prompt_tokens, row.completion_tokens, row.thinking_tokens) == (prompt, answer, thoughts)
