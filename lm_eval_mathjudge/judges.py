"""The judges: each is a template (request) + a parser (verdict) + metrics.

The backend is chosen by settings, not by the judge, so any judge can run on
any backend that speaks its contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import parsing, prompts
from .media import load_media, media_reference
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

def _vlm_request(template: prompts.Template, doc: Mapping[str, Any], response: str) -> JudgeRequest:
    """The protocol's single message: the filled prompt, then the output (text, or media instead)."""
    prompt = template.render(solution_text=doc["mj_reference"])
    fields = {"question": doc["mj_question"], "reference": doc["mj_reference"], "answer": doc["mj_answer"],
              "response": response}
    reference = media_reference(response)
    if reference is not None:  # raises MediaError naming the file: a counted per-sample failure
        return JudgeRequest(prompt=prompt, media=(load_media(reference),), fields=fields)
    return JudgeRequest(prompt=prompt, output_text=response, fields=fields)


VLM = Judge(
    name="vlm",
    template="vlm_judge",
    parse=parsing.parse_vlm,
    metrics=lambda v: {"final_correct": float(v.final_correct), "intermediate_correct": float(v.intermediate_correct),
                       "action_reflection": float(v.action_reflection)},
    metric_names=("final_correct", "intermediate_correct", "action_reflection"),
    build=_vlm_request,
)

JUDGES: dict[str, Judge] = {judge.name: judge for judge in (EXACT_MATCH, VLM)}
