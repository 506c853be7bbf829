"""Judge backends: one transport per service (``<vendor>/``), named by its vendor record; only
these modules import an SDK.

``build`` imports the transport on first use, so the SDKs load only when a judge is actually
built. What each service is (SDK, credentials, endpoint, models, prices) is its record in
``vendors``; where each judge's requests go is ``endpoints``' rule.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Mapping

from .. import vendors
from ..core.errors import ConfigError
from ..core.types import Backend
from ..settings import credentials
from ..settings.schema import JudgeSettings


def _alternatives(judge: str) -> str:
    """Another judge to pick, for the message that refuses this one."""
    if judge == "exact_match":
        return "--metadata '{\"gpt4em_judge_backend\": \"local\"}' (the offline math-verify judge)"
    return (f"--metadata '{{\"vlm_judge_backend\": \"...\", \"vlm_judge_model\": \"...\"}}' with one of "
            f"{vendors.listed(vendors.names(judge, api=True))} (any OpenAI-compatible vision model on openai)")


def check_credentials(settings: JudgeSettings, judge: str, environ: Mapping[str, str] | None = None) -> None:
    """Fail before any generation when the judge cannot possibly authenticate."""
    if settings.backend in credentials.SERVICES:
        credentials.require(settings.backend, f"the {settings.backend} judge ({settings.model})", environ,
                            otherwise=f"Or pick another judge with {_alternatives(judge)}.")


def check_sdk(backend: str) -> None:
    """An optional SDK that is not installed stops the run before generation, saying what to install."""
    vendor = vendors.BY_NAME[backend]
    if vendor.sdk and vendor.extra and importlib.util.find_spec(vendor.sdk) is None:
        raise ConfigError(f"judge_backend={backend} needs the {vendor.sdk} package, which is not installed: "
                          f"pip install 'lm-eval-mathjudge[{vendor.extra}]' (or pick another judge_backend: "
                          f"{vendors.listed([n for n in vendors.NAMES if n != backend])})")


def build(settings: JudgeSettings, judge: str) -> Backend:
    check_sdk(settings.backend)
    module = importlib.import_module(f"{__name__}.{vendors.BY_NAME[settings.backend].transport}")
    return module.create(settings, judge)


def has_batch(backend: str) -> bool:
    """Whether judge_mode=batch can use this service's batch API."""
    vendor = vendors.get(backend)
    return vendor is not None and vendor.batch is not None


def batch_provider(backend: Backend, service: str) -> Any:
    """The batch API (``batch.base.BatchProvider``) of a built ``service`` backend (raises BatchUnavailable)."""
    module = importlib.import_module(f"{__name__}.{vendors.BY_NAME[service].batch}")
    return module.create(backend)
