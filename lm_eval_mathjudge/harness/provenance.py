"""What the results record about a task's judge: identity, endpoint, pipeline label, and its run stats.

``judge_record`` is the task's ``metadata.judge`` block as written at load time (settings without
secrets, the endpoint really called, the prompt version, a panel's members or a cascade's stages,
and the pipeline label that names them all); ``run_stats`` is what the judge did in this run, with
the failures counted per sample. A judge named by a moving alias (``settings.models.moving_alias``)
is warned about once per judge pass (``warn_aliases``) and its run stats say so (``alias_note``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from .. import vendors
from ..backends import endpoints
from ..core import prompts
from ..core.judges import Judge
from ..core.redact import public_url
from ..core.types import Outcome
from ..settings.models import moving_alias
from ..settings.schema import JudgeSettings, RunOptions, pipeline_label

log = logging.getLogger(__name__)
PIN_EXAMPLES = "gpt-4o-2024-08-06, gemini-1.5-pro-002"


def judge_record(judge: Judge, settings: JudgeSettings, options: RunOptions,
                 members: Sequence[JudgeSettings]) -> dict[str, Any]:
    record = {"name": judge.name, **_public(settings),
              "cache_dir": settings.resolved_cache_dir() if settings.cache else None,
              "prompt_version": prompts.load(judge.template).version, **_pipeline(options, members)}
    return {**record, "pipeline": pipeline_label(record)}


def _public(settings: JudgeSettings) -> dict[str, Any]:
    return {**settings.public(), "base_url": public_url(settings.base_url) if settings.base_url else None,
            "endpoint": endpoints.recorded_endpoint(settings)}


def _pipeline(options: RunOptions, members: Sequence[JudgeSettings]) -> dict[str, Any]:
    """A panel's members (or a cascade's stages), with their full settings."""
    if options.panel:
        return {"panel": {"rule": options.panel_rule, "min": options.quorum,
                          "members": [_public(s) for s in members]}}
    if options.cascade:
        return {"cascade": {"rule": _public(members[0]), "llm": _public(members[1])}}
    return {}


def run_stats(task: str, judge: Any, failures: Counter, skipped: Sequence[Outcome],
              combined: dict[str, Any] | None = None) -> dict[str, Any]:
    """The judge's stats for this task, logged. ``failures`` are per sample (counted once, by the pass);
    ``skipped`` are the outcomes of samples never sent (no media to judge), which are warned about.
    ``combined``: the stats summed over every rank of the run (``schedule.summarise``), when there are."""
    stats = dict(combined) if combined is not None else {**judge.stats.as_dict(), "failures": dict(failures)}
    not_generated = Counter(o.failure for o in skipped)
    if not_generated:
        log.warning("%s: %d samples have no media to judge (%s); each counts as judge_failed",
                    task, sum(not_generated.values()),
                    ", ".join(f"{k}: {n}" for k, n in sorted(not_generated.items())))
    log.info("%s: %s", task, stats)
    return stats


def is_alias(settings: JudgeSettings) -> bool:
    """The judge is named by a name its provider can point at a new snapshot (a vendor whose record has no
    alias rule names models by the user's own names: an Azure deployment's version is the deployment's)."""
    vendor = vendors.get(settings.backend)
    return vendor is not None and vendor.aliases is not None and moving_alias(settings.model)


def snapshots(stats: Mapping[str, Any]) -> list[str]:
    """The model versions a judge's run stats say answered: every reply used, and the paid ones."""
    return sorted({str(m) for name in ("used_models", "reported_models")
                   if isinstance(stats.get(name), dict) for m in stats[name]})


def alias_note(settings: JudgeSettings, stats: Mapping[str, Any]) -> dict[str, Any]:
    """What the run stats add for an alias: ``alias: true`` and the snapshots that really judged."""
    return {"alias": True, "snapshots": snapshots(stats)} if is_alias(settings) else {}


def warn_aliases(members: Iterable[Any]) -> None:
    """One warning per aliased judge model of a judge pass (``members``: the clients that made calls),
    naming the snapshots its API reported and how to pin one."""
    found: dict[tuple[str, str], set[str]] = {}
    for member in members:
        settings = member.settings
        if is_alias(settings):
            found.setdefault((settings.backend, settings.model), set()).update(snapshots(member.stats.as_dict()))
    for (backend, model), reported in found.items():
        pinned = sorted(m for m in reported if not moving_alias(m))
        seen = (f"this run's replies came from {', '.join(sorted(reported))}" if reported
                else "its API reported no snapshot")
        hint = f"judge_model={pinned[0]}" if pinned else f"a dated snapshot or a version, e.g. {PIN_EXAMPLES}"
        log.warning("judge_model %s (%s) is an alias the provider can move to a new snapshot at any time, so "
                    "a later run may be judged by another model; %s. Pin it (%s) to keep runs comparable; the "
                    "results record alias: true and the snapshots (metadata.judge.run)", model, backend, seen, hint)
