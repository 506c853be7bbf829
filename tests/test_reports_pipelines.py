"""The leaderboard tells judging pipelines apart, on results files made by real lm_eval runs.

Three replayed "models" (tests/reports_fixtures.py: the real GPT-3 GSM8K solutions, and the
variant with 10 wrong answers fixed) are judged through the real CLI by a loopback OpenAI judge:

* ``gpt3-verifier`` by the LLM judge alone (``gpt4_exact_match``);
* ``gpt3-fixed`` by the rule-then-LLM cascade (``cascade_exact_match``);
* ``gpt3-verifier`` again, by the cascade, into another folder: the same model name.

Side by side the first two are refused (their pipelines differ, and so do their metrics);
with ``--allow-mixed`` each is ranked by its own primary metric and a note says so; the
cascade rerun of ``gpt3-verifier`` never silently replaces its LLM-only run.
"""

from __future__ import annotations

import csv
import io
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from lm_eval_mathjudge.__main__ import main
from tests.conftest import SHARED_DATA
from tests.e2e import CANARY_KEY
from tests.loopback import ChatCompletionsServer
from tests.reports_fixtures import run_cli, variants

pytestmark = pytest.mark.e2e

LIMIT = 40
JUDGE = "openai:strict-judge"
CASCADE = f"cascade(local:math-verify → {JUDGE})"
_STUDENT = re.compile(r"### Student's solution\n(?P<section>.*?)\n\n### How to grade", re.S)


def _strict_judge(body: dict) -> str:
    """Correct exactly when the student's last number is the reference's final answer."""
    prompt = body["messages"][-1]["content"]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    gold = reference.strip().splitlines()[-1].split(":")[-1].strip()
    numbers = re.findall(r"-?\d+(?:\.\d+)?", _STUDENT.search(prompt)["section"].replace(",", ""))
    same = bool(numbers) and numbers[-1] == gold
    return (f"Error Analysis: The student's final answer is {numbers[-1] if numbers else 'missing'} and the "
            f"reference answer is {gold}.\nFinal Verdict: {'Correct' if same else 'Incorrect'}")


@pytest.fixture(scope="module")
def runs(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("pipelines")
    inputs = root / "inputs"
    inputs.mkdir()
    for name, rows in variants().items():
        (inputs / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plan = {"llm": ("gpt3-verifier", {}), "cascade": ("gpt3-fixed", {"judge_cascade": True}),
            "rerun": ("gpt3-verifier", {"judge_cascade": True})}
    with ChatCompletionsServer(_strict_judge, models=["strict-judge"]) as judge:
        def one(item):
            folder, (model, extra) = item
            metadata = {"judge_base_url": judge.url, "judge_model": "strict-judge", **extra}
            return run_cli(["--model", "mathjudge-replay", "--model_args", f"path={model}.jsonl",
                            "--tasks", "gsm8k_gpt4em", "--limit", str(LIMIT), "--log_samples",
                            "--metadata", json.dumps(metadata)],
                           {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(root / "cache"),
                            "OPENAI_API_KEY": CANARY_KEY}, root / "runs" / folder, cwd=inputs)

        with ThreadPoolExecutor(len(plan)) as pool:
            done = dict(zip(plan, pool.map(one, plan.items())))
    for run in done.values():
        assert run.returncode == 0, run.stderr[-3000:]
    return root / "runs", done


def test_the_results_name_the_whole_pipeline(runs):
    _, done = runs
    judges = {k: run.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"] for k, run in done.items()}
    assert judges["llm"]["pipeline"] == JUDGE
    assert judges["cascade"]["pipeline"] == judges["rerun"]["pipeline"] == CASCADE


def test_the_leaderboard_refuses_a_cascade_run_beside_an_llm_only_run(runs, tmp_path, capsys):
    folder, _ = runs
    assert main(["leaderboard", str(folder / "llm"), str(folder / "cascade"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"judge differs: {JUDGE} (gpt3-verifier.jsonl); {CASCADE} (gpt3-fixed.jsonl)" in err
    assert "primary metric differs: gpt4_exact_match (gpt3-verifier.jsonl); cascade_exact_match (gpt3-fixed.jsonl)" in err
    assert "--allow-mixed" in err and not (tmp_path / "leaderboard.csv").exists()


def test_allow_mixed_ranks_each_run_by_its_own_primary_metric_and_says_so(runs, tmp_path, capsys):
    folder, done = runs
    assert main(["leaderboard", str(folder / "llm"), str(folder / "cascade"), "--out", str(tmp_path),
                 "--allow-mixed"]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "leaderboard.csv").read_text())))
    scores = {"gpt3-verifier.jsonl": done["llm"].results()["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"],
              "gpt3-fixed.jsonl": done["cascade"].results()["results"]["gsm8k_gpt4em"]["cascade_exact_match,none"]}
    assert scores["gpt3-fixed.jsonl"] > scores["gpt3-verifier.jsonl"]  # 10 wrong answers fixed
    ranked = sorted({r["model"]: int(r["rank"]) for r in rows}.items(), key=lambda kv: kv[1])
    assert [m for m, _ in ranked] == ["gpt3-fixed.jsonl", "gpt3-verifier.jsonl"]  # by value, not by column
    judges = {r["model"]: r["judge"] for r in rows}
    assert judges == {"gpt3-verifier.jsonl": JUDGE, "gpt3-fixed.jsonl": CASCADE}
    out = capsys.readouterr().out
    assert "each model is ranked by its own primary metric" in out and "Δ primary metric vs top" in out


def test_a_cascade_rerun_never_replaces_the_llm_only_run_of_the_same_model(runs, tmp_path, capsys):
    folder, _ = runs
    for args in (["leaderboard", str(folder / "llm"), str(folder / "rerun"), "--out", str(tmp_path)],
                 ["leaderboard", str(folder / "rerun"), str(folder / "llm"), "--out", str(tmp_path), "--allow-mixed"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "gpt3-verifier.jsonl has two results for gsm8k_gpt4em judged differently" in err
        assert f"{JUDGE} @ exact_match@" in err and f"{CASCADE} @ exact_match@" in err
        assert "neither replaces the other" in err
