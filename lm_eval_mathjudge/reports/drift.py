"""``mathjudge drift``: did the judge change its verdicts on the same responses? Two runs, or a canary.

Two runs judged on the same responses (the same model's generations judged twice: a rerun months
later, a rejudge, another snapshot behind the same alias) are matched response by response: doc
(doc_id + question hash), sample index (with ``repeats`` k) and the response text itself. Responses
that differ make it a model comparison (``mathjudge diff``), which is refused. Per metric: the verdicts
that flipped each way, the flip rate with its Wilson interval, and the exact McNemar test of whether
the judge now credits more (or fewer) answers; each side's judge label and the snapshots its API
reported (``metadata.judge.run``).

With k samples per problem a doc's metrics are per-problem estimates, so each sample's own verdict
fields (``verdict.correct``, ``verdict.final_correct``, ...) and ``judge_failed`` are compared instead.

The canary (``canary``) re-judges a fixed, seeded sample of one run's docs with the judge configured
now (``rejudge``, the judge cache off unless asked) and compares those verdicts with the stored ones.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ..core import stats
from .runs import (ReportError, Run, Sample, TaskResult, judge_id, judge_snapshots, load_one, metric_label,
                   primary_metric, read_jsonl, samples_per_problem)

FAILED = "judge_failed"
SIGNIFICANT = 0.05  # McNemar p below this: the judge moved one way
CANARY_N, CANARY_SEED = 20, 0
UnitKey = tuple[int, str, int]  # doc_id, question hash, sample index


@dataclass(frozen=True)
class Side:
    run: str
    judge: str  # pipeline @ prompt version
    snapshots: tuple[str, ...]  # the model versions its API reported
    alias: bool  # the judge model was a moving alias (harness/provenance.py)
    fingerprints: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: Run, result: TaskResult) -> "Side":
        stats_ = result.judge.get("run") if isinstance(result.judge.get("run"), dict) else {}
        prints = stats_.get("fingerprints")
        return cls(run.model, judge_id(result), judge_snapshots(result), stats_.get("alias") is True,
                   tuple(sorted(prints)) if isinstance(prints, dict) else ())


@dataclass(frozen=True)
class MetricDrift:
    metric: str
    n: int  # responses both judged (judge failures left out, except on judge_failed itself)
    lost: int  # credited by A, not by B
    gained: int  # credited by B, not by A
    judge_failed: int  # pairs left out: either judge failed on the response
    flip_rate: float
    ci_low: float
    ci_high: float
    p_value: float  # exact McNemar on (lost, gained)

    @property
    def flips(self) -> int:
        return self.lost + self.gained

    def as_dict(self) -> dict[str, Any]:
        values = {"metric": metric_label(self.metric), "n": self.n, "flips": self.flips, "lost": self.lost,
                  "gained": self.gained, "excluded_judge_failed": self.judge_failed, "flip_rate": self.flip_rate,
                  "ci_low": self.ci_low, "ci_high": self.ci_high, "p_value": self.p_value}
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in values.items()}


@dataclass
class TaskDrift:
    task: str
    a: Side
    b: Side
    responses: int  # judged in both runs
    only_a: int = 0
    only_b: int = 0
    metrics: list[MetricDrift] = field(default_factory=list)

    def headline(self) -> MetricDrift | None:
        names = [m.metric for m in self.metrics]
        chosen = primary_metric([n for n in names if not n.startswith(FAILED + ",")]) or (names[0] if names else None)
        return next((m for m in self.metrics if m.metric == chosen), None)

    def conclusion(self) -> str:
        return conclusion(self)

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "a": self.a.__dict__, "b": self.b.__dict__, "responses": self.responses,
                "only_a": self.only_a, "only_b": self.only_b, "metrics": [m.as_dict() for m in self.metrics],
                "conclusion": self.conclusion()}


def units(samples: list[Sample], k: int) -> dict[UnitKey, tuple[str | None, dict[str, float]]]:
    """Each judged response: (its text, its 0/1 values per metric), keyed by doc and sample index."""
    out: dict[UnitKey, tuple[str | None, dict[str, float]]] = {}
    for s in samples:
        if k == 1:
            out[(*s.key, 0)] = (s.response, s.scores)
            continue
        for j, record in enumerate(s.records):
            verdict = record.get("verdict") if isinstance(record.get("verdict"), dict) else {}
            values = {f"verdict.{name}": float(v) for name, v in verdict.items() if isinstance(v, bool)}
            values[FAILED] = float(bool(record.get("judge_failed")))
            out[(*s.key, j)] = (record.get("response"), values)
    return out


def _same(x: str | None, y: str | None) -> bool:
    return (x is None and y is None) or (x is not None and y is not None and " ".join(x.split()) == " ".join(y.split()))


def compare_task(a: Run, b: Run, task: str, metrics: list[str] | None = None) -> TaskDrift:
    ta, tb = a.tasks[task], b.tasks[task]
    ua, ub = units(ta.samples(), samples_per_problem(ta)), units(tb.samples(), samples_per_problem(tb))
    common = [key for key in ua if key in ub]
    if not common:
        raise ReportError(f"{task}: {a.model} and {b.model} judged no response in common (matched by doc id, "
                          "question and sample index); drift compares two judgings of the same responses")
    differ = sum(1 for key in common if not _same(ua[key][0], ub[key][0]))
    if differ:
        raise ReportError(f"{task}: {differ} of {len(common)} responses differ between {a.model} and {b.model} "
                          "(matched by doc id and sample index), so their verdicts differ because the model's "
                          "answers do, not the judge: this is a model diff, not judge drift. Compare them with "
                          "`mathjudge diff A B`; drift needs two judgings of the same responses")
    found = TaskDrift(task, Side.of(a, ta), Side.of(b, tb), len(common), len(ua) - len(common), len(ub) - len(common))
    names = dict.fromkeys(m for key in common for m in ua[key][1] if m in ub[key][1])
    for metric in names:
        if metrics and metric_label(metric) not in metrics:
            continue
        pairs, failed = _pairs(metric, [(ua[key][1], ub[key][1]) for key in common])
        if pairs is not None:
            found.metrics.append(metric_drift(metric, pairs, failed))
    return found


def _pairs(metric: str, both: list[tuple[dict, dict]]) -> tuple[list[tuple[float, float]] | None, int]:
    """The 0/1 pairs of ``metric`` (None when it is not 0/1), and how many a judge failure left out."""
    suffix = metric.partition(",")[2]
    failed_key = f"{FAILED},{suffix}" if suffix else FAILED
    pairs, failed = [], 0
    for x, y in both:
        if metric not in x or metric not in y:
            continue
        if not metric.startswith(FAILED) and (x.get(failed_key) or y.get(failed_key)):
            failed += 1
            continue
        if x[metric] not in (0.0, 1.0) or y[metric] not in (0.0, 1.0):
            return None, 0
        pairs.append((x[metric], y[metric]))
    return pairs, failed


def metric_drift(metric: str, pairs: list[tuple[float, float]], failed: int = 0) -> MetricDrift:
    lost = sum(1 for x, y in pairs if x > y)
    gained = sum(1 for x, y in pairs if y > x)
    n = len(pairs)
    low, high = stats.wilson_interval(lost + gained, n)
    return MetricDrift(metric, n, lost, gained, failed, (lost + gained) / n if n else math.nan, low, high,
                       stats.mcnemar_exact(lost, gained))


def compare_runs(a: Run, b: Run, metrics: list[str] | None = None) -> list[TaskDrift]:
    tasks = [t for t in sorted(set(a.tasks) & set(b.tasks)) if not a.tasks[t].is_group
             and a.tasks[t].samples_path is not None and b.tasks[t].samples_path is not None]
    if not tasks:
        raise ReportError(f"{a.model} and {b.model} share no task with samples files (run lm_eval with --log_samples)")
    return [compare_task(a, b, task, metrics) for task in tasks]


def conclusion(found: TaskDrift) -> str:
    """One line: did the verdicts move, which way, and which snapshots judged."""
    m = found.headline()
    a, b = found.a.snapshots, found.b.snapshots
    judges = (f"; snapshots: A {', '.join(a) or 'none reported'}, B {', '.join(b) or 'none reported'}"
              if a != b else f"; both judged by {', '.join(a)}" if a else "")
    if m is None:
        return f"{found.task}: no 0/1 metric to compare{judges}"
    label = metric_label(m.metric)
    if m.flips == 0:
        return f"{found.task}: no verdict changed on {m.n} responses ({label}): no sign of judge drift{judges}"
    share = f"{m.flips} of {m.n} verdicts flipped ({m.flip_rate:.1%} [{m.ci_low:.1%}, {m.ci_high:.1%}])"
    if m.p_value < SIGNIFICANT:
        way = "more" if m.gained > m.lost else "fewer"
        return (f"{found.task}: judge drift: {share} on {label}, {m.gained} now credited and {m.lost} no longer "
                f"(McNemar p = {m.p_value:.3g}): B credits {way} answers than A{judges}")
    return (f"{found.task}: {share} on {label}, {m.gained} one way and {m.lost} the other (McNemar p = "
            f"{m.p_value:.3g}): no evidence that the judge credits more or fewer answers overall, but these "
            f"verdicts did not reproduce{judges}")


# ---------------------------------------------------------------------- the canary
def canary(run: Run, metadata: dict, n: int = CANARY_N, seed: int = CANARY_SEED,
           metrics: list[str] | None = None) -> list[TaskDrift]:
    """Re-judge ``n`` seeded docs per task of ``run`` with the judge configured now and compare."""
    from .rejudge import rejudge

    if n < 1:
        raise ReportError(f"--n {n}: the canary needs at least 1 doc per task")
    tasks = [t for t, r in sorted(run.tasks.items()) if not r.is_group and r.samples_path and r.judge.get("backend")]
    if not tasks:
        raise ReportError(f"{run.model}: no judged task with a samples file (run lm_eval with --log_samples)")
    settings = {"judge_cache": False, **metadata}  # ask the judge now: a cached reply would only repeat the old one
    scratch = tempfile.mkdtemp(prefix="mathjudge-canary-")
    try:
        paths = [_sampled(run.tasks[t], n, seed, scratch) for t in tasks]
        written = rejudge(paths, os.path.join(scratch, "rejudged"), settings, name=run.model)
        now = load_one(written[0])
        now.model = f"{run.model} (canary)"
        return [compare_task(run, now, t, metrics) for t in tasks if t in now.tasks]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sampled(result: TaskResult, n: int, seed: int, scratch: str) -> str:
    """A samples file of ``n`` seeded docs of ``result`` (all its lines), named as lm-eval names it,
    beside a copy of its results file (which names the model and any media folders)."""
    rows = read_jsonl(result.samples_path, "samples file")
    ids = sorted({row.get("doc_id") for _, row in rows if isinstance(row, dict) and isinstance(row.get("doc_id"), int)})
    chosen = set(random.Random(seed).sample(ids, min(n, len(ids))))
    folder = os.path.join(scratch, "source", os.path.basename(os.path.dirname(result.samples_path)) or "run")
    os.makedirs(folder, exist_ok=True)
    shutil.copyfile(result.results_path, os.path.join(folder, os.path.basename(result.results_path)))
    path = os.path.join(folder, os.path.basename(result.samples_path))
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for _, row in rows if row.get("doc_id") in chosen)
    return path
