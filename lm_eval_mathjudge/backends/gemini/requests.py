"""The parts of a Gemini request built from a judge request: text, contents, generation config.

A failure while building is this sample's (``building_request``), never a judge outage.
The batch provider builds its requests with the same functions as the online calls.
"""

from __future__ import annotations

from typing import Any

from ...core.types import JudgeRequest
from ...settings.schema import JudgeSettings
from .._http import building_request, check_text


def text_parts(request: JudgeRequest) -> list[Any]:
    """The prompt, then the output text when the judge reads one (the VLM judge's text solutions)."""
    from google.genai import types

    check_text(request)
    texts = [request.prompt] + ([request.output_text] if request.output_text is not None else [])
    with building_request():
        return [types.Part.from_text(text=t) for t in texts]


def contents(parts: list[Any]) -> list[Any]:
    from google.genai import types

    with building_request():
        return [types.Content(role="user", parts=parts)]


def generation_config(settings: JudgeSettings) -> Any:
    from google.genai import types

    with building_request():
        thinking = (None if settings.thinking_budget is None
                    else types.ThinkingConfig(thinking_budget=settings.thinking_budget))
        return types.GenerateContentConfig(temperature=settings.temperature, max_output_tokens=settings.max_tokens,
                                           thinking_config=thinking)
