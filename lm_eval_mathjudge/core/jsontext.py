"""JSON text from outside (settings, data and input files), read with one kind of failure.

``json.loads`` raises ``RecursionError`` on text nested deeper than the interpreter's stack allows
(``[[[[...`` a few thousand deep), which no ``except ValueError`` catches: a setting given inline as
such text ended in a traceback where the same content in a file got a clean error. Here every
failure is a ``json.JSONDecodeError``, so each caller's own message (which says what to write)
covers it. ``shown`` puts a value into a message: short, and never failing.
"""

from __future__ import annotations

import json
from typing import Any

TOO_DEEP = "nested too deeply to read"


def loads(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep to read a ``json.JSONDecodeError`` like any other bad JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(TOO_DEEP, doc[:0], 0) from None


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for a message: at most ``limit`` characters, and a type name where repr fails."""
    try:
        text = repr(value)
    except (RecursionError, ValueError, MemoryError):  # deep nesting; an int too long to print
        return f"<a {type(value).__name__} too deep or long to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
