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
# The most bytes one judge reply may take on the wire (raw and decoded), unless judge_max_reply_bytes says:
# room for the envelope (JSON, usage, Gemini's thought signatures, an error page) plus, per token of the
# reply, more than any token takes as JSON-escaped UTF-8. A judge that sends more is not a judge.
REPLY_BYTES_BASE = 1 << 20
REPLY_BYTES_PER_TOKEN = 64

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

# Pinned names: an OpenAI dated snapshot ("gpt-4o-2024-08-06"), an older four-digit one ("gpt-4-0613",
# "gpt-4-1106-preview"), a stable Gemini version ("gemini-1.5-pro-002") or a dated Gemini preview
# ("gemini-2.5-pro-preview-06-05"). The price table reads the first and third too (cost/prices.py).
DATED_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
GEMINI_VERSION = re.compile(r"^(gemini-.*)-\d{3}$")
_OPENAI_OLD_SNAPSHOT = re.compile(r"-\d{4}(-preview)?$")
_GEMINI_PREVIEW_DATE = re.compile(r"-preview-\d{2}-\d{2}$")
_OPENAI_FAMILY = re.compile(r"^(gpt-|chatgpt-|o\d)")
_REASONING = re.compile(r"^(o\d+(-.*)?|gpt-5(?!.*-chat).*)$")  # gpt-5-chat-* is a chat model


def is_reasoning_model(model: str) -> bool:
    """OpenAI reasoning families (o1, o3, o4-mini, GPT-5, ...): they take
    ``max_completion_tokens`` and no ``temperature``, and think before answering.
    A provider prefix (``openai/o3``) is ignored; ``gpt-5-chat`` models are chat models."""
    return bool(_REASONING.match(model.strip().lower().rsplit("/", 1)[-1]))


def moving_alias(model: str) -> bool:
    """True for an OpenAI or Gemini model name the provider may point at a new snapshot at any time
    ("gpt-4o", "o3", "gemini-2.5-pro", "*-latest"); False for a pinned one ("gpt-4o-2024-08-06",
    "gemini-1.5-pro-002"), a fine-tune, and names of other families (which this rule cannot tell)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name.startswith("ft:"):  # a fine-tuned model is its own fixed snapshot
        return False
    if name.endswith("-latest"):
        return True
    if name.startswith("gemini-"):
        return not (GEMINI_VERSION.match(name) or _GEMINI_PREVIEW_DATE.search(name))
    if _OPENAI_FAMILY.match(name):
        return not (DATED_SNAPSHOT.search(name) or _OPENAI_OLD_SNAPSHOT.search(name))
    return False


def default_reply_bytes(max_tokens: int) -> int:
    """The byte cap on one reply of a judge allowed ``max_tokens`` tokens (1 MiB + 64 bytes a token)."""
    return REPLY_BYTES_BASE + REPLY_BYTES_PER_TOKEN * max_tokens


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
