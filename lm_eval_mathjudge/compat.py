"""The one place where lm-eval versions differ.

Tested: lm-eval 0.4.12, 0.4.13 and the 0.5.0.dev1 pre-release; later releases up to 0.6 are
allowed, and any lm-eval is refused only when it lacks an internal the plugin needs (``missing``:
features are detected, versions are not compared). What differs, and how this module hides it:

=====================  ==============================  ===================================
                       0.4.12 / 0.4.13                 0.5.0.dev1
=====================  ==============================  ===================================
task base class        ``ConfigurableTask``            ``GenerateTask`` (``ConfigurableTask``
                                                       is an alias of the abstract ``Task``)
task constructor       ``(data_dir, cache_dir,         ``(config)``; the dataset loads lazily
                       download_mode, config)``
default filter         ``take_first``: one string      ``noop``: the list of responses (the
                                                       harness judges the first either way)
scoring after filters  ``process_results`` per doc     scorers: ``score_instances`` per task
``repeats``            ``repeats:`` in the YAML or     the same, and ``--repeats K``, which
                       ``--metadata``, read when the   reaches a built task (``set_repeats``):
                       task is built                   its filters, metrics, scorers rebuilt
``--predict_only``     ``bypass`` in                   ``bypass`` metric in the scorers; it returns
                       ``_metric_fn_list``             a bare number that 0.5.0.dev1's reduce
                                                       step cannot take (wrapped in a list here)
metric registration    ``register_metric(**args)``     same call; ``output_type`` must match
                                                       the task's (default: multiple_choice)
model registry         ``model_registry.register(name, target="module:Class")`` in both
                       (so ``_startup`` registers the replay model the same way)
task discovery         ``lm_eval.tasks.manager.TaskManager(include_path=...)`` in both
                       (so ``_startup`` patches the same module on both lines)
a group's tasks in     ``task``                        ``group::task`` (lm-eval's naming; left
results/samples files                                  as it is)
``--use_cache`` file   ``PATH_rank<R>.db``, R = rank   ``PATH_rank<R>.db``, R = rank
                       or ``LOCAL_RANK`` (0.4.13;
                       0.4.12: rank)
finished generations   ``CacheHook.add_partial(attr, args, result)`` and ``hash_args(attr, args)``
                       (its key) in ``lm_eval.api.model``, the same in all three
result table           ``lm_eval.utils.make_table(results[, "groups"])`` in all three
recorded model name    ``GeneralConfigTracker.log_experiment_args(model_source, model_args, ...)``
                       in ``lm_eval.loggers.evaluation_tracker`` sets ``model_name`` from
                       ``model_args`` in all three (``pretrained=``, ``model=``, ``path=``, ...:
                       our models take the name as ``model=``)
a model by its name    ``lm_eval.api.registry.get_model(name)``, the same in all three
filter pipelines       ``task._filters``                  ``scorer.filter`` of each scorer
=====================  ==============================  ===================================

Everything that touches lm-eval is imported inside functions, so importing
this module costs nothing of lm-eval's. ``TaskBase`` is built on first
access (PEP 562 ``__getattr__``), after the check of the internals it needs, so an lm-eval
that lacks one fails with :class:`UnsupportedLmEvalError` naming what is missing when a task is
built or the replay model is created, never at import.
"""

from __future__ import annotations

from typing import Any, Callable

from .core.errors import ConfigError

TESTED = "lm-eval 0.4.12, 0.4.13 and 0.5.0.dev1"  # what CI runs on (.ci/run); newer ones are allowed
# What pyproject.toml declares (tests/test_compat.py keeps the two in step): the tested releases and
# the ones after them up to 0.6. A fresh install takes the newest final release, `--pre` the newest
# pre-release, and an installed 0.5.0.dev1 is kept. Whether an lm-eval can run the plugin is decided
# by what it has (``missing``), never by its version number.
PIP_REQUIREMENT = "lm-eval>=0.4.12,<0.6"

# The internals the plugin uses, as (module, attribute): lm-eval's public and semi-public API.
_NEEDED = (("lm_eval.tasks.manager", "TaskManager"), ("lm_eval.api.registry", "model_registry"),
           ("lm_eval.api.registry", "metric_registry"), ("lm_eval.api.registry", "register_metric"),
           ("lm_eval.api.registry", "get_model"), ("lm_eval.api.model", "LM"), ("lm_eval.api.model", "CacheHook"),
           ("lm_eval.api.model", "hash_args"), ("lm_eval.utils", "make_table"))
# A task line: 0.5's scorers (GenerateTask + GenScorer), or 0.4's ConfigurableTask scoring per doc.
_SCORER_LINE = (("lm_eval.api.task", "GenerateTask"), ("lm_eval.scorers", "GenScorer"), ("lm_eval.scorers", "ScoredDoc"))
_PER_DOC_LINE = (("lm_eval.api.task", "ConfigurableTask"),)


class UnsupportedLmEvalError(ConfigError):
    """The installed lm-eval lacks an internal the plugin needs."""

    family = "version"


def installed_version() -> str | None:
    """lm-eval's version from its installed metadata (None when it is not installed)."""
    from importlib import metadata

    try:
        return metadata.version("lm-eval")
    except metadata.PackageNotFoundError:
        return None


def _has(module: str, name: str) -> bool:
    import importlib

    try:
        return hasattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - a module that is missing or fails to import is a missing feature
        return False


def has_scorers() -> bool:
    """True where lm-eval scores through scorers (the 0.5 line: GenerateTask, lazy datasets, the
    ``(config)`` task constructor), False where tasks score per doc (0.4)."""
    return all(_has(m, n) for m, n in _SCORER_LINE)


def missing() -> list[str]:
    """The internals the plugin needs that the installed lm-eval lacks ("module.name"), [] when none."""
    if installed_version() is None:
        return ["lm_eval (not installed)"]
    gone = [f"{m}.{n}" for m, n in _NEEDED if not _has(m, n)]
    if not has_scorers() and not _concrete_configurable_task():
        gone.append("lm_eval.api.task.ConfigurableTask (a concrete task class) or lm_eval.scorers")
    return gone


def _concrete_configurable_task() -> bool:
    if not all(_has(m, n) for m, n in _PER_DOC_LINE):
        return False
    from lm_eval.api.task import ConfigurableTask

    return not getattr(ConfigurableTask, "__abstractmethods__", None)


def require_supported() -> str:
    """Return the installed lm-eval version, or raise a clear error naming what it lacks."""
    gone = missing()
    if gone:
        version = installed_version()
        found = "no lm-eval" if version is None else f"lm-eval {version}"
        raise UnsupportedLmEvalError(
            f"lm_eval_mathjudge cannot run on {found}: it lacks {', '.join(gone)}. The plugin is tested on "
            f"{TESTED}; install one of those: pip install 'lm-eval==0.4.13'.")
    return str(installed_version())


def register_metric(name: str, higher_is_better: bool) -> None:
    """Make a judge metric known to lm-eval: mean aggregation, closed-form stderr."""
    import lm_eval.api.metrics  # noqa: F401  -- the built-in aggregations must exist first
    from lm_eval.api.registry import metric_registry, register_metric as register

    if name not in metric_registry:
        # output_type: 0.5 refuses a metric registered for another output type; 0.4 ignores it.
        register(metric=name, higher_is_better=higher_is_better, aggregation="mean",
                 output_type="generate_until")(_passthrough)


def _passthrough(items):  # scores are computed by the task; lm-eval never calls this
    return items


def result_table(results: dict[str, Any]) -> str:
    """lm-eval's own result table of ``results`` (and its groups table), as ``lm_eval`` prints it."""
    from lm_eval.utils import make_table

    table = make_table(results)
    if results.get("groups"):
        table += "\n" + make_table(results, "groups")
    return table


# ---------------------------------------------------------------------- lm-eval's generation cache
def generation_key(args: Any) -> str | None:
    """lm-eval's cache key of a generate_until request's ``args`` (what ``--use_cache`` looks up);
    None for arguments JSON cannot take (images)."""
    from lm_eval.api.model import hash_args

    try:
        return hash_args("generate_until", args)
    except (TypeError, ValueError):
        return None


_WATCHERS: list[Callable[[str, Any, Any], None]] = []  # who is told of each finished generation


def watch_generations(callback: Callable[[str, Any, Any], None]) -> None:
    """Also hand every result an lm-eval model reports as finished (``CacheHook.add_partial``, which
    the API, hf and vLLM adapters call per request) to ``callback`` (each callback once); never raises."""
    from lm_eval.api.model import CacheHook

    if callback not in _WATCHERS:
        _WATCHERS.append(callback)
    original = CacheHook.add_partial
    if getattr(original, "_mathjudge", False):
        return

    def add_partial(self, attr, req, res):
        for watcher in list(_WATCHERS):
            try:
                watcher(attr, req, res)
            except Exception:  # noqa: BLE001 - watching must never break the model
                import logging

                logging.getLogger(__name__).debug("watching a finished generation failed", exc_info=True)
        return original(self, attr, req, res)

    add_partial._mathjudge = True  # type: ignore[attr-defined]
    add_partial.__wrapped__ = original  # type: ignore[attr-defined]
    CacheHook.add_partial = add_partial


def build_model(name: str, kwargs: dict[str, Any]) -> Any:
    """An lm-eval model by its registered name, built from parsed model arguments (as
    ``LM.create_from_arg_string`` does: None values left out)."""
    from lm_eval.api.registry import get_model

    try:
        cls = get_model(name)
    except ValueError as exc:
        raise ConfigError(f"fallback={name}: lm-eval knows no such model ({exc})") from None
    return cls(**{k: v for k, v in kwargs.items() if v is not None})


# lm-eval's filters that read each response on its own (and its doc): applied to one response as it
# arrives, they give what the task's filters give once all have arrived. Any other filter (a custom
# function, decontamination) may look across responses, so such a task is judged after generation.
_PER_RESPONSE_FILTERS = frozenset({"NoopFilter", "TakeFirstFilter", "TakeKFilter", "MajorityVoteFilter", "RegexFilter",
                                   "MultiChoiceRegexFilter", "WhitespaceFilter", "LowercaseFilter", "UppercaseFilter",
                                   "MapFilter"})


def filter_ensembles(task: Any) -> list:
    """The task's named filter pipelines (0.4: ``task._filters``; 0.5: one per scorer)."""
    if has_scorers():
        return [scorer.filter for scorer in getattr(task, "_scorers", None) or []]
    return list(getattr(task, "_filters", None) or [])


def per_response(ensembles: list) -> bool:
    """True when there are pipelines and every filter of them is one of ``_PER_RESPONSE_FILTERS``."""
    for ensemble in ensembles:
        for factory in ensemble.filters:
            cls = getattr(factory, "func", factory)
            if (getattr(cls, "__name__", "") not in _PER_RESPONSE_FILTERS
                    or not getattr(cls, "__module__", "").startswith("lm_eval.filters.")):
                return False
    return bool(ensembles)


def filter_one(ensembles: list, resps: list, doc: Any) -> dict[str, Any]:
    """What each filter pipeline (``filter_ensembles``) makes of one instance's responses: name -> value."""
    out = {}
    for ensemble in ensembles:
        values: Any = [resps]
        for factory in ensemble.filters:
            values = factory().apply(values, [doc])
        out[ensemble.name] = list(values)[0]
    return out


def generation_cache_file(prefix: str, rank: int) -> str:
    """The file ``--use_cache PREFIX`` reads for this rank."""
    import os

    if not rank and _cache_reads_local_rank():  # under torchrun every process has rank 0: LOCAL_RANK tells
        rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
    return f"{prefix}_rank{rank}.db"


def _cache_reads_local_rank() -> bool:
    """Whether lm-eval names its ``--use_cache`` file by ``LOCAL_RANK`` when the rank is 0 (0.4.13 on)."""
    import inspect

    import lm_eval.evaluator

    try:
        return "LOCAL_RANK" in inspect.getsource(lm_eval.evaluator.simple_evaluate)
    except (OSError, TypeError):  # no source shipped: the newer rule
        return True


def write_generation_cache(path: str, generations: dict[str, str]) -> None:
    """Write key -> generation rows in the format lm-eval's ``CachingLM`` reads (sqlitedict, pickled values)."""
    import os

    from sqlitedict import SqliteDict

    db = SqliteDict(path, autocommit=False)
    try:
        db.update(generations)
        db.commit()
    finally:
        db.close()
    os.chmod(path, 0o600)


def __getattr__(name: str):  # PEP 562: TaskBase is built when first asked for
    if name == "TaskBase":
        require_supported()
        base = _task_base_05() if has_scorers() else _task_base_04()
        globals()["TaskBase"] = base
        return base
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _task_base_04() -> type:
    from lm_eval.api.task import ConfigurableTask

    class TaskBase(ConfigurableTask):
        """0.4: the stock task; lm-eval calls ``process_results`` per doc after ``apply_filters``."""

        def _compat_predict_only(self) -> bool:
            return "bypass" in self._metric_fn_list

    return TaskBase


def _task_base_05() -> type:
    from dataclasses import dataclass

    from lm_eval.api.task import GenerateTask
    from lm_eval.scorers import GenScorer, ScoredDoc

    @dataclass(kw_only=True)
    class VerdictScorer(GenScorer):
        """Scores a whole task in one pass from the verdicts the task's judge batch recorded.

        ``verdicts(doc, [record])`` is the task's ``process_results``: one mapping from a
        judged record to metrics for every lm-eval version.
        """

        verdicts: Callable[[dict, list], dict] | None = None

        def score_instances(self, instances):
            return {doc_id: ScoredDoc(doc_id=doc_id, reference=insts[0].target,
                                      scores={metric: [value] for metric, value in self.verdicts(
                                          insts[0].doc, [i.filtered_resps[self.name] for i in insts]).items()})
                    for doc_id, insts in instances.items()}

    def _listed(scored: ScoredDoc) -> ScoredDoc:
        # 0.5.0.dev1's stock GenScorer returns bare numbers for some metrics (the "bypass" metric of
        # --predict_only among them), which its own reduce step cannot take: one value per repeat.
        scores = {metric: value if isinstance(value, list) else [value] for metric, value in scored.scores.items()}
        return ScoredDoc(doc_id=scored.doc_id, reference=scored.reference, scores=scores)

    class TaskBase(GenerateTask):
        """0.5: 0.4's constructor signature, and scoring through scorers."""

        def __init__(self, data_dir=None, cache_dir=None, download_mode=None, config=None):
            # 0.5 has no dataset folder, cache or download mode here (datasets load lazily).
            super().__init__(config)

        def _build_scorers(self):
            return [VerdictScorer.from_dict({**cfg}, output_type=self.OUTPUT_TYPE, verdicts=self.process_results)
                    for cfg in self.config.filter_list]

        def process_instances(self) -> None:
            # Stock 0.5 tries process_results per doc first, on responses flattened into
            # characters when a filter returns a string; the scorers read the verdicts instead.
            if not self._scorers:
                return
            self.apply_filters()  # the task's filters, then its one concurrent judge batch
            by_doc: dict[int, list] = {}
            for inst in self._instances:
                by_doc.setdefault(inst.doc_id, []).append(inst)
            for scorer in self._scorers:
                scored = scorer.score_instances(by_doc)
                scorer.set_results({doc_id: _listed(doc) for doc_id, doc in scored.items()})

        def set_repeats(self, repeats: int) -> None:
            super().set_repeats(repeats)
            scoring = self._compat_scoring_for(int(repeats))  # the task's filters and metrics for this k
            if scoring is not None:
                self._config.filter_list, self._config.metric_list = scoring
                self._config._normalize_scoring_config()
                self._scorers = self._build_scorers()

        def _compat_predict_only(self) -> bool:
            return self._has_metric("bypass")

    return TaskBase
