"""The judges: each is a template (request) + a parser (verdict) + metrics.

The backend is chosen by settings, not by the judge, so any judge can run on
any backend that speaks its contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import parsing, prompts
from .types import JudgeRequest

JUDGE_FAILED = "judge_failed"


@dataclass(frozen=True)
class Judge:
    name: str
    template: str
    parse: Callable[[str], Any]
    metrics: Callable[[Any], dict[str, float]]
    metric_names: tuple[str, ...]  # primary first; judge_failed is added by the harness
    build: Callable[[prompts.Template, Mapping[str, Any], str], JudgeRequest]

    def request(self, doc: Mapping[str, Any], response: str) -> JudgeRequest:
        return self.build(prompts.load(self.template), doc, response)

    def scores(self, verdict: Any | None) -> dict[str, float]:
        """Per-sample metrics; a failed judgement scores 0 everywhere and 1 on judge_failed."""
        if verdict is None:
            return {**{m: 0.0 for m in self.metric_names}, JUDGE_FAILED: 1.0}
        return {**self.metrics(verdict), JUDGE_FAILED: 0.0}

    def describe(self, verdict: Any) -> dict[str, Any]:
        """The verdict as it appears in the samples file."""
        return dict(verdict.__dict__)


def _exact_match_request(template: prompts.Template, doc: Mapping[str, Any], response: str) -> JudgeRequest:
    fields = {"question": doc["mj_question"], "reference": doc["mj_reference"], "response": response}
    return JudgeRequest(prompt=template.render(**fields), fields={**fields, "answer": doc["mj_answer"]})


EXACT_MATCH = Judge(
    name="exact_match",
    template="exact_match",
    parse=parsing.parse_exact_match,
    metrics=lambda v: {"gpt4_exact_match": float(v.correct)},
    metric_names=("gpt4_exact_match",),
    build=_exact_match_request,
)

JUDGES: dict[str, Judge] = {EXACT_MATCH.name: EXACT_MATCH}
