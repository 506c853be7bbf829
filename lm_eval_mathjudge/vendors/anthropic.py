"""Anthropic's Messages API (Claude), through the official ``anthropic`` SDK (an optional extra).

Model names (Anthropic's model-ID page): from the 4.6 generation on, an ID without a date
(``claude-sonnet-4-6``, ``claude-opus-5``) is a pinned version; before it, the pinned ID ends in a
snapshot date (``claude-haiku-4-5-20251001``) and the dateless name is an alias that can move.
From Claude 4.7 on (Opus 4.7 and later, Sonnet 5, Haiku 5.5, Fable, Mythos) the API rejects a
temperature and a thinking budget (400), and the 5 generation thinks by default. So the default
judge is ``claude-sonnet-4-6``: pinned, and the newest Sonnet that still judges at temperature 0.

Prices: list prices per 1M tokens read from Anthropic's pricing and model pages on ``PRICES_AS_OF``
(Message Batches: half price; cache reads where the page gives them); ``judge_prices`` overrides.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .record import DEFAULT_MAX_TOKENS, Credentials, Endpoint, JudgeDefault, Vendor, row

DEFAULT_MODEL = "claude-sonnet-4-6"
VLM_MAX_TOKENS = 4096
THINKING_ROOM = 25000  # max_tokens counts thinking: a model that thinks by default needs room for it
EXPECTED_THINKING = 1000  # tokens a thinking Claude is expected to spend comparing two short answers
MIN_THINKING_BUDGET = 1024  # the smallest budget_tokens the API takes
PRICES_AS_OF = "2026-12-06"

_DATED = re.compile(r"-\d{8}$")
# claude-{name}-{major}[-{minor}][-date] (Claude 4 and later), or claude-{major}[-{minor}]-{name} (Claude 3).
_NEW = re.compile(r"^claude-(?P<name>[a-z]+)-(?P<major>\d+)(?:-(?P<minor>\d{1,2})(?!\d))?")
_OLD = re.compile(r"^claude-(?P<major>\d)(?:-(?P<minor>\d))?-(?P<name>[a-z]+)")
_ALWAYS_NEW = ("fable", "mythos")  # families that began after Claude 4.7


def version(model: str) -> tuple[int, int] | None:
    """(major, minor) of a Claude model name, a provider prefix ignored; None for another name."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    match = _NEW.match(name) or _OLD.match(name)
    if match is None:
        return None
    return int(match["major"]), int(match["minor"] or 0)


def _family(model: str) -> str:
    match = _NEW.match(model.strip().lower().rsplit("/", 1)[-1])
    return match["name"] if match else ""


def takes_sampling(model: str) -> bool:
    """Whether the model accepts temperature and a thinking budget (Claude before 4.7; other names: yes)."""
    found = version(model)
    return _family(model) not in _ALWAYS_NEW and (found is None or found < (4, 7))


def thinks(model: str) -> bool:
    """The 5 generation (and Fable, Mythos) think by default: the judge needs room in max_tokens."""
    found = version(model)
    return _family(model) in _ALWAYS_NEW or (found is not None and found >= (5, 0))


def moving(name: str) -> bool | None:
    if not name.startswith("claude-"):
        return None
    found = version(name)
    if found is None:
        return None  # a Claude name of a shape this rule does not know
    return not (_DATED.search(name) or found >= (4, 6) or _family(name) in _ALWAYS_NEW)


def undated(name: str) -> str | None:
    return _DATED.sub("", name) if _DATED.search(name) else None


def expected_thinking(settings: Any) -> int:
    budget = getattr(settings, "thinking_budget", None)
    if budget is None:
        return EXPECTED_THINKING if thinks(settings.model) else 0
    return EXPECTED_THINKING if budget == -1 else min(budget, EXPECTED_THINKING)


def image_tokens(width: int, height: int, model: str = "") -> int:
    """Claude 4.7 and later: 28-px patches within 2576 px and 3.6 MP; earlier: width x height / 750
    within 1568 px and about 1600 tokens (the API scales a larger image down first)."""
    if not takes_sampling(model):
        scale = min(1.0, 2576 / max(width, height), math.sqrt(3_605_000 / (width * height)))
        return math.ceil(width * scale / 28) * math.ceil(height * scale / 28)
    scale = min(1.0, 1568 / max(width, height))
    return min(1600, math.ceil(width * height * scale * scale / 750))


PRICES = {
    "claude-fable-5-2": row(8.00, 40.00),
    "claude-fable-5-1": row(10.00, 50.00, 0.25),
    "claude-fable-5": row(10.00, 50.00, 1.00),
    "claude-opus-5-5": row(4.00, 20.00, 0.20),
    "claude-opus-5": row(5.00, 25.00, 0.50),
    "claude-opus-4-8": row(5.00, 25.00, 0.50),
    "claude-opus-4-7": row(5.00, 25.00, 0.50),
    "claude-opus-4-6": row(5.00, 25.00, 0.50),
    "claude-opus-4-5": row(5.00, 25.00, 0.50),  # claude-opus-4-5-20251101
    "claude-sonnet-5-5": row(2.00, 10.00, 0.20),
    "claude-sonnet-5": row(2.00, 10.00, 0.20),
    "claude-sonnet-4-6": row(3.00, 15.00, 0.30),  # the default judge
    # Haiku 5.5: a prompt over 100k tokens costs five times as much, on all of its tokens
    "claude-haiku-5-5": row(0.10, 0.50, long_threshold=100_000, long_input=0.50, long_output=2.50),
    "claude-haiku-4-5": row(1.00, 5.00, 0.10),  # claude-haiku-4-5-20251001
}

ANTHROPIC = Vendor(
    name="anthropic", title="Anthropic Messages API (Claude)", transport="anthropic.messages",
    batch="anthropic.batch", sdk="anthropic", extra="anthropic",
    credentials=Credentials(("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
                            "export ANTHROPIC_API_KEY=... (ANTHROPIC_BASE_URL=... for a gateway or proxy)",
                            "the API key variable (ANTHROPIC_API_KEY, or ANTHROPIC_AUTH_TOKEN)",
                            keys=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")),
    env_prefixes=("ANTHROPIC_",), endpoint=Endpoint("ANTHROPIC_BASE_URL", "https://api.anthropic.com",
                                                  hosts=("api.anthropic.com",)),
    judges={"exact_match": JudgeDefault(DEFAULT_MODEL, DEFAULT_MAX_TOKENS),
            "vlm": JudgeDefault(DEFAULT_MODEL, VLM_MAX_TOKENS)},
    thinks=thinks, thinking_room=THINKING_ROOM, expected_thinking=expected_thinking, aliases=moving,
    prices=PRICES, prices_as_of=PRICES_AS_OF, undated=undated, model_prefixes=("anthropic/",),
    image_tokens=image_tokens, preflight="GET <base>/v1/models/<model>")
