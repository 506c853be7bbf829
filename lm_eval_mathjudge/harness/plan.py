"""How one judged task is judged, read once from its config: the one place its judge settings take effect.

``plan_of(config)`` reads a task's ``mathjudge:`` block, its data set (``core/data_sets.py``), the
judge settings and run options from their layers (``settings/layers.py``: YAML < environment <
metadata), a panel's members or a cascade's two stages, and ``repeats``. It returns lm-eval's config
with the keys the judging decides filled in (the data set's keys, the k-sample filters and metrics,
a cascade's metric names) and a frozen ``JudgePlan``; nothing after it reads a setting from the
config again. The plan opens the task's judge (``open_judge``), scores a verdict (``scores``) and
names its judge audit (``audit_key``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping

from .. import audit, compat
from ..core import data_sets
from ..core.errors import ConfigError
from ..core.judges import JUDGE_FAILED, JUDGES, Judge
from ..core.samples import KSpec
from ..cost import prices
from ..judging import cascade, counterfactual, factory
from ..settings.layers import check_near_misses, metadata_keys, resolve_run_options, resolve_settings
from ..settings.schema import JudgeSettings, RunOptions
from . import commands, ksamples, overrides, provenance
from .render import Renderer

SCORING_KEYS = ("task", "metadata", "metric_list", "filter_list")  # what lm-eval 0.5's --repeats rebuilds from


@dataclass(frozen=True)
class JudgePlan:
    """A task's judge (``core/judges.py``), its settings and run options, the settings of every judge it
    calls (one, a panel's members or a cascade's stages), k samples per doc, and what the results record."""
    judge: Judge
    settings: JudgeSettings
    options: RunOptions
    members: tuple[JudgeSettings, ...]
    k: KSpec | None  # repeats > 1: k samples per doc (harness/ksamples.py)
    record: Mapping[str, Any]  # metadata.judge as written when the task is built (provenance.judge_record)
    local_name: str | None  # its data set's folder under MATHJUDGE_DATA_DIR
    base: Mapping[str, Any]  # the config's scoring keys before the k-sample set-up

    @property
    def cache_dir(self) -> str:
        return self.settings.resolved_cache_dir()

    def scores(self, verdict: Any, caught: bool = False) -> dict[str, float]:
        """A verdict's metrics (a failure: 0, and 1 on judge_failed), under a cascade's names; with
        judge_counterfactual, ``judge_counterfactual`` says whether the re-check caught the judge."""
        scores = self.judge.scores(verdict)
        if self.options.counterfactual:
            scores[counterfactual.METRIC] = float(caught)
        return cascade.rename(scores) if self.options.cascade else scores

    def open_judge(self) -> tuple[Any, list[Any]]:
        """A new copy of this task's judge (one client, a panel or a cascade) and its member clients; the
        caller closes it. The task judges its samples with one; the judge audit opens another."""
        return factory.open_judge(self.judge, self.options, self.members)

    def audit_key(self) -> str:
        """Tasks of one run with the same judge (settings, template, panel or cascade) share one audit."""
        return json.dumps([dict(self.record), self.options.audit_limit], sort_keys=True, default=str)

    def renderer(self, name: str) -> Renderer:
        """How the task ``name`` renders its samples (with their re-checks under judge_counterfactual)."""
        return Renderer(self.judge, name, self.options.media_dirs, recheck=self.options.counterfactual)

    def audit_target(self, name: str, docs: Any, render: Renderer | None = None,
                     recheck: bool | None = None) -> audit.Target:
        """What the judge audit needs of the task ``name``: its docs, its judge and how it renders a request.
        ``recheck``: audit with the counterfactual re-check on (True) or off, whatever the task's setting."""
        plan = self if recheck is None else replace(self, options=replace(self.options, counterfactual=recheck))
        return audit.Target(name=name, docs=docs, judge=plan.judge, limit=plan.options.audit_limit,
                            label=plan.record["pipeline"], open_judge=plan.open_judge,
                            render=render or plan.renderer(name))

    def with_repeats(self, repeats: int) -> tuple[JudgePlan, dict] | None:
        """lm-eval 0.5's ``--repeats`` after the task was built: the plan and the config for that k, or None
        when nothing changes."""
        if repeats == (self.k.k if self.k is not None else 1):
            return None
        k, config = ksamples.reconfigure(dict(self.base), repeats, self.judge, self.options)
        return replace(self, k=k), config


def plan_of(config: dict | None) -> tuple[dict, JudgePlan]:
    """lm-eval's config of a judged task (our keys taken out, the judging's filled in) and its plan."""
    config = dict(config or {})
    config.pop("class", None)
    block = overrides.our_keys(config)
    judge = _judge_named(block.get("judge", "exact_match"), config.get("task"))
    config, data_set = data_sets.task_config(config)  # mathjudge_dataset: the data keys from its entry
    yaml_settings, metadata = block.get("settings"), config.get("metadata")
    settings = resolve_settings(judge.name, yaml_settings, metadata)
    options = resolve_run_options(judge.name, yaml_settings, metadata)
    check_near_misses(metadata, metadata_keys(ksamples.KEYS), ignore=commands.model_arg_names())
    members = tuple(factory.member_settings(judge.name, options, settings, yaml_settings, metadata))
    for member in members:  # a bad price override is a load-time error, not a surprise after paying
        if member.prices is not None:
            prices.load_overrides(member.prices)
    if options.cascade and config.get("metric_list"):  # the metric name says it is a cascade's
        config["metric_list"] = [{**m, "metric": cascade.METRICS.get(m.get("metric"), m.get("metric"))}
                                 for m in config["metric_list"]]
    if options.counterfactual and config.get("metric_list"):  # counted next to judge_failed, lm-eval's mean
        config["metric_list"] = [*config["metric_list"], {"metric": counterfactual.METRIC, "aggregation": "mean",
                                                          "higher_is_better": False}]
    register_metrics()
    base = {key: config.get(key) for key in SCORING_KEYS}
    k = ksamples.configure(config, judge, options)  # repeats > 1: k samples per doc
    record = provenance.judge_record(judge, settings, options, members)
    return config, JudgePlan(judge, settings, options, members, k, record,
                             data_set.local_name if data_set else None, base)


def register_metrics() -> None:
    """Make every judge metric known to lm-eval (mean aggregation, closed-form stderr)."""
    names = {JUDGE_FAILED: False, counterfactual.METRIC: False}
    names.update({m: True for judge in JUDGES.values() for m in judge.metric_names})
    names.update({m: True for m in cascade.METRICS.values()})
    for name, higher in names.items():
        compat.register_metric(name, higher)


def _judge_named(name: str, task: str | None) -> Judge:
    if name not in JUDGES:
        raise ConfigError(f"task {task}: unknown judge {name!r} in the mathjudge block; known: {', '.join(JUDGES)}")
    return JUDGES[name]
