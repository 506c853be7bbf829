"""Judge backends: one module per service; only these modules import an SDK.

``build`` imports the backend module on first use, so the SDKs load only when
a judge is actually built.
"""

from __future__ import annotations

import importlib
import os
from typing import Mapping

from ..config import JudgeSettings
from ..errors import ConfigError
from ..types import Backend

_MODULES = {"openai": "openai_chat", "azure": "openai_chat", "local": "local", "gemini": "gemini"}

# Which variable (any of) must hold a key for each backend, and the hint to print.
_CREDENTIALS: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_API_KEY",),
               "export OPENAI_API_KEY=... (servers that check no key, such as a local vLLM, accept any value, e.g. EMPTY)"),
    "azure": (("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
              "export AZURE_OPENAI_API_KEY=..., AZURE_OPENAI_ENDPOINT=... and OPENAI_API_VERSION=..."),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"),
               "export GEMINI_API_KEY=... (or GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_CLOUD_PROJECT "
               "and GOOGLE_CLOUD_LOCATION for Vertex AI)"),
}


_ALTERNATIVES = {
    "exact_match": "--metadata '{\"gpt4em_judge_backend\": \"local\"}' (the offline math-verify judge)",
    "vlm": "--metadata '{\"vlm_judge_backend\": \"openai\", \"vlm_judge_model\": \"...\"}' "
           "(any OpenAI-compatible vision model)",
}


def check_credentials(settings: JudgeSettings, judge: str, environ: Mapping[str, str] | None = None) -> None:
    """Fail before any generation when the judge cannot possibly authenticate."""
    environ = os.environ if environ is None else environ
    if settings.backend not in _CREDENTIALS:
        return
    names, hint = _CREDENTIALS[settings.backend]
    if not any(environ.get(n, "").strip().lower() not in ("", "0", "false") for n in names):
        raise ConfigError(f"the {settings.backend} judge ({settings.model}) needs credentials, and none of "
                          f"{', '.join(names)} is set: {hint}. Or pick another judge with {_ALTERNATIVES[judge]}.")


def build(settings: JudgeSettings, judge: str) -> Backend:
    module = importlib.import_module(f"{__name__}.{_MODULES[settings.backend]}")
    return module.create(settings, judge)
