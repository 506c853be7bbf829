"""Reports on runs with k samples per problem: per-problem values, intervals and paired tests.

Three replayed "models" on the first 6 GSM8K docs, judged by the real lm_eval CLI with the
local judge (offline): A and B with repeats 4 and known correct counts per problem, C with
repeats 2. The leaderboard and diff must use the per-problem means (n = 6 problems, not 24
samples), a paired permutation test on them (checked against SciPy), and refuse to put runs
with different k side by side unless --allow-mixed.
"""

from __future__ import annotations

import csv
import json
import math

import pytest

from lm_eval_mathjudge.__main__ import main
from lm_eval_mathjudge.core.data_sets import gsm8k_answer
from lm_eval_mathjudge.core.errors import ConfigError
from tests.conftest import read_jsonl, write_data_slice

pytestmark = pytest.mark.e2e

TASK = "gsm8k_gpt4em"
CORRECT = {"model-a": (4, [4, 3, 2, 1, 0, 4]), "model-b": (4, [2, 1, 2, 0, 0, 1]), "model-c": (2, [2, 1, 1, 0, 0, 2])}


def _run(tmp, root, docs, name):
    from tests.e2e import run_lm_eval

    k, counts = CORRECT[name]
    path = tmp / f"{name}.jsonl"
    with open(path, "w") as fh:
        for i, (doc, c) in enumerate(zip(docs, counts)):
            gold = gsm8k_answer(doc["answer"])
            answers = [f"So \\boxed{{{gold}}}"] * c + [f"So \\boxed{{{9000 + i * 10 + j}}}" for j in range(k - c)]
            fh.write(json.dumps({"question": doc["question"], "responses": answers}) + "\n")
    run = run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={path}", "--tasks", TASK,
                       "--log_samples", "--metadata", json.dumps({"repeats": k, "judge_backend": "local"})],
                      {"MATHJUDGE_DATA_DIR": str(root), "MATHJUDGE_CACHE_DIR": str(tmp / "cache")}, tmp / name)
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kruns")
    root = write_data_slice(tmp / "data", 6)
    docs = read_jsonl(root / "gsm8k" / "test.jsonl")
    return {name: _run(tmp, root, docs, name) for name in CORRECT}


def _means(name):
    k, counts = CORRECT[name]
    return [c / k for c in counts]


def _scipy_p(a, b):
    import numpy as np

    scipy = pytest.importorskip("scipy.stats")
    res = scipy.permutation_test((np.array(a), np.array(b)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                 permutation_type="samples", alternative="two-sided", n_resamples=10**6)
    return float(res.pvalue)


def test_the_leaderboard_ranks_per_problem_means_with_a_paired_permutation_test(runs, tmp_path):
    assert main(["leaderboard", str(runs["model-a"]), str(runs["model-b"]), "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "leaderboard.csv")))
    avg = {r["model"].rsplit("/", 1)[-1]: r for r in rows if r["metric"] == "gpt4_exact_match_avg@4"}
    a, b = avg["model-a.jsonl"], avg["model-b.jsonl"]
    means_a, means_b = _means("model-a"), _means("model-b")
    assert float(a["value"]) == pytest.approx(sum(means_a) / 6) and int(a["n"]) == 6 and a["k"] == "4"
    sd = math.sqrt(sum((v - sum(means_a) / 6) ** 2 for v in means_a) / 5)  # over the 6 problems
    assert float(a["ci_high"]) - float(a["ci_low"]) == pytest.approx(2 * 1.959963984540054 * sd / math.sqrt(6))
    assert a["rank"] == "1" and b["rank"] == "2"
    assert b["p_test"] == "paired_permutation"
    assert float(b["p_value"]) == pytest.approx(_scipy_p(means_b, means_a))
    assert float(b["diff_vs_top"]) == pytest.approx((sum(means_b) - sum(means_a)) / 6)
    text = (tmp_path / "leaderboard.md").read_text()
    assert "p (paired permutation)" in text and "gpt4_exact_match_pass@4" in text and "| k |" in text


def test_diff_pairs_problems_and_tests_their_means(runs, capsys):
    assert main(["diff", str(runs["model-a"]), str(runs["model-b"]), "--json"]) == 0
    found = {c["metric"]: c for c in json.loads(capsys.readouterr().out)["comparisons"]}
    avg = found["gpt4_exact_match_avg@4"]
    assert avg["n"] == 6 and avg["test"] == "paired_permutation"
    assert avg["p_value"] == pytest.approx(_scipy_p(_means("model-a"), _means("model-b")))
    # maj@4 (the wrong answers all differ): A's gold group is largest on problems 0, 1, 2, 5; problem 3 is a
    # four-way tie of single answers (1/4), problem 4 has no right answer
    assert found["gpt4_exact_match_maj@4"]["a"] == pytest.approx((1 + 1 + 1 + 0.25 + 0 + 1) / 6)


def test_runs_with_different_k_are_refused_side_by_side_unless_allowed(runs, tmp_path, capsys):
    with pytest.raises(ConfigError, match="samples per problem"):
        from lm_eval_mathjudge.reports import leaderboard, runs as runs_mod

        leaderboard.build(runs_mod.load_runs([str(runs["model-a"]), str(runs["model-c"])]))
    assert main(["leaderboard", str(runs["model-a"]), str(runs["model-c"]), "--out", str(tmp_path), "--allow-mixed"]) == 0
    assert main(["diff", str(runs["model-a"]), str(runs["model-c"])]) != 0
    assert "4 samples per problem" in capsys.readouterr().err
