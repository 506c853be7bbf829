"""The leaderboard: models x tasks x metrics with 95% intervals and a paired test against the top.

Per task, models are ranked by the primary metric (``gpt4_exact_match``,
``cascade_exact_match`` or ``final_correct``); for every metric, each model is compared
with the best model on that task and metric, doc by doc (exact McNemar,
paired-bootstrap interval of the difference). With k samples per problem (``repeats``)
a doc's value is its per-problem estimate (``avg@k``, ``pass@k'``, ``maj@k``): intervals
come from the per-problem values and the paired test is a sign-flip permutation test on
them (``paired.py``). Cells judged differently (the judging
pipeline: one judge, a cascade or a panel and its members; the prompt version; the
doc set; the primary metric; the samples per problem; the judge snapshot its API reported
answering, where both runs recorded one) are refused side by side unless ``allow_mixed``, because
their gap would measure the judges as much as the models. Under ``allow_mixed`` each
model is ranked by its own primary metric, and a note says which metrics were mixed.

A row's value, n and interval come from one source: the samples when the samples
file is there, readable and complete (``runs.checked_samples``); otherwise the
results file, with the interval of lm-eval's stderr, and a note saying why. The
writers treat every name as hostile: CSV cells that a spreadsheet would run as a
formula are prefixed with ``'``, Markdown escapes HTML and pipes, HTML escapes all.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from dataclasses import asdict, dataclass

from ..core import stats
from .paired import compare
from . import calibration as calib
from .runs import (ReportError, Run, Sample, TaskResult, checked_samples, doc_set_id, judge_id, metric_label, pipeline,
                   judge_snapshots, primary_metric, samples_per_problem)

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets read as a formula (CSV injection)
CSV_COLUMNS = ("model", "task", "metric", "n", "value", "ci_low", "ci_high", "ci_method", "p_value",
               "diff_vs_top", "diff_ci_low", "diff_ci_high", "rank", "judge", "prompt_version", "data", "k", "p_test",
               "corrected", "corrected_ci_low", "corrected_ci_high")


@dataclass(frozen=True)
class Row:
    model: str
    task: str
    metric: str
    n: int | None
    value: float
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    p_value: float | None  # vs the top model on this task and metric; None for the top model
    diff_vs_top: float | None  # this model - top, with its paired-bootstrap interval
    diff_ci_low: float | None
    diff_ci_high: float | None
    rank: int  # by the primary metric of the task
    judge: str
    prompt_version: str
    data: str
    primary: bool
    is_top: bool  # the best model on this task and metric
    k: int = 1  # samples per problem (repeats)
    p_test: str | None = None  # mcnemar_exact, or paired_permutation for per-problem estimates
    corrected: float | None = None  # --calibration: Rogan-Gladen corrected accuracy (primary rows)
    corrected_ci_low: float | None = None  # over the run's problems and the labelled set
    corrected_ci_high: float | None = None


@dataclass(frozen=True)
class Board:
    rows: list[Row]
    notes: list[str]
    iters: int = stats.BOOTSTRAP_ITERS
    seed: int = stats.BOOTSTRAP_SEED

    def tasks(self) -> list[str]:
        return list(dict.fromkeys(r.task for r in self.rows))


def build(runs: list[Run], allow_mixed: bool = False, iters: int = stats.BOOTSTRAP_ITERS,
          seed: int = stats.BOOTSTRAP_SEED, calibration: dict[str, list[calib.Entry]] | None = None) -> Board:
    if not runs:
        raise ReportError("no runs given")
    rows, notes = [], []
    for run in runs:
        notes += [f"{run.model}: {p} is superseded by another result of the same task (the newest, or the newest "
                  "with whole samples)" for p in run.superseded]
        notes += [f"{run.model}: {text.removeprefix('mathjudge: ')}" for text in run.skipped]
        notes += [f"{run.model}: {p} has no scores (--predict_only?); judge it with mathjudge rejudge"
                  for p in run.unscored]
    for task in sorted({t for run in runs for t in run.tasks}):
        cells = [(run.model, run.tasks[task]) for run in runs if task in run.tasks]
        task_rows, task_notes = _task_rows(task, cells, allow_mixed, iters, seed)
        if calibration is not None:
            task_rows, more = _corrected(task, task_rows, dict(cells), calibration.get(task, []), iters, seed)
            task_notes += more
        rows += task_rows
        notes += task_notes
    return Board(rows, notes, iters, seed)


def _task_rows(task: str, cells: list[tuple[str, TaskResult]], allow_mixed: bool, iters: int, seed: int):
    checked = {model: (None, None) if r.is_group else checked_samples(r) for model, r in cells}
    samples = {model: found for model, (found, _) in checked.items()}
    headline = {model: primary_metric(list(r.metrics)) for model, r in cells}  # each cell's own primary metric
    prov = {model: (*_provenance(r, samples[model]), metric_label(headline[model]), samples_per_problem(r),
                    judge_snapshots(r)) for model, r in cells}
    notes = [_mixed(task, prov, allow_mixed)]
    notes += [f"{model} on {task}: no samples file, so no paired test (run lm_eval with --log_samples)"
              for model, r in cells if r.samples_path is None and not r.is_group]
    notes += [f"{model} on {task}: {why}" for model, (_, why) in checked.items() if why]
    notes += [_flagged(task, model, r, headline[model]) for model, r in cells]
    notes += [f"{model} on {task}: its judge reported {len(p[6])} model versions within the run ({', '.join(p[6])}); "
              "the alias moved while it was judged" for model, p in prov.items() if len(p[6]) > 1]
    metrics = list(dict.fromkeys(m for _, r in cells for m in r.metrics))
    primaries = list(dict.fromkeys(headline[model] for model, _ in cells))
    metrics = [*primaries, *(m for m in metrics if m not in primaries)]
    measured = {(model, metric): _measure(r, metric, samples[model]) for model, r in cells for metric in r.metrics}

    def order(cell: tuple[str, TaskResult], metric: str) -> float:  # ranked by the value the row shows
        value = measured[(cell[0], metric)][0] if (cell[0], metric) in measured else math.nan
        if math.isnan(value):
            return math.inf
        return -value if cell[1].higher_is_better.get(metric, True) else value

    ranked = sorted(cells, key=lambda c: order(c, headline[c[0]]))
    rank = {model: i + 1 for i, (model, _) in enumerate(ranked)}
    rows = []
    for metric in metrics:
        have = [(m, r) for m, r in ranked if metric in r.metrics]
        top_model, _ = min(have, key=lambda c: order(c, metric))
        for model, _result in have:
            rows.append(_row(task, metric, model, measured[(model, metric)], samples[model], top_model,
                             samples[top_model], rank[model], prov[model], metric == headline[model], iters, seed))
    return rows, [n for n in notes if n]


def _corrected(task: str, rows: list[Row], results: dict[str, TaskResult], entries: list[calib.Entry],
               iters: int, seed: int) -> tuple[list[Row], list[str]]:
    """The primary rows with the judge's error taken out (Rogan-Gladen), where a calibration of the
    same judge on this task exists; a note for every row it does not apply to."""
    out, notes = [], []
    for row in rows:
        entry = calib.entry_for(entries, row.metric) if row.primary else None
        if not row.primary:
            out.append(row)
            continue
        result = results[row.model]
        if entry is None:
            notes.append(f"{row.model} on {task}: no calibration of {row.metric} for this task, so no corrected score")
            out.append(row)
            continue
        if entry.judge != judge_id(result):
            notes.append(f"{row.model} on {task}: the calibration was measured on {entry.judge}, not on this run's "
                         f"judge {judge_id(result)}, so it is not applied")
            out.append(row)
            continue
        samples, _ = checked_samples(result)
        key = next((k for k in result.metrics if metric_label(k) == row.metric), None)
        values = [s.scores[key] for s in samples if key in s.scores] if samples and key else []
        if values:
            c = stats.corrected_interval(values, entry.cells, iters=iters, seed=seed)
            low, high = (None if math.isnan(c.ci_low) else c.ci_low), (None if math.isnan(c.ci_high) else c.ci_high)
            value = None if math.isnan(c.value) else c.value
            if c.unusable > 0.025:
                notes.append(f"{row.model} on {task}: in {c.unusable:.0%} of the resamples the judge was no better "
                             "than chance on the labelled set; label more samples for a usable interval")
        else:
            value = stats.rogan_gladen(row.value, entry.cells.sensitivity, entry.cells.specificity)
            value, low, high = (None if math.isnan(value) else value), None, None
            notes.append(f"{row.model} on {task}: no complete samples file, so the corrected score has no interval")
        out.append(dataclasses.replace(row, corrected=value, corrected_ci_low=low, corrected_ci_high=high))
    return out, notes


def _flagged(task: str, model: str, result: TaskResult, metric: str) -> str | None:
    """A note when answers addressed the judge (the results' ``metadata.judge.flags``), and what they scored."""
    found = result.judge.get("flags")
    if not isinstance(found, dict) or not found.get("flagged"):
        return None
    kinds = ", ".join(f"{k}: {v.get('samples')}" for k, v in (found.get("by_flag") or {}).items())
    score = (found.get("scores") or {}).get(metric.partition(",")[0])
    scored = f"; they scored {score:.3f} on {metric_label(metric)}" if isinstance(score, (int, float)) else ""
    return (f"{model} on {task}: {found['flagged']} of {found.get('samples')} answers are flagged as addressing "
            f"the judge ({kinds}){scored}")


def _provenance(result: TaskResult, samples: list[Sample] | None) -> tuple[str, str, str, tuple]:
    """(pipeline, prompt version, data as shown, data as compared: data set, n, doc set or None)."""
    data = f"{result.data}, {len(samples)} docs #{doc_set_id(samples)}" if samples else f"{result.data}, n={result.n}"
    key = (result.data, len(samples), doc_set_id(samples)) if samples else (result.data, result.n, None)
    return pipeline(result), str(result.judge.get("prompt_version") or "-"), data, key


def _same_docs(keys: list[tuple]) -> bool:
    """One data set and n; doc sets equal where known (a run without usable samples shows none)."""
    return len({k[:2] for k in keys}) == 1 and len({k[2] for k in keys if k[2] is not None}) <= 1


def _mixed(task: str, prov: dict[str, tuple], allow_mixed: bool) -> str | None:
    """(pipeline, prompt version, data, data key, primary metric) per model: a note, or a refusal, when they differ."""
    reasons = []
    for i, what in ((0, "judge"), (1, "prompt version"), (2, "data (doc set)"), (4, "primary metric"),
                    (5, "samples per problem (repeats)")):
        values: dict[str, list[str]] = {}
        for model, p in prov.items():
            values.setdefault(str(p[i]), []).append(model)
        if i == 2 and _same_docs([p[3] for p in prov.values()]):
            continue
        if len(values) > 1:
            reasons.append(f"{what} differs: " + "; ".join(f"{v} ({', '.join(ms)})" for v, ms in values.items()))
    snapshots: dict[str, list[str]] = {}
    for model, p in prov.items():
        if p[6]:  # only runs whose judge API reported a version can differ in it
            snapshots.setdefault(", ".join(p[6]), []).append(model)
    if len(snapshots) > 1:
        reasons.append("judge snapshot (the model version the judge's API reported) differs: "
                       + "; ".join(f"{v} ({', '.join(ms)})" for v, ms in snapshots.items()))
    if not reasons:
        return None
    message = f"{task}: the runs were judged differently, so their gap is not only the models'. " + " | ".join(reasons)
    if not allow_mixed:
        raise ReportError(message + ". Re-judge them alike (mathjudge rejudge) or pass --allow-mixed "
                          "to show them side by side anyway (paired tests use the common docs only).")
    ranked_by = "; each model is ranked by its own primary metric" if len({p[4] for p in prov.values()}) > 1 else ""
    return message + f" (shown side by side: --allow-mixed{ranked_by})"


def _row(task, metric, model, measured, samples, top_model, top_samples, rank, prov, primary, iters, seed) -> Row:
    value, n, low, high, method = measured
    p = diff = d_low = d_high = test = None
    if model != top_model and samples is not None and top_samples is not None:
        c = compare(task, metric, samples, top_samples, iters, seed)  # this - top
        if c.n:
            p, diff, d_low, d_high, test = c.p_value, c.diff, c.ci_low, c.ci_high, c.test
    return Row(model, task, metric_label(metric), n, value, low, high, method, p, diff, d_low, d_high,
               rank, prov[0], prov[1], prov[2], primary, model == top_model, prov[5], test)


def _measure(result: TaskResult, metric: str, samples: list[Sample] | None):
    """(value, n, ci_low, ci_high, ci_method) from one source: every sample's score, else the results file."""
    scores = [s.scores[metric] for s in samples if metric in s.scores] if samples is not None else []
    if scores and len(scores) == len(samples):
        value, n = sum(scores) / len(scores), len(scores)
        if all(v in (0.0, 1.0) for v in scores):
            return (value, n, *stats.wilson_interval(int(sum(scores)), n), "wilson")
        if n > 1:
            stderr = math.sqrt(sum((v - value) ** 2 for v in scores) / (n - 1) / n)  # as lm-eval's mean stderr
            return (value, n, *stats.normal_interval(value, stderr), "normal")
        return value, n, None, None, "none"
    value, stderr = result.metrics[metric]
    if stderr is not None and not math.isnan(stderr):
        return (value, result.n, *stats.normal_interval(value, stderr), "normal")
    return value, result.n, None, None, "none"


# ---------------------------------------------------------------------- text outputs
def to_csv(board: Board) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in board.rows:
        values = asdict(row)
        writer.writerow(["" if values[c] is None else _csv_value(values[c]) for c in CSV_COLUMNS])
    return out.getvalue()


def _csv_value(value):
    if isinstance(value, float):
        return f"{value:.10g}"  # 10 digits: no 0.08000000000000002
    return csv_text(value) if isinstance(value, str) else value


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text, on one line: ``'`` before anything it would run as a formula."""
    risky = text.startswith(_FORMULA_STARTS) or text.lstrip(" ").startswith(_FORMULA_STARTS)
    text = text.replace("\r", " ").replace("\n", " ")  # the writer would leave a lone CR unquoted
    return "'" + text if risky else text


def md_text(text: str) -> str:
    """Text safe inside Markdown (a table cell, a heading, a list item): HTML and pipes escaped, one line."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.splitlines())


def fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def fmt_p(p: float | None) -> str:
    if p is None:
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def task_table(board: Board, task: str) -> tuple[list[str], list[list[str]]]:
    """Header and cells of one task's table: a line per model, ranked by the primary metric."""
    rows = [r for r in board.rows if r.task == task]
    metrics = list(dict.fromkeys(r.metric for r in rows))
    models = sorted(dict.fromkeys(r.model for r in rows), key=lambda m: next(r.rank for r in rows if r.model == m))
    lead_name = metrics[0] if len({r.metric for r in rows if r.primary}) == 1 else "primary metric"
    tests = {r.p_test for r in rows if r.primary and r.p_test}
    p_name = "p (paired permutation)" if tests == {"paired_permutation"} else (
        "p (McNemar)" if tests <= {"mcnemar_exact"} else "p (McNemar / paired permutation)")
    k = max((r.k for r in rows), default=1)
    corrected = any(r.corrected is not None for r in rows)
    header = ["#", "model", *(f"{m} [95% CI]" for m in metrics),
              *(["corrected [95% CI, judge error included]"] if corrected else []), f"Δ {lead_name} vs top [95% CI]",
              p_name, "n", *(["k"] if k > 1 else []), "judge", "prompt", "data"]
    cells = []
    for model in models:
        mine = {r.metric: r for r in rows if r.model == model}
        lead = next((r for r in mine.values() if r.primary), mine.get(metrics[0]))  # its own primary metric
        first = next(iter(mine.values()))
        diff = "top" if lead and lead.is_top else (
            f"{fmt(lead.diff_vs_top)} [{fmt(lead.diff_ci_low)}, {fmt(lead.diff_ci_high)}]"
            if lead and lead.diff_vs_top is not None else "")
        fixed = [f"{fmt(lead.corrected)} [{fmt(lead.corrected_ci_low)}, {fmt(lead.corrected_ci_high)}]"
                 if lead and lead.corrected is not None else ""] if corrected else []
        cells.append([str(first.rank), model,
                      *(_value_cell(mine.get(m)) for m in metrics), *fixed, diff, fmt_p(lead.p_value if lead else None),
                      str(first.n or ""), *([str(first.k)] if k > 1 else []), first.judge, first.prompt_version,
                      first.data])
    return header, cells


def _value_cell(row: Row | None) -> str:
    if row is None:
        return ""
    if row.ci_low is None:
        return fmt(row.value)
    return f"{fmt(row.value)} [{fmt(row.ci_low)}, {fmt(row.ci_high)}]"


def methods(board: Board) -> str:
    return ("Intervals: Wilson score 95% for per-sample 0/1 metrics, else mean ± 1.96·stderr. "
            f"Δ vs top: paired bootstrap over docs ({board.iters:,} resamples, seed {board.seed}, percentile 95%). "
            "p: exact two-sided McNemar test on the docs where exactly one of the two models is right; for "
            "per-problem estimates of k samples (k > 1: avg@k, pass@k' for each k' ≤ k, maj@k; n counts problems) a two-sided "
            "sign-flip permutation test on the per-problem values, exact up to 16 differing problems.")


def to_markdown(board: Board) -> str:
    lines = ["# Leaderboard", ""]
    for task in board.tasks():
        header, cells = task_table(board, task)
        lines += [f"## {md_text(task)}", "", "| " + " | ".join(md_text(h) for h in header) + " |",
                  "|" + "|".join("---:" if h in ("#", "n") else "---" for h in header) + "|"]
        lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in cells]
        lines.append("")
    lines += [f"_{methods(board)}_", ""]
    lines += [f"- note: {md_text(n)}" for n in board.notes]
    return "\n".join(lines).rstrip() + "\n"
