"""Judge backends: one module per service; only these modules import an SDK.

``build`` imports the backend module on first use, so the SDKs load only when
a judge is actually built.
"""

from __future__ import annotations

import importlib
import os
from typing import Mapping

from ..core.errors import ConfigError
from ..core.redact import public_url
from ..core.types import Backend
from ..settings.schema import JudgeSettings

_MODULES = {"openai": "openai.chat", "azure": "openai.chat", "local": "local", "gemini": "gemini.online"}

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


# Where each SDK sends requests when no base URL is set (its own variable first).
_DEFAULT_ENDPOINTS = {"openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                      "azure": ("AZURE_OPENAI_ENDPOINT", None),
                      "gemini": ("GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com")}


def effective_endpoint(settings: JudgeSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint the judge will talk to, without credentials (for the results); None for the local judge.

    Resolved the way the SDKs do, without importing them: the setting, then the
    SDK's variable, then its default; Gemini on Vertex AI is named by project and location.
    """
    environ = os.environ if environ is None else environ
    if settings.backend not in _DEFAULT_ENDPOINTS:
        return None
    if settings.backend == "gemini" and environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true"):
        return f"vertex:{environ.get('GOOGLE_CLOUD_PROJECT') or '-'}/{environ.get('GOOGLE_CLOUD_LOCATION') or 'global'}"
    variable, default = _DEFAULT_ENDPOINTS[settings.backend]
    url = settings.base_url or environ.get(variable) or default
    return public_url(url) if url else None


def build(settings: JudgeSettings, judge: str) -> Backend:
    module = importlib.import_module(f"{__name__}.{_MODULES[settings.backend]}")
    return module.create(settings, judge)
