"""Judge panels: several judges per sample, combined into one verdict.

Each member is a full judge (its own backend and settings, the task's template
and parser, its own cache identity) behind its own ``JudgeClient``; members are
judged one after another, each with its own concurrency. Per sample:

- fewer than ``quorum`` members gave a verdict -> counted failure ``panel_quorum``;
- ``majority``: every voting field (the verdict's bool/int fields, e.g.
  ``correct``; for the VLM judge each of its three scores) takes the value more
  than half of the answering members gave; no such value -> counted failure
  ``panel_tie`` (a tie is never broken by a guess);
- ``unanimous``: a field is credited only as far as every answering member
  credits it (the minimum), so one dissent withholds the credit.

A member that failed (off-contract reply, refusal, or a service that is down)
simply did not vote; its failure is kept in the sample's record. Panel failures
are scored like any judge failure (0 on the metrics, 1 on ``judge_failed``):
the panel, not a member, is the judge. Member replies stay cached, so a rerun
re-asks only members that gave no verdict.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections import Counter
from typing import Any, Callable, Sequence

from ..core import stats
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome

log = logging.getLogger(__name__)

QUORUM = "panel_quorum"
TIE = "panel_tie"


def vote_fields(verdict: Any) -> list[str]:
    """The fields members vote on: bools and ints (verdict text is not voted on)."""
    return [f.name for f in dataclasses.fields(verdict) if isinstance(getattr(verdict, f.name), (bool, int))]


def combine(verdicts: Sequence[Any | None], rule: str, quorum: int) -> tuple[Any | None, str | None, str]:
    """(combined verdict, None, note) or (None, failure kind, reason) for one sample."""
    answered = [v for v in verdicts if v is not None]
    if len(answered) < quorum:
        return None, QUORUM, (f"{len(answered)} of {len(verdicts)} panel members gave a verdict; "
                              f"the panel needs {quorum}")
    values: dict[str, Any] = {}
    for name in vote_fields(answered[0]):
        votes = [getattr(v, name) for v in answered]
        if rule == "unanimous":
            values[name] = min(votes)
            continue
        value, count = Counter(votes).most_common(1)[0]
        if 2 * count <= len(votes):
            return None, TIE, f"no majority on {name}: the members voted {votes}"
        values[name] = value
    note = f"panel {rule} of {len(answered)} verdicts ({len(verdicts) - len(answered)} member(s) without one)"
    texts = {f.name: note for f in dataclasses.fields(answered[0])
             if f.name not in values and isinstance(getattr(answered[0], f.name), str)}
    return dataclasses.replace(answered[0], **values, **texts), None, note


class Panel:
    """Runs every member on the same requests and combines their verdicts per sample.

    Quacks like ``JudgeClient`` for the harness: ``judge_all``, ``stats``,
    ``fatal_error``, ``close``; ``details`` holds, per request of the last call,
    what the samples file shows about the members.
    """

    def __init__(self, members: Sequence[tuple[str, Any]], rule: str, quorum: int,
                 describe: Callable[[Any], dict[str, Any]]):
        self._members = list(members)  # (label, JudgeClient)
        self._rule, self._quorum, self._describe = rule, quorum, describe
        self._columns: list[list[Any | None]] = [[] for _ in self._members]
        self.details: list[dict[str, Any]] = []
        self.stats = _PanelStats(self)

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self._members]

    def judge_all(self, requests: Sequence[JudgeRequest], desc: str = "judging") -> list[Outcome]:
        per_member = [client.judge_all(requests, desc=f"{desc} [{label}]") for label, client in self._members]
        outcomes, self.details = [], []
        for column, results in zip(self._columns, per_member):
            column.extend(o.verdict for o in results)
        for row in zip(*per_member) if per_member else ():
            verdict, failure, note = combine([o.verdict for o in row], self._rule, self._quorum)
            outcomes.append(Outcome(verdict=verdict, failure=failure, error=note if failure else None,
                                    cached=all(o.cached for o in row), calls=sum(o.calls for o in row)))
            self.details.append({"panel": [self._member_record(label, o) for label, o in zip(self.labels, row)]})
        for label, results in zip(self.labels, per_member):
            down = sum(o.transport_failed for o in results)
            if down:
                log.warning("judge panel member %s could not be reached for %d of %d samples (%s); those samples "
                            "were decided by the other members or counted as %s. Rerun the same command to ask "
                            "it again: every verdict obtained is cached.", label, down, len(results),
                            redact(next(o.error for o in results if o.transport_failed) or ""), QUORUM)
        return outcomes

    def _member_record(self, label: str, outcome: Outcome) -> dict[str, Any]:
        return {"judge": label,
                "verdict": None if outcome.verdict is None else self._describe(outcome.verdict),
                "failure": outcome.failure,
                "error": redact(outcome.error) if outcome.error else outcome.error,
                "raw_reply": redact(outcome.raw_reply) if outcome.raw_reply else outcome.raw_reply,
                "cached": outcome.cached}

    @property
    def fatal_error(self):
        return None  # a member that is down does not stop the panel; see judge_all

    def summary(self) -> dict[str, Any]:
        return {"rule": self._rule, "min": self._quorum,
                "members": [{"judge": label, **client.stats.as_dict()} for label, client in self._members],
                "agreement": agreement(self.labels, self._columns)}

    def close(self) -> None:
        errors = []
        for _, client in self._members:  # every member is closed even if one fails to
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 -- re-raised below, after the others
                errors.append(exc)
        if errors:
            raise errors[0]


class _PanelStats:
    def __init__(self, panel: Panel):
        self._panel = panel

    def as_dict(self) -> dict[str, Any]:
        return {"panel": self._panel.summary()}


# ---------------------------------------------------------------------- agreement
def agreement(labels: Sequence[str], columns: Sequence[Sequence[Any | None]]) -> dict[str, Any]:
    """Per voting field: pairwise agreement and Cohen's kappa, their means, and Fleiss' kappa.

    A pair is compared on the samples where both members gave a verdict; Fleiss'
    kappa uses the samples where every member did. A kappa whose chance agreement
    is 1 (every vote the same value) is undefined: None.
    """
    sample = next((v for column in columns for v in column if v is not None), None)
    if sample is None:
        return {}
    report: dict[str, Any] = {}
    for name in vote_fields(sample):
        votes = [[None if v is None else getattr(v, name) for v in column] for column in columns]
        pairs = []
        for (la, a), (lb, b) in itertools.combinations(zip(labels, votes), 2):
            both = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
            pairs.append({"a": la, "b": lb, "n": len(both),
                          "agreement": sum(x == y for x, y in both) / len(both) if both else None,
                          "kappa": stats.cohen_kappa(both).kappa})
        full = [list(row) for row in zip(*votes) if all(x is not None for x in row)]
        report[name] = {"pairs": pairs, "mean_pairwise_agreement": _mean(p["agreement"] for p in pairs),
                        "mean_pairwise_kappa": _mean(p["kappa"] for p in pairs),
                        "fleiss_n": len(full), "fleiss_kappa": stats.fleiss_kappa(full)}
    return report


def _mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
