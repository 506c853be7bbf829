"""Judge the samples of an earlier ``--log_samples`` run again, without the model.

The samples' responses are matched to this plugin's docs by question text and
replayed through lm-eval itself (``simple_evaluate`` with the ``mathjudge-replay``
model, only the matched docs), and the output is written by lm-eval's own
``EvaluationTracker``: the results and samples files are exactly lm-eval's, under
the original run's model name, so the leaderboard, ``diff``, ``agreement`` and any
other lm-eval tool read them.

Sources: samples files of this plugin's tasks (judged or ``--predict_only``) and of
lm-eval's built-in tasks that hold a data set's docs (``gsm8k*``, ``minerva_math*``, ``aime*``...:
each entry's ``builtin_tasks`` in ``core/data_sets.py``); a built-in task is
judged as the plugin task of the same data set (``--tasks`` picks another judge,
e.g. ``gsm8k_vlmjudge``). Docs of the source that are not in the plugin's data
(say ``minerva_math_algebra`` beyond MATH-500) are skipped and counted. The media
folders of an image or video run (its results' ``metadata.generator``) go with
its responses, so the VLM judge attaches those files again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Callable

from ..core import data_sets
from ..core.docs import question_of, question_texts
from . import partial
from .runs import ReportError, Sample, load_samples, model_name

log = logging.getLogger(__name__)

FAMILIES = ("gpt4em", "vlmjudge")
_SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")


@dataclass
class Source:
    path: str
    task: str
    model: str
    samples: list[Sample]
    media_dirs: tuple[str, ...] = ()  # where its media responses were made (the original run's generator)


@dataclass
class Plan:
    model: str
    records: list[dict] = field(default_factory=list)  # replay records: task, doc_id, question, response
    indices: dict[str, list[int]] = field(default_factory=dict)  # target task -> doc indices to judge
    skipped: dict[str, int] = field(default_factory=dict)  # source task -> samples with no doc of ours


def read_source(path: str) -> Source:
    match = _SAMPLES_NAME.match(os.path.basename(path))
    if not os.path.isfile(path):
        raise ReportError(f"{path}: no such samples file")
    if match is None:
        raise ReportError(f"{path}: not named like lm-eval's samples files (samples_<task>_<time>.jsonl), so its "
                          "task is unknown; pass the files lm_eval --log_samples wrote")
    task, stamp = match["task"], match["stamp"]
    from ..generators import media_folders

    results = os.path.join(os.path.dirname(path), f"results_{stamp}.json")
    folders: tuple[str, ...] = ()
    data, _ = partial.read_results(results) if os.path.isfile(results) else (None, None)
    if isinstance(data, dict):
        model = model_name(data)
        generator = (((data.get("configs") or {}).get(task) or {}).get("metadata") or {}).get("generator")
        folders = media_folders(generator) if isinstance(generator, dict) else ()
    else:  # none, or one a kill left half-written: lm-eval puts samples under <output_path>/<sanitized model name>/
        model = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return Source(path, task, model, load_samples(path, task), folders)


def _whole(paths: list[str]) -> list[str]:
    """A samples file a kill left half-written is passed over when a whole one of the same task and model
    (lm-eval's folder) is given too; alone, reading it says what to do."""
    def key(path: str) -> tuple[str, str | None]:
        match = _SAMPLES_NAME.match(os.path.basename(path))
        return os.path.dirname(os.path.abspath(path)), match["task"] if match else None

    cut = {p: partial.samples_state(p) if os.path.isfile(p) else None for p in paths}
    whole = {key(p) for p in paths if cut[p] is None}
    kept = []
    for path in paths:
        if cut[path] is not None and key(path) in whole:
            partial.skipped(path, cut[path], f"the other samples files of {key(path)[1]} are judged")
        else:
            kept.append(path)
    return kept


def task_paths() -> list[str]:
    """The folders of the plugin's task YAMLs: its own, then those of data sets that bring their own."""
    from .._startup import tasks_dir

    return [tasks_dir(), *data_sets.task_folders()]


def datasets_of(task: str) -> tuple[str, ...]:
    """The data sets whose docs the samples of ``task`` (ours or one of lm-eval's) may hold."""
    entries = data_sets.every()  # one look at the installed plugins
    known = [entry.name for entry in entries]
    for name in known:
        if any(task == f"{name}_{family}" for family in FAMILIES):
            return (name,)
    held = data_sets.holding(task, entries)
    if held:
        return tuple(entry.name for entry in held)
    builtin = ", ".join(f"{prefix}*" for prefix in data_sets.builtin_prefixes(entries))
    raise ReportError(f"task {task!r}: no data set of this plugin matches it (known: {', '.join(known)}, and "
                      f"lm-eval's {builtin} tasks)")


def targets_for(task: str, chosen: list[str] | None) -> list[str]:
    names = datasets_of(task)
    if chosen:
        picked = [t for t in chosen if t.rsplit("_", 1)[0] in names]
        if not picked:
            raise ReportError(f"--tasks {','.join(chosen)} has no task for the data of {task} ({', '.join(names)})")
        return picked
    if task in {f"{n}_{f}" for n in names for f in FAMILIES}:
        return [task]
    return [f"{name}_gpt4em" for name in names]


def plan(sources: list[Source], docs: dict[str, list[dict]], chosen: list[str] | None) -> Plan:
    """Match every source sample to a doc of a target task by question text."""

    result = Plan(sources[0].model)
    index = {t: {_norm(text): i for i, doc in enumerate(d) for text in question_texts(doc)} for t, d in docs.items()}
    for source in sources:
        targets = targets_for(source.task, chosen)
        for sample in source.samples:
            hit = next(((t, index[t][_norm(sample.question)]) for t in targets
                        if sample.question and _norm(sample.question) in index.get(t, {})), None)
            if hit is None or sample.response is None:
                result.skipped[source.task] = result.skipped.get(source.task, 0) + 1
                continue
            target, i = hit
            if i in result.indices.setdefault(target, []):
                continue  # the same doc in two sources: the first wins
            result.indices[target].append(i)
            result.records.append({"task": target, "doc_id": i, "question": question_of(docs[target][i]),
                                   "response": sample.response, "source": f"{source.task}:{sample.doc_id}",
                                   **({"media_dirs": list(source.media_dirs)} if source.media_dirs else {})})
    return result


def _norm(text: str | None) -> str:
    return " ".join((text or "").split())


def rejudge(paths: list[str], output_path: str, metadata: dict | None = None,
            tasks: list[str] | None = None, *, name: str | None = None,
            show: Callable[[str, dict], None] | None = None) -> list[str]:
    """Re-judge the given samples files; returns the results files written (one per model).

    ``name``: the model name to record (samples of one model only; default: the original run's).
    ``show(model, results)`` is called with lm-eval's results of each model (the CLI prints its table).

    A SIGINT or SIGTERM stops it as it stops ``lm_eval`` (``stop.py``): the replies received are
    cached, so the same command judges only the rest.
    """
    from ..calls import stop

    with stop.guarded("rejudge", _stopped_note):
        return _rejudge(paths, output_path, metadata, tasks, name, show)


def _stopped_note() -> str:
    return "Every judge reply received is in the judge cache: rerun the same command to judge only the rest."


def _rejudge(paths: list[str], output_path: str, metadata: dict | None, tasks: list[str] | None,
             name: str | None = None, show: Callable[[str, dict], None] | None = None) -> list[str]:
    sources = [read_source(p) for p in _whole(paths)]
    for source in sources:  # unknown tasks fail before lm-eval is even imported
        targets_for(source.task, tasks)
    by_model: dict[str, list[Source]] = {}
    for source in sources:
        by_model.setdefault(source.model, []).append(source)
    if name is not None and not name.strip():
        raise ReportError("--name is empty: give the model name the re-judged results should record")
    if name is not None and len(by_model) > 1:
        raise ReportError(f"--name names one model, but the samples files are of {len(by_model)} "
                          f"({', '.join(by_model)}); re-judge each model's files with its own --name")
    return [_rejudge_model(group, output_path, dict(metadata or {}), tasks, name, show)
            for group in by_model.values()]


def _rejudge_model(sources: list[Source], output_path: str, metadata: dict, tasks: list[str] | None,
                   name: str | None = None, show: Callable[[str, dict], None] | None = None) -> str:
    from lm_eval.api.registry import model_registry
    from lm_eval.evaluator import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import sanitize_model_name

    from .._startup import REPLAY_MODEL

    if REPLAY_MODEL not in model_registry:  # the start-up hook is off (MATHJUDGE_NO_AUTOLOAD)
        model_registry.register(REPLAY_MODEL, target="lm_eval_mathjudge.harness.replay:ReplayLM")
    targets = list(dict.fromkeys(t for s in sources for t in targets_for(s.task, tasks)))
    metadata = {**metadata, "rejudged_from": [s.path for s in sources]}  # recorded in each task's config
    manager = TaskManager(include_path=task_paths(), include_defaults=False, metadata=metadata)
    loaded = manager.load(targets)["tasks"]
    docs = {name: list(task.eval_docs) for name, task in loaded.items()}
    work = plan(sources, docs, tasks)
    if name:
        work.model = name.strip()
    for task, count in work.skipped.items():
        print(f"mathjudge rejudge: {count} sample(s) of {task} have no doc of this plugin's data "
              "(matched by question text); skipped", file=sys.stderr)
    if not work.records:
        raise ReportError("no sample matches a doc of " + ", ".join(targets) + " by question text; are the samples "
                          "from the same data set (check MATHJUDGE_DATA_DIR)?")
    safe = sanitize_model_name(work.model)
    replay = os.path.join(output_path, "rejudge-inputs", f"{safe}-responses.jsonl")
    os.makedirs(os.path.dirname(replay), exist_ok=True)
    with open(replay, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in work.records)
    tracker = EvaluationTracker(output_path=output_path)
    chosen = [loaded[t] for t in work.indices]
    results = simple_evaluate(model=REPLAY_MODEL, model_args={"path": replay}, tasks=chosen,
                              samples={t: sorted(i) for t, i in work.indices.items()}, log_samples=True,
                              task_manager=manager, evaluation_tracker=tracker, metadata=metadata)
    # The generations are the original model's: record its name, not the replay file's.
    tracker.general_config_tracker.model_name = work.model
    tracker.general_config_tracker.model_name_sanitized = safe
    samples = results.pop("samples")
    if show is not None:
        show(work.model, results)
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    written = os.path.join(output_path, safe, f"results_{getattr(tracker, 'date_id', '')}.json")
    if not os.path.isfile(written):  # lm-eval logs a failed save as a warning only
        raise ReportError(f"lm-eval could not write the results under {output_path}; is it writable? "
                          "The judge replies obtained are cached (unless judge_cache is off): "
                          "a rerun does not pay for them again")
    return written
