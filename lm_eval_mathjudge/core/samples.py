"""k samples per problem: one problem's metrics from the verdicts of its k judged samples.

With ``repeats: k`` every sample is judged on its own; a problem's metrics are then
estimates over its k samples, and lm-eval averages them over problems, so the
stderr lm-eval reports is over problems (the independent units), never over the
k x n samples as if they were independent:

* ``<metric>_avg@k``: the mean verdict of the problem's k samples;
* ``<primary>_pass@k'``: the unbiased pass@k' estimator of Chen et al. (2021) with n = k
  samples and c of them correct (``stats.pass_at_k``), for each k' asked (``judge_pass_at``);
* ``<primary>_maj@k``: the verdict of the majority final answer. Final answers are grouped by
  mathematical equivalence with the local rule (``answers.answer_classes``); the largest group
  wins, and its verdict is the mean verdict of its samples (1 or 0 when the judge is consistent
  on equivalent answers). Several largest groups are a tie: the problem scores the mean of the
  tied groups' verdicts (what a fair coin among them would score on average), and the tie is
  counted and its problems named. A problem where no sample states one final answer has no
  majority: it scores 0 and is counted as ``no_answer``.
* ``judge_failed``: the share of the problem's samples that got no verdict (a failed sample
  scores 0 on every other metric, as with one sample).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .judges import JUDGE_FAILED, Judge
from .stats import pass_at_k


@dataclass(frozen=True)
class KSpec:
    """The k-sample metrics of one task: k samples per problem, pass@k' for each k' in ``pass_at``."""
    k: int
    pass_at: tuple[int, ...]
    metrics: tuple[str, ...]  # the judge's metrics, primary first

    @classmethod
    def of(cls, judge: Judge, k: int, pass_at: Sequence[int] = ()) -> KSpec:
        wanted = tuple(sorted(set(pass_at))) if pass_at else tuple(sorted({1, k}))
        return cls(k=k, pass_at=wanted, metrics=judge.metric_names)

    @property
    def primary(self) -> str:
        return self.metrics[0]

    def names(self) -> dict[str, bool]:
        """Every metric name this task reports, with higher_is_better."""
        names = {f"{m}_avg@{self.k}": True for m in self.metrics}
        names.update({f"{self.primary}_pass@{kp}": True for kp in self.pass_at})
        names[f"{self.primary}_maj@{self.k}"] = True
        names[JUDGE_FAILED] = False
        return names


_K = re.compile(r"@(\d+)")


def k_order(names: Iterable[str]) -> list[str]:
    """Metric names with the k of ``pass@k`` (and ``avg@k``, ``maj@k``) in numeric order: ``pass@4`` before
    ``pass@16``. Names that differ only in k stay where the first of them was; every other name keeps its place."""
    names = list(names)
    stems = {name: _K.sub("@", name) for name in names}
    first = {}
    for i, name in enumerate(names):
        first.setdefault(stems[name], i)
    return sorted(names, key=lambda n: (first[stems[n]], [int(k) for k in _K.findall(n)], names.index(n)))


@dataclass(frozen=True)
class Majority:
    score: float
    tied: int  # how many largest groups share the top count (1: a clear majority; 0: no answer at all)
    size: int  # samples in the (each) largest group


def majority(classes: Sequence[int | None], verdicts: Sequence[float]) -> Majority:
    """The majority vote over answer classes (None: no final answer, never a group of its own)."""
    sizes = Counter(c for c in classes if c is not None)
    if not sizes:
        return Majority(0.0, 0, 0)
    top = max(sizes.values())
    tied = [c for c, n in sizes.items() if n == top]
    group_scores = [sum(v for c, v in zip(classes, verdicts) if c == g) / top for g in tied]
    return Majority(sum(group_scores) / len(tied), len(tied), top)


def problem_metrics(spec: KSpec, scores: Sequence[Mapping[str, float]],
                    classes: Sequence[int | None]) -> tuple[dict[str, float], Majority]:
    """One problem's metrics from its k samples' scores (``Judge.scores``) and answer classes."""
    n = len(scores)
    if n != spec.k or len(classes) != n:
        raise ValueError(f"a problem has {n} judged samples and {len(classes)} answer classes; repeats is {spec.k}")
    out = {f"{m}_avg@{spec.k}": sum(s[m] for s in scores) / n for m in spec.metrics}
    correct = sum(1 for s in scores if s[spec.primary] >= 0.5)
    out.update({f"{spec.primary}_pass@{kp}": pass_at_k(n, correct, kp) for kp in spec.pass_at})
    vote = majority(classes, [s[spec.primary] for s in scores])
    out[f"{spec.primary}_maj@{spec.k}"] = vote.score
    out[JUDGE_FAILED] = sum(s[JUDGE_FAILED] for s in scores) / n
    return out, vote


def identical(responses: Sequence[str]) -> int:
    """Responses of one problem that repeat an earlier one word for word (judged once, by the cache key)."""
    return len(responses) - len(set(responses))
