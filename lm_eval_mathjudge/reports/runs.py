"""Read lm-eval's own output: ``results_<stamp>.json`` and ``samples_<task>_<stamp>.jsonl``.

A RUN argument is a results file or a folder searched recursively (lm-eval writes
``<output_path>/<model>/results_<stamp>.json``). Results files are grouped by the
model name lm-eval recorded; when several results of one model hold the same task
(a rerun), the newest wins. Samples files belong to the results file with the same
time stamp, as lm-eval names them.

Samples are matched across runs by doc: ``doc_id`` plus a hash of the question text,
so two runs on different doc sets never pair by accident.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..core.docs import question_of
from ..core.errors import ConfigError
from ..core.redact import redact
from ..core.samples import k_order
from ..settings.schema import pipeline_label
from . import partial

# The headline score of each judge, first found leads the table (a cascade's has its own name).
PRIMARY_METRICS = ("gpt4_exact_match", "cascade_exact_match", "final_correct")
NO_JUDGE = "lm-eval metric (no judge)"
_NAME_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")  # lm-eval's own order
_STAMP = re.compile(r"results_(.+)\.json$")


class ReportError(ConfigError):
    """Input that cannot be reported on; the message says what to do."""


@dataclass(frozen=True)
class Sample:
    task: str
    doc_id: int
    question: str | None
    response: str | None
    scores: dict[str, float]  # "metric,filter" -> value
    record: dict[str, Any] | None  # our judge's JSON record (verdict, raw reply), if any
    records: tuple[dict[str, Any], ...] = ()  # every sample's record, in sample order (k with ``repeats`` k)

    @property
    def key(self) -> tuple[int, str]:
        return (self.doc_id, question_hash(self.question))


@dataclass(frozen=True)
class TaskResult:
    task: str
    metrics: dict[str, tuple[float, float | None]]  # "metric,filter" -> (value, stderr)
    higher_is_better: dict[str, bool]
    n: int | None
    judge: dict[str, Any]  # configs.<task>.metadata.judge, {} for tasks without our judge
    data: str  # data set, config and split as recorded
    results_path: str
    samples_path: str | None
    is_group: bool
    date: float

    def samples(self) -> list[Sample]:
        if self.samples_path is None:
            raise ReportError(f"{self.task}: no samples file next to {self.results_path}; "
                              "rerun lm_eval with --log_samples to compare per sample")
        return load_samples(self.samples_path, self.task)


@dataclass
class Run:
    model: str
    sources: list[str] = field(default_factory=list)
    tasks: dict[str, TaskResult] = field(default_factory=dict)
    superseded: list[str] = field(default_factory=list)  # older results of a task that a rerun replaced
    unscored: list[str] = field(default_factory=list)  # results without scores (--predict_only)
    skipped: list[str] = field(default_factory=list)  # half-written samples files passed over (the warnings)


def pipeline(result: TaskResult) -> str:
    """Who scored a task: the whole judging pipeline (config.pipeline_label), or lm-eval's own metric."""
    return pipeline_label(result.judge) if result.judge.get("backend") else NO_JUDGE


def judge_id(result: TaskResult) -> str:
    """Who scored a task and with which prompt: ``pipeline @ prompt version``."""
    if not result.judge.get("backend"):
        return NO_JUDGE
    return f"{pipeline(result)} @ {result.judge.get('prompt_version') or '-'}"


def question_hash(question: str | None) -> str:
    text = " ".join((question or "").split())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def metric_label(key: str) -> str:
    """``gpt4_exact_match,none`` -> ``gpt4_exact_match``; other filters stay visible."""
    name, _, filt = key.partition(",")
    return name if filt in ("", "none") else f"{name} ({filt})"


def primary_metric(metrics: list[str]) -> str | None:
    """The headline metric: the judge's primary, or with k samples per problem its ``_avg@k``."""
    for name in PRIMARY_METRICS:
        for key in metrics:
            base = key.partition(",")[0]
            if base == name or base.startswith(f"{name}_avg@"):
                return key
    return metrics[0] if metrics else None


def judge_snapshots(result: TaskResult) -> tuple[str, ...]:
    """The model versions the judge's API reported answering: every reply used (``metadata.judge.run.
    used_models``: paid, cached or from a batch) and the paid ones (``reported_models``, all older results
    have); () when none was reported (a local judge, an API that does not say, a cache older than the record)."""
    run = result.judge.get("run")
    if not isinstance(run, dict):
        return ()
    found = [m for name in ("used_models", "reported_models") if isinstance(run.get(name), dict) for m in run[name]]
    return tuple(sorted({str(m) for m in found}))


def samples_per_problem(result: TaskResult) -> int:
    """k of a run with ``repeats`` k (the results' ``metadata.judge.k_samples``), else 1."""
    k = (result.judge.get("k_samples") or {}).get("k") if isinstance(result.judge.get("k_samples"), dict) else None
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1


# ---------------------------------------------------------------------- finding files
def results_files(arg: str) -> list[str]:
    if os.path.isfile(arg):
        return [arg]
    if os.path.isdir(arg):
        found = sorted(glob.glob(os.path.join(glob.escape(arg), "**", "results_*.json"), recursive=True))
        if found:
            return found
        raise ReportError(f"{arg}: no results_*.json inside; pass lm_eval's --output_path folder or a results file")
    raise ReportError(f"{arg}: no such file or folder")


def load_runs(args: list[str]) -> list[Run]:
    """Every model found under the arguments, in the order first seen."""
    runs: dict[str, Run] = {}
    seen: set[str] = set()
    for arg in args:
        for path, data in _whole_results(arg, seen):
            model = model_name(data)
            run = runs.setdefault(model, Run(model))
            run.sources.append(path)
            if not data["results"] or all(not _metrics(v) for v in data["results"].values()):
                run.unscored.append(path)
            for result in _task_results(path, data):
                _keep(run, result)
    return list(runs.values())


def _keep(run: Run, result: TaskResult) -> None:
    """Two results of one task (a rerun): whole samples beat half-written ones, then the newer wins."""
    old = run.tasks.get(result.task)
    if old is None:
        run.tasks[result.task] = result
        return
    if judge_id(old) != judge_id(result):  # a rerun replaces only its own kind
        raise ReportError(
            f"{run.model} has two results for {result.task} judged differently ({judge_id(old)} in "
            f"{old.results_path}, {judge_id(result)} in {result.results_path}); neither replaces the "
            "other, since they are different measurements: pass only one of them "
            "(mathjudge agreement compares two judges)")
    cut_new, cut_old = partial.samples_state(result.samples_path), partial.samples_state(old.samples_path)
    newer = result.date >= old.date if (cut_new is None) == (cut_old is None) else cut_new is None
    kept, dropped, why = (result, old, cut_old) if newer else (old, result, cut_new)
    run.superseded.append(dropped.results_path)
    if why is not None and kept.samples_path is not None and partial.samples_state(kept.samples_path) is None:
        run.skipped.append(partial.skipped(dropped.samples_path, why, f"{kept.samples_path} is used for {result.task}"))
    run.tasks[result.task] = kept


def _whole_results(arg: str, seen: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The whole results files under ``arg`` (each path once over all arguments); a file a kill left
    half-written is skipped with a warning when a whole one is there, and refused when none is."""
    whole, cut = [], []
    for path in results_files(arg):
        if path not in seen:
            seen.add(path)
            data, why = _read_json(path)
            (whole if why is None else cut).append((path, data if why is None else why))
    if cut and not whole:
        raise ReportError(f"{arg} holds no complete results file: {cut[0][0]} {cut[0][1]} ({partial.KILLED}); "
                          + partial.RESUME)
    for path, why in cut:
        partial.skipped(path, why, "the complete results files beside it are used")
    return whole


def load_one(arg: str) -> Run:
    runs = load_runs([arg])
    if len(runs) != 1:
        raise ReportError(f"{arg} holds results of {len(runs)} models ({', '.join(r.model for r in runs)}); "
                          "pass the folder or results file of one model")
    return runs[0]


def _read_json(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """(results, None), or (None, why) for a file a kill left half-written."""
    try:
        data, why = partial.read_results(path)
    except OSError as exc:
        raise ReportError(f"{path}: not a readable lm-eval results file ({exc.strerror or exc})") from None
    if why is None and (not isinstance(data, dict) or not isinstance(data.get("results"), dict)):
        raise ReportError(f"{path}: has no 'results' object; is it an lm-eval results_*.json?")
    return data, why


# ---------------------------------------------------------------------- model names
def model_name(results: dict[str, Any]) -> str:
    """The name lm-eval recorded; never a value that looks like a credential."""
    name = results.get("model_name")
    if not isinstance(name, str) or not name:
        name = _name_from_args((results.get("config") or {}).get("model_args")) or "unknown-model"
    return name if redact(name) == name else "***"


def _name_from_args(args: Any) -> str | None:
    if isinstance(args, str):  # "pretrained=x,api_key=..." as lm-eval keeps it
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    if not isinstance(args, dict):
        return None
    for key in _NAME_KEYS:
        if key in args:  # none of these names is a credential; model_name() still checks the value
            return str(args[key])
    return None


# ---------------------------------------------------------------------- per-task results
def _task_results(path: str, data: dict[str, Any]) -> Iterator[TaskResult]:
    match = _STAMP.search(os.path.basename(path))
    stamp = match.group(1) if match else None
    groups = set(data.get("group_subtasks") or {})
    for task, values in data["results"].items():
        metrics = _metrics(values)
        if not metrics:  # --predict_only: nothing was scored
            continue
        config = (data.get("configs") or {}).get(task) or {}
        yield TaskResult(
            task=task, metrics=metrics,
            higher_is_better={k: bool((data.get("higher_is_better") or {}).get(task, {}).get(k.partition(",")[0], True))
                              for k in metrics},
            n=((data.get("n-samples") or {}).get(task) or {}).get("effective") or values.get("sample_len"),
            judge=((config.get("metadata") or {}).get("judge") or {}),
            data=_data_source(config), results_path=path,
            samples_path=_samples_file(path, task, stamp), is_group=task in groups,
            date=float(data.get("date") or os.path.getmtime(path)))


def _metrics(values: dict[str, Any]) -> dict[str, tuple[float, float | None]]:
    out = {}
    for key, value in values.items():
        if "," not in key or "_stderr," in key or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key.startswith("bypass,"):
            continue
        name, _, filt = key.partition(",")
        stderr = values.get(f"{name}_stderr,{filt}")
        out[key] = (float(value), float(stderr) if isinstance(stderr, (int, float)) else None)
    return {key: out[key] for key in k_order(out)}  # pass@4 before pass@16, however the file was written


def _data_source(config: dict[str, Any]) -> str:
    """The data set as a reader knows it: the hub id, or ``local:<folder>@<hash>`` for a local copy.

    A local file's absolute path says nothing to another reader (and makes the table overflow); its
    folder names the data set and the content hash tells two different copies apart.
    """
    path = config.get("dataset_path")
    source = (config.get("metadata") or {}).get("data_source") or {}
    if path and (isinstance(source, dict) and source.get("path") or os.path.isabs(str(path))):
        folder = os.path.basename(os.path.dirname(str(path))) or os.path.basename(str(path))
        sha = source.get("sha256") if isinstance(source, dict) else None
        path = f"local:{folder}" + (f"@{str(sha)[:8]}" if sha else "")
    parts = [path, config.get("dataset_name"), config.get("test_split")]
    return " ".join(str(p) for p in parts if p) or "unknown"


def _samples_file(results_path: str, task: str, stamp: str | None) -> str | None:
    if stamp is None:
        return None
    path = os.path.join(os.path.dirname(results_path), f"samples_{task}_{stamp}.jsonl")
    return path if os.path.isfile(path) else None


# ---------------------------------------------------------------------- samples
def load_samples(path: str, task: str) -> list[Sample]:
    """One Sample per doc; lm-eval writes a line per (doc, filter), whose scores are merged."""
    return _merge(read_samples(path), path, task)


def read_samples(path: str) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a whole samples file; one a kill left half-written is refused, saying what to do."""
    why = partial.samples_state(path)
    if why is not None:
        raise ReportError(f"samples file {path} {why}: it was left half-written ({partial.KILLED}); "
                          + partial.RESUME)
    return read_jsonl(path, "samples file")


def checked_samples(result: TaskResult) -> tuple[list[Sample] | None, str | None]:
    """The task's samples when present, readable and complete; else None and why (for a note on its row).

    Complete: as many docs as the results file counts (``n``). A file whose last line is cut
    mid-record (a copy or a write that stopped) is incomplete, not unreadable.
    """
    path = result.samples_path
    if path is None:
        return None, None
    try:
        rows, cut = _jsonl(path, "samples file", allow_cut=True)
        samples = _merge(rows, path, result.task)
    except ReportError as exc:
        return None, (f"its samples file is unreadable ({exc}), so this row's value, n and interval come from "
                      "the results file and it has no paired test")
    if cut is not None or (result.n is not None and len(samples) < result.n):
        where = f"cut at line {cut}: " if cut is not None else ""
        return None, (f"its samples file {path} is incomplete ({where}{len(samples)} of {result.n or '?'} samples), "
                      "so this row's value, n and interval come from the results file and it has no paired test")
    return samples, None


def _merge(rows: list[tuple[int, Any]], path: str, task: str) -> list[Sample]:
    out: dict[int, Sample] = {}
    for number, row in rows:
        sample = _sample(row, task, f"{path}:{number}")
        seen = out.get(sample.doc_id)
        out[sample.doc_id] = sample if seen is None else dataclasses.replace(
            seen, scores={**seen.scores, **sample.scores})
    return list(out.values())


def read_jsonl(path: str, what: str = "file") -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) for every non-blank line; unreadable files, bytes and JSON are ReportErrors."""
    return _jsonl(path, what, allow_cut=False)[0]


def _jsonl(path: str, what: str, allow_cut: bool) -> tuple[list[tuple[int, Any]], int | None]:
    """The rows, and the number of a cut last line (no newline, not JSON) when ``allow_cut`` (else None)."""
    try:
        with open(path, "rb") as fh:
            lines = list(enumerate(fh, 1))
    except OSError as exc:
        raise ReportError(f"{what} {path}: {exc.strerror}") from None
    rows = []
    for number, raw in lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReportError(f"{path}:{number} is not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                              f"{exc.start + 1})") from None
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except (json.JSONDecodeError, RecursionError) as exc:
            if allow_cut and number == len(lines) and not line.endswith("\n"):
                return rows, number
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise ReportError(f"{path}:{number} is not valid JSON ({reason})") from None
    return rows, None


def _sample(row: Any, task: str, where: str) -> Sample:
    if not isinstance(row, dict):
        raise ReportError(f"{where} is not a JSON object; is it an lm-eval samples file?")
    doc_id = row.get("doc_id", -1)
    if isinstance(doc_id, bool) or not isinstance(doc_id, int):
        raise ReportError(f"{where}: doc_id {doc_id!r} is not a whole number")
    filt = row.get("filter", "none")
    scores = {f"{m},{filt}": float(row[m]) for m in row.get("metrics") or []
              if isinstance(m, str) and isinstance(row.get(m), (int, float)) and not isinstance(row.get(m), bool)}
    records = tuple(r for r in map(_judge_record, _texts(row.get("filtered_resps"))) if r is not None)
    record = _judge_record(_first_text(row.get("filtered_resps")))
    response = record.get("response") if record else _first_text(row.get("resps"))
    doc = row.get("doc")
    return Sample(task, doc_id, question_of(doc) if isinstance(doc, dict) else None, response, scores, record,
                  records)


def _texts(value: Any) -> list[str]:
    """Every string of a (nested) list, in order: a doc's k records in ``filtered_resps``."""
    if isinstance(value, str):
        return [value]
    return [t for item in value for t in _texts(item)] if isinstance(value, list) else []


def _judge_record(text: str | None) -> dict[str, Any] | None:
    if not text or not text.startswith("{"):
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "raw_reply" in record else None


def _first_text(value: Any) -> str | None:
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else None


def by_key(samples: list[Sample]) -> dict[tuple[int, str], Sample]:
    return {s.key: s for s in samples}


def doc_set_id(samples: list[Sample]) -> str:
    """A short fingerprint of which docs a run covered (order-free)."""
    keys = sorted({f"{doc_id}:{qhash}" for doc_id, qhash in (s.key for s in samples)})
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:8]
