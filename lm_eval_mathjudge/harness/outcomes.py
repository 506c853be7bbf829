"""What one task's judged samples become: their records, their scores and what the results record.

After the run's pass (``run.py``) an entry holds its ``Job``: one outcome per slot. ``score`` puts
each slot's record (what ``--log_samples`` shows, as a JSON string) in place of its response in the
instance, its scores in the task's table under that record (what ``process_results`` reads), and the
task's blocks in its ``metadata.judge``: the judge's run stats, the flags, the k-sample summary and
the cost. It raises ``JudgeRunError`` for this task's own failures only: a pass that broke off for
it, or samples the judge could not be reached for (nothing is scored as wrong; the message says where
the generations are kept and that a rerun pays only for what is missing).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

from ..core import flags
from ..core.errors import JudgeRunError
from ..core.redact import redact
from ..core.types import Outcome
from ..judging import schedule
from ..judging.counterfactual import CAUGHT, caught
from . import ksamples, provenance, recovery
from .entry import Entry
from .render import as_text

log = logging.getLogger(__name__)


def score(entry: Entry, scores: dict, record: dict[str, Any]) -> None:
    """Write the entry's outcomes into its instances, ``scores`` (record -> metrics) and ``record`` (its
    ``metadata.judge``); raise for its own failures only."""
    job, plan = entry.job, entry.plan
    if job.error is not None:
        raise JudgeRunError(schedule.failure_message(job) + " "
                            + recovery.keep_generations(entry.cache_dir)) from job.error
    outcomes = job.slot_outcomes()
    flagged = []
    for (inst, key, j), outcome in zip(entry.slots, outcomes):
        fields = {**sample_record(entry, as_text(ksamples.response(inst, key, j)), outcome, record["pipeline"]),
                  **outcome.detail}
        text = json.dumps(fields, ensure_ascii=False)
        scores[text] = plan.scores(outcome.verdict, caught(outcome))
        flagged.append((fields["judge_flags"], scores[text]))
        ksamples.store(inst, key, j, text)
    run = provenance.run_stats(entry.name, job.client, job.failures(), list(job.skipped.values()), job.run_stats)
    record["run"] = {**run, **provenance.alias_note(plan.settings, run)}
    record["flags"] = _flags(entry.name, flagged)
    if plan.judge.name == "vlm":
        record["media_dirs"] = list(entry.renderer.media_roots())
    if plan.k is not None:  # each doc's k-sample metrics from its k records, and the k-sample summary
        record["k_samples"] = ksamples.finish(entry.instances, plan.k, scores, entry.name)
    if job.cost is not None:
        record.update(job.cost)
    _raise_for_transport_failures(entry, outcomes, job.client.fatal_error)


def sample_record(entry: Entry, response: str, outcome: Outcome, pipeline: str) -> dict[str, Any]:
    """What --log_samples shows for one judged response (as a JSON string)."""
    describe = entry.plan.judge.describe
    return {
        "verdict": None if outcome.verdict is None else describe(outcome.verdict),
        "judge_failed": outcome.failure is not None,
        "failure": outcome.failure,
        "error": redact(outcome.error) if outcome.error else outcome.error,
        "raw_reply": redact(outcome.raw_reply) if outcome.raw_reply else outcome.raw_reply,
        "cached": outcome.cached,
        "judge": pipeline,  # a cascade's record names its deciding stage
        "judge_flags": entry.renderer.flags(response) + ([CAUGHT] if caught(outcome) else []),
        "response": response,
    }


def _flags(task: str, flagged: list[tuple[list[str], dict[str, float]]]) -> dict[str, Any]:
    """How many answers addressed the judge, per flag, and how they scored (flags.py)."""
    summary = flags.summarise(flagged)
    if summary["flagged"]:
        log.warning("%s: %d of %d responses are flagged as addressing the judge (%s); see judge_flags in the "
                    "samples file", task, summary["flagged"], summary["samples"],
                    ", ".join(f"{k}: {v['samples']}" for k, v in summary["by_flag"].items()))
    return summary


def _raise_for_transport_failures(entry: Entry, outcomes: list[Outcome], fatal: Any) -> None:
    failed = [o for o in outcomes if o.transport_failed]
    if not failed:
        return
    kinds = ", ".join(f"{k}: {n}" for k, n in sorted(Counter(o.failure for o in failed).items()))
    cause = redact(f" The judge refused the requests: {fatal}." if fatal else f" Last error: {failed[-1].error}.")
    raise JudgeRunError(
        f"{entry.name}: {len(failed)} of {len(outcomes)} samples got no verdict ({kinds}).{cause} "
        f"Nothing was scored as wrong. Every verdict obtained is cached in {entry.cache_dir}, "
        f"so rerunning the same command judges only the missing samples. "
        + recovery.keep_generations(entry.cache_dir))
