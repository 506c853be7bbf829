"""How far two judges agree: two judged runs on the same samples, or a run and a labels file.

Pairs are matched by doc (doc_id + question hash). A pair whose judged responses
differ is not a judge disagreement, so it is left out and counted; so is a pair
where either judge failed (``judge_failed``), which says nothing about the answer.

Labels file: JSONL, one record per doc with ``doc_id`` or ``question``
(``problem``), a label (``label`` by default; true/false, 1/0, correct/incorrect,
yes/no) and optionally ``task``, ``metric`` and ``response``; a label applies to the
task's primary metric unless it names another. A label is for the response it was
given to: one whose ``response`` differs from the run's is left out and counted
(``excluded_response_differs``), and so is one for a doc the run does not have
(``excluded_not_in_run``).

Against labels, each metric's report also holds the judge's error rates, what
``mathjudge calibrate`` writes and ``leaderboard --calibration`` reads: ``sensitivity``
(credited among the labelled-correct), ``specificity`` (not credited among the
labelled-incorrect), the four cells and their Wilson intervals, and the judge
(pipeline @ prompt version) they were measured on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core import stats
from ..core.docs import question_of
from .runs import (ReportError, Run, Sample, by_key, judge_id, metric_label, primary_metric, question_hash,
                   read_jsonl)

_TRUE = {"1", "true", "correct", "yes", "y", "right"}
_FALSE = {"0", "false", "incorrect", "no", "n", "wrong"}
FAILED = "judge_failed"


@dataclass
class MetricAgreement:
    task: str
    metric: str
    pairs: list[tuple[float, float]] = field(default_factory=list)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    response_differs: int = 0
    judge_failed: int = 0
    judge: str | None = None  # against labels: the judge measured (pipeline @ prompt version)
    not_in_run: int = 0  # against labels: labels for docs the run does not have

    def as_dict(self) -> dict[str, Any]:
        result = stats.cohen_kappa(self.pairs)
        confusion: dict[str, dict[str, int]] = {}
        for (x, y), count in sorted(result.confusion.items(), reverse=True):
            confusion.setdefault(_label(x), {})[_label(y)] = count
        out = {"n": result.n, "agreement": result.agreement if result.n else None, "kappa": result.kappa,
               "confusion": confusion, "excluded_response_differs": self.response_differs,
               "excluded_judge_failed": self.judge_failed}
        if self.judge is not None:
            out["excluded_not_in_run"] = self.not_in_run
            out.update(self.error_rates())
        return out

    def calibration(self) -> stats.Calibration | None:
        """The judge's cells against the labels; None unless every value is 0/1."""
        if not self.pairs or any(x not in (0.0, 1.0) or y not in (0.0, 1.0) for x, y in self.pairs):
            return None
        cells = {(j, t): sum(1 for p in self.pairs if p == (j, t)) for j in (0.0, 1.0) for t in (0.0, 1.0)}
        return stats.Calibration(tp=cells[(1.0, 1.0)], fn=cells[(0.0, 1.0)], tn=cells[(0.0, 0.0)], fp=cells[(1.0, 0.0)])

    def error_rates(self) -> dict[str, Any]:
        c = self.calibration()
        if c is None:
            return {"sensitivity": None, "specificity": None}
        def rate(k: int, n: int) -> dict[str, Any]:
            low, high = stats.wilson_interval(k, n)
            return {"ci_low": low if n else None, "ci_high": high if n else None}
        return {"judge": self.judge, "true_positive": c.tp, "false_negative": c.fn, "true_negative": c.tn,
                "false_positive": c.fp,
                "sensitivity": None if math.isnan(c.sensitivity) else c.sensitivity,
                "sensitivity_interval": rate(c.tp, c.tp + c.fn),
                "specificity": None if math.isnan(c.specificity) else c.specificity,
                "specificity_interval": rate(c.tn, c.tn + c.fp)}


def _label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def between_runs(a: Run, b: Run) -> list[MetricAgreement]:
    out = []
    for task in sorted(set(a.tasks) & set(b.tasks)):
        ta, tb = a.tasks[task], b.tasks[task]
        if ta.is_group or tb.is_group:
            continue
        sa, sb = by_key(ta.samples()), by_key(tb.samples())
        for metric in (m for m in ta.metrics if m in tb.metrics):
            out.append(_agree(task, metric, [(s, sb.get(k)) for k, s in sa.items()], _reply))
    if not out:
        raise ReportError(f"{a.model} and {b.model} share no task with samples; agreement needs the same tasks")
    return out


def _agree(task: str, metric: str, pairs: list[tuple[Sample, Any]], b_reply) -> MetricAgreement:
    result = MetricAgreement(task, metric)
    failed = f"{FAILED},{metric.partition(',')[2]}"
    for s, other in pairs:
        if other is None or metric not in s.scores or metric not in _scores(other):
            continue
        theirs = _response(other)
        if s.response is not None and theirs is not None and " ".join(s.response.split()) != " ".join(theirs.split()):
            result.response_differs += 1
            continue
        if not metric.startswith(FAILED + ",") and (s.scores.get(failed) or _scores(other).get(failed)):
            result.judge_failed += 1
            continue
        x, y = s.scores[metric], _scores(other)[metric]
        result.pairs.append((x, y))
        if x != y:
            result.disagreements.append({
                "task": task, "metric": metric_label(metric), "doc_id": s.doc_id, "question": s.question,
                "response": s.response, "a": x, "b": y, "a_reply": _reply(s), "b_reply": b_reply(other)})
    return result


@dataclass(frozen=True)
class Label:
    """A label as the other side of a pair: its score, and the response it was given to (if the file says)."""
    scores: dict[str, float]
    response: str | None = None


def _scores(other: Any) -> dict[str, float]:
    return other.scores


def _response(other: Any) -> str | None:
    return other.response


def _reply(sample: Any) -> str | None:
    return (sample.record or {}).get("raw_reply") if isinstance(sample, Sample) else None


# ---------------------------------------------------------------------- labels file
def with_labels(a: Run, path: str, label_field: str = "label") -> list[MetricAgreement]:
    records = _read_labels(path, label_field)
    out = []
    for task, result in sorted(a.tasks.items()):
        if result.is_group or result.samples_path is None:
            continue
        samples = result.samples()
        primary = primary_metric(list(result.metrics))
        by_question = {question_hash(s.question): s for s in samples}
        by_doc = {s.doc_id: s for s in samples}
        grouped: dict[str, list[tuple[Sample, Any]]] = {}
        missing: dict[str, int] = {}
        for rec in records:
            if rec.get("task") not in (None, task):
                continue
            q = rec.get("question")
            s = by_question.get(question_hash(q)) if q is not None else by_doc.get(rec.get("doc_id"))
            metric = _metric_key(rec.get("metric"), result.metrics) or primary
            if metric and s is None:
                missing[metric] = missing.get(metric, 0) + 1
            elif metric:
                grouped.setdefault(metric, []).append((s, Label({metric: rec["label"]}, rec["response"])))
        for m, pairs in grouped.items():
            measured = _agree(task, m, pairs, lambda other: None)
            measured.judge, measured.not_in_run = judge_id(result), missing.get(m, 0)
            out.append(measured)
    if not out:
        raise ReportError(f"{path}: no label matches a sample of {a.model} (by question text, or doc_id when a "
                          "record has no question); check that the labels are for the same docs")
    return out


def _metric_key(name: str | None, metrics: dict) -> str | None:
    if name is None:
        return None
    return next((m for m in metrics if m == name or metric_label(m) == name), None)


def _read_labels(path: str, label_field: str) -> list[dict[str, Any]]:
    records = []
    for number, row in read_jsonl(path, "labels file"):
        if label_field not in row:
            raise ReportError(f"{path}:{number} has no {label_field!r} field (choose the field with --label-field)")
        question = question_of(row)
        if question is None and row.get("doc_id") is None:
            raise ReportError(f"{path}:{number} has neither 'question'/'problem' nor 'doc_id'")
        response = row.get("response")
        records.append({"question": question, "doc_id": row.get("doc_id"), "task": row.get("task"),
                        "metric": row.get("metric"), "label": _label_value(row[label_field], path, number),
                        "response": response if isinstance(response, str) else None})
    return records


def _label_value(value: Any, path: str, number: int) -> float:
    text = str(value).strip().lower()
    if isinstance(value, bool) or text in _TRUE | _FALSE:
        return 1.0 if (value is True or text in _TRUE) else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    raise ReportError(f"{path}:{number}: label {value!r} is not true/false, 1/0 or correct/incorrect")


def report(a_name: str, b_name: str, results: list[MetricAgreement]) -> dict[str, Any]:
    tasks: dict[str, dict[str, Any]] = {}
    for r in results:
        tasks.setdefault(r.task, {})[metric_label(r.metric)] = r.as_dict()
    return {"a": a_name, "b": b_name, "tasks": tasks}
