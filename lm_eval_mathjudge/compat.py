"""The one place where the supported lm-eval versions differ.

Supported: lm-eval 0.4.12, 0.4.13 and the 0.5.0.dev1 pre-release. What differs,
and how this module hides it:

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
                       ``model_args`` in all three (``_startup`` lets ``name=`` win for our models)
a model by its name    ``lm_eval.api.registry.get_model(name)``, the same in all three
filter pipelines       ``task._filters``                  ``scorer.filter`` of each scorer
=====================  ==============================  ===================================

Everything that touches lm-eval is imported inside functions, so importing
this module costs nothing of lm-eval's. ``TaskBase`` is built on first
access (PEP 562 ``__getattr__``), after the version check, so an unsupported
lm-eval fails with :class:`UnsupportedLmEvalError` naming the supported range
when a task is built or the replay model is created, never at import.
"""

from __future__ import annotations

from typing import Any, Callable

from .core.errors import ConfigError

SUPPORTED = "lm-eval 0.4.12, 0.4.13 or 0.5.0.dev1"
# What pyproject.toml declares (tests/test_compat.py keeps the two in step). PEP 440 specifier
# sets are intersections, so "0.4.12 to 0.4.13, or 0.5.0.dev1" cannot be written exactly:
# * "<0.5" would exclude 0.5.0.dev1 (a "<V" bound excludes V's own pre-releases), so a plain
#   `pip install .` replaced an installed 0.5.0.dev1 with 0.4.13;
# * "<=0.5.0.dev1" or "<0.5.0.dev2" name a pre-release, which makes pip (26) prefer
#   0.5.0.dev1 on a fresh install without --pre;
# * "<=0.5.0,!=0.5.0" names no pre-release: a fresh install gets 0.4.13, `--pre` gets
#   0.5.0.dev1, and an installed 0.5.0.dev1 is kept. It also admits later 0.4.x finals (after
#   0.4.14) and other 0.5.0 pre-releases, which supported() refuses when a task is built.
PIP_REQUIREMENT = "lm-eval>=0.4.12,<=0.5.0,!=0.5.0,!=0.4.13.dev0,!=0.4.14.*,!=0.5.0.dev0"
_RELEASES_04 = ((0, 4, 12), (0, 4, 13))
_PRERELEASE_05 = "0.5.0.dev1"


class UnsupportedLmEvalError(ConfigError):
    """The installed lm-eval is not one this release was tested with."""

    family = "version"


def installed_version() -> str | None:
    """lm-eval's version from its installed metadata (None when it is not installed)."""
    from importlib import metadata

    try:
        return metadata.version("lm-eval")
    except metadata.PackageNotFoundError:
        return None


def supported(version: str) -> bool:
    """True for 0.4.12 and 0.4.13 (with post releases) and exactly 0.5.0.dev1."""
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    if parsed.public == _PRERELEASE_05:
        return True
    return tuple(parsed.release[:3]) in _RELEASES_04 and not parsed.is_prerelease


def require_supported(version: str | None = None) -> str:
    """Return the installed lm-eval version, or raise a clear error if it is not supported."""
    version = installed_version() if version is None else version
    if version is None or not supported(version):
        found = "no lm-eval" if version is None else f"lm-eval {version}"
        raise UnsupportedLmEvalError(
            f"lm_eval_mathjudge supports {SUPPORTED}, but {found} is installed. Install a supported one: "
            f"pip install 'lm-eval==0.4.13' (or pip install --pre 'lm-eval==0.5.0.dev1').")
    return version


def is_05(version: str | None = None) -> bool:
    """True on the 0.5 line (scorers, lazy datasets, new Task constructor)."""
    from packaging.version import Version

    return Version(require_supported(version)).release[:2] >= (0, 5)


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
    if is_05():
        return [scorer.filter for scorer in getattr(task, "_scorers", None) or []]
    return list(getattr(task, "_filters", None) or [])


def filters_per_response(task: Any) -> bool:
    """True when every filter of the task reads one response at a time (see ``_PER_RESPONSE_FILTERS``)."""
    return per_response(filter_ensembles(task))


def per_response(ensembles: list) -> bool:
    """True when there are pipelines and every filter of them is one of ``_PER_RESPONSE_FILTERS``."""
    for ensemble in ensembles:
        for factory in ensemble.filters:
            cls = getattr(factory, "func", factory)
            if (getattr(cls, "__name__", "") not in _PER_RESPONSE_FILTERS
                    or not getattr(cls, "__module__", "").startswith("lm_eval.filters.")):
                return False
    return bool(ensembles)


def filter_one(task: Any, resps: list, doc: Any) -> dict[str, Any]:
    """What each of the task's filter pipelines makes of one instance's responses: name -> value."""
    out = {}
    for ensemble in filter_ensembles(task):
        values: Any = [resps]
        for factory in ensemble.filters:
            values = factory().apply(values, [doc])
        out[ensemble.name] = list(values)[0]
    return out


def generation_cache_file(prefix: str, rank: int) -> str:
    """The file ``--use_cache PREFIX`` reads for this rank."""
    import os

    from packaging.version import Version

    if not rank and Version(require_supported()).release[:3] == (0, 4, 13):  # LOCAL_RANK under torchrun
        rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
    return f"{prefix}_rank{rank}.db"


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
        base = _task_base_05() if is_05() else _task_base_04()
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
    from typing import Callable, Optional

    from lm_eval.api.task import GenerateTask
    from lm_eval.scorers import GenScorer, ScoredDoc

    @dataclass(kw_only=True)
    class VerdictScorer(GenScorer):
        """Scores a whole task in one pass from the verdicts the task's judge batch recorded.

        ``verdicts(doc, [record])`` is the task's ``process_results``: one mapping from a
        judged record to metrics for every lm-eval version.
        """

        verdicts: Optional[Callable[[dict, list], dict]] = None

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
