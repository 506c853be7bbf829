"""Scrub credentials from text before it reaches a log, an exception or a file.

Servers sometimes echo the key they rejected ("Incorrect API key provided:
sk-..."); the SDKs put such text in their exception messages.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

SECRET_ENV_VARS = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "GEMINI_API_KEY",
                   "GOOGLE_API_KEY")
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{20,})")
_URL_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")  # https://user:password@host


def redact(text: str) -> str:
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name, "")
        if len(value) >= 4:
            text = text.replace(value, "***")
    return _URL_USERINFO.sub("***@", _KEY_SHAPES.sub("***", text))


def public_url(url: str) -> str:
    """An endpoint without user:password, query string or fragment (safe to record and hash)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
