"""Whole-run judging through the real lm_eval CLI: one pool for a group, per-task scores unchanged.

Generations are replayed (``mathjudge-replay``) from records built on the real data slices; the
GPT4-EM judge is a loopback OpenAI server that records which task each request in flight belongs to.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter

import pytest

from lm_eval_mathjudge.core import data_sets
from tests._helpers import list_prices
from tests.conftest import DATASETS, data_rows
from tests.e2e import CANARY_KEY, run_lm_eval
from tests.loopback import ChatCompletionsServer

pytestmark = pytest.mark.e2e

N = 3  # docs per data set: doc 0 answered wrongly, docs 1 and 2 rightly
TASKS = [f"{ds}_gpt4em" for ds in DATASETS]
WRONG = "999999"


class InFlight:
    """A judge that takes ``latency`` seconds per call and notes which data sets are in flight together."""

    def __init__(self, questions: dict[str, str], latency: float):
        self.questions, self.latency = questions, latency
        self.lock = threading.Lock()
        self.live: dict[str, int] = {}
        self.max_tasks_at_once = 0
        self.calls: list[str] = []

    def __call__(self, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        dataset = next(ds for q, ds in self.questions.items() if q in prompt)
        with self.lock:
            self.calls.append(dataset)
            self.live[dataset] = self.live.get(dataset, 0) + 1
            self.max_tasks_at_once = max(self.max_tasks_at_once, sum(1 for n in self.live.values() if n))
        try:
            time.sleep(self.latency)
        finally:
            with self.lock:
                self.live[dataset] -= 1
        student = prompt.split("### Student's solution", 1)[1]
        right = WRONG not in student
        return (f"Error Analysis: the student's final answer {'agrees' if right else 'disagrees'} with the "
                f"reference.\nFinal Verdict: {'Correct' if right else 'Incorrect'}")


def _generations(data_dir, path) -> dict[str, str]:
    """Replay records for every data set; returns question -> data set."""
    questions = {}
    with open(path, "w", encoding="utf-8") as fh:
        for ds in DATASETS:
            for i, row in enumerate(data_rows(data_dir, ds)):
                question = row[data_sets.get(ds).question]
                questions[question] = ds
                answer = WRONG if i % 3 == 0 else "42"
                fh.write(json.dumps({"question": question,
                                     "response": f"Working it out.\nSo the result is {answer}.\n\\boxed{{{answer}}}"})
                         + "\n")
    return questions


def _run(tmp_path, name: str, generations, judge_url: str, env: dict | None = None, metadata: dict | None = None):
    meta = {"gpt4em_judge_base_url": judge_url, **(metadata or {})}
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={generations}",
                        "--tasks", "mathjudge_gpt4em", "--log_samples", "--metadata", json.dumps(meta)],
                       {"MATHJUDGE_DATA_DIR": str(tmp_path / "data"), "MATHJUDGE_CACHE_DIR": str(tmp_path / name),
                        "OPENAI_API_KEY": CANARY_KEY, **(env or {})}, tmp_path / f"out-{name}")


def _verdicts(run, task: str) -> list[tuple[int, str]]:
    return sorted((s["doc_id"], json.dumps(json.loads(s["filtered_resps"][0])["verdict"], sort_keys=True))
                  for s in run.samples(task))


@pytest.mark.e2e_versions  # lm-eval 0.5 reaches apply_filters another way: the one pool must hold there too
def test_a_group_judges_in_one_pool_with_the_scores_of_a_task_by_task_run(data_slice, tmp_path):
    data_dir = data_slice(N)
    generations = tmp_path / "generations.jsonl"
    questions = _generations(data_dir, generations)
    judge = InFlight(questions, latency=0.3)
    with ChatCompletionsServer(judge) as server:
        whole = _run(tmp_path, "whole", generations, server.url)
        assert whole.returncode == 0, whole.stderr[-4000:]
        whole_calls, whole_max = len(judge.calls), judge.max_tasks_at_once
        judge.calls.clear()
        judge.max_tasks_at_once = 0
        by_task = _run(tmp_path, "by-task", generations, server.url, env={"LM_EVAL_MATHJUDGE_TASK_BY_TASK": "1"})
        assert by_task.returncode == 0, by_task.stderr[-4000:]

    assert whole_calls == len(judge.calls) == len(DATASETS) * N
    assert whole_max >= 2, "requests of several tasks were never in flight at once"
    assert judge.max_tasks_at_once == 1  # the before: each task alone
    assert whole.stderr.count(f"judging {len(DATASETS)} tasks") >= 1 and "judging gsm8k_gpt4em" in by_task.stderr

    results, baseline = whole.results(), by_task.results()
    for task in TASKS:
        assert results["results"][task]["gpt4_exact_match,none"] == pytest.approx(2 / 3), task
        for metric in ("gpt4_exact_match,none", "gpt4_exact_match_stderr,none", "judge_failed,none"):
            assert results["results"][task][metric] == baseline["results"][task][metric], (task, metric)
        assert _verdicts(whole, task) == _verdicts(by_task, task)
        judge_meta = results["configs"][task]["metadata"]["judge"]
        assert judge_meta["run"]["requests"] == N and judge_meta["run"]["judge_calls"] == N  # its own stats
        assert judge_meta["cost"]["calls"] == N and judge_meta["cost"]["requests"] == N
        assert judge_meta["run_cost"]["total"]["calls"] == len(DATASETS) * N
        assert len(judge_meta["run_cost"]["tasks"]) == len(DATASETS)
    assert results["results"]["mathjudge_gpt4em"]["gpt4_exact_match,none"] == pytest.approx(2 / 3)
    assert whole.stderr.count("judge cost (USD") == 1  # one table for the run
    assert CANARY_KEY not in whole.stdout + whole.stderr


@pytest.mark.parametrize("metadata, words, code", [
    ({"judge_dry_run": True}, "dry run (judge_dry_run=true): nothing was sent to any judge", 0),  # not an error
    # a loopback judge has no list price: priced as a user would price it, so the budget compares dollars
    ({"judge_budget_usd": 0.000001, "judge_prices": list_prices("gpt-4-turbo-2024-04-09")},
     "the judge estimate is above judge_budget_usd=1e-06", 5),  # core/errors.py
])
def test_dry_run_and_budget_stop_before_any_judge_call(data_slice, tmp_path, metadata, words, code):
    data_dir = data_slice(N)
    generations = tmp_path / "generations.jsonl"
    judge = InFlight(_generations(data_dir, generations), latency=0.0)
    with ChatCompletionsServer(judge) as server:
        stopped = _run(tmp_path, "cache", generations, server.url, metadata=metadata)
    assert stopped.returncode == code and "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    assert judge.calls == [] and server.call_count == 0  # no judge call reached the server
    text = " ".join(stopped.stderr.split())
    assert words in text
    assert f"{len(DATASETS) * N} judge call(s)" in text  # the estimate covers the whole run, not the first task
    saved = next((tmp_path / "cache" / "generations").glob("generations-*.jsonl"))
    assert str(saved) in text and "--model mathjudge-replay" in text
    rows = [json.loads(line) for line in saved.read_text().splitlines()]
    assert {r["task"] for r in rows} == set(TASKS) and len(rows) == len(DATASETS) * N
    assert "judge cost estimate" in stopped.stderr  # the per-task table


def test_a_cached_rerun_estimates_nothing_to_pay(data_slice, tmp_path):
    """After a real run, a dry run of the same command counts every request as answered by the cache."""
    data_dir = data_slice(N)
    generations = tmp_path / "generations.jsonl"
    judge = InFlight(_generations(data_dir, generations), latency=0.0)
    with ChatCompletionsServer(judge) as server:
        first = _run(tmp_path, "cache", generations, server.url)
        assert first.returncode == 0, first.stderr[-4000:]
        dry = _run(tmp_path, "cache", generations, server.url, metadata={"judge_dry_run": True})
    text = " ".join(dry.stderr.split())
    assert f"0 judge call(s) ({len(DATASETS) * N} more answered by the cache, free)" in text, text[-3000:]
    assert len(judge.calls) == len(DATASETS) * N


def _vlm_reply(body: dict) -> str:
    text = "\n".join(p.get("text", "") for c in body["contents"] for p in c["parts"])
    flag = int(WRONG not in text.rsplit("\\boxed", 1)[-1])
    return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
            f"EXPLANATION: the final answer {'matches' if flag else 'does not match'} the official one.")


def test_a_task_whose_judge_is_down_fails_alone_and_the_others_verdicts_are_kept(data_slice, tmp_path):
    """GPT4-EM and VLM tasks in one pool; the VLM judge answers 500: only its task fails, and the rerun
    (VLM judge back) pays no second GPT4-EM call."""
    from tests.loopback import GeminiServer

    data_dir = data_slice(N)
    generations = tmp_path / "generations.jsonl"
    em = InFlight(_generations(data_dir, generations), latency=0.0)
    state = {"down": True}

    def vlm(body):
        if state["down"]:
            raise RuntimeError("the VLM judge is down")
        return _vlm_reply(body)
    args = ["--model", "mathjudge-replay", "--model_args", f"path={generations}",
            "--tasks", "gsm8k_gpt4em,gsm8k_vlmjudge", "--log_samples"]
    env = {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": CANARY_KEY, "GEMINI_API_KEY": "AIza-canary-gemini-0123456789abcdef"}
    with ChatCompletionsServer(em) as em_server, GeminiServer(vlm) as vlm_server:
        metadata = {"gpt4em_judge_base_url": em_server.url, "vlm_judge_base_url": vlm_server.url,
                    "judge_max_retries": 0}
        down = run_lm_eval([*args, "--metadata", json.dumps(metadata)], env, tmp_path / "out-down")
        assert down.returncode != 0
        message = " ".join(down.stderr.split())
        assert "gsm8k_vlmjudge: 3 of 3 samples got no verdict" in message
        assert "gsm8k_gpt4em:" not in message.split("JudgeRunError", 1)[-1]  # the EM task is not blamed
        assert len(em.calls) == N  # the EM task was judged in the same pass
        state["down"] = False
        again = run_lm_eval([*args, "--metadata", json.dumps(metadata)], env, tmp_path / "out-again")
        assert again.returncode == 0, again.stderr[-4000:]
    assert len(em.calls) == N  # its verdicts were kept: no second call
    results = again.results()["results"]
    assert results["gsm8k_gpt4em"]["gpt4_exact_match,none"] == pytest.approx(2 / 3)
    assert results["gsm8k_vlmjudge"]["final_correct,none"] == pytest.approx(2 / 3)
    assert again.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["run"]["cache_hits"] == N


class ByModel:
    """A judge that takes ``latency`` seconds per call and notes which judge models are in flight together."""

    def __init__(self, latency: float):
        self.latency = latency
        self.lock = threading.Lock()
        self.live: dict[str, int] = {}
        self.together: set[frozenset[str]] = set()  # the models in flight at each moment a call starts
        self.max_calls_at_once = 0

    def __call__(self, body: dict) -> str:
        model = body["model"]
        with self.lock:
            self.live[model] = self.live.get(model, 0) + 1
            self.together.add(frozenset(m for m, n in self.live.items() if n))
            self.max_calls_at_once = max(self.max_calls_at_once, sum(self.live.values()))
        try:
            time.sleep(self.latency)
        finally:
            with self.lock:
                self.live[model] -= 1
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)
        right = WRONG not in text.rsplit("\\boxed", 1)[-1]
        if model == "vlm-judge":
            flag = int(right)
            return (f"INTERMEDIATE_CORRECT: {flag}\nFINAL_CORRECT: {flag}\nACTION_REFLECTION: 0\n"
                    f"EXPLANATION: the final answer {'matches' if flag else 'does not match'} the official one.")
        return (f"Error Analysis: the student's final answer {'agrees' if right else 'disagrees'} with the "
                f"reference.\nFinal Verdict: {'Correct' if right else 'Incorrect'}")


@pytest.mark.e2e_versions  # lm-eval 0.5 reaches apply_filters another way: the one pool must hold there too
def test_a_panel_task_and_a_plain_task_share_the_runs_one_pool(data_slice, tmp_path, monkeypatch):
    """GPT4-EM by a panel of two judges and a plain VLM judge in one lm_eval call: one pass, one bar,
    one cost table; the panel's members and the plain judge are in flight at the same time. Each task's
    lm-eval filters run once (the pass that judges a task before lm-eval reaches it does not run them again)."""
    from lm_eval_mathjudge import compat

    stock = compat.TaskBase.__mro__[1]  # lm-eval's own task class, whose apply_filters runs the filters
    filtered: Counter = Counter()

    def counted(task):
        filtered[task.config.task] += 1
        return original(task)
    original = stock.apply_filters
    monkeypatch.setattr(stock, "apply_filters", counted)
    n = 6
    data_dir = data_slice(n)
    generations = tmp_path / "generations.jsonl"
    _generations(data_dir, generations)
    judge = ByModel(latency=0.2)
    width = 3
    with ChatCompletionsServer(judge, models=["judge-a", "judge-b", "vlm-judge"]) as server:
        metadata = {"judge_base_url": server.url, "judge_concurrency": width,
                    "gpt4em_judge_panel": [{"model": "judge-a"}, {"model": "judge-b"}],
                    "vlm_judge_backend": "openai", "vlm_judge_model": "vlm-judge"}
        run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={generations}",
                           "--tasks", "gsm8k_gpt4em,gsm8k_vlmjudge", "--log_samples",
                           "--metadata", json.dumps(metadata)],
                          {"MATHJUDGE_DATA_DIR": str(data_dir), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
                           "OPENAI_API_KEY": CANARY_KEY}, tmp_path / "out")
        assert run.returncode == 0, run.stderr[-4000:]
        assert server.call_count == 3 * n  # each panel member and the VLM judge judged every sample once

    assert any({"judge-a", "judge-b", "vlm-judge"} <= live for live in judge.together), judge.together
    assert judge.max_calls_at_once <= 2 * width  # the pool's width in requests, a panel request is two calls
    assert run.stderr.count("judging 2 tasks") >= 1 and "judging gsm8k_gpt4em" not in run.stderr
    assert run.stderr.count("judge cost (USD") == 1  # one table for the run
    results = run.results()
    assert results["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"] == pytest.approx(2 / 3)
    assert results["results"]["gsm8k_vlmjudge"]["final_correct,none"] == pytest.approx(2 / 3)
    panel_meta = results["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]
    assert [m["judge_calls"] for m in panel_meta["run"]["panel"]["members"]] == [n, n]
    assert set(panel_meta["cost"]["judges"]) == {"openai:judge-a", "openai:judge-b"}
    assert panel_meta["run_cost"]["total"]["calls"] == 3 * n and len(panel_meta["run_cost"]["tasks"]) == 2
    records = [json.loads(s["filtered_resps"][0]) for s in run.samples("gsm8k_gpt4em")]
    assert all([m["judge"] for m in r["panel"]] == ["openai:judge-a", "openai:judge-b"] for r in records)
    if os.environ.get("MJ_TEST_PROCESS") != "1":  # lm_eval ran in this process, so the counter saw it
        assert filtered == {"gsm8k_gpt4em": 1, "gsm8k_vlmjudge": 1}
