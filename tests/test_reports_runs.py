"""Reading lm-eval output: model names (never a secret), reruns, bad input; the CLI stays cheap to import."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.reports.runs import ReportError, load_runs, model_name
from tests.e2e import TIMEOUT_S

KEY = "sk-canary-7f3d9c2b4a1e8f6d"


@pytest.mark.parametrize("results, expected", [
    ({"model_name": "Qwen/Qwen2.5-7B-Instruct"}, "Qwen/Qwen2.5-7B-Instruct"),
    # older lm-eval: no model_name; lm-eval's own key order, never a credential-named key
    ({"config": {"model_args": "pretrained=EleutherAI/pythia-160m,dtype=float16"}}, "EleutherAI/pythia-160m"),
    ({"config": {"model_args": {"model": "gpt-4o", "api_key": KEY}}}, "gpt-4o"),
    ({"config": {"model_args": f"api_key={KEY},base_url=http://127.0.0.1:8000/v1"}}, "unknown-model"),
    # a "name" that is a key is hidden, not printed
    ({"model_name": KEY}, "***"),
    ({"config": {"model_args": f"model={KEY}"}}, "***"),
])
def test_model_name_is_the_recorded_one_and_never_a_key(results, expected):
    assert model_name(results) == expected


def _results(path, model, task="gsm8k_gpt4em", value=0.5, date=1.0, model_args=None, prompt="exact_match@abc"):
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"results": {task: {"gpt4_exact_match,none": value, "gpt4_exact_match_stderr,none": 0.05}},
            "configs": {task: {"dataset_path": "openai/gsm8k", "metadata": {"judge": {
                "backend": "local", "model": "math-verify", "prompt_version": prompt}}}},
            "n-samples": {task: {"original": 100, "effective": 100}}, "date": date}
    if model is not None:
        data["model_name"] = model
    if model_args is not None:
        data["config"] = {"model_args": model_args}
    path.write_text(json.dumps(data))


def test_a_rerun_of_the_same_task_replaces_the_older_result_and_says_so(tmp_path):
    _results(tmp_path / "m" / "results_2026-01-01T00-00-00.json", "m", value=0.4, date=1.0)
    _results(tmp_path / "m" / "results_2026-01-02T00-00-00.json", "m", value=0.6, date=2.0)
    _results(tmp_path / "m" / "results_2026-01-03T00-00-00.json", "m", task="math500_gpt4em", date=3.0)
    (run,) = load_runs([str(tmp_path)])
    assert run.tasks["gsm8k_gpt4em"].metrics["gpt4_exact_match,none"] == (0.6, 0.05)
    assert set(run.tasks) == {"gsm8k_gpt4em", "math500_gpt4em"}
    assert run.superseded == [str(tmp_path / "m" / "results_2026-01-01T00-00-00.json")]


def test_a_second_result_of_one_model_and_task_judged_differently_is_not_a_rerun(tmp_path):
    _results(tmp_path / "m" / "results_2026-01-01T00-00-00.json", "m", date=1.0)
    _results(tmp_path / "m" / "results_2026-01-02T00-00-00.json", "m", date=2.0, prompt="exact_match@new")
    with pytest.raises(ReportError, match=r"m has two results for gsm8k_gpt4em judged differently \(local:math-verify "
                                          r"@ exact_match@abc in .*\); neither replaces the other, since they are different "
                                          r"measurements: pass only one of them"):
        load_runs([str(tmp_path)])


def test_predict_only_results_are_named_not_ranked(tmp_path, capsys):
    _results(tmp_path / "m" / "results_2026-01-01T00-00-00.json", "m")
    unscored = tmp_path / "p" / "results_2026-01-01T00-00-00.json"
    _results(unscored, "p")
    data = json.loads(unscored.read_text())
    data["results"]["gsm8k_gpt4em"] = {"bypass,none": 999, "bypass_stderr,none": "N/A"}
    unscored.write_text(json.dumps(data))
    assert main(["leaderboard", str(tmp_path), "--out", str(tmp_path / "o")]) == 0
    text = (tmp_path / "o" / "leaderboard.md").read_text()
    assert f"p: {unscored} has no scores (--predict_only?); judge it with mathjudge rejudge" in text
    assert "| p |" not in text


def test_results_without_samples_get_a_normal_interval_and_no_test(tmp_path, capsys):
    _results(tmp_path / "a" / "results_2026-01-01T00-00-00.json", "model-a", value=0.7)
    _results(tmp_path / "b" / "results_2026-01-01T00-00-00.json", None, value=0.5,
             model_args={"model": "model-b", "api_key": KEY})
    assert main(["leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0
    a, b = csv.DictReader(io.StringIO((tmp_path / "out" / "leaderboard.csv").read_text()))
    assert (a["model"], b["model"]) == ("model-a", "model-b")  # ranked; model-b's name from its model_args
    for row, value in ((a, 0.7), (b, 0.5)):  # mean ± 1.96 x 0.05 from the results file
        assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx((value - 0.098, value + 0.098), abs=1e-4)
        assert (row["ci_method"], row["p_value"], row["diff_vs_top"]) == ("normal", "", "")
    notes = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "model-b on gsm8k_gpt4em: no samples file, so no paired test" in notes
    for path in (tmp_path / "out").iterdir():
        assert KEY not in path.read_text(errors="replace")
    assert KEY not in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    ("not json", "holds no complete results file"),  # what a kill left half-written, with nothing whole beside it
    ('{"model_name": "m"}', "has no 'results' object"),
])
def test_unreadable_results_are_named(tmp_path, capsys, content, message):
    (tmp_path / "results_x.json").write_text(content)
    assert main(["leaderboard", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_missing_paths_and_empty_folders_say_what_to_pass(tmp_path, capsys):
    assert main(["leaderboard", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    with pytest.raises(ReportError, match="no results_\\*.json inside; pass lm_eval's --output_path folder"):
        load_runs([str(tmp_path)])


@pytest.mark.e2e
def test_the_cli_imports_no_numpy_lm_eval_or_matplotlib_until_a_command_runs():
    code = ("import sys, lm_eval_mathjudge.__main__ as m, lm_eval_mathjudge.reports.cli\n"
            "try:\n    m.main(['leaderboard', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(n for n in ('numpy', 'lm_eval', 'matplotlib', 'openai') if n in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def _vlm_results(path, model, final, intermediate):
    path.parent.mkdir(parents=True, exist_ok=True)
    task = {"final_correct,none": final, "final_correct_stderr,none": 0.05, "intermediate_correct,none": intermediate,
            "intermediate_correct_stderr,none": 0.05, "judge_failed,none": 0.0, "judge_failed_stderr,none": 0.0}
    group = {"final_correct,none": final, "final_correct_stderr,none": "N/A"}
    path.write_text(json.dumps({
        "results": {"mathjudge_vlmjudge": group, "gsm8k_vlmjudge": task}, "model_name": model,
        "group_subtasks": {"mathjudge_vlmjudge": ["gsm8k_vlmjudge"]},
        "higher_is_better": {"gsm8k_vlmjudge": {"final_correct": True, "intermediate_correct": True,
                                                "judge_failed": False}},
        "configs": {"gsm8k_vlmjudge": {"dataset_path": "openai/gsm8k", "metadata": {"judge": {
            "backend": "gemini", "model": "gemini-2.5-pro", "prompt_version": "vlm_judge@abc"}}}},
        "n-samples": {"gsm8k_vlmjudge": {"original": 100, "effective": 100}}, "date": 1.0}))


def test_vlm_tasks_rank_by_final_correct_and_groups_get_rows_without_tests(tmp_path):
    _vlm_results(tmp_path / "a" / "results_2026-01-01T00-00-00.json", "a", final=0.5, intermediate=0.9)
    _vlm_results(tmp_path / "b" / "results_2026-01-01T00-00-00.json", "b", final=0.7, intermediate=0.2)
    assert main(["leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "o")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "o" / "leaderboard.csv").read_text())))
    task_rows = [r for r in rows if r["task"] == "gsm8k_vlmjudge"]
    assert [(r["model"], r["metric"], r["rank"]) for r in task_rows[:2]] == [("b", "final_correct", "1"),
                                                                            ("a", "final_correct", "2")]
    assert [r["model"] for r in task_rows if r["metric"] == "intermediate_correct"] == ["b", "a"]  # rank order kept
    group = [r for r in rows if r["task"] == "mathjudge_vlmjudge"]
    assert [(r["model"], r["ci_method"], r["p_value"]) for r in group] == [("b", "none", ""), ("a", "none", "")]


@pytest.mark.parametrize("source, chosen, targets", [
    ("gsm8k_gpt4em", None, ["gsm8k_gpt4em"]),
    ("gsm8k_vlmjudge", None, ["gsm8k_vlmjudge"]),
    ("gsm8k_gpt4em", ["gsm8k_vlmjudge"], ["gsm8k_vlmjudge"]),  # another judge for the same data
    ("gsm8k", None, ["gsm8k_gpt4em"]),  # lm-eval built-ins
    ("gsm8k_cot_zeroshot", None, ["gsm8k_gpt4em"]),
    ("minerva_math500", None, ["math500_gpt4em"]),
    ("minerva_math_algebra", None, ["math500_gpt4em"]),  # only its MATH-500 problems will match
    ("aime24", None, ["aime24_gpt4em"]),
    ("aime25", ["aime25_vlmjudge", "gsm8k_gpt4em"], ["aime25_vlmjudge"]),
])
def test_rejudge_maps_task_names_to_the_plugin_tasks_of_the_same_data(source, chosen, targets):
    from lm_eval_mathjudge.reports.rejudge import targets_for

    assert targets_for(source, chosen) == targets


def test_lm_evals_aime_of_every_year_goes_to_every_aime_set_of_ours():
    """1983-2024: each sample is routed by its question text to the set that holds it."""
    from lm_eval_mathjudge.reports.rejudge import targets_for

    targets = targets_for("aime", None)
    assert targets[:2] == ["aime24_gpt4em", "aime25_gpt4em"]
    assert not {"gsm8k_gpt4em", "math500_gpt4em", "omnimath_gpt4em"} & set(targets)


def test_rejudge_refuses_tasks_of_other_data():
    from lm_eval_mathjudge.reports.rejudge import targets_for

    with pytest.raises(ReportError, match="--tasks math500_gpt4em has no task for the data of gsm8k"):
        targets_for("gsm8k", ["math500_gpt4em"])
    with pytest.raises(ReportError, match="task 'mmlu': no data set of this plugin matches it"):
        targets_for("mmlu", None)


def test_rejudge_matches_docs_by_question_text_not_doc_id():
    """A built-in `aime` run: its doc ids index AIME 1983-2024, ours index one year."""
    from lm_eval_mathjudge.reports.rejudge import Source, plan
    from lm_eval_mathjudge.reports.runs import Sample

    def sample(doc_id, question, response):
        return Sample("aime", doc_id, question, response, {}, None)

    ours = {"aime24_gpt4em": [{"problem": "P24-a", "mj_question": "P24-a"},
                              {"problem": "P24-b", "mj_question": "P24-b"}],
            "aime25_gpt4em": [{"problem": "P25-a", "mj_question": "P25-a"}]}
    source = Source("samples_aime_x.jsonl", "aime", "m", [
        sample(900, "P24-b", "\\boxed{7}"), sample(3, "P1983-1", "\\boxed{1}"), sample(931, "P25-a", "\\boxed{9}"),
        sample(901, "  P24-a\n", "\\boxed{5}")])  # whitespace differences do not matter
    work = plan([source], ours, None)
    assert work.indices == {"aime24_gpt4em": [1, 0], "aime25_gpt4em": [0]}
    assert work.skipped == {"aime": 1}  # 1983 is in no data set of ours
    assert [(r["task"], r["question"], r["response"], r["source"]) for r in work.records] == [
        ("aime24_gpt4em", "P24-b", "\\boxed{7}", "aime:900"), ("aime25_gpt4em", "P25-a", "\\boxed{9}", "aime:931"),
        ("aime24_gpt4em", "P24-a", "\\boxed{5}", "aime:901")]
