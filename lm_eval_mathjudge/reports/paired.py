"""Paired comparison of two runs on one task and metric, doc by doc.

A doc's value is its 0/1 verdict, or with k samples per problem (``repeats``) its per-problem
estimate (``avg@k``, ``pass@k'``, ``maj@k``): the problems are the paired units either way.
0/1 values get the exact McNemar test; any other values a paired sign-flip permutation test.

``mathjudge diff`` prints these; the leaderboard computes one per model against
the top model of each task and metric.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..core import stats
from .runs import ReportError, Run, Sample, by_key, metric_label, samples_per_problem


@dataclass(frozen=True)
class Comparison:
    task: str
    metric: str
    n: int  # docs both runs scored
    a: float  # mean of A on those docs
    b: float
    diff: float  # a - b
    ci_low: float  # paired-bootstrap interval of the difference
    ci_high: float
    a_only: int  # docs where A scored higher (with 0/1 values: only A got it right)
    b_only: int
    p_value: float | None  # exact McNemar (0/1 per doc), else a paired permutation test on per-doc values
    test: str

    def as_dict(self) -> dict:
        out = asdict(self)
        out["metric"] = metric_label(self.metric)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def compare(task: str, metric: str, a: list[Sample], b: list[Sample],
            iters: int = stats.BOOTSTRAP_ITERS, seed: int = stats.BOOTSTRAP_SEED) -> Comparison:
    b_by_key = by_key(b)
    pairs = [(s.scores[metric], b_by_key[s.key].scores[metric]) for s in a
             if metric in s.scores and s.key in b_by_key and metric in b_by_key[s.key].scores]
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    boot = stats.paired_bootstrap(xs, ys, iters=iters, seed=seed)
    a_only = sum(1 for x, y in pairs if x > y)
    b_only = sum(1 for x, y in pairs if y > x)
    n = len(pairs)
    p_value, test = paired_test(xs, ys, iters, seed)
    return Comparison(
        task=task, metric=metric, n=n,
        a=sum(xs) / n if n else math.nan, b=sum(ys) / n if n else math.nan,
        diff=boot.diff, ci_low=boot.ci_low, ci_high=boot.ci_high, a_only=a_only, b_only=b_only,
        p_value=p_value if n else None, test=test)


def paired_test(xs: list[float], ys: list[float], iters: int = stats.BOOTSTRAP_ITERS,
                seed: int = stats.BOOTSTRAP_SEED) -> tuple[float, str]:
    """(two-sided p, test name) for per-doc paired values: exact McNemar on 0/1, else sign-flip permutation."""
    if all(v in (0.0, 1.0) for v in xs + ys):
        return stats.mcnemar_exact(sum(1 for x, y in zip(xs, ys) if x > y),
                                   sum(1 for x, y in zip(xs, ys) if y > x)), "mcnemar_exact"
    return stats.paired_permutation(xs, ys, iters, seed), "paired_permutation"


def compare_runs(a: Run, b: Run, metrics: list[str] | None = None, iters: int = stats.BOOTSTRAP_ITERS,
                 seed: int = stats.BOOTSTRAP_SEED, allow_mixed: bool = False) -> list[Comparison]:
    """Every task both runs scored with samples, every metric both have (or those asked for)."""
    out = []
    for task in sorted(set(a.tasks) & set(b.tasks)):
        ta, tb = a.tasks[task], b.tasks[task]
        if ta.is_group or ta.samples_path is None or tb.samples_path is None:
            continue
        ka, kb = samples_per_problem(ta), samples_per_problem(tb)
        if ka != kb and not allow_mixed:
            raise ReportError(f"{task}: {a.model} has {ka} samples per problem and {b.model} has {kb} (repeats), so "
                              "their per-problem estimates differ in variance and in what @k means; rerun one "
                              "with the other's repeats, or pass --allow-mixed to compare the metrics they share")
        sa, sb = ta.samples(), tb.samples()
        for metric in ta.metrics:
            if metric in tb.metrics and (not metrics or metric_label(metric) in metrics):
                out.append(compare(task, metric, sa, sb, iters, seed))
    return out
