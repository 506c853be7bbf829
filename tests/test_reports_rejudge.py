"""`mathjudge rejudge`: saved samples judged again without the model, written in lm-eval's own format.

Two sources: a judged run of this plugin (re-judged by a second judge, a loopback
OpenAI-protocol server, through the real openai SDK) and lm-eval's built-in `gsm8k`
task run with `--predict_only` (judged by the local judge).
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from lm_eval.utils import get_file_task_name, get_results_filenames, get_sample_results_filenames

from lm_eval_mathjudge.__main__ import main
from tests._helpers import list_prices
from tests.conftest import SHARED_DATA, read_jsonl
from tests.e2e import CANARY_KEY, fenced, run_mathjudge, run_together
from tests.loopback import ChatCompletionsServer
from tests.reports_fixtures import BUILTIN_LIMIT, three_runs

LABELS = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"
JUDGE_MODEL = "tolerant-judge"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


def tolerant_judge(body: dict) -> str:
    """A second judge that accepts a final answer within 1 of the reference (an off-by-one-tolerant grader)."""
    prompt = body["messages"][-1]["content"]
    reference = prompt.split("### Reference solution", 1)[1].split("### Student's solution", 1)[0]
    student = fenced(prompt)
    gold = float(reference.strip().splitlines()[-1].split(":")[-1].replace(",", ""))
    answer = _final_number(student)
    ok = answer is not None and abs(answer - gold) <= 1
    return (f"Error Analysis: The student's final answer is {answer} and the reference answer is {gold:g}.\n"
            f"Final Verdict: {'Correct' if ok else 'Incorrect'}")


def _final_number(text: str) -> float | None:
    found = re.findall(r"-?\d[\d,]*\.?\d*", text.strip().splitlines()[-1])
    return float(found[-1].replace(",", "").rstrip(".")) if found else None


def _mathjudge(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return run_mathjudge(args, env)


@pytest.fixture(scope="module")
def rejudge_runs(runs, tmp_path_factory):
    """Both rejudge commands of this module, side by side (each is one CLI process that loads lm-eval's tasks).

    ``rejudged``: gpt3-mixed's samples, judged again by the tolerant loopback judge;
    ``builtin``: the built-in predict-only gsm8k run, judged by the local judge.
    """
    out, builtin = tmp_path_factory.mktemp("rejudged"), tmp_path_factory.mktemp("builtin_rejudged")
    source = next(runs.builtin_dir.rglob("samples_gsm8k_*.jsonl"))
    with ChatCompletionsServer(tolerant_judge, models=(JUDGE_MODEL,)) as judge:
        proc, builtin_proc = run_together(
            lambda: _mathjudge(["rejudge", str(runs.samples_file("gpt3-mixed")), "--output_path", str(out),
                                "--judge", f"openai:{JUDGE_MODEL}",
                                "--metadata", json.dumps({"judge_base_url": judge.url})],
                               {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(out / "cache"),
                                "OPENAI_API_KEY": CANARY_KEY}),
            lambda: _mathjudge(["rejudge", str(source), "--output_path", str(builtin), "--judge", "local"],
                               {"MATHJUDGE_DATA_DIR": str(SHARED_DATA),
                                "MATHJUDGE_CACHE_DIR": str(builtin / "cache")}))
        calls = judge.call_count
        auth = {r.headers.get("authorization") for r in judge.requests}
    return {"rejudged": (out, proc, calls, auth), "builtin": (builtin, builtin_proc)}


@pytest.fixture(scope="module")
def rejudged(rejudge_runs):
    """gpt3-mixed's samples, judged again by the tolerant loopback judge."""
    out, proc, calls, auth = rejudge_runs["rejudged"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc, calls, auth


@pytest.mark.e2e
def test_rejudged_run_is_in_lm_evals_format_under_the_original_model_name(rejudged):
    out, proc, calls, auth = rejudged
    files = [str(p) for p in out.rglob("*.json*")]
    results_files = get_results_filenames(files)  # lm-eval's own helpers find them
    samples_files = get_sample_results_filenames(files)
    assert len(results_files) == 1 and len(samples_files) == 1
    assert get_file_task_name(Path(samples_files[0]).stem) == "gsm8k_gpt4em"
    assert Path(results_files[0]).parent.name == "gpt3-mixed.jsonl"  # <output_path>/<model>/ as lm_eval writes
    results = json.loads(Path(results_files[0]).read_text())
    assert results["model_name"] == "gpt3-mixed.jsonl" and results["lm_eval_version"]
    assert results["n-samples"]["gsm8k_gpt4em"] == {"original": 100, "effective": 100}
    judge = results["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]
    assert (judge["backend"], judge["model"], judge["run"]["judge_calls"]) == ("openai", JUDGE_MODEL, 100)
    assert results["configs"]["gsm8k_gpt4em"]["metadata"]["rejudged_from"][0].endswith(".jsonl")
    assert calls == 100 and auth == {f"Bearer {CANARY_KEY}"}
    samples = read_jsonl(Path(samples_files[0]))
    assert sorted(s["doc_id"] for s in samples) == list(range(100))
    assert {"doc", "resps", "filtered_resps", "doc_hash", "gpt4_exact_match", "judge_failed"} <= set(samples[0])
    for path in out.rglob("*"):
        if path.is_file():
            assert CANARY_KEY.encode() not in path.read_bytes(), path
    assert CANARY_KEY not in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_agreement_of_the_two_judges_and_the_leaderboard_refuses_them_side_by_side(runs, rejudged, capsys, tmp_path):
    out, *_ = rejudged
    samples = read_jsonl(runs.samples_file("gpt3-mixed"))
    gold = {r["question"]: float(r["answer"].split("####")[-1].replace(",", ""))
            for r in read_jsonl(SHARED_DATA / "gsm8k" / "test.jsonl")}
    strict = {s["doc_id"]: s["gpt4_exact_match"] for s in samples}
    tolerant = {s["doc_id"]: float(abs(_final_number(s["resps"][0][0]) - gold[s["doc"]["question"]]) <= 1)
                for s in samples}
    lenient_only = {d for d in strict if tolerant[d] and not strict[d]}
    assert len(lenient_only) >= 4  # at least the 4 answers gpt3-mixed moved to gold + 1

    assert main(["agreement", str(runs.run_dir("gpt3-mixed")), str(out), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    right = int(sum(strict.values()))
    assert m["confusion"] == {"1": {"1": right}, "0": {"1": len(lenient_only), "0": 100 - right - len(lenient_only)}}
    assert m["agreement"] == pytest.approx(1 - len(lenient_only) / 100)

    assert main(["leaderboard", str(runs.run_dir("gpt3-verifier")), str(out), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "judge differs: local:math-verify (gpt3-verifier.jsonl); openai:tolerant-judge (gpt3-mixed.jsonl)" in err
    args = ["leaderboard", str(runs.run_dir("gpt3-verifier")), str(out), "--out", str(tmp_path)]
    assert main([*args, "--allow-mixed"]) == 0
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO((tmp_path / "leaderboard.csv").read_text()))
            if r["metric"] == "gpt4_exact_match"}
    assert float(rows["gpt3-mixed.jsonl"]["value"]) == pytest.approx((right + len(lenient_only)) / 100)
    assert rows["gpt3-mixed.jsonl"]["judge"] == "openai:tolerant-judge" and rows["gpt3-mixed.jsonl"]["rank"] == "1"


@pytest.mark.e2e
def test_builtin_predict_only_gsm8k_run_is_judged_as_gsm8k_gpt4em(runs, rejudge_runs, tmp_path, capsys):
    out, proc = rejudge_runs["builtin"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert results["model_name"] == "gpt3-verifier.jsonl"
    assert results["n-samples"]["gsm8k_gpt4em"]["effective"] == BUILTIN_LIMIT
    labels = read_jsonl(LABELS)[:BUILTIN_LIMIT]
    metric = results["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"]
    assert metric == pytest.approx(sum(r["is_correct"] for r in labels) / BUILTIN_LIMIT)
    # verdict by verdict, matched by question text
    assert main(["agreement", str(out), "--labels", str(LABELS), "--label-field", "is_correct", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert (m["n"], m["agreement"]) == (BUILTIN_LIMIT, 1.0)
    # a doc set of 30 is not the 100 of the other runs: refused side by side
    assert main(["leaderboard", str(runs.run_dir("gpt3-fixed")), str(out), "--out", str(tmp_path / "b")]) == 2
    assert "data (doc set) differs" in capsys.readouterr().err


def test_bad_rejudge_input_says_what_to_do(tmp_path, capsys):
    stray = tmp_path / "outputs.jsonl"
    stray.write_text("{}\n")
    assert main(["rejudge", str(stray), "--output_path", str(tmp_path / "o")]) == 2
    assert "not named like lm-eval's samples files" in capsys.readouterr().err
    other = tmp_path / "samples_arc_easy_2026-01-01T00-00-00.000000.jsonl"
    other.write_text("{}\n")
    assert main(["rejudge", str(other), "--output_path", str(tmp_path / "o")]) == 2
    assert "task 'arc_easy': no data set of this plugin matches it" in capsys.readouterr().err
    assert main(["rejudge", str(other), "--output_path", str(tmp_path / "o"), "--metadata", "{judge"]) == 2
    assert "--metadata is not JSON" in capsys.readouterr().err


@pytest.mark.e2e
def test_rejudge_prints_lm_evals_result_table(rejudged):
    out, proc, calls, auth = rejudged
    lines = proc.stdout.splitlines()
    assert lines[0] == "gpt3-mixed.jsonl:"  # the model, then lm-eval's own table (make_table)
    [head] = [line for line in lines if line.startswith("|") and "Tasks" in line]
    assert [c.strip() for c in head.strip("|").split("|")][:3] == ["Tasks", "Version", "Filter"]
    [row] = [line for line in lines if "gpt4_exact_match" in line and line.startswith("|")]
    value = float(row.split("|")[7])
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["gsm8k_gpt4em"]
    assert value == pytest.approx(results["gpt4_exact_match,none"], abs=1e-4)
    assert lines[-1].startswith("written ") and lines[-1].endswith(".json")


@pytest.mark.e2e
def test_rejudge_name_sets_the_recorded_model_name_and_refuses_two_models(runs, tmp_path, capsys):
    out = tmp_path / "named"
    env = {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache")}
    proc = run_mathjudge(["rejudge", str(runs.samples_file("gpt3-fixed")), "--output_path", str(out),
                          "--judge", "local", "--name", "GPT-3 (fixed, re-judged)"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results_file = next(out.rglob("results_*.json"))
    assert json.loads(results_file.read_text())["model_name"] == "GPT-3 (fixed, re-judged)"
    assert proc.stdout.startswith("GPT-3 (fixed, re-judged):\n")
    two = [str(runs.samples_file("gpt3-fixed")), str(runs.samples_file("gpt3-mixed"))]
    assert main(["rejudge", *two, "--output_path", str(tmp_path / "o"), "--judge", "local", "--name", "x"]) == 2
    assert "--name names one model, but the samples files are of 2" in capsys.readouterr().err


@pytest.mark.e2e
def test_rejudge_budget_and_dry_run_messages_name_only_what_rejudge_takes(runs, tmp_path):
    env = {"MATHJUDGE_DATA_DIR": str(SHARED_DATA), "MATHJUDGE_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": CANARY_KEY}
    source = str(runs.samples_file("gpt3-fixed"))
    budget = run_mathjudge(["rejudge", source, "--output_path", str(tmp_path / "b"), "--judge", "openai:gpt-4o",
                            "--metadata", json.dumps({"judge_budget_usd": 1e-6, "judge_preflight": False,
                                                      "judge_prices": list_prices("gpt-4o"),
                                                      "judge_base_url": "http://127.0.0.1:9/v1"})], env)
    dry = run_mathjudge(["rejudge", source, "--output_path", str(tmp_path / "d"), "--judge", "openai:gpt-4o",
                         "--metadata", json.dumps({"judge_dry_run": True,
                                                   "judge_base_url": "http://127.0.0.1:9/v1"})], env)
    assert budget.returncode == 5 and "judge fewer samples (fewer samples files)" in budget.stderr, budget.stderr[-3000:]
    assert dry.returncode == 0 and "mathjudge rejudge: dry run (judge_dry_run=true)" in dry.stderr, dry.stderr[-3000:]
    for proc in (budget, dry):
        assert "--limit" not in proc.stderr and "--model mathjudge-replay" not in proc.stderr
        assert "Traceback" not in proc.stderr
