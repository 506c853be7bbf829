"""The counterfactual re-check (``judge_counterfactual``): a Correct verdict is asked once more, with a wrong reference.

A judge that credits an answer because the answer told it to (a grader note, a forged verdict, an
instruction in any language or encoding) credits it whatever the reference says. So every verdict
that credits an answer (exact match: Correct; VLM judge: FINAL_CORRECT) is asked again, by the same
client, with the request's ``recheck``: the same prompt and answer, the reference's final answer
changed (``core/counterfactual.py``). Then:

* Incorrect under the wrong reference: the verdict stands (an honest judge loses nothing);
* Correct under both: the judge cannot tell this answer right from wrong. The sample is not credited:
  a counted failure ``counterfactual`` (0 on the metrics, 1 on ``judge_failed``), flagged
  ``counterfactual`` in the samples and counted in the ``judge_counterfactual`` metric;
* the re-check failed (off-contract, refused, unreachable): that failure is the sample's, never a credit;
* no wrong reference could be built (a gold with nothing safe to change): the verdict stands, counted
  as ``unchecked``.

``Counterfactual`` wraps one member client (a task's judge, each panel member, a cascade's LLM stage:
never the offline rule) and has the pieces the run's pool judges with, so the re-checks go through the
same client: cache, limits, retries, batch mode (a second batch, of the credited requests' re-checks),
the cost table, the dry run and the budget (``schedule.parts_for`` counts one re-check per request: the
worst case). At most one re-check per credited verdict, never one for any other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome, Recheck
from .members import Members

CAUGHT = "counterfactual"  # the failure kind, the sample flag and (as judge_counterfactual) the metric
METRIC = "judge_counterfactual"
NO_RECHECK = "the request carries no wrong reference (it was not rendered with judge_counterfactual)"


def caught(outcome: Outcome) -> bool:
    """The judge (or a panel member) credited this answer against the wrong reference too."""
    if outcome.failure == CAUGHT:
        return True
    members = outcome.detail.get("panel") if isinstance(outcome.detail, Mapping) else None
    return any(isinstance(m, Mapping) and m.get("failure") == CAUGHT for m in members or ())


def rechecks(judge: Any) -> bool:
    """Whether ``judge`` (a client, a panel, a cascade) re-checks its credited verdicts."""
    return isinstance(judge, Counterfactual) or any(isinstance(c, Counterfactual)
                                                    for c in getattr(judge, "clients", ()))


class Counterfactual(Members):
    """One client whose credited verdicts are re-checked against a wrong reference."""

    def __init__(self, client: Any, credits: Callable[[Any], bool], describe: Callable[[Any], dict[str, Any]]):
        self._client, self._credits, self._describe = client, credits, describe
        self._lock = threading.Lock()
        self.counts: Counter = Counter()  # credited, checked, caught, passed, failed, unchecked
        self.stats = _Stats(self)

    @property
    def clients(self) -> list[Any]:
        return [self._client]

    def key(self, request: JudgeRequest) -> str:
        return "counterfactual:" + hashlib.sha256(self._client.key(request).encode()).hexdigest()

    def count_requests(self, requests: int, unique: int) -> None:
        self._client.count_requests(requests, unique)  # the re-checks count as they are asked (judge_one)

    def judge_one(self, key: str, request: JudgeRequest) -> Outcome:
        first = self._client.judge_one(self._client.key(request), request)
        if not self._credits(first.verdict):
            return first
        check = request.recheck
        if check is None or check.request is None:
            self._count("credited", "unchecked")
            reason = check.refused if check is not None else NO_RECHECK
            return _with(first, {"checked": False, "reason": reason})
        self._client.count_requests(1, 1)
        second = self._client.judge_one(self._client.key(check.request), check.request)
        return self._decide(first, second, check)

    def _decide(self, first: Outcome, second: Outcome, check: Recheck) -> Outcome:
        record = {"checked": True, "wrong_answer": check.answer,
                  "verdict": None if second.verdict is None else self._describe(second.verdict),
                  "failure": second.failure, "raw_reply": redact(second.raw_reply) if second.raw_reply else None,
                  "cached": second.cached}
        both = dict(calls=first.calls + second.calls, cached=first.cached and second.cached,
                    usage=dict(Counter(first.usage) + Counter(second.usage)))
        if second.failure is not None:
            self._count("credited", "checked", "failed")
            return Outcome(failure=second.failure, transport=second.transport, raw_reply=first.raw_reply,
                           error=f"the counterfactual re-check failed: {second.error}", **both,
                           detail={**first.detail, CAUGHT: {**record, "credited": self._describe(first.verdict)}})
        if self._credits(second.verdict):
            self._count("credited", "checked", "caught")
            return Outcome(failure=CAUGHT, raw_reply=first.raw_reply, **both,
                           error=f"counterfactual: the judge credited this answer against the reference and again "
                                 f"against a wrong one (final answer {check.answer}); it cannot tell this answer "
                                 "right from wrong, so it is not credited",
                           detail={**first.detail, CAUGHT: {**record, "credited": self._describe(first.verdict)}})
        self._count("credited", "checked", "passed")
        return _with(dataclasses.replace(first, **both), record)

    def _count(self, *names: str) -> None:
        with self._lock:
            self.counts.update(names)

    def prefill(self, items: Sequence[tuple[str, JudgeRequest]]) -> None:
        """Batch mode: the requests' batch first, then a second batch of the re-checks of those it credited."""
        if not self._client.batch_mode:
            return
        client = self._client
        client.prefill([(client.key(request), request) for _, request in items])
        again = [request.recheck.request for _, request in items
                 if request.recheck is not None and request.recheck.request is not None
                 and self._credits(client.known_verdict(client.key(request)))]
        if again:
            client.prefill([(client.key(request), request) for request in again])

    def finish(self, outcomes: Iterable[Outcome]) -> None:
        self._client.finish(outcomes)

    def summary(self) -> dict[str, int]:
        with self._lock:
            return {name: self.counts[name] for name in ("credited", "checked", "caught", "passed", "failed",
                                                         "unchecked")}

    @property
    def batch_mode(self) -> bool:
        return self._client.batch_mode

    @property
    def settings(self) -> Any:
        return self._client.settings

    @property
    def fatal_error(self):
        return self._client.fatal_error

    @property
    def wait_limit(self) -> float:
        return 2 * self._client.wait_limit  # the request, then its re-check

    def close(self) -> None:
        self._client.close()


def _with(outcome: Outcome, record: dict[str, Any]) -> Outcome:
    return dataclasses.replace(outcome, detail={**outcome.detail, CAUGHT: record})


class _Stats:
    def __init__(self, judge: Counterfactual):
        self._judge = judge

    def as_dict(self) -> dict[str, Any]:
        return {**self._judge._client.stats.as_dict(), CAUGHT: self._judge.summary()}
