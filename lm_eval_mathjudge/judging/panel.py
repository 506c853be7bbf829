"""Judge panels: several judges per sample, combined into one verdict.

Each member is a full judge (its own backend and settings, the task's template
and parser, its own cache identity) behind its own ``JudgeClient``. The panel judges
one request at a time like a client does (its members asked at once), so a panel task
goes through the run's one pool (``schedule.py``) with every other task. Per sample:

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
import hashlib
import itertools
import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Sequence

from ..core import stats
from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome
from .members import Members, width

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


class Panel(Members):
    """A judge made of several member judges: one request in, one combined Outcome out.

    It has the pieces the run's pool judges with (``key``, ``judge_one``, ``count_requests``,
    ``prefill``, ``finish``, ``set_bar``), so a panel task shares the run's one pool with every
    other task; within one request the members are asked at once (each member's own limits,
    per endpoint, still hold). The Outcome's ``detail`` is what the samples file shows about the
    members; ``stats`` summarises them and their agreement.
    """

    def __init__(self, members: Sequence[tuple[str, Any]], rule: str, quorum: int,
                 describe: Callable[[Any], dict[str, Any]]):
        self._members = list(members)  # (label, JudgeClient)
        self._rule, self._quorum, self._describe = rule, quorum, describe
        self._votes: dict[str, tuple[Outcome, ...]] = {}  # panel key -> each member's outcome
        self._lock = threading.Lock()
        self._helpers: ThreadPoolExecutor | None = None  # asks the members after the first one
        self.stats = _PanelStats(self)

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self._members]

    @property
    def clients(self) -> list[Any]:
        return [client for _, client in self._members]

    # ------------------------------------------------------------------ the pieces the pool judges with
    def key(self, request: JudgeRequest) -> str:
        return "panel:" + hashlib.sha256(
            "\n".join(client.key(request) for client in self.clients).encode()).hexdigest()

    def count_requests(self, requests: int, unique: int) -> None:
        for client in self.clients:
            client.count_requests(requests, unique)

    def judge_one(self, key: str, request: JudgeRequest) -> Outcome:
        """Every member's outcome for one request (asked at once), combined by the panel's rule."""
        row = tuple(self._ask_all(request))
        with self._lock:
            self._votes[key] = row
        verdict, failure, note = combine([o.verdict for o in row], self._rule, self._quorum)
        return Outcome(verdict=verdict, failure=failure, error=note if failure else None,
                       cached=all(o.cached for o in row), calls=sum(o.calls for o in row),
                       detail={"panel": [self._member_record(label, o) for label, o in zip(self.labels, row)]})

    def _ask_all(self, request: JudgeRequest) -> list[Outcome]:
        clients = self.clients
        if len(clients) == 1:
            return [clients[0].judge_one(clients[0].key(request), request)]
        with self._lock:
            if self._helpers is None:
                helpers = width(clients) * (len(clients) - 1)  # the first member is asked on the pool's own thread
                self._helpers = ThreadPoolExecutor(max_workers=helpers, thread_name_prefix="mathjudge-panel")
        later = [self._helpers.submit(client.judge_one, client.key(request), request) for client in clients[1:]]
        try:
            first = clients[0].judge_one(clients[0].key(request), request)
        finally:
            outcomes = [future.result() for future in later]  # every member paid for is waited for
        return [first, *outcomes]

    def prefill(self, items: Sequence[tuple[str, JudgeRequest]]) -> None:
        """Batch mode: every batch member submits (or collects) its job before the panel stops for any."""
        from ..batch.base import BatchPending  # lazy: only batch mode gets here

        pending: list[BatchPending] = []
        for client in self.clients:
            if client.batch_mode:
                try:
                    client.prefill([(client.key(request), request) for _, request in items])
                except BatchPending as exc:
                    pending.append(exc)
        if pending:
            raise BatchPending("; ".join(str(exc) for exc in pending),
                               job_ids=[i for exc in pending for i in exc.job_ids])

    def finish(self, outcomes: Iterable[Outcome]) -> None:
        """Each member counts its own failures; a member that was down is said once, with how to resume."""
        with self._lock:
            rows = list(self._votes.values())
        for i, (label, client) in enumerate(self._members):
            results = [row[i] for row in rows]
            client.finish(results)
            down = sum(o.transport_failed for o in results)
            if down:
                log.warning("judge panel member %s could not be reached for %d of %d samples (%s); those samples "
                            "were decided by the other members or counted as %s. Rerun the same command to ask "
                            "it again: every verdict obtained is cached.", label, down, len(results),
                            redact(next(o.error for o in results if o.transport_failed) or ""), QUORUM)

    @property
    def batch_mode(self) -> bool:
        return any(client.batch_mode for client in self.clients)

    @property
    def settings(self) -> Any:
        return self.clients[0].settings

    def _member_record(self, label: str, outcome: Outcome) -> dict[str, Any]:
        return {"judge": label,
                "verdict": None if outcome.verdict is None else self._describe(outcome.verdict),
                "failure": outcome.failure,
                "error": redact(outcome.error) if outcome.error else outcome.error,
                "raw_reply": redact(outcome.raw_reply) if outcome.raw_reply else outcome.raw_reply,
                "cached": outcome.cached, **{k: v for k, v in outcome.detail.items() if k == "counterfactual"}}

    @property
    def fatal_error(self):
        return None  # a member that is down does not stop the panel; see finish

    def summary(self) -> dict[str, Any]:
        with self._lock:
            rows = list(self._votes.values())
        columns = [[row[i].verdict for row in rows] for i in range(len(self._members))]
        return {"rule": self._rule, "min": self._quorum,
                "members": [{"judge": label, **client.stats.as_dict()} for label, client in self._members],
                "agreement": agreement(self.labels, columns)}

    def close(self) -> None:
        if self._helpers is not None:
            self._helpers.shutdown(wait=True)
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
