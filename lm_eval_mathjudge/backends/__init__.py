"""Judge backends: one module per service; only these modules import an SDK.

``build`` imports the backend module on first use, so the SDKs load only when
a judge is actually built. Where each judge's requests go is ``endpoints``' rule.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

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
