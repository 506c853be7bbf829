"""What the results record about a task's judge: identity, endpoint, pipeline label, and its run stats.

``judge_record`` is the task's ``metadata.judge`` block as written at load time (settings without
secrets, the endpoint really called, the prompt version, a panel's members or a cascade's stages,
and the pipeline label that names them all); ``run_stats`` is what the judge did in this run, with
the failures counted per sample.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Sequence

from ..backends import endpoints
from ..core import prompts
from ..core.judges import Judge
from ..core.redact import public_url
from ..core.types import Outcome
from ..settings.schema import JudgeSettings, RunOptions, pipeline_label

log = logging.getLogger(__name__)


def judge_record(judge: Judge, settings: JudgeSettings, options: RunOptions,
                 members: Sequence[JudgeSettings]) -> dict[str, Any]:
    record = {"name": judge.name, **_public(settings),
              "cache_dir": settings.resolved_cache_dir() if settings.cache else None,
              "prompt_version": prompts.load(judge.template).version, "dedupe": options.dedupe,
              **_pipeline(options, members)}
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
