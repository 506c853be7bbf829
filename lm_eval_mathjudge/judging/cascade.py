"""Rule-then-LLM cascade for the exact-match judge (``judge_cascade: true``).

The ``local`` (math-verify) judge looks at every sample first. A sample it
accepts as Correct is decided there and never sent to the LLM judge; a rule's
"Incorrect" is often a formatting miss (units, words, an unboxed answer), so
every other sample - rejected, or not judged by the rule at all - goes to the
LLM judge, whose verdict decides it.

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

from typing import Any, Callable, Sequence

from ..core.redact import redact
from ..core.types import JudgeRequest, Outcome

METRICS = {"gpt4_exact_match": "cascade_exact_match"}  # judge metric -> its name under a cascade


def rename(scores: dict[str, float]) -> dict[str, float]:
    return {METRICS.get(name, name): value for name, value in scores.items()}


def accepts(verdict: Any) -> bool:
    """The rule stage's Correct: one committed final answer equal to the gold (the answer policy)."""
    return verdict is not None and bool(getattr(verdict, "correct", False))


class Cascade:
    """Quacks like ``JudgeClient`` for the harness (``judge_all``, ``stats``, ``fatal_error``, ``close``);
    ``details`` holds, per request of the last call, which stage decided it."""

    def __init__(self, rule: tuple[str, Any], llm: tuple[str, Any], describe: Callable[[Any], dict[str, Any]]):
        (self._rule_label, self._rule), (self._llm_label, self._llm) = rule, llm
        self._describe = describe
        self.details: list[dict[str, Any]] = []
        self.decided = {"rule": 0, "llm": 0}
        self.stats = _CascadeStats(self)

    def judge_all(self, requests: Sequence[JudgeRequest], desc: str = "judging") -> list[Outcome]:
        first = self._rule.judge_all(requests, desc=f"{desc} [rule: {self._rule_label}]")
        rest = [request for request, outcome in zip(requests, first) if not accepts(outcome.verdict)]
        second = iter(self._llm.judge_all(rest, desc=f"{desc} [llm: {self._llm_label}]") if rest else ())
        outcomes, self.details = [], []
        for outcome in first:
            if accepts(outcome.verdict):
                self.decided["rule"] += 1
                outcomes.append(outcome)
                self.details.append({"stage": "rule", "judge": self._rule_label})
                continue
            self.decided["llm"] += 1
            outcomes.append(next(second))
            self.details.append({"stage": "llm", "judge": self._llm_label, "rule": {
                "verdict": None if outcome.verdict is None else self._describe(outcome.verdict),
                "failure": outcome.failure, "error": redact(outcome.error) if outcome.error else outcome.error}})
        return outcomes

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
