"""The judge's own error in the score: calibrate against labels, the Rogan-Gladen correction and its interval."""

from __future__ import annotations

import csv
import json

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core import stats
from tests.conftest import SHARED_DATA
from tests.reports_fixtures import three_runs

LABELS = SHARED_DATA / "gsm8k_outputs" / "gpt3_175b_verifier_first100.jsonl"  # upstream is_correct labels


@pytest.mark.parametrize("p, se, sp, theta", [
    (0.60, 1.0, 1.0, 0.60),              # a perfect judge: nothing to correct
    (0.62, 0.9, 0.8, (0.62 - 0.2) / 0.7),
    (0.10, 0.9, 0.8, 0.0),               # below what false positives alone give: kept at 0
    (0.95, 0.9, 0.95, 1.0),
    (0.50, 0.5, 0.5, None),              # a coin: no correction possible
])
def test_rogan_gladen_by_hand(p, se, sp, theta):
    got = stats.rogan_gladen(p, se, sp)
    assert (got != got) if theta is None else got == pytest.approx(theta)


def test_the_corrected_interval_covers_the_true_accuracy_in_simulation():
    """A judge with known sensitivity 0.9 and specificity 0.8 grades 200 problems of a model that is right
    on 60% of them; 150 labelled samples estimate its error rates. Over 1,000 seeded runs the interval
    (problems and labels resampled) holds the true 0.6 at least 93% of the time, and the corrected
    estimate is unbiased where the raw score is not."""
    np = pytest.importorskip("numpy")
    theta, se, sp, n, m, runs = 0.6, 0.9, 0.8, 200, 150, 1000
    covered, estimates, raws = 0, [], []
    for seed in range(runs):
        rng = np.random.default_rng(10_000 + seed)
        truth = rng.random(n) < theta
        verdict = np.where(truth, rng.random(n) < se, rng.random(n) < 1 - sp).astype(float)
        labelled = rng.random(m) < 0.5
        judged = np.where(labelled, rng.random(m) < se, rng.random(m) < 1 - sp)
        cells = stats.Calibration(int((labelled & judged).sum()), int((labelled & ~judged).sum()),
                                  int((~labelled & ~judged).sum()), int((~labelled & judged).sum()))
        result = stats.corrected_interval(list(verdict), cells, iters=1000, seed=seed)
        covered += result.ci_low <= theta <= result.ci_high
        estimates.append(result.value)
        raws.append(verdict.mean())
    assert covered / runs >= 0.93
    assert abs(np.mean(estimates) - theta) < 0.01 < abs(np.mean(raws) - theta)  # raw: 0.62 on average


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return three_runs(tmp_path_factory)


@pytest.mark.e2e
def test_the_docs_example_compares_like_with_like(runs, capsys, tmp_path):
    """gpt3-mixed changed 10 answers; the labels judged the original responses. Those 10 labels are left
    out, the judge is right on the 90 others, and the corrected score is the raw one."""
    assert main(["calibrate", str(runs.run_dir("gpt3-mixed")), "--labels", str(LABELS),
                 "--label-field", "is_correct", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    m = report["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert (m["n"], m["excluded_response_differs"], m["excluded_not_in_run"]) == (90, 10, 0)
    assert (m["sensitivity"], m["specificity"]) == (1.0, 1.0)
    assert main(["calibrate", str(runs.run_dir("gpt3-mixed")), "--labels", str(LABELS),
                 "--label-field", "is_correct"]) == 0
    assert "| 90 | 1.000 [" in capsys.readouterr().out
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(report))
    out = tmp_path / "board"
    assert main(["leaderboard", str(runs.run_dir("gpt3-mixed")), "--out", str(out), "--calibration", str(path)]) == 0
    row = next(r for r in csv.DictReader(open(out / "leaderboard.csv")) if r["metric"] == "gpt4_exact_match")
    assert float(row["corrected"]) == pytest.approx(float(row["value"])) == pytest.approx(0.60)


@pytest.mark.e2e
def test_calibrate_reports_the_judges_error_rates_and_the_leaderboard_corrects_with_them(runs, capsys, tmp_path):
    # Labels without the responses they judged apply to gpt3-mixed as given: against them its judge has
    # 54 TP, 6 FP, 4 FN, 36 TN (the 10 changed answers)
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "response"}) + "\n"
                            for r in map(json.loads, LABELS.read_text().splitlines())))
    assert main(["calibrate", str(runs.run_dir("gpt3-mixed")), "--labels", str(bare),
                 "--label-field", "is_correct", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    m = report["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]
    assert (m["true_positive"], m["false_positive"], m["false_negative"], m["true_negative"]) == (54, 6, 4, 36)
    assert m["sensitivity"] == pytest.approx(54 / 58) and m["specificity"] == pytest.approx(36 / 42)
    assert m["sensitivity_interval"]["ci_low"] < 54 / 58 < m["sensitivity_interval"]["ci_high"]
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(report))

    out = tmp_path / "board"
    assert main(["leaderboard", str(runs.run_dir("gpt3-mixed")), str(runs.run_dir("gpt3-verifier")), "--out",
                 str(out), "--calibration", str(path)]) == 0
    rows = {r["model"]: r for r in csv.DictReader(open(out / "leaderboard.csv")) if r["metric"] == "gpt4_exact_match"}
    mixed = next(r for name, r in rows.items() if "mixed" in name)
    raw = float(mixed["value"])
    assert raw == pytest.approx(0.60)
    expected = (raw + 36 / 42 - 1) / (54 / 58 + 36 / 42 - 1)
    assert float(mixed["corrected"]) == pytest.approx(expected)
    low, high = float(mixed["corrected_ci_low"]), float(mixed["corrected_ci_high"])
    assert low < expected < high
    assert high - low > float(mixed["ci_high"]) - float(mixed["ci_low"])  # the judge's error widens it
    assert "corrected [95% CI, judge error included]" in (out / "leaderboard.md").read_text()

    # a calibration of another judge is not applied to these runs
    report["tasks"]["gsm8k_gpt4em"]["gpt4_exact_match"]["judge"] = "openai:gpt-4o @ 1"
    path.write_text(json.dumps(report))
    assert main(["leaderboard", str(runs.run_dir("gpt3-mixed")), "--out", str(out), "--calibration", str(path)]) == 0
    text = capsys.readouterr().out
    assert "the calibration was measured on openai:gpt-4o @ 1" in text
    rows = list(csv.DictReader(open(out / "leaderboard.csv")))
    assert all(r["corrected"] == "" for r in rows)


@pytest.mark.e2e
def test_a_calibration_file_that_is_not_one_is_a_clear_error(tmp_path, runs, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tasks": {"gsm8k_gpt4em": {"gpt4_exact_match": {"n": 3}}}}))
    assert main(["leaderboard", str(runs.run_dir("gpt3-mixed")), "--out", str(tmp_path / "o"),
                 "--calibration", str(bad)]) != 0
    assert "has no judge and four whole cells" in capsys.readouterr().err
