"""OpenAI (and any OpenAI-compatible chat-completions server) and Azure OpenAI: one transport, two records.

Reasoning models (o-series, GPT-5) take ``max_completion_tokens`` and no temperature, and think
before they answer: ``is_reasoning_model`` tells them, for the backend, the default max_tokens
and the estimate. Prices: list prices per 1M tokens as remembered on ``PRICES_AS_OF`` (check them;
``judge_prices`` overrides any row).
"""

from __future__ import annotations

import re
from typing import Any

from .record import DEFAULT_MAX_TOKENS, Credentials, Endpoint, JudgeDefault, Vendor, row, tiles

DEFAULT_EXACT_MATCH_MODEL = "gpt-4-turbo-2024-04-09"  # Orca-Math's judge was GPT-4-Turbo
DEFAULT_VISION_MODEL = "gpt-4o-2024-08-06"  # the VLM judge on an OpenAI-compatible backend
VISION_MAX_TOKENS = 8192
REASONING_MAX_TOKENS = 25000  # reasoning models spend hidden tokens before the verdict; OpenAI advises ~25k
# Expected thinking of a reasoning judge comparing two short answers, per effort (OpenAI's default: medium).
THINKING_BY_EFFORT = {"none": 0, "minimal": 100, "low": 400, "medium": 1000, "high": 3000}
PRICES_AS_OF = "2025-08-15"

# Pinned names: a dated snapshot ("gpt-4o-2024-08-06") or an older four-digit one ("gpt-4-0613",
# "gpt-4-1106-preview"). The price table reads the first as its undated row.
DATED_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_OLD_SNAPSHOT = re.compile(r"-\d{4}(-preview)?$")
_FAMILY = re.compile(r"^(gpt-|chatgpt-|o\d)")
_REASONING = re.compile(r"^(o\d+(-.*)?|gpt-5(?!.*-chat).*)$")  # gpt-5-chat-* is a chat model


def is_reasoning_model(model: str) -> bool:
    """OpenAI reasoning families (o1, o3, o4-mini, GPT-5, ...): they take ``max_completion_tokens`` and
    no ``temperature``, and think before answering. A provider prefix (``openai/o3``) is ignored;
    ``gpt-5-chat`` models are chat models."""
    return bool(_REASONING.match(model.strip().lower().rsplit("/", 1)[-1]))


def moving(name: str) -> bool | None:
    """An OpenAI name without a snapshot date can move ("gpt-4o", "o3"); None for other families."""
    if not _FAMILY.match(name):
        return None
    return not (DATED_SNAPSHOT.search(name) or _OLD_SNAPSHOT.search(name))


def undated(name: str) -> str | None:
    return DATED_SNAPSHOT.sub("", name) if DATED_SNAPSHOT.search(name) else None


def expected_thinking(settings: Any) -> int:
    if not is_reasoning_model(settings.model):
        return 0
    return THINKING_BY_EFFORT.get(getattr(settings, "reasoning_effort", None) or "medium", 1000)


def image_tokens(width: int, height: int, model: str = "") -> int:
    """High detail: fit in 2048x2048, shortest side down to 768, then 85 + 170 per 512-px tile."""
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    return 85 + 170 * tiles(w * scale, h * scale, 512)


# Model id -> price. A dated snapshot ("gpt-4.1-2025-04-14") falls back to its undated row unless it has
# its own (gpt-4o-2024-05-13 cost twice gpt-4o's current price). Previews are left out on purpose.
PRICES = {
    # GPT-4 generation
    "gpt-4-turbo-2024-04-09": row(10.00, 30.00),  # the exact-match default (Orca-Math's judge)
    "gpt-4-turbo": row(10.00, 30.00),
    "gpt-4-0125-preview": row(10.00, 30.00),
    "gpt-4-1106-preview": row(10.00, 30.00),
    "gpt-4": row(30.00, 60.00),
    "gpt-4-0613": row(30.00, 60.00),
    # GPT-4o
    "gpt-4o": row(2.50, 10.00, 1.25),
    "gpt-4o-2024-08-06": row(2.50, 10.00, 1.25),  # the VLM judge's default on OpenAI
    "gpt-4o-2024-11-20": row(2.50, 10.00, 1.25),
    "gpt-4o-2024-05-13": row(5.00, 15.00),  # the first snapshot: no prompt-cache discount
    "gpt-4o-mini": row(0.15, 0.60, 0.075),
    # GPT-4.1
    "gpt-4.1": row(2.00, 8.00, 0.50),
    "gpt-4.1-mini": row(0.40, 1.60, 0.10),
    "gpt-4.1-nano": row(0.10, 0.40, 0.025),
    # o-series (reasoning tokens billed as output)
    "o1": row(15.00, 60.00, 7.50),
    "o3": row(2.00, 8.00, 0.50),  # after the June 2025 price cut
    "o3-mini": row(1.10, 4.40, 0.55),
    "o4-mini": row(1.10, 4.40, 0.275),
    # GPT-5 family (reasoning tokens billed as output); gpt-5-chat-latest is the same price as gpt-5
    "gpt-5": row(1.25, 10.00, 0.125),
    "gpt-5-mini": row(0.25, 2.00, 0.025),
    "gpt-5-nano": row(0.05, 0.40, 0.005),
    "gpt-5-chat-latest": row(1.25, 10.00, 0.125),
}

_JUDGES = {"exact_match": JudgeDefault(DEFAULT_EXACT_MATCH_MODEL, DEFAULT_MAX_TOKENS),
           "vlm": JudgeDefault(DEFAULT_VISION_MODEL, VISION_MAX_TOKENS)}

OPENAI = Vendor(
    name="openai", title="OpenAI-compatible chat completions", transport="openai.chat", batch="openai.batch",
    sdk="openai",
    credentials=Credentials(("OPENAI_API_KEY",),
                            "export OPENAI_API_KEY=... (OPENAI_BASE_URL=... for a compatible server; one that checks "
                            "no key, such as a local vLLM, accepts any value, e.g. EMPTY)",
                            "the API key variable (OPENAI_API_KEY)", keys=("OPENAI_API_KEY",)),
    env_prefixes=("OPENAI_",), endpoint=Endpoint("OPENAI_BASE_URL", "https://api.openai.com/v1", rule="openai",
                                               hosts=("api.openai.com",)),  # eu.api.openai.com too
    judges=_JUDGES, thinks=is_reasoning_model, thinking_room=REASONING_MAX_TOKENS,
    expected_thinking=expected_thinking, aliases=moving, prices=PRICES, prices_as_of=PRICES_AS_OF, undated=undated,
    model_prefixes=("openai/",), image_tokens=image_tokens, preflight="GET <base>/models/<model>")

AZURE = Vendor(
    name="azure", title="Azure OpenAI", transport="openai.chat", batch="openai.batch", sdk="openai",
    credentials=Credentials(("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
                            "export AZURE_OPENAI_API_KEY=..., AZURE_OPENAI_ENDPOINT=... and OPENAI_API_VERSION=...",
                            "the API key variable (AZURE_OPENAI_API_KEY, or AZURE_OPENAI_AD_TOKEN)",
                            keys=("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")),
    env_prefixes=("AZURE_OPENAI_", "OPENAI_"), endpoint=Endpoint(
        "AZURE_OPENAI_ENDPOINT", None, rule="azure",
        # a resource's hosts in Azure's public cloud (the sovereign clouds sell at other prices)
        hosts=("openai.azure.com", "cognitiveservices.azure.com", "services.ai.azure.com")),
    judges=_JUDGES, thinks=is_reasoning_model, thinking_room=REASONING_MAX_TOKENS,
    expected_thinking=expected_thinking,
    aliases=None,  # a deployment name is the user's own; its version is the deployment's
    model_prefixes=("azure/",), image_tokens=image_tokens, preflight="GET <endpoint>/openai/models")
