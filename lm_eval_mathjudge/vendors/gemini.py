"""Gemini, on the Gemini Developer API or Vertex AI (google-genai), and the other Google services the
image and video generators use.

Gemini 2.5 Pro and Flash think by default, within max_output_tokens: the judges get 8192 tokens.
Prices: list prices per 1M tokens as remembered on ``PRICES_AS_OF`` (thinking billed as output;
text, image and video input priced alike); ``judge_prices`` overrides any row.
"""

from __future__ import annotations

import re
from typing import Any

from .record import Credentials, Endpoint, JudgeDefault, Vendor, row, tiles

DEFAULT_MODEL = "gemini-2.5-pro"  # the VLM-as-judge protocol's judge
THINKING_MAX_TOKENS = 8192  # Gemini 2.5 thinks within max_output_tokens
EXPECTED_THINKING = 1000  # tokens a thinking Gemini is expected to spend comparing two short answers
THINKERS = ("gemini-2.5-pro", "gemini-2.5-flash")  # flash-lite does not think unless asked
VIDEO_TOKENS_PER_SECOND = 300  # 258 per frame at 1 frame/s + 32 audio tokens/s, rounded up
IMAGE_TILE = 258  # up to 384x384 one tile; larger images in 768x768 tiles of 258 tokens each
PRICES_AS_OF = "2025-08-15"

# Pinned names: a stable version ("gemini-1.5-pro-002") or a dated preview ("gemini-2.5-pro-preview-06-05").
VERSION = re.compile(r"^(gemini-.*)-\d{3}$")
_PREVIEW_DATE = re.compile(r"-preview-\d{2}-\d{2}$")

_VERTEX_HINT = ("GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION with application default credentials "
                "(gcloud auth application-default login), or a Vertex AI express-mode key in GOOGLE_API_KEY")
# The generators' two Google services (the judge runs on either; the SDK's switch selects Vertex AI).
GEMINI_API = Credentials(("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GEMINI_API_KEY (or GOOGLE_API_KEY)",
                         keys=("GEMINI_API_KEY", "GOOGLE_API_KEY"))
VERTEX = Credentials((), _VERTEX_HINT)  # application default credentials are found by the SDK, not by a variable


def moving(name: str) -> bool | None:
    if not name.startswith("gemini-"):
        return None
    return not (VERSION.match(name) or _PREVIEW_DATE.search(name))


def undated(name: str) -> str | None:
    match = VERSION.match(name)
    return match.group(1) if match else None


def expected_thinking(settings: Any) -> int:
    budget = getattr(settings, "thinking_budget", None)
    if budget is None:  # the model's default: 2.5 Pro and Flash think, Flash-Lite and older models do not
        model = settings.model.strip().lower().rsplit("/", 1)[-1]
        thinks = model.startswith(THINKERS) and not model.startswith("gemini-2.5-flash-lite")
        return EXPECTED_THINKING if thinks else 0
    return EXPECTED_THINKING if budget == -1 else min(budget, EXPECTED_THINKING)  # -1: dynamic


def image_tokens(width: int, height: int, model: str = "") -> int:
    return IMAGE_TILE if width <= 384 and height <= 384 else IMAGE_TILE * tiles(width, height, 768)


PRICES = {
    "gemini-2.5-pro": row(1.25, 10.00, 0.31, long_threshold=200_000, long_input=2.50, long_output=15.00),
    "gemini-2.5-flash": row(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": row(0.10, 0.40, 0.025),
    "gemini-2.0-flash": row(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": row(0.075, 0.30),
}

GEMINI = Vendor(
    name="gemini", title="Gemini (Gemini API or Vertex AI)", transport="gemini.online", batch="gemini.batch",
    sdk="google.genai",
    credentials=Credentials(
        ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE"),
        "export GEMINI_API_KEY=... (or GOOGLE_API_KEY), or GOOGLE_GENAI_USE_VERTEXAI=true with " + _VERTEX_HINT
        + " for Vertex AI", "GEMINI_API_KEY / GOOGLE_API_KEY, or the Vertex AI credentials and project",
        keys=("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    env_prefixes=("GEMINI_", "GOOGLE_"),
    endpoint=Endpoint("GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com", rule="gemini",
                      hosts=("googleapis.com",)),  # the Gemini API and Vertex AI (aiplatform, regional)
    judges={"exact_match": JudgeDefault(DEFAULT_MODEL, THINKING_MAX_TOKENS),
            "vlm": JudgeDefault(DEFAULT_MODEL, THINKING_MAX_TOKENS)},
    expected_thinking=expected_thinking, aliases=moving, prices=PRICES, prices_as_of=PRICES_AS_OF, undated=undated,
    model_prefixes=("google/", "gemini/", "models/"), image_tokens=image_tokens,
    video_tokens_per_second=VIDEO_TOKENS_PER_SECOND, preflight="the SDK's model lookup (models.get)")
