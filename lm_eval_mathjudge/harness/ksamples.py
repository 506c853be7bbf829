"""k samples per problem in a judged task (``repeats: k``): the glue between lm-eval and ``core.samples``.

lm-eval makes k samples per doc with its own mechanism: one Instance per doc with
``repeats = k``, the model asked k times, ``resps`` the k answers. Its default
filter keeps only the first, so a task with k > 1 gets a ``take_first_k`` filter that
keeps them all (the same filter in every supported lm-eval). Each of the k samples
is judged as a slot of its own (identical responses share one request key, so they
are judged once, and counted); the samples file then holds the k per-sample records of a
doc in ``filtered_resps``, and the doc's metrics are ``core.samples.problem_metrics``.
The final answers of a doc's k samples are grouped by equivalence in the local rule's
worker process (``backends.local``), bounded in time like any local judgement, for the majority
vote (maj@k) only: every sample is judged on its own.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

from .. import compat
from ..core.errors import ConfigError, JudgeRefusal
from ..core.jsontext import shown
from ..core.judges import JUDGE_FAILED, Judge
from ..core.samples import KSpec, identical, problem_metrics
from ..settings.schema import MAX_REPEATS, RunOptions

log = logging.getLogger(__name__)
KEYS = ("repeats",)  # the metadata keys read here
MAX_NAMED = 20  # problems named in the results for ties and answerless majorities (the counts are complete)


def configure(config: dict, judge: Judge, options: RunOptions) -> KSpec | None:
    """Read ``repeats`` (the YAML's, or ``--metadata '{"repeats": K}'``, which wins) and, for k > 1, set up the
    task config for k samples: lm-eval's repeats, a filter that keeps them all, and the k-sample metrics."""
    task = config.get("task")
    raw = (config.get("metadata") or {}).get("repeats", config.get("repeats"))
    k = _repeats(raw, task)
    if k == 1:  # judge_pass_at without repeats: check_ready refuses it (0.5's --repeats may still come)
        return None
    too_big = [kp for kp in options.pass_at if kp > k]
    if too_big:
        raise ConfigError(f"task {task}: judge_pass_at asks for pass@{too_big[0]} but there are only {k} samples "
                          f"per problem (repeats {k}); ask for values from 1 to {k}")
    listed = [m.get("metric") for m in config.get("metric_list") or [] if m.get("metric") != JUDGE_FAILED]
    metrics = tuple(m for m in listed if isinstance(m, str)) or judge.metric_names
    spec = KSpec.of(judge, k, options.pass_at)
    spec = KSpec(k=spec.k, pass_at=spec.pass_at, metrics=metrics)
    config["repeats"] = k
    if not config.get("filter_list"):
        config["filter_list"] = [{"name": "none", "filter": [{"function": "take_first_k", "k": k}]}]
    names = spec.names()
    config["metric_list"] = [{"metric": name, "aggregation": "mean", "higher_is_better": higher}
                             for name, higher in names.items()]
    for name, higher in names.items():
        compat.register_metric(name, higher)
    return spec


def check_ready(spec: KSpec | None, options: RunOptions, task: str | None) -> None:
    """Before any generation, once the task's k is final: pass@k' without k samples is a mistake."""
    if spec is None and options.pass_at:
        raise ConfigError(f"task {task}: judge_pass_at is set but repeats is 1; pass@k' needs k samples per "
                          'problem: add --metadata \'{"repeats": K}\' (or repeats: K in the task YAML)')


def check_filters(spec: KSpec | None, ensembles: list, instances: list, task: str | None) -> None:
    """Before any generation: with k samples every filter pipeline must keep all k of a doc (a majority
    vote or take_first would leave one), else the k samples would be paid for and then refused."""
    if spec is None or not instances:
        return
    try:  # a custom filter cannot be tried on made-up answers: it is checked once the answers are in
        views = compat.filter_one(ensembles, ["0"] * spec.k, instances[0].doc) if compat.per_response(ensembles) else {}
    except Exception:  # noqa: BLE001 - as above
        log.debug("%s: filters not tried before generation", task, exc_info=True)
        return
    for name, value in views.items():
        got = len(value) if isinstance(value, (list, tuple)) else 1
        if got != spec.k:
            raise ConfigError(f"{task}: the filter {name!r} keeps {got} of the {spec.k} samples of each "
                              f"doc (repeats {spec.k}); a task with repeats > 1 needs a filter that keeps every sample "
                              "(remove filter_list, or end it with take_first_k). Nothing was generated")


def reconfigure(base: dict, k: int, judge: Judge, options: RunOptions) -> tuple[KSpec | None, dict]:
    """The same set-up for a k given after the task was built (lm-eval 0.5's ``--repeats``): from the
    task's config as it was before ``configure`` (``base``), with ``k`` in place of its repeats."""
    config = {**base, "metadata": {**(base.get("metadata") or {}), "repeats": k}}
    return configure(config, judge, options), config


def _repeats(raw: Any, task: str | None) -> int:
    if raw in (None, ""):
        return 1
    try:
        k = int(raw) if not isinstance(raw, bool) and float(raw) == int(float(raw)) else None
    except (TypeError, ValueError, OverflowError):  # a list, a word, inf, an int beyond any float
        k = None
    if k is None or not 1 <= k <= MAX_REPEATS:
        raise ConfigError(f"task {task}: repeats={shown(raw)} must be a whole number from 1 to {MAX_REPEATS} "
                          '(samples per problem), e.g. --metadata \'{"repeats": 16}\'')
    return k


# ---------------------------------------------------------------------- slots: one per sample
def slots(instances, spec: KSpec | None) -> Iterator[tuple[Any, str, int | None]]:
    """(instance, filter key, sample index) per response to judge; index None with one sample per doc."""
    for inst in instances:
        for key, value in inst.filtered_resps.items():
            if spec is None:
                yield inst, key, None
                continue
            if not isinstance(value, (list, tuple)) or len(value) != spec.k:
                got = len(value) if isinstance(value, (list, tuple)) else 1
                raise ConfigError(f"{inst.task_name}: doc {inst.doc_id} has {got} response(s) after the filter "
                                  f"{key!r}, but repeats is {spec.k}; a task with repeats > 1 needs a filter that "
                                  "keeps every sample (remove filter_list, or end it with take_first_k)")
            for j in range(spec.k):
                yield inst, key, j


def response(inst, key: str, j: int | None) -> Any:
    value = inst.filtered_resps[key]
    return value if j is None else value[j]


def store(inst, key: str, j: int | None, record: str) -> None:
    """Put sample j's judged record in place of its response (a new list: ``resps`` stays the model's text)."""
    if j is None:
        inst.filtered_resps[key] = record
        return
    values = list(inst.filtered_resps[key])
    values[j] = record
    inst.filtered_resps[key] = values


def key_of(value: Any) -> Any:
    """What ``process_results`` receives for one doc, as a key of the task's score table."""
    return tuple(value) if isinstance(value, list) else value


# ---------------------------------------------------------------------- per-problem metrics
def answer_classes(docs: list[tuple[Any, str, list[str]]], task_name: str,
                   classes_of=None) -> dict[tuple[int, str], list[int | None]]:
    """(instance, filter key, its k texts) -> each text's answer class (the local rule's), by (id(instance), key).
    A doc whose answers the rule cannot group gets no class at all: no majority."""
    out = {}
    with (classes_of or _local_classes)() as group:
        for inst, key, texts in docs:
            try:
                out[(id(inst), key)] = group(inst.doc, texts)
            except JudgeRefusal as exc:  # unsure: no majority for this problem, counted
                log.warning("%s: doc %s: the answers of its samples could not be grouped (%s); no majority",
                            task_name, inst.doc_id, exc)
                out[(id(inst), key)] = [None] * len(texts)
    return out


def finish(instances, spec: KSpec, scores: dict, task_name: str, classes_of=None) -> dict[str, Any]:
    """Score every doc from its k records (``scores``: record -> per-sample scores; the doc's metrics are
    added under the doc's key) and return the run's k-sample summary for the results' metadata."""
    summary = {"k": spec.k, "pass_at": list(spec.pass_at), "problems": 0, "samples": 0, "identical_responses": 0,
               "maj": {"ties": 0, "tied_docs": [], "no_answer": 0, "no_answer_docs": []}}
    docs = []
    for inst in instances:
        for key, records in inst.filtered_resps.items():
            fields = [json.loads(r) for r in records]
            docs.append((inst, key, records, [f["response"] for f in fields]))
    known = answer_classes([(inst, key, texts) for inst, key, _, texts in docs], task_name, classes_of)
    for inst, key, records, texts in docs:
        classes = known[(id(inst), key)]
        metrics, vote = problem_metrics(spec, [scores[r] for r in records], classes)
        scores[key_of(records)] = metrics
        summary["problems"] += 1
        summary["samples"] += len(records)
        summary["identical_responses"] += identical(texts)
        if vote.tied > 1:
            _count(summary["maj"], "ties", "tied_docs", inst.doc_id)
        elif vote.tied == 0:
            _count(summary["maj"], "no_answer", "no_answer_docs", inst.doc_id)
    if summary["maj"]["ties"]:
        log.warning("%s: maj@%d is tied on %d problem(s) (docs %s); each scores the mean verdict of its tied "
                    "answers", task_name, spec.k, summary["maj"]["ties"], summary["maj"]["tied_docs"])
    return summary


def _count(table: dict, count: str, docs: str, doc_id: Any) -> None:
    table[count] += 1
    if len(table[docs]) < MAX_NAMED:
        table[docs].append(doc_id)


class _local_classes:
    """The local rule's worker, opened for one task's grouping and closed after it."""

    def __enter__(self):
        from ..backends.local import LocalBackend

        self._backend = LocalBackend(workers=1)
        return lambda doc, texts: self._backend.answer_classes(str(doc["mj_answer"]), texts,
                                                               str(doc.get("mj_question", "")))

    def __exit__(self, *exc) -> None:
        self._backend.close()
