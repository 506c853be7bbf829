"""`mathjudge diff` and `mathjudge agreement` on real lm_eval runs, against counts known by construction."""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge.__main__ import main
from tests.conftest import SHARED_DATA, read_jsonl
from tests.reports_fixtures import expected_correct, three_runs

pytestmark = pytest.mark.e2e

LABELS = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"  # upstream is_correct labels


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


def _json(capsys, *args) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def _kappa(both: int, a_only: int, b_only: int, neither: int) -> float:
    n = both + a_only + b_only + neither
    po = (both + neither) / n
    pe = ((both + a_only) * (both + b_only) + (neither + b_only) * (neither + a_only)) / (n * n)
    return (po - pe) / (1 - pe)


def test_diff_gives_mcnemar_and_a_bootstrap_interval_per_task_and_metric(runs, capsys):
    out = _json(capsys, "diff", str(runs.run_dir("gpt3-verifier")), str(runs.run_dir("gpt3-mixed")), "--json")
    assert (out["a"], out["b"], out["seed"], out["iters"]) == ("gpt3-verifier.jsonl", "gpt3-mixed.jsonl", 0, 10_000)
    main_metric = next(c for c in out["comparisons"] if c["metric"] == "gpt4_exact_match")
    assert main_metric["task"] == "gsm8k_gpt4em" and main_metric["n"] == 100
    assert (main_metric["a_only"], main_metric["b_only"]) == (4, 6)
    assert main_metric["p_value"] == pytest.approx(772 / 1024)  # 2 * (1+10+45+120+210) / 2^10
    assert main_metric["diff"] == pytest.approx(0.58 - 0.60)
    assert main_metric["ci_low"] < -0.02 < main_metric["ci_high"] and main_metric["test"] == "mcnemar_exact"
    failed = next(c for c in out["comparisons"] if c["metric"] == "judge_failed")
    assert (failed["p_value"], failed["ci_low"], failed["ci_high"]) == (1.0, 0.0, 0.0)


def test_diff_is_significant_when_one_model_only_gains(runs, capsys):
    assert main(["diff", str(runs.run_dir("gpt3-fixed")), str(runs.run_dir("gpt3-verifier"))]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "| gpt4_exact_match |" in line)
    assert row.split(" | ")[2:] == ["100", "0.680", "0.580", row.split(" | ")[5], "10", "0", "0.002", "mcnemar_exact |"]
    low, high = (float(x) for x in row.split(" | ")[5].split("[")[1].rstrip("]").split(", "))
    assert 0 < low <= 0.10 <= high  # the interval of the gain excludes 0


def test_agreement_with_the_upstream_labels(runs, capsys, tmp_path):
    """The local judge on the original solutions agrees with every upstream label."""
    out = _json(capsys, "agreement", str(runs.run_dir("gpt3-verifier")), "--labels", str(LABELS),
                "--label-field", "is_correct", "--json")
    m = out["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert (m["n"], m["agreement"], m["kappa"]) == (100, 1.0, 1.0)
    assert m["confusion"] == {"1": {"1": 58}, "0": {"0": 42}}

    # gpt3-mixed changed 10 answers: the labels were given to the original responses, so those 10 are left out
    out = _json(capsys, "agreement", str(runs.run_dir("gpt3-mixed")), "--labels", str(LABELS),
                "--label-field", "is_correct", "--json")
    m = out["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert (m["n"], m["excluded_response_differs"], m["excluded_not_in_run"], m["agreement"]) == (90, 10, 0, 1.0)

    # Labels that do not say which response they judged apply as given: the judge "disagrees" on those 10 docs.
    changed = expected_correct()["gpt3-mixed"] ^ expected_correct()["gpt3-verifier"]
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "response"}) + "\n"
                            for r in read_jsonl(LABELS)))
    dis = tmp_path / "dis.jsonl"
    out = _json(capsys, "agreement", str(runs.run_dir("gpt3-mixed")), "--labels", str(bare),
                "--label-field", "is_correct", "--disagreements", str(dis), "--json")
    m = out["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert m["confusion"] == {"1": {"1": 54, "0": 6}, "0": {"1": 4, "0": 36}}
    assert (m["n"], m["agreement"]) == (100, 0.9) and m["kappa"] == pytest.approx(_kappa(54, 6, 4, 36))
    rows = read_jsonl(dis)
    assert {r["doc_id"] for r in rows} == changed and len(rows) == 10
    questions = {r["question"]: r for r in read_jsonl(LABELS)}
    for row in rows:
        assert row["question"] in questions and row["response"].rstrip().splitlines()[-1].startswith("A: ")
        assert (row["a"], row["b"]) == (float(not questions[row["question"]]["is_correct"]),
                                         float(questions[row["question"]]["is_correct"]))
        assert row["a_reply"].splitlines()[-1].startswith("Final Verdict: ")


def test_agreement_of_two_runs_leaves_out_pairs_whose_responses_differ(runs, capsys):
    out = _json(capsys, "agreement", str(runs.run_dir("gpt3-verifier")), str(runs.run_dir("gpt3-fixed")), "--json")
    m = out["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    # the 10 fixed docs have other responses: comparing their verdicts would not compare judges
    assert (m["n"], m["excluded_response_differs"], m["agreement"], m["kappa"]) == (90, 10, 1.0, 1.0)


def test_labels_by_doc_id_and_bad_labels_files(runs, capsys, tmp_path):
    by_id = tmp_path / "by_id.jsonl"
    by_id.write_text("".join(json.dumps({"doc_id": r["doc_id"], "label": "correct" if r["is_correct"] else "incorrect"})
                             + "\n" for r in read_jsonl(LABELS)[:20]))
    out = _json(capsys, "agreement", str(runs.run_dir("gpt3-verifier")), "--labels", str(by_id), "--json")
    assert out["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]["n"] == 20

    # a label for a doc the run does not have is left out and counted
    with by_id.open("a") as fh:
        fh.write(json.dumps({"doc_id": 4000, "label": "correct"}) + "\n")
        fh.write(json.dumps({"question": "A question no run here was asked?", "label": "incorrect"}) + "\n")
    out = _json(capsys, "agreement", str(runs.run_dir("gpt3-verifier")), "--labels", str(by_id), "--json")
    m = out["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert (m["n"], m["excluded_not_in_run"]) == (20, 2)

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"doc_id": 0, "label": "maybe"}) + "\n")
    assert main(["agreement", str(runs.run_dir("gpt3-verifier")), "--labels", str(bad)]) == 2
    assert "bad.jsonl:1: label 'maybe' is not true/false" in capsys.readouterr().err
    assert main(["agreement", str(runs.run_dir("gpt3-verifier")), "--labels", str(LABELS)]) == 2
    assert "has no 'label' field (choose the field with --label-field)" in capsys.readouterr().err
    assert main(["agreement", str(runs.run_dir("gpt3-verifier"))]) == 2
    assert "give either a second run B or --labels FILE" in capsys.readouterr().err


def test_a_folder_with_several_models_is_not_one_run(runs, capsys):
    assert main(["diff", str(runs.out), str(runs.run_dir("gpt3-fixed"))]) == 2
    assert "holds results of 3 models" in capsys.readouterr().err
