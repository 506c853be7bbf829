"""What a kill left half-written: lm-eval's results and samples files cut short.

lm-eval writes ``results_<time>.json`` in one plain write and then each ``samples_<task>_<time>.jsonl``
a line at a time, neither through a temporary file: a run killed while writing (or as its output
folder appeared) leaves an empty results file, a results file cut mid-JSON, or a samples file that is
empty or whose last line has no end. The reports skip such a file, with a warning naming it, when a
whole one for the same run is there, and refuse, saying what to do, when none is.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

log = logging.getLogger(__name__)

KILLED = "a run killed while lm-eval wrote it"
RESUME = ("resume that run (mathjudge resume <its --output_path>) or run it again, then report on the folder "
          "again")


def read_results(path: str) -> tuple[Any, str | None]:
    """(the parsed results file, None), or (None, why) for a file a kill left half-written: empty, or
    not whole JSON. An unreadable file raises ``OSError``."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if not raw.strip():
        return None, "is empty"
    try:
        return json.loads(raw), None
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        return None, f"is not whole JSON ({reason}), cut short"


def samples_state(path: str | None) -> str | None:
    """Why a samples file is half-written (empty, or its last line without an end), else None (whole or absent)."""
    if path is None:
        return None
    try:
        size = os.path.getsize(path)
        if size == 0:
            return "is empty"
        with open(path, "rb") as fh:
            fh.seek(size - 1)
            return None if fh.read(1) == b"\n" else "is cut short (its last line has no end)"
    except OSError:
        return None  # unreadable: the reader that opens it says so


def skipped(path: str, why: str, instead: str) -> str:
    """The warning for a half-written file passed over (``instead``: what is used)."""
    text = f"mathjudge: skipped {path}: it {why} ({KILLED}); {instead}"
    log.warning("%s", text)
    return text
