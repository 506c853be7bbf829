"""Which model a judge gets by default on each backend, and what a model's family implies.

A (judge, backend) pair missing from ``DEFAULTS`` is a combination that cannot
work (the local judge speaks the exact-match contract only). Reasoning models
(OpenAI's o-series and GPT-5) think before they answer: they get room for it
(``REASONING_MAX_TOKENS``) and take other request parameters (the backend and
the cost estimate ask ``is_reasoning_model``).
"""

from __future__ import annotations

import re
from typing import Any

# The pinned default judges, named in this one place.
DEFAULT_EXACT_MATCH_MODEL = "gpt-4-turbo-2024-04-09"  # Orca-Math's judge was GPT-4-Turbo
DEFAULT_VLM_MODEL = "gemini-2.5-pro"  # the VLM-as-judge protocol's judge
DEFAULT_OPENAI_VISION_MODEL = "gpt-4o-2024-08-06"  # the VLM judge on an OpenAI-compatible backend
LOCAL_MODEL = "math-verify"

DEFAULT_BACKEND = {"exact_match": "openai", "vlm": "gemini"}
DEFAULT_MAX_TOKENS = 1024  # the contract itself is ~60 tokens; the table adds room for thinking
# Reasoning models spend hidden tokens before the verdict; OpenAI advises reserving ~25k.
REASONING_MAX_TOKENS = 25000
GEMINI_THINKING_MAX_TOKENS = 8192  # Gemini 2.5 thinks within max_output_tokens

# Built-in defaults per (judge, backend): a pair missing here is a combination that cannot work.
DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("exact_match", "openai"): {"model": DEFAULT_EXACT_MATCH_MODEL, "max_tokens": DEFAULT_MAX_TOKENS},
    ("exact_match", "azure"): {"model": DEFAULT_EXACT_MATCH_MODEL, "max_tokens": DEFAULT_MAX_TOKENS},
    ("exact_match", "gemini"): {"model": DEFAULT_VLM_MODEL, "max_tokens": GEMINI_THINKING_MAX_TOKENS},
    ("exact_match", "local"): {"model": LOCAL_MODEL, "max_tokens": DEFAULT_MAX_TOKENS},
    ("vlm", "gemini"): {"model": DEFAULT_VLM_MODEL, "max_tokens": GEMINI_THINKING_MAX_TOKENS},
    ("vlm", "openai"): {"model": DEFAULT_OPENAI_VISION_MODEL, "max_tokens": 8192},
    ("vlm", "azure"): {"model": DEFAULT_OPENAI_VISION_MODEL, "max_tokens": 8192},
}

_REASONING = re.compile(r"^(o\d+(-.*)?|gpt-5(?!.*-chat).*)$")  # gpt-5-chat-* is a chat model


def is_reasoning_model(model: str) -> bool:
    """OpenAI reasoning families (o1, o3, o4-mini, GPT-5, ...): they take
    ``max_completion_tokens`` and no ``temperature``, and think before answering.
    A provider prefix (``openai/o3``) is ignored; ``gpt-5-chat`` models are chat models."""
    return bool(_REASONING.match(model.strip().lower().rsplit("/", 1)[-1]))


def model_defaults(judge: str, backend: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the model and max_tokens the pair's defaults give where they are not set.

    The local judge has no model to choose; a reasoning model gets room to think unless
    max_tokens is set.
    """
    row = DEFAULTS.get((judge, backend), {})
    values = dict(values)
    if "model" not in values or backend == "local":
        values["model"] = row.get("model", DEFAULT_EXACT_MATCH_MODEL)
    if "max_tokens" not in values:
        values["max_tokens"] = row.get("max_tokens", DEFAULT_MAX_TOKENS)
        if isinstance(values["model"], str) and is_reasoning_model(values["model"]):
            values["max_tokens"] = max(values["max_tokens"], REASONING_MAX_TOKENS)
    return values
