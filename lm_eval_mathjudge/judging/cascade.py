"""Rule-then-LLM cascade for the exact-match judge (``judge_cascade: true``).

The ``local`` (math-verify) judge looks at every sample first. It has three
outcomes: a sample it proves Correct is decided there and never sent to the LLM
judge; every other sample - one it marks Incorrect, one it leaves undecided (a
counted ``undecided`` failure of the rule stage: words, forms it cannot parse
completely, hedges), or one it could not judge at all - goes to the LLM judge,
whose verdict decides it.

The rule stage is sound because it judges by the answer policy the LLM judge's
prompt states (``answers``): it accepts only a response that commits to one
final answer equal to the gold. A response with two candidate answers, a hedge,
a revision or a refusal is rejected there and decided by the LLM judge, so a
model never gets one guess from each stage, and the cascade cannot score above
an LLM judge that follows its rubric (tests/test_cascade_bound.py).

The score is still its own measurement (the rule decides samples the LLM judge
might have misjudged), so the metric is renamed: ``gpt4_exact_match`` is
reported as ``cascade_exact_match``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from typing import Any, Callable, Iterable, Sequence

from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome
from .flights import Flights, wait_limit
from .members import Members

METRICS = {"gpt4_exact_match": "cascade_exact_match"}  # judge metric -> its name under a cascade


def rename(scores: dict[str, float]) -> dict[str, float]:
    return {METRICS.get(name, name): value for name, value in scores.items()}


def accepts(verdict: Any) -> bool:
    """The rule stage's Correct: one committed final answer equal to the gold (the answer policy)."""
    return verdict is not None and bool(getattr(verdict, "correct", False))


class Cascade(Members):
    """A judge made of a rule stage and an LLM stage: one request in, one Outcome out.

    It has the pieces the run's pool judges with (``key``, ``judge_one``, ``count_requests``,
    ``prefill``, ``finish``, ``set_bar``), so a cascade task shares the run's one pool with every
    other task. The Outcome's ``detail`` says which stage decided the sample."""

    def __init__(self, rule: tuple[str, Any], llm: tuple[str, Any], describe: Callable[[Any], dict[str, Any]]):
        (self._rule_label, self._rule), (self._llm_label, self._llm) = rule, llm
        self._describe = describe
        self._lock = threading.Lock()
        self._first: dict[str, Outcome] = {}  # rule-stage outcomes, by the rule's key
        self._second: dict[str, Outcome] = {}  # LLM-stage outcomes, by the LLM's key
        self._asked = Flights(keep=True)  # each LLM-stage key asked once
        self.decided = {"rule": 0, "llm": 0}
        self.stats = _CascadeStats(self)

    @property
    def clients(self) -> list[Any]:
        return [self._rule, self._llm]

    def key(self, request: JudgeRequest) -> str:
        return "cascade:" + hashlib.sha256(f"{self._rule.key(request)}\n{self._llm.key(request)}".encode()).hexdigest()

    def count_requests(self, requests: int, unique: int) -> None:
        self._rule.count_requests(requests, unique)  # the LLM stage counts what reaches it (judge_one)

    def judge_one(self, key: str, request: JudgeRequest) -> Outcome:
        first = self._by_rule(request)
        if accepts(first.verdict):
            with self._lock:
                self.decided["rule"] += 1
            return dataclasses.replace(first, detail={"stage": "rule", "judge": self._rule_label})
        llm_key = self._llm.key(request)
        self._llm.count_requests(1, 1)
        second, _ = self._asked.run(llm_key, lambda: self._llm.judge_one(llm_key, request), wait_limit(self._llm))
        with self._lock:
            self._second[llm_key] = second
            self.decided["llm"] += 1
        return dataclasses.replace(second, detail={**second.detail, "stage": "llm", "judge": self._llm_label, "rule": {
            "verdict": None if first.verdict is None else self._describe(first.verdict),
            "failure": first.failure, "error": redact(first.error) if first.error else first.error}})

    def _by_rule(self, request: JudgeRequest) -> Outcome:
        """The rule stage's outcome (judged once per request, even when a batch pre-fill asked first)."""
        rule_key = self._rule.key(request)
        with self._lock:
            known = self._first.get(rule_key)
        if known is None:
            known = self._rule.judge_one(rule_key, request)
            with self._lock:
                self._first[rule_key] = known
        return known

    def prefill(self, items: Sequence[tuple[str, JudgeRequest]]) -> None:
        """Batch mode: the LLM stage's batch holds only what the rule stage does not accept."""
        if self._llm.batch_mode:
            rest = [request for _, request in items if not accepts(self._by_rule(request).verdict)]
            self._llm.prefill([(self._llm.key(request), request) for request in rest])

    def finish(self, outcomes: Iterable[Outcome]) -> None:
        with self._lock:
            first, second = list(self._first.values()), list(self._second.values())
        self._rule.finish(first)
        self._llm.finish(second)

    @property
    def batch_mode(self) -> bool:
        return self._llm.batch_mode

    @property
    def settings(self) -> Any:
        return self._llm.settings

    @property
    def fatal_error(self):
        return self._llm.fatal_error  # the LLM stage decides; the rule stage failing only sends work on

    def summary(self) -> dict[str, Any]:
        return {"rule_judge": self._rule_label, "llm_judge": self._llm_label,
                "decided_by_rule": self.decided["rule"], "decided_by_llm": self.decided["llm"],
                "llm_requests_saved": self.decided["rule"],
                "rule": self._rule.stats.as_dict(), "llm": self._llm.stats.as_dict()}

    def close(self) -> None:
        try:
            self._rule.close()
        finally:
            self._llm.close()


class _CascadeStats:
    def __init__(self, cascade: Cascade):
        self._cascade = cascade

    def as_dict(self) -> dict[str, Any]:
        return {"cascade": self._cascade.summary()}
