"""Batch mode: judge requests through the providers' batch APIs (about half price), as a cache pre-fill.

``prefill(client, items)`` (``runner.py``) is the one entry point; ``base.py`` is the
provider contract; ``openai_batch.py`` and ``gemini_batch.py`` implement it. Nothing here
is imported unless a judge runs with ``judge_mode=batch``.
"""

from __future__ import annotations

from typing import Any


def prefill(client: Any, items: Any) -> Any:
    """See ``runner.prefill`` (imported on first use)."""
    from .runner import prefill as run

    return run(client, items)


__all__ = ["prefill"]
