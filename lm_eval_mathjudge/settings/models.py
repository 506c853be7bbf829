"""Which model a judge gets by default on each backend, and what a model's name implies.

Read from the vendor records (``vendors``): a (judge, backend) pair missing from ``DEFAULTS`` is a
combination that cannot work (the local judge speaks the exact-match contract only). A model that
thinks before it answers (OpenAI's o-series and GPT-5, Claude 5) gets room for it (its vendor's
``thinking_room``) unless max_tokens is set.
"""

from __future__ import annotations

from typing import Any

from .. import vendors
from ..vendors.gemini import THINKING_MAX_TOKENS as GEMINI_THINKING_MAX_TOKENS  # noqa: F401 - re-exported
from ..vendors.openai import REASONING_MAX_TOKENS, is_reasoning_model  # noqa: F401 - re-exported
from ..vendors.record import DEFAULT_MAX_TOKENS

# The pinned default judges, named in their vendors' records.
DEFAULT_EXACT_MATCH_MODEL = vendors.OPENAI.judges["exact_match"].model  # Orca-Math's judge was GPT-4-Turbo
DEFAULT_VLM_MODEL = vendors.GEMINI.judges["vlm"].model  # the VLM-as-judge protocol's judge
DEFAULT_OPENAI_VISION_MODEL = vendors.OPENAI.judges["vlm"].model  # the VLM judge on an OpenAI-compatible backend
LOCAL_MODEL = vendors.LOCAL.judges["exact_match"].model

DEFAULT_BACKEND = {"exact_match": "openai", "vlm": "gemini"}
# The most bytes one judge reply may take on the wire (raw and decoded), unless judge_max_reply_bytes says:
# room for the envelope (JSON, usage, Gemini's thought signatures, an error page) plus, per token of the
# reply, more than any token takes as JSON-escaped UTF-8. A judge that sends more is not a judge.
REPLY_BYTES_BASE = 1 << 20
REPLY_BYTES_PER_TOKEN = 64

# Built-in defaults per (judge, backend): a pair missing here is a combination that cannot work.
DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    (judge, vendor.name): {"model": default.model, "max_tokens": default.max_tokens}
    for vendor in vendors.VENDORS for judge, default in vendor.judges.items()}


def moving_alias(model: str) -> bool:
    """True for a model name its provider may point at a new snapshot at any time ("gpt-4o", "o3",
    "gemini-2.5-pro", "*-latest"; each vendor record's rule); False for a pinned one ("gpt-4o-2024-08-06",
    "gemini-1.5-pro-002"), a fine-tune, and names no vendor record knows."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name.startswith("ft:"):  # a fine-tuned model is its own fixed snapshot
        return False
    if name.endswith("-latest"):
        return True
    for vendor in vendors.VENDORS:
        found = vendor.aliases(name) if vendor.aliases is not None else None
        if found is not None:
            return found
    return False


def default_reply_bytes(max_tokens: int) -> int:
    """The byte cap on one reply of a judge allowed ``max_tokens`` tokens (1 MiB + 64 bytes a token)."""
    return REPLY_BYTES_BASE + REPLY_BYTES_PER_TOKEN * max_tokens


def model_defaults(judge: str, backend: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the model and max_tokens the pair's defaults give where they are not set.

    The local judge has no model to choose; a model that thinks gets room to think unless
    max_tokens is set.
    """
    row = DEFAULTS.get((judge, backend), {})
    vendor = vendors.get(backend)
    values = dict(values)
    if "model" not in values or backend == vendors.LOCAL.name:
        values["model"] = row.get("model", DEFAULT_EXACT_MATCH_MODEL)
    if "max_tokens" not in values:
        values["max_tokens"] = row.get("max_tokens", DEFAULT_MAX_TOKENS)
        if vendor is not None and isinstance(values["model"], str) and vendor.thinks(values["model"]):
            values["max_tokens"] = max(values["max_tokens"], vendor.thinking_room)
    return values
