"""k samples per problem: the estimators on hand-computed tables, the majority vote, settings and replay."""

from __future__ import annotations

import json
from math import comb

import pytest

from lm_eval_mathjudge.core import stats
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.core.judges import EXACT_MATCH, VLM
from lm_eval_mathjudge.core.samples import KSpec, k_order, majority, problem_metrics


def _chen(n: int, c: int, k: int) -> float:
    """Chen et al. (2021), eq. 1 for one problem, straight from the binomials."""
    return 1.0 if n - c < k else 1 - comb(n - c, k) / comb(n, k)


@pytest.mark.parametrize("n, c, k, by_hand", [
    (4, 0, 1, 0.0), (4, 0, 4, 0.0),            # all wrong
    (4, 4, 1, 1.0), (4, 4, 4, 1.0),            # all right
    (4, 1, 1, 1 / 4), (4, 1, 2, 1 / 2), (4, 1, 4, 1.0),
    (4, 2, 2, 5 / 6),                          # 1 - C(2,2)/C(4,2)
    (16, 3, 4, 1 - 715 / 1820),                 # 1 - C(13,4)/C(16,4)
    (16, 1, 16, 1.0), (16, 15, 1, 15 / 16),
    (10, 2, 3, 1 - 56 / 120),                  # 1 - C(8,3)/C(10,3)
])
def test_pass_at_k_matches_the_binomial_formula(n, c, k, by_hand):
    assert stats.pass_at_k(n, c, k) == pytest.approx(by_hand)
    assert stats.pass_at_k(n, c, k) == pytest.approx(_chen(n, c, k))


def test_pass_at_k_is_exact_for_large_n():
    assert stats.pass_at_k(200, 7, 100) == pytest.approx(_chen(200, 7, 100))


@pytest.mark.parametrize("n, c, k", [(4, 1, 0), (4, 1, 5), (4, 5, 1), (4, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        stats.pass_at_k(n, c, k)


@pytest.mark.parametrize("classes, verdicts, score, tied", [
    ([0, 0, 1, 2], [1, 1, 0, 0], 1.0, 1),           # clear majority, right
    ([0, 1, 1, 2], [1, 0, 0, 0], 0.0, 1),           # clear majority, wrong (one right answer loses)
    ([0, 0, 1, 1], [1, 1, 0, 0], 0.5, 2),           # a tie of two: the mean of the tied groups
    ([0, 1, 2, None], [1, 0, 0, 0], 1 / 3, 3),      # three-way tie; no answer is no group
    ([None, None, 0, None], [0, 0, 0, 0], 0.0, 1),  # one stated answer beats three without one
    ([None] * 4, [0, 0, 0, 0], 0.0, 0),             # no answer at all: no majority
    ([0, 0, 0, 1], [1, 0, 1, 0], 2 / 3, 1),         # the judge split on equivalent answers: their mean
])
def test_majority_vote(classes, verdicts, score, tied):
    vote = majority(classes, verdicts)
    assert vote.score == pytest.approx(score) and vote.tied == tied


def _scores(judge, verdicts, failed=()):
    out = []
    for i, v in enumerate(verdicts):
        s = judge.scores(None) if i in failed else {**{m: float(v) for m in judge.metric_names}, "judge_failed": 0.0}
        out.append(s)
    return out


def test_problem_metrics_names_carry_the_estimator():
    spec = KSpec.of(EXACT_MATCH, 4, [1, 2, 4])
    metrics, vote = problem_metrics(spec, _scores(EXACT_MATCH, [1, 0, 0, 1]), [0, 1, 1, 0])
    assert metrics == pytest.approx({"gpt4_exact_match_avg@4": 0.5, "gpt4_exact_match_pass@1": 0.5,
                                     "gpt4_exact_match_pass@2": 5 / 6, "gpt4_exact_match_pass@4": 1.0,
                                     "gpt4_exact_match_maj@4": 0.5, "judge_failed": 0.0})
    assert vote.tied == 2


def test_a_failed_sample_counts_as_failed_and_not_correct():
    spec = KSpec.of(EXACT_MATCH, 4)
    metrics, _ = problem_metrics(spec, _scores(EXACT_MATCH, [1, 1, 1, 1], failed={3}), [0, 0, 0, 0])
    assert metrics["judge_failed"] == 0.25 and metrics["gpt4_exact_match_avg@4"] == 0.75
    assert metrics["gpt4_exact_match_pass@1"] == 0.75 and metrics["gpt4_exact_match_pass@4"] == 1.0
    assert metrics["gpt4_exact_match_maj@4"] == 0.75  # the failed sample's 0 is in its group's mean


def test_vlm_metrics_avg_every_field_and_pass_maj_on_the_primary():
    names = KSpec.of(VLM, 5).names()
    assert {"final_correct_avg@5", "intermediate_correct_avg@5", "action_reflection_avg@5",
            "final_correct_pass@1", "final_correct_pass@5", "final_correct_maj@5"} <= set(names)
    assert names["judge_failed"] is False and not any(n.startswith("intermediate_correct_pass") for n in names)


def test_problem_metrics_refuses_a_problem_with_the_wrong_number_of_samples():
    with pytest.raises(ValueError, match="repeats is 4"):
        problem_metrics(KSpec.of(EXACT_MATCH, 4), _scores(EXACT_MATCH, [1, 0, 1]), [0, 0, 0])


def test_mean_interval_is_over_the_values_given():
    iv = stats.mean_interval([1.0, 0.5, 0.25])
    assert iv.n == 3 and iv.mean == pytest.approx(7 / 12)
    scipy = pytest.importorskip("scipy.stats")
    assert iv.stderr == pytest.approx(float(scipy.sem([1.0, 0.5, 0.25])))


# ---------------------------------------------------------------------- equivalence classes (local rule)
@pytest.mark.local_judge
@pytest.mark.parametrize("gold, responses, classes", [
    ("1/2", ["so \\boxed{1/2}", "the answer is 0.5", "\\boxed{\\frac12}", "\\boxed{\\frac{1}{2}}", "\\boxed{2}"],
     [0, 0, 0, 0, 1]),
    ("18", ["\\boxed{18}", "\\boxed{18.0}", "The answer is $18", "\\boxed{20}", "I cannot solve this."],
     [0, 0, 0, 1, None]),
    ("18", ["\\boxed{18} or maybe \\boxed{20}", "\\boxed{20}", "\\boxed{20}"], [None, 0, 0]),
])
def test_answers_are_grouped_by_equivalence_with_the_local_rule(gold, responses, classes):
    from lm_eval_mathjudge.backends.local import LocalBackend

    backend = LocalBackend()
    try:
        assert backend.answer_classes(gold, responses) == classes
    finally:
        backend.close()


# ---------------------------------------------------------------------- configuration
def _configure(metadata, **config):
    from lm_eval_mathjudge.harness import ksamples
    from lm_eval_mathjudge.settings.layers import resolve_run_options

    config = {"task": "t", "metadata": metadata, "metric_list": [{"metric": "gpt4_exact_match"},
                                                                 {"metric": "judge_failed"}], **config}
    return ksamples.configure(config, EXACT_MATCH, resolve_run_options("exact_match", None, metadata, {})), config


def test_metadata_repeats_wins_over_the_yaml_and_sets_up_the_task():
    spec, config = _configure({"repeats": 3}, repeats=8)
    assert spec.k == 3 and config["repeats"] == 3 and spec.pass_at == (1, 3)
    assert config["filter_list"] == [{"name": "none", "filter": [{"function": "take_first_k", "k": 3}]}]
    assert [m["metric"] for m in config["metric_list"]] == [
        "gpt4_exact_match_avg@3", "gpt4_exact_match_pass@1", "gpt4_exact_match_pass@3", "gpt4_exact_match_maj@3",
        "judge_failed"]


def test_pass_at_without_repeats_is_refused_once_k_is_final():
    from lm_eval_mathjudge.harness import ksamples

    spec, _ = _configure({"judge_pass_at": [1, 4]})
    assert spec is None  # lm-eval 0.5's --repeats may still reach the task
    with pytest.raises(ConfigError, match="judge_pass_at is set but repeats is 1"):
        ksamples.check_ready(spec, _options({"judge_pass_at": [1, 4]}), "t")


def _options(metadata):
    from lm_eval_mathjudge.settings.layers import resolve_run_options

    return resolve_run_options("exact_match", None, metadata, {})


def test_one_sample_leaves_the_task_as_it_is():
    spec, config = _configure({}, repeats=1)
    assert spec is None and "filter_list" not in config and config["metric_list"][0]["metric"] == "gpt4_exact_match"


@pytest.mark.parametrize("metadata, message", [
    ({"repeats": 0}, "repeats=0 must be a whole number from 1"),
    ({"repeats": "many"}, "repeats='many' must be a whole number"),
    ({"repeats": 2.5}, "repeats=2.5 must be a whole number"),
    ({"repeats": 4, "judge_pass_at": [8]}, "asks for pass@8 but there are only 4 samples"),
    ({"repeats": 4, "judge_pass_at": "one"}, "pass_at='one' must be whole numbers"),
])
def test_bad_repeats_or_pass_at_are_clear_errors(metadata, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        _configure(metadata)


# ---------------------------------------------------------------------- the replay model
class _Req:
    def __init__(self, doc, doc_id=0, task="t", repeats=4):
        self.doc, self.doc_id, self.task_name, self.repeats = doc, doc_id, task, repeats


def test_replay_answers_the_kth_ask_with_the_kth_recorded_answer(tmp_path):
    from lm_eval_mathjudge.harness.replay import ReplayLM

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"question": "Q1", "responses": ["a", "b", "c"]}) + "\n"
                    + json.dumps({"question": "Q2", "response": "only"}) + "\n")
    one, two = _Req({"question": "Q1"}, repeats=3), _Req({"question": "Q2"}, 1, repeats=3)
    assert ReplayLM(path=str(path)).generate_until([one] * 3 + [two] * 3) == ["a", "b", "c", "only", "only", "only"]
    with pytest.raises(ConfigError, match=r"r.jsonl:1 records 3 responses for t:0, but the run asks for more"):
        ReplayLM(path=str(path)).generate_until([_Req({"question": "Q1"})] * 4)


def test_replay_refuses_responses_that_are_not_text(tmp_path):
    from lm_eval_mathjudge.harness.replay import ReplayLM

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"question": "Q1", "responses": ["a", 3]}) + "\n")
    with pytest.raises(ConfigError, match="every answer in 'responses'"):
        ReplayLM(path=str(path))


# ---------------------------------------------------------------------- the paired test on per-problem means
@pytest.mark.parametrize("a, b", [
    ([1, 0.75, 0.5, 0.25, 0, 1], [0.5, 0.25, 0.5, 0, 0, 0.25]),
    ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),                  # no difference at all: p = 1
    ([1, 1, 1, 1, 1], [0, 0, 0, 0, 0]),                  # the smallest p five pairs allow: 2/32
    ([0.25, 0.5, 0.75, 1.0, 0.0, 0.5, 0.25, 0.125], [0.5, 0.25, 0.5, 0.5, 0.25, 0.5, 0.0, 0.375]),
])
def test_paired_permutation_matches_scipy_exactly_on_small_tables(a, b):
    np = pytest.importorskip("numpy")
    scipy = pytest.importorskip("scipy.stats")
    ours = stats.paired_permutation(a, b)
    if a == b:
        assert ours == 1.0
        return
    theirs = scipy.permutation_test((np.array(a, float), np.array(b, float)),
                                    lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                    alternative="two-sided", n_resamples=10**6).pvalue
    assert ours == pytest.approx(float(theirs))


def test_paired_permutation_samples_sign_patterns_beyond_the_exact_limit():
    np = pytest.importorskip("numpy")
    scipy = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    a = rng.integers(0, 17, size=30) / 16
    b = np.clip(a - rng.integers(-3, 5, size=30) / 16, 0, 1)
    theirs = scipy.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                    permutation_type="samples", alternative="two-sided", n_resamples=200_000,
                                    random_state=1).pvalue
    ours = stats.paired_permutation(list(a), list(b), iters=20_000, seed=0)
    assert ours == pytest.approx(float(theirs), abs=0.01) and ours > 0


@pytest.mark.parametrize("names, ordered", [
    # lm-eval's results table and a results file re-saved with sorted keys list them as text: pass@16 first
    (["gpt4_exact_match_avg@16,none", "gpt4_exact_match_maj@16,none", "gpt4_exact_match_pass@1,none",
      "gpt4_exact_match_pass@16,none", "gpt4_exact_match_pass@4,none", "judge_failed,none"],
     ["gpt4_exact_match_avg@16,none", "gpt4_exact_match_maj@16,none", "gpt4_exact_match_pass@1,none",
      "gpt4_exact_match_pass@4,none", "gpt4_exact_match_pass@16,none", "judge_failed,none"]),
    (["final_correct_pass@64", "final_correct_pass@8", "final_correct_pass@128", "final_correct_pass@2"],
     ["final_correct_pass@2", "final_correct_pass@8", "final_correct_pass@64", "final_correct_pass@128"]),
    # the same metric under two filters keeps the filters' order; other names keep their places
    (["judge_failed,none", "m_pass@10,strict", "m_pass@2,strict", "acc,none"],
     ["judge_failed,none", "m_pass@2,strict", "m_pass@10,strict", "acc,none"]),
    ([], []),
])
def test_k_metrics_are_listed_in_numeric_order(names, ordered):
    assert k_order(names) == ordered
