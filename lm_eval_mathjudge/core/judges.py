"""The judges: each is a template (request) + a parser (verdict) + metrics.

The backend is chosen by settings, not by the judge, so any judge can run on
any backend that speaks its contract. The model's response always reaches the
judge fenced (``prompts.fence``); a VLM judge's response is attached as media
only when the task has media folders (its answers came from a media model) and
it names a file inside one of them or is a ``data:`` URL (``media.attachable``);
it is graded as text otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from . import parsing, prompts
from .media import attachable, load_media
from .types import JudgeRequest

JUDGE_FAILED = "judge_failed"


@dataclass(frozen=True)
class Judge:
    name: str
    template: str
    parse: Callable[[str], Any]
    metrics: Callable[[Any], dict[str, float]]
    metric_names: tuple[str, ...]  # primary first; judge_failed is added by the harness
    build: Callable[[prompts.Template, Mapping[str, Any], str, Sequence[str]], JudgeRequest]

    def request(self, doc: Mapping[str, Any], response: str, media_dirs: Sequence[str] = ()) -> JudgeRequest:
        """The judge request for one response; ``media_dirs``: the folders media may be attached from."""
        return self.build(prompts.load(self.template), doc, response, media_dirs)

    def scores(self, verdict: Any | None) -> dict[str, float]:
        """Per-sample metrics; a failed judgement scores 0 everywhere and 1 on judge_failed."""
        if verdict is None:
            return {**{m: 0.0 for m in self.metric_names}, JUDGE_FAILED: 1.0}
        return {**self.metrics(verdict), JUDGE_FAILED: 0.0}

    def credits(self, verdict: Any | None) -> bool:
        """Whether a verdict credits the answer on the primary metric (exact match: Correct; VLM: FINAL_CORRECT)."""
        return verdict is not None and self.metrics(verdict)[self.metric_names[0]] == 1.0

    def describe(self, verdict: Any) -> dict[str, Any]:
        """The verdict as it appears in the samples file."""
        return dict(verdict.__dict__)


def _fence_values(fenced: prompts.Fence) -> dict[str, str]:
    return {"begin": fenced.begin, "end": fenced.end, "quote_mark": prompts.QUOTE_MARK}


def _exact_match_request(template: prompts.Template, doc: Mapping[str, Any], response: str,
                         media_dirs: Sequence[str] = ()) -> JudgeRequest:
    fields = {"question": doc["mj_question"], "reference": doc["mj_reference"], "response": response}
    fenced = prompts.fence(response, template.name)
    prompt = template.render(**{**fields, "response": fenced.text}, **_fence_values(fenced))
    return JudgeRequest(prompt=prompt, fields={**fields, "answer": doc["mj_answer"]})


EXACT_MATCH = Judge(
    name="exact_match",
    template="exact_match",
    parse=parsing.parse_exact_match,
    metrics=lambda v: {"gpt4_exact_match": float(v.correct)},
    metric_names=("gpt4_exact_match",),
    build=_exact_match_request,
)

def _vlm_request(template: prompts.Template, doc: Mapping[str, Any], response: str,
                 media_dirs: Sequence[str] = ()) -> JudgeRequest:
    """The protocol's single message: the filled prompt, then the output (fenced text, or media instead)."""
    fields = {"question": doc["mj_question"], "reference": doc["mj_reference"], "answer": doc["mj_answer"],
              "response": response}
    reference = attachable(response, media_dirs)
    if reference is not None:  # load_media raises MediaError naming the file: a counted per-sample failure
        media = load_media(reference)
        # The prompt names a fence either way; for media it comes from the content, never the path.
        fenced = prompts.fence("", f"{template.name}:{media.sha256}")
        return JudgeRequest(prompt=_vlm_prompt(template, doc, fenced), media=(media,), fields=fields)
    fenced = prompts.fence(response, template.name)
    return JudgeRequest(prompt=_vlm_prompt(template, doc, fenced), output_text=fenced.text, fields=fields)


def _vlm_prompt(template: prompts.Template, doc: Mapping[str, Any], fenced: prompts.Fence) -> str:
    return template.render(solution_text=doc["mj_reference"], **_fence_values(fenced))


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
