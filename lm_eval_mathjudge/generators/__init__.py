"""Image and video generators as lm-eval models (see ``base.py`` for the interface).

This module stays import-cheap (no lm-eval, no SDK): the harness imports it to
recognise a counted generation failure in a response and to find the
generator's provenance for a task's results.

A request that got no media is answered with a *failure marker*,
``MATHJUDGE_GENERATION_FAILED [kind] message``; the harness turns it into a
counted per-sample failure (``judge_failed`` 1, the kind in the samples file)
without calling the judge.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

FAILURE_PREFIX = "MATHJUDGE_GENERATION_FAILED"
_MARKER = re.compile(rf"^{FAILURE_PREFIX} \[([a-z0-9_]+)\] (.*)$", re.DOTALL)

# Adapter name -> "module:Class", registered lazily with lm-eval by _startup.py. One table: add yours here.
ADAPTERS: dict[str, str] = {
    "mathjudge-openai-image": "lm_eval_mathjudge.generators.openai_image:OpenAIImageLM",
    "mathjudge-sora": "lm_eval_mathjudge.generators.sora:SoraLM",
    "mathjudge-gemini-image": "lm_eval_mathjudge.generators.gemini_image:GeminiImageLM",
    "mathjudge-veo": "lm_eval_mathjudge.generators.veo:VeoLM",
    "mathjudge-media": "lm_eval_mathjudge.generators.pregenerated:PregeneratedMediaLM",
}

_lock = threading.Lock()
_PROVENANCE: dict[str, dict[str, Any]] = {}  # task name -> what made its media (set by GeneratorLM)


def failure_marker(kind: str, message: str) -> str:
    """The response text for a request that got no media."""
    return f"{FAILURE_PREFIX} [{kind}] {message}"


def generation_failure(response: str) -> tuple[str, str] | None:
    """(kind, message) when the response is a failure marker, else None."""
    match = _MARKER.match(response) if response.startswith(FAILURE_PREFIX) else None
    return (match.group(1), match.group(2)) if match else None


def record_provenance(task: str, record: dict[str, Any]) -> None:
    with _lock:
        _PROVENANCE[task] = record


def provenance(task: str) -> dict[str, Any] | None:
    """The generator record of a task in this process (None when a non-generator model ran it)."""
    with _lock:
        record = _PROVENANCE.get(task)
    return None if record is None else dict(record)


def media_dirs(task: str) -> tuple[str, ...]:
    """The folders a task's media were made in or read from (none when a text model answered): the
    only places a VLM judge attaches media from, besides the judge_media_dirs setting."""
    return media_folders(provenance(task) or {})


def media_folders(record: dict[str, Any]) -> tuple[str, ...]:
    """The media folders a generator record names (as ``provenance`` gives it, or a results file keeps it)."""
    found = [record.get("media_dir"), record.get("dir"), *(record.get("media_dirs") or ())]
    return tuple(os.path.realpath(d) for d in found if isinstance(d, str) and d)
