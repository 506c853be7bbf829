"""A Gemini response read as a reply: its text and usage, or the refusal that withheld it."""

from __future__ import annotations

from typing import Any

from ...core.errors import JudgeRefusal
from ...core.types import Reply
from ...settings.schema import JudgeSettings

_OK_FINISH = {"STOP", "FINISH_REASON_UNSPECIFIED"}


def enum_name(value: Any) -> str | None:
    """An SDK enum (or a plain string for values the SDK does not know) as its name."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def reply_of(response: Any, settings: JudgeSettings) -> Reply:
    """Blocked prompts, withheld candidates, a cut-off verdict and thoughts-only replies are refusals."""
    feedback = getattr(response, "prompt_feedback", None)
    block = enum_name(getattr(feedback, "block_reason", None))
    if block:
        detail = getattr(feedback, "block_reason_message", None)
        raise JudgeRefusal(f"Gemini blocked the prompt ({block}{': ' + detail if detail else ''})",
                           kind="blocked_prompt")
    candidates = getattr(response, "candidates", None)
    if not candidates:
        raise JudgeRefusal("Gemini returned no candidates", kind="no_candidates")
    candidate = candidates[0]
    finish = enum_name(candidate.finish_reason)
    if finish == "MAX_TOKENS":
        raise JudgeRefusal(
            f"Gemini stopped at max_output_tokens={settings.max_tokens} before finishing the verdict; "
            "Gemini 2.5's thinking tokens count against max_output_tokens, so raise judge_max_tokens",
            kind="max_tokens")
    if finish and finish not in _OK_FINISH:
        raise JudgeRefusal(f"Gemini withheld the reply (finish reason {finish})", kind=finish.lower())
    parts = getattr(candidate.content, "parts", None) or []
    text = "".join(p.text for p in parts if p.text and p.thought is not True)
    if not text.strip():
        raise JudgeRefusal("Gemini replied without any answer text (thoughts only or empty)", kind="empty_reply")
    version = getattr(response, "model_version", None)  # modelVersion: the version that answered
    return Reply(text=text, usage=_usage(getattr(response, "usage_metadata", None)), finish_reason=finish,
                 model=version if isinstance(version, str) and version else None)


def _usage(meta: Any) -> dict[str, int]:
    if meta is None:
        return {}
    fields = {"prompt_tokens": "prompt_token_count", "completion_tokens": "candidates_token_count",
              "thoughts_tokens": "thoughts_token_count", "total_tokens": "total_token_count"}
    values = {name: getattr(meta, attr, None) for name, attr in fields.items()}
    return {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
