"""Streaming with a budget, a dry run or k samples per problem, through the real CLI (in this process).

A budget cannot wait for answers that do not exist yet, so before the first streamed call the run
checks the worst case: every answer at max_gen_toks. Within the budget the run streams; above it, it
is judged after generation and the budget decides on the real answers, exactly as with
``judge_stream=false``. A refusal and a dry run send nothing to the judge either way. With k samples
each sample is judged as it arrives, and the k-sample metrics are the same as with streaming off.
"""

from __future__ import annotations

import collections
import json
import re
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA, read_jsonl
from tests._helpers import list_prices
from tests.e2e import exact_match_judge, question_of, run_lm_eval
from tests.loopback import ChatCompletionsServer

pytestmark = [pytest.mark.e2e, pytest.mark.e2e_versions]  # CacheHook, filters and repeats through compat.py

TASK = "gsm8k_gpt4em"
N = 16
# A loopback judge has no list price: the budget tests price it as a user would (judge_prices=None: unpriced).
PRICES = list_prices("gpt-4-turbo-2024-04-09", "gpt-4o-2024-08-06")
GOLD = {r["question"]: r["answer"].split("####")[-1].strip().replace(",", "")
        for r in read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")}


def model(body: dict) -> str:
    return f"Counting it out.\n\\boxed{{{GOLD[question_of(body)]}}}"


def _run(tmp: Path, name: str, model=model, tasks: str = TASK, include: Path | None = None, **meta) -> dict:
    with ChatCompletionsServer(model, latency=0.2) as lm, ChatCompletionsServer(exact_match_judge) as judge:
        run = run_lm_eval(
            ["--model", "local-chat-completions", "--model_args",
             f"model=loopback-model,base_url={lm.chat_url},num_concurrent=2,max_retries=1",
             "--apply_chat_template", "--tasks", tasks, "--limit", str(N),
             *(["--include_path", str(include)] if include else []),
             "--metadata", json.dumps({k: v for k, v in {"judge_base_url": judge.url, "judge_concurrency": 4,
                                                         "judge_prices": PRICES, **meta}.items() if v is not None})],
            {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp / name / "cache"),
             "OPENAI_API_KEY": "sk-loopback"}, tmp / name / "out")
        judge_times = [r.time for r in judge.requests if judge.is_model_call(r.method, r.path)]
        last_generation = max(lm.replies_sent) if lm.replies_sent else None
        model_calls = sum(1 for r in lm.requests if lm.is_model_call(r.method, r.path))
    return {"run": run, "judge_times": judge_times, "last_generation": last_generation, "model_calls": model_calls}


def _task_yaml(folder: Path, name: str, extra: str = "") -> Path:
    """A task of our own beside the shipped ones: the GSM8K judged task under another name."""
    folder.mkdir(parents=True, exist_ok=True)
    configs = REPO / "task_configs"
    (folder / f"{name}.yaml").write_text(f"include: {configs / '_judge_gpt4em.yaml'}\nmathjudge_dataset: gsm8k\n"
                                         f"task: {name}\n{extra}")
    return folder


@pytest.fixture(scope="module")
def estimate(tmp_path_factory) -> float:
    """The run's expected judge cost on its real answers, from a dry run (streaming on, the default)."""
    dry = _run(tmp_path_factory.mktemp("dry"), "dry", judge_dry_run=True)
    assert dry["run"].returncode == 0, dry["run"].stderr[-3000:]
    assert dry["judge_times"] == []  # the dry run asked the judge nothing
    [total] = [line for line in dry["run"].stderr.splitlines() if line.startswith("total ")]
    return float(total.split()[-2])  # the online price (the run's mode)


def _streamed(result: dict) -> bool:
    return min(result["judge_times"]) < result["last_generation"]


def test_a_budget_that_covers_every_possible_answer_keeps_streaming(tmp_path, estimate):
    result = _run(tmp_path, "wide", judge_budget_usd=round(100 * estimate, 4))
    assert result["run"].returncode == 0, result["run"].stderr[-3000:]
    assert _streamed(result) and len(result["judge_times"]) == N
    assert result["run"].results()["results"][TASK]["gpt4_exact_match,none"] == 1.0


def test_a_budget_below_the_worst_case_judges_after_generation_on_the_real_answers(tmp_path, estimate):
    # above what these answers cost, below what answers of max_gen_toks (4,096) tokens each could cost
    result = _run(tmp_path, "narrow", judge_budget_usd=round(2 * estimate, 4))
    assert result["run"].returncode == 0, result["run"].stderr[-3000:]
    assert not _streamed(result) and len(result["judge_times"]) == N
    assert "judge_stream: judged after generation" in result["run"].stderr
    assert result["run"].results()["results"][TASK]["gpt4_exact_match,none"] == 1.0


def test_a_budget_below_the_estimate_refuses_before_any_judge_call(tmp_path, estimate):
    result = _run(tmp_path, "refused", judge_budget_usd=round(estimate / 2, 6))
    assert result["run"].returncode != 0
    assert "the judge estimate is above judge_budget_usd" in result["run"].stderr
    assert result["judge_times"] == []
    assert re.search(r"resume with lm_eval (run )?--model mathjudge-replay", result["run"].stderr)


def test_a_budget_with_an_unpriced_custom_endpoint_streams_nothing_and_refuses_saying_why(tmp_path):
    """The streaming worst case and the budget price a loopback judge alike: without judge_prices it has no
    price, so nothing streams and the budget refuses before any judge call, naming the endpoint."""
    from lm_eval_mathjudge.core.errors import EXIT_CODES

    result = _run(tmp_path, "unpriced", judge_budget_usd=100, judge_prices=None)
    text = " ".join(result["run"].stderr.split())
    assert result["run"].returncode == EXIT_CODES["budget"], text[-3000:]
    assert result["judge_times"] == [] and "Traceback" not in text
    assert "judge_stream: judged after generation" in text and "the judge has no price" in text
    assert "has no price, so the cost cannot be checked against the budget" in text
    assert re.search(r"served at http://127\.0\.0\.1:\d+/v1, not by its vendor \(api\.openai\.com\)", text)
    assert "judge_prices" in text


class Sampler:
    """A model whose k answers to one question differ: right, wrong, right, ... in the order asked."""

    def __init__(self):
        self.asked, self._lock = collections.Counter(), threading.Lock()

    def __call__(self, body: dict) -> str:
        question = question_of(body)
        with self._lock:
            self.asked[question] += 1
            j = self.asked[question]
        answer = GOLD[question] if j % 2 else int(GOLD[question]) + j
        return f"Counting it out (attempt {j}).\n\\boxed{{{answer}}}"


def test_k_samples_are_judged_as_they_arrive_with_the_metrics_of_judging_after_generation(tmp_path):
    k = 3
    on = _run(tmp_path, "k-on", model=Sampler(), repeats=k)
    off = _run(tmp_path, "k-off", model=Sampler(), repeats=k, judge_stream=False)
    for result in (on, off):
        assert result["run"].returncode == 0, result["run"].stderr[-3000:]
        assert len(result["judge_times"]) == k * N  # every sample differs: one call each
    assert _streamed(on) and not _streamed(off)
    early = sum(1 for t in on["judge_times"] if t < on["last_generation"])
    assert early >= k * N // 2, early
    metrics_on, metrics_off = (r["run"].results()["results"][TASK] for r in (on, off))
    assert metrics_on == metrics_off
    assert metrics_on[f"gpt4_exact_match_avg@{k},none"] == pytest.approx(2 / 3)  # right, wrong, right
    assert metrics_on[f"gpt4_exact_match_pass@{k},none"] == 1.0


def test_a_filter_that_keeps_fewer_than_k_samples_is_refused_before_anything_is_generated(tmp_path):
    folder = _task_yaml(tmp_path / "tasks", "gsm8k_gpt4em_voted", "filter_list:\n  - name: voted\n    filter:\n"
                        "      - function: majority_vote\n      - function: take_first\n")
    result = _run(tmp_path, "voted", tasks="gsm8k_gpt4em_voted", include=folder, repeats=3)
    assert result["run"].returncode != 0
    assert "the filter 'voted' keeps 1 of the 3 samples of each doc" in result["run"].stderr, result["run"].stderr[-3000:]
    assert "Traceback" not in result["run"].stderr
    assert result["model_calls"] == 0 and result["judge_times"] == []


def test_two_tasks_with_one_prompt_and_a_budget_pay_for_each_own_answer_once(tmp_path, estimate):
    """The model answers each call differently: which task an arrival belongs to is unknown until the end,
    so under a budget their shared prompts are judged by the pass, each task on its own answers."""
    # the twin has a judge of its own: an early call made on the other task's answer is of no use to it
    folder = _task_yaml(tmp_path / "tasks", "gsm8k_gpt4em_twin",
                        "mathjudge:\n  judge: exact_match\n  settings:\n    model: gpt-4o-2024-08-06\n")
    result = _run(tmp_path, "twins", model=Sampler(), tasks=f"{TASK},gsm8k_gpt4em_twin", include=folder,
                  judge_budget_usd=round(100 * estimate, 4))
    assert result["run"].returncode == 0, result["run"].stderr[-3000:]
    assert result["model_calls"] == 2 * N
    assert len(result["judge_times"]) == 2 * N  # one call per task per doc: no early call judged the twin's answer
    runs = result["run"].results()["configs"]
    assert [runs[t]["metadata"]["judge"]["run"]["judge_calls"] for t in (TASK, "gsm8k_gpt4em_twin")] == [N, N]
