"""Judging while the model generates (``judge_stream``), through the real CLI.

A loopback model behind ``local-chat-completions`` that takes its time, and a loopback judge: with
streaming on (the default) the judge gets its first request while the model still has requests
open; with ``judge_stream=false`` not before the last generation. Both runs of the same docs give
the same scores, samples, failure counts and cost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import LM_EVAL, TIMEOUT_S, exact_match_judge, question_of, run_env, run_together
from tests.loopback import ChatCompletionsServer

pytestmark = [pytest.mark.e2e, pytest.mark.e2e_versions]  # CacheHook and the filters through compat.py

TASK = "gsm8k_gpt4em"
ROWS = read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")
N = 60
GOLD = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "") for r in ROWS}
WRONG = {r["question"] for r in ROWS[::4]}  # a quarter answered wrongly: scores are not all 1
UNPARSEABLE = {r["question"] for r in ROWS[1::9]}  # and some judge replies are refused: failures counted


def model(body: dict) -> str:
    question = question_of(body)
    answer = int(GOLD[question]) + 1 if question in WRONG else GOLD[question]
    return f"Adding up the amounts step by step.\n\\boxed{{{answer}}}"


def judge(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    if any(q in prompt for q in UNPARSEABLE):
        return "I would rather not say."
    return exact_match_judge(body)


def _run(tmp: Path, name: str, stream: bool) -> dict:
    import subprocess

    cache, out = tmp / name / "cache", tmp / name / "out"
    with ChatCompletionsServer(model, latency=0.3) as lm, ChatCompletionsServer(judge, latency=0.1) as judge_server:
        meta = {"judge_base_url": judge_server.url, "judge_concurrency": 8, **({} if stream else {"judge_stream": False})}
        argv = [LM_EVAL, "--model", "local-chat-completions", "--model_args",
                f"model=loopback-model,base_url={lm.chat_url},num_concurrent=8,max_retries=1",
                "--apply_chat_template", "--tasks", TASK, "--limit", str(N), "--log_samples",
                "--output_path", str(out), "--metadata", json.dumps(meta)]
        env = run_env({"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(cache),
                       "OPENAI_API_KEY": "sk-loopback"})
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        model_times = [r.time for r in lm.requests if lm.is_model_call(r.method, r.path)]
        judge_times = [r.time for r in judge_server.requests if judge_server.is_model_call(r.method, r.path)]
        model_replies = lm.replies_sent
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(max(out.rglob("results_*.json")).read_text())
    samples_file = max(out.rglob(f"samples_*{TASK}_*.jsonl"))
    samples = sorted((json.loads(line) for line in samples_file.read_text().splitlines()), key=lambda s: s["doc_id"])
    return {"results": results, "samples": samples, "model_times": model_times, "judge_times": judge_times,
            "last_generation": max(model_replies), "last_model_request": max(model_times)}


def _judge_block(results: dict) -> dict:
    configs = {name.split("::")[-1]: value for name, value in results["configs"].items()}
    return configs[TASK]["metadata"]["judge"]


def _without_times(value):
    """The cost and stats blocks without wall-clock figures (they differ run to run)."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if not any(w in k for w in ("second", "time", "_s"))}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def test_streaming_judges_while_generating_and_changes_no_score_sample_failure_or_cost(tmp_path):
    streamed, after = run_together(lambda: _run(tmp_path, "stream", True), lambda: _run(tmp_path, "after", False))
    # on: the judge's first request came while the model still had requests to answer
    assert min(streamed["judge_times"]) < streamed["last_generation"]
    early = sum(1 for t in streamed["judge_times"] if t < streamed["last_generation"])
    assert early >= N // 2, early
    # off: judging starts after the last generation, as before
    assert min(after["judge_times"]) > after["last_generation"]
    # the same calls either way: each sample once, and an unparseable reply asked once more
    refused = sum(1 for r in ROWS[:N] if r["question"] in UNPARSEABLE)
    assert (len(streamed["judge_times"]), len(after["judge_times"])) == (N + refused, N + refused)

    metric = {name.split("::")[-1]: value for name, value in streamed["results"]["results"].items()}[TASK]
    metric_off = {name.split("::")[-1]: value for name, value in after["results"]["results"].items()}[TASK]
    assert metric == metric_off
    assert 0 < metric["gpt4_exact_match,none"] < 1 and metric["judge_failed,none"] > 0
    keep = ("doc_id", "filtered_resps", "resps", "gpt4_exact_match", "judge_failed", "target")
    assert [{k: s.get(k) for k in keep} for s in streamed["samples"]] == \
           [{k: s.get(k) for k in keep} for s in after["samples"]]
    on, off = _judge_block(streamed["results"]), _judge_block(after["results"])
    assert _without_times(on["run"]) == _without_times(off["run"])
    assert _without_times(on["cost"]) == _without_times(off["cost"])
