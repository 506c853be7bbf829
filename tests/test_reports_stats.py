"""The report statistics against hand-computed values, and against SciPy / statsmodels when installed."""

from __future__ import annotations

import math
import random

import pytest

from lm_eval_mathjudge.core import stats

# (k, n, low, high): Wilson 95% intervals worked by hand from the closed form
# (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), z = 1.959964, to 4 decimals.
WILSON = [
    (58, 100, 0.4821, 0.6720),  # the quick start's 58 of 100
    (0, 10, 0.0, 0.2775),  # at 0/n the lower end is exactly 0 (no 1e-18 residue)
    (10, 10, 0.7225, 1.0),
    (1, 2, 0.0945, 0.9055),
    (500, 1000, 0.4691, 0.5309),
]


@pytest.mark.parametrize("k, n, low, high", WILSON)
def test_wilson_interval_matches_hand_computed_values(k, n, low, high):
    got = stats.wilson_interval(k, n)
    assert got == pytest.approx((low, high), abs=5e-5)
    if k == 0:
        assert got[0] == 0.0
    if k == n:
        assert got[1] == 1.0


def test_normal_interval_is_mean_plus_minus_1_96_stderr():
    assert stats.normal_interval(0.58, 0.0496) == pytest.approx((0.58 - 0.09722, 0.58 + 0.09722), abs=1e-5)


# (b, c, p): two-sided exact McNemar = min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2), by hand.
MCNEMAR = [
    (0, 10, 2 / 1024),  # 2 * C(10,0) / 2^10
    (4, 6, 2 * (1 + 10 + 45 + 120 + 210) / 1024),  # 0.75390625
    (14, 6, 2 * (1 + 20 + 190 + 1140 + 4845 + 15504 + 38760) / 2**20),  # 0.1153182983...
    (6, 14, 2 * (1 + 20 + 190 + 1140 + 4845 + 15504 + 38760) / 2**20),  # symmetric
    (5, 5, 1.0),  # the tails overlap at the middle: capped at 1
    (0, 0, 1.0),  # no discordant doc: no evidence either way
    (0, 1, 1.0),
    (1, 0, 1.0),
    (0, 2, 0.5),
]


@pytest.mark.parametrize("b, c, p", MCNEMAR)
def test_mcnemar_exact_matches_hand_computed_values(b, c, p):
    assert stats.mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_exact_is_exact_for_large_counts():
    # 0 vs 2000 discordant docs: 2 / 2^2000 underflows a float to 0, but must not be negative or NaN.
    assert stats.mcnemar_exact(0, 2000) == 0.0
    assert 0 < stats.mcnemar_exact(900, 1100) < 1e-5


@pytest.mark.parametrize("b, c", [(0, 10), (4, 6), (14, 6), (37, 61), (200, 260), (1500, 1400)])
def test_mcnemar_exact_agrees_with_scipy_binomtest(b, c):
    scipy_stats = pytest.importorskip("scipy.stats")
    reference = scipy_stats.binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue
    assert stats.mcnemar_exact(b, c) == pytest.approx(reference, rel=1e-9)


def test_mcnemar_exact_agrees_with_statsmodels():
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    for b, c in [(4, 6), (14, 6), (37, 61)]:
        reference = contingency.mcnemar([[50, b], [c, 30]], exact=True).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(reference, rel=1e-9)


def test_wilson_interval_agrees_with_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    for k, n, _, _ in WILSON:
        ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert stats.wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def _paired(n_both: int, a_only: int, b_only: int, n_neither: int) -> tuple[list[float], list[float]]:
    a = [1.0] * n_both + [1.0] * a_only + [0.0] * b_only + [0.0] * n_neither
    b = [1.0] * n_both + [0.0] * a_only + [1.0] * b_only + [0.0] * n_neither
    return a, b


def test_paired_bootstrap_is_seeded_and_centred_on_the_mean_difference():
    a, b = _paired(54, 4, 6, 36)  # 0.58 vs 0.60
    first = stats.paired_bootstrap(a, b, seed=0)
    assert first == stats.paired_bootstrap(a, b, seed=0)  # same seed, same interval
    assert first.diff == pytest.approx(-0.02, abs=1e-12) and first.n == 100
    assert first.ci_low < first.diff < first.ci_high
    # the normal approximation of the paired difference: sd = sqrt(((b+c)/n - d^2) / n)
    sd = math.sqrt((10 / 100 - 0.02**2) / 100)
    assert first.ci_low == pytest.approx(-0.02 - 1.96 * sd, abs=0.012)
    assert first.ci_high == pytest.approx(-0.02 + 1.96 * sd, abs=0.012)


def test_paired_bootstrap_of_identical_runs_is_a_point():
    a, b = _paired(50, 0, 0, 50)
    assert stats.paired_bootstrap(a, b) == stats.PairedDiff(100, 0.0, 0.0, 0.0)


def test_paired_bootstrap_equals_index_resampling_in_distribution():
    """The multinomial shortcut against the textbook loop (resample doc indices), large iters."""
    np = pytest.importorskip("numpy")
    a, b = _paired(40, 12, 5, 43)
    rng = np.random.default_rng(123)
    d = np.array(a) - np.array(b)
    means = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(20_000)]
    textbook = np.percentile(means, [2.5, 97.5])
    ours = stats.paired_bootstrap(a, b, iters=20_000, seed=7)
    assert (ours.ci_low, ours.ci_high) == pytest.approx(tuple(textbook), abs=0.011)


def test_paired_bootstrap_rejects_unpaired_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired_bootstrap([1.0, 0.0], [1.0])


def test_cohen_kappa_matches_the_textbook_example():
    # 50 items; both yes 20, A yes/B no 5, A no/B yes 10, both no 15: po = 0.7, pe = 0.5, kappa = 0.4
    pairs = [(1, 1)] * 20 + [(1, 0)] * 5 + [(0, 1)] * 10 + [(0, 0)] * 15
    result = stats.cohen_kappa(pairs)
    assert (result.n, result.agreement) == (50, pytest.approx(0.7))
    assert result.kappa == pytest.approx(0.4)
    assert result.confusion == {(1, 1): 20, (1, 0): 5, (0, 1): 10, (0, 0): 15}


def test_cohen_kappa_is_undefined_when_both_raters_are_constant():
    result = stats.cohen_kappa([(0, 0)] * 30)
    assert result.agreement == 1.0 and result.kappa is None


def test_cohen_kappa_agrees_with_statsmodels():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = random.Random(5)
    pairs = [(x, x if rng.random() < 0.8 else 1 - x) for x in (rng.randint(0, 1) for _ in range(200))]
    table = [[sum(1 for p in pairs if p == (i, j)) for j in (0, 1)] for i in (0, 1)]
    assert stats.cohen_kappa(pairs).kappa == pytest.approx(inter_rater.cohens_kappa(table).kappa, rel=1e-9)


def test_cohen_kappa_agrees_with_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(9)
    pairs = [(x, x if rng.random() < 0.7 else 1 - x) for x in (rng.randint(0, 1) for _ in range(150))]
    reference = metrics.cohen_kappa_score([x for x, _ in pairs], [y for _, y in pairs])
    assert stats.cohen_kappa(pairs).kappa == pytest.approx(reference, rel=1e-9)
