"""Judge backends: one module per service; only these modules import an SDK.

``build`` imports the backend module on first use, so the SDKs load only when
a judge is actually built.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Mapping

from ..core.redact import public_url
from ..core.types import Backend
from ..settings import credentials
from ..settings.schema import JudgeSettings

_MODULES = {"openai": "openai.chat", "azure": "openai.chat", "local": "local", "gemini": "gemini.online"}
_BATCH_MODULES = {"openai": "openai.batch", "azure": "openai.batch", "gemini": "gemini.batch"}

_ALTERNATIVES = {
    "exact_match": "--metadata '{\"gpt4em_judge_backend\": \"local\"}' (the offline math-verify judge)",
    "vlm": "--metadata '{\"vlm_judge_backend\": \"openai\", \"vlm_judge_model\": \"...\"}' "
           "(any OpenAI-compatible vision model)",
}


def check_credentials(settings: JudgeSettings, judge: str, environ: Mapping[str, str] | None = None) -> None:
    """Fail before any generation when the judge cannot possibly authenticate."""
    if settings.backend in credentials.SERVICES:
        credentials.require(settings.backend, f"the {settings.backend} judge ({settings.model})", environ,
                            otherwise=f"Or pick another judge with {_ALTERNATIVES[judge]}.")


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


def has_batch(backend: str) -> bool:
    """Whether judge_mode=batch can use this service's batch API."""
    return backend in _BATCH_MODULES


def batch_provider(backend: Backend, service: str) -> Any:
    """The batch API (``batch.base.BatchProvider``) of a built ``service`` backend (raises BatchUnavailable)."""
    module = importlib.import_module(f"{__name__}.{_BATCH_MODULES[service]}")
    return module.create(backend)
