"""``mathjudge drift``: did the judge change its verdicts on the same responses? Two runs, or a canary.

Two runs judged on the same responses (the same model's generations judged twice: a rerun months
later, a rejudge, another snapshot behind the same alias) are matched response by response: doc
(doc_id + question hash), sample index (with ``repeats`` k) and the response text itself. Responses
that differ make it a model comparison (``mathjudge diff``), which is refused. Per metric: the verdicts
that flipped each way, the flip rate with its Wilson interval, and the exact McNemar test of whether
the judge now credits more (or fewer) answers; each side's judge label and the snapshots its API
reported (``metadata.judge.run``).

With k samples per problem a doc's metrics are per-problem estimates, so each sample's own verdict
fields (``verdict.correct``, ``verdict.final_correct``, ...) and ``judge_failed`` are compared instead;
the samples of one problem are not independent, so the interval (Wilson on the design effect's sample
size) and the test (sign-flip permutation of the per-problem net flips, ``paired.paired_test``) count
problems.

Drift is one judge over time: the same judge name and prompt version, whatever snapshot now answers
behind it. Sides judged by different judges (``same_judge: false``) are a judge comparison, said
prominently (``mathjudge agreement`` is the report for that); decoding settings that differ are listed.

The canary (``canary``) re-judges a fixed, seeded sample of one run's docs with the judge that run
recorded (``recorded_judge``: backend, model, decoding, panel or cascade; the endpoint and key from
the environment), through ``rejudge`` with the judge cache off unless asked, and compares those
verdicts with the stored ones. ``--judge``/``--metadata`` override it, and the report then says so.
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
from .paired import paired_test
from .runs import (ReportError, Run, Sample, TaskResult, judge_id, judge_snapshots, load_one, metric_label,
                   primary_metric, read_samples, samples_per_problem)

FAILED = "judge_failed"
SIGNIFICANT = 0.05  # McNemar p below this: the judge moved one way
CANARY_N, CANARY_SEED = 20, 0
UnitKey = tuple[int, str, int]  # doc_id, question hash, sample index
# What the canary takes from a run's judge record (``harness/provenance.judge_record``) to judge as it did,
# and the settings that, differing between two sides, can flip verdicts by themselves.
RECORDED = ("backend", "model", "temperature", "max_tokens", "thinking_budget", "reasoning_effort")
DECODING = ("temperature", "max_tokens", "thinking_budget", "reasoning_effort", "dedupe")
# A retired setting an earlier run recorded: its value then that every run has now ("dedupe": "off").
RETIRED_AS_NOW = {"dedupe": "off"}


@dataclass(frozen=True)
class Side:
    run: str
    judge: str  # pipeline @ prompt version
    snapshots: tuple[str, ...]  # the model versions its API reported
    alias: bool  # the judge model was a moving alias (harness/provenance.py)
    fingerprints: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: Run, result: TaskResult) -> Side:
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
    p_value: float  # exact McNemar on (lost, gained); with k samples a permutation test over problems
    docs: int = 0  # problems the pairs come from
    test: str = "mcnemar_exact"

    @property
    def flips(self) -> int:
        return self.lost + self.gained

    def as_dict(self) -> dict[str, Any]:
        values = {"metric": metric_label(self.metric), "n": self.n, "flips": self.flips, "lost": self.lost,
                  "gained": self.gained, "excluded_judge_failed": self.judge_failed, "flip_rate": self.flip_rate,
                  "ci_low": self.ci_low, "ci_high": self.ci_high, "p_value": self.p_value, "docs": self.docs,
                  "test": self.test}
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
    k: int = 1  # samples per problem
    judge_changes: dict[str, list] = field(default_factory=dict)  # DECODING settings that differ: [A, B]

    @property
    def same_judge(self) -> bool:
        """The same judge name and prompt version on both sides (a moved snapshot behind it is drift)."""
        return self.a.judge == self.b.judge

    def headline(self) -> MetricDrift | None:
        names = [m.metric for m in self.metrics]
        chosen = primary_metric([n for n in names if not n.startswith(FAILED + ",")]) or (names[0] if names else None)
        return next((m for m in self.metrics if m.metric == chosen), None)

    def conclusion(self) -> str:
        return conclusion(self)

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "a": self.a.__dict__, "b": self.b.__dict__, "same_judge": self.same_judge,
                "judge_changes": self.judge_changes, "k": self.k, "responses": self.responses,
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
    k = max(samples_per_problem(ta), samples_per_problem(tb))
    found = TaskDrift(task, Side.of(a, ta), Side.of(b, tb), len(common), len(ua) - len(common),
                      len(ub) - len(common), k=k, judge_changes=judge_changes(ta.judge, tb.judge))
    names = dict.fromkeys(m for key in common for m in ua[key][1] if m in ub[key][1])
    for metric in names:
        if metrics and metric_label(metric) not in metrics:
            continue
        pairs, failed = _pairs(metric, [(key[:2], ua[key][1], ub[key][1]) for key in common])
        if pairs is not None:
            found.metrics.append(metric_drift(metric, pairs, failed, clustered=k > 1))
    return found


def judge_changes(a: dict, b: dict) -> dict[str, list]:
    """The decoding settings two judge records (``metadata.judge``) disagree on: name -> [A, B]."""
    return {name: [a.get(name), b.get(name)] for name in DECODING if _now(a, name) != _now(b, name)}


def _now(record: dict, name: str) -> Any:
    value = record.get(name)
    return None if name in RETIRED_AS_NOW and value == RETIRED_AS_NOW[name] else value


def _pairs(metric: str, both: list[tuple[Any, dict, dict]]) -> tuple[list[tuple[float, float, Any]] | None, int]:
    """The 0/1 pairs of ``metric`` with their doc (None when it is not 0/1), and how many a judge failure left out."""
    suffix = metric.partition(",")[2]
    failed_key = f"{FAILED},{suffix}" if suffix else FAILED
    pairs, failed = [], 0
    for doc, x, y in both:
        if metric not in x or metric not in y:
            continue
        if not metric.startswith(FAILED) and (x.get(failed_key) or y.get(failed_key)):
            failed += 1
            continue
        if x[metric] not in (0.0, 1.0) or y[metric] not in (0.0, 1.0):
            return None, 0
        pairs.append((x[metric], y[metric], doc))
    return pairs, failed


def metric_drift(metric: str, pairs: list[tuple], failed: int = 0, clustered: bool = False) -> MetricDrift:
    """Flips of 0/1 pairs (A, B[, doc]). ``clustered`` (k samples per problem): the interval and the test
    count problems, since the samples of one problem are not independent; else each pair is a unit."""
    lost = sum(1 for x, y, *_ in pairs if x > y)
    gained = sum(1 for x, y, *_ in pairs if y > x)
    n = len(pairs)
    docs: dict[Any, list[tuple[float, float]]] = {}
    for i, (x, y, *doc) in enumerate(pairs):
        docs.setdefault(doc[0] if doc and clustered else i, []).append((x, y))
    if clustered:
        low, high = stats.clustered_wilson_interval([(sum(x != y for x, y in v), len(v)) for v in docs.values()])
        p_value, test = paired_test([sum(x for x, _ in v) for v in docs.values()],
                                    [sum(y for _, y in v) for v in docs.values()])
        test += "_by_problem"
    else:
        low, high = stats.wilson_interval(lost + gained, n)
        p_value, test = stats.mcnemar_exact(lost, gained), "mcnemar_exact"
    return MetricDrift(metric, n, lost, gained, failed, (lost + gained) / n if n else math.nan, low, high,
                       p_value, len(docs), test)


def compare_runs(a: Run, b: Run, metrics: list[str] | None = None) -> list[TaskDrift]:
    tasks = [t for t in sorted(set(a.tasks) & set(b.tasks)) if not a.tasks[t].is_group
             and a.tasks[t].samples_path is not None and b.tasks[t].samples_path is not None]
    if not tasks:
        raise ReportError(f"{a.model} and {b.model} share no task with samples files (run lm_eval with --log_samples)")
    return [compare_task(a, b, task, metrics) for task in tasks]


def conclusion(found: TaskDrift) -> str:
    """One line: which judges, did the verdicts move, which way, and which snapshots judged."""
    line = _verdicts(found)
    if found.judge_changes:
        changed = ", ".join(f"{name} {a!r} vs {b!r}" for name, (a, b) in found.judge_changes.items())
        line += f"; the judge settings differ too ({changed}), which can flip verdicts by themselves"
    if found.same_judge:
        return f"{found.task}: {line}"
    return (f"{found.task}: DIFFERENT JUDGES: A {found.a.judge}, B {found.b.judge}. This compares two judges, "
            f"not one judge over time (their agreement: `mathjudge agreement A B`); {line}")


def _verdicts(found: TaskDrift) -> str:
    m = found.headline()
    a, b = found.a.snapshots, found.b.snapshots
    judges = (f"; snapshots: A {', '.join(a) or 'none reported'}, B {', '.join(b) or 'none reported'}"
              if a != b else f"; both judged by {', '.join(a)}" if a else "")
    if m is None:
        return f"no 0/1 metric to compare{judges}"
    label = metric_label(m.metric)
    if m.flips == 0:
        return f"no verdict changed on {m.n} responses ({label}): no sign of judge drift{judges}"
    share = f"{m.flips} of {m.n} verdicts flipped ({m.flip_rate:.1%} [{m.ci_low:.1%}, {m.ci_high:.1%}])"
    test = (f"McNemar p = {m.p_value:.3g}" if m.test == "mcnemar_exact"
            else f"p = {m.p_value:.3g} over {m.docs} problems, whose {found.k} samples each are not independent")
    if m.p_value < SIGNIFICANT:
        way = "more" if m.gained > m.lost else "fewer"
        return (f"judge drift: {share} on {label}, {m.gained} now credited and {m.lost} no longer "
                f"({test}): B credits {way} answers than A{judges}")
    return (f"{share} on {label}, {m.gained} one way and {m.lost} the other ({test}): no "
            f"evidence that the judge credits more or fewer answers overall, but these verdicts did not "
            f"reproduce{judges}")


# ---------------------------------------------------------------------- the canary
def recorded_judge(result: TaskResult) -> dict[str, Any]:
    """The ``--metadata`` that judges as ``result`` was judged: its judge, model and decoding, panel or cascade.

    The endpoint and key are not taken: they come from the environment, as for any run.
    """
    record = result.judge

    def settings(judge: dict, prefix: str) -> dict[str, Any]:
        return {prefix + name: judge[name] for name in RECORDED if judge.get(name) is not None}

    metadata = settings(record, "judge_")
    panel = record.get("panel")
    if isinstance(panel, dict):
        metadata["judge_panel"] = [settings(m, "") for m in panel.get("members") or () if isinstance(m, dict)]
        metadata["judge_panel_rule"] = panel.get("rule") or "majority"
        if isinstance(panel.get("min"), int):
            metadata["judge_panel_min"] = panel["min"]
    if isinstance(record.get("cascade"), dict):
        metadata["judge_cascade"] = True
    return metadata


def canary(run: Run, metadata: dict, n: int = CANARY_N, seed: int = CANARY_SEED,
           metrics: list[str] | None = None) -> list[TaskDrift]:
    """Re-judge ``n`` seeded docs per task of ``run`` with the judge it recorded (``metadata`` on top) and compare."""
    from .rejudge import rejudge

    if n < 1:
        raise ReportError(f"--n {n}: the canary needs at least 1 doc per task")
    tasks = [t for t, r in sorted(run.tasks.items()) if not r.is_group and r.samples_path and r.judge.get("backend")]
    if not tasks:
        raise ReportError(f"{run.model}: no judged task with a samples file (run lm_eval with --log_samples)")
    groups: dict[str, list[str]] = {}  # tasks judged alike are re-judged in one pass
    for t in tasks:
        # The cache is off: a cached reply would only repeat the old one.
        settings = {"judge_cache": False, **recorded_judge(run.tasks[t]), **metadata}
        groups.setdefault(json.dumps(settings, sort_keys=True), []).append(t)
    scratch = tempfile.mkdtemp(prefix="mathjudge-canary-")
    found: list[TaskDrift] = []
    try:
        for i, (settings, group) in enumerate(groups.items()):
            paths = [_sampled(run.tasks[t], n, seed, os.path.join(scratch, str(i))) for t in group]
            written = rejudge(paths, os.path.join(scratch, str(i), "rejudged"), json.loads(settings), name=run.model)
            now = load_one(written[0])
            now.model = f"{run.model} (canary)"
            found += [compare_task(run, now, t, metrics) for t in group if t in now.tasks]
        return sorted(found, key=lambda d: d.task)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sampled(result: TaskResult, n: int, seed: int, scratch: str) -> str:
    """A samples file of ``n`` seeded docs of ``result`` (all its lines), named as lm-eval names it,
    beside a copy of its results file (which names the model and any media folders)."""
    rows = read_samples(result.samples_path)
    ids = sorted({row.get("doc_id") for _, row in rows if isinstance(row, dict) and isinstance(row.get("doc_id"), int)})
    chosen = set(random.Random(seed).sample(ids, min(n, len(ids))))
    folder = os.path.join(scratch, "source", os.path.basename(os.path.dirname(result.samples_path)) or "run")
    os.makedirs(folder, exist_ok=True)
    shutil.copyfile(result.results_path, os.path.join(folder, os.path.basename(result.results_path)))
    path = os.path.join(folder, os.path.basename(result.samples_path))
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for _, row in rows if row.get("doc_id") in chosen)
    return path
