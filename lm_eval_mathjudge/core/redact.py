"""Scrub credentials from text before it reaches a log, an exception or a file.

Servers sometimes echo the key they rejected ("Incorrect API key provided:
sk-..."), the request headers they saw, or a URL with its query string; the
SDKs put such text in their exception messages, and a hostile judge can put
it in a reply. The client scrubs every reply and error with ``redact`` before
it is cached, logged or written to samples.
"""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import urlsplit, urlunsplit

from .. import vendors

# Every vendor record's key variables, and the Hugging Face tokens lm-eval's data loading reads.
SECRET_ENV_VARS = (*dict.fromkeys(k for v in vendors.VENDORS if v.credentials for k in v.credentials.keys),
                   "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Any other variable named like a credential is scrubbed too (MY_PROXY_TOKEN, ...).
_SECRET_ENV_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
_MIN_SECRET_LEN = 8  # shorter values ("1", "true", "EMPTY") would scrub ordinary words
MASK = "***"

_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{20,})")
_URL_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")  # https://user:password@host
# "Authorization: Bearer xyz" / "Proxy-Authorization: Basic ..." (whatever the scheme), and a bare
# "Bearer <token>" / "Basic <base64>" whose token has a digit: "basic arithmetic" stays as it is.
_AUTH_HEADER = re.compile(r"(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z]+\s+)?)([^\s\"',;]+)",
                          re.IGNORECASE)
_AUTH_SCHEMES = re.compile(r"\b(Bearer|Basic|Digest|Token)\s+(?=[^\s]*\d)[A-Za-z0-9._~+/=\-]{12,}")
_KEY_FIELDS = re.compile(
    r"((?:x-goog-api-key|x-api-key|api[-_]?key|access[-_]?token|token|key|password|secret)"
    r"[\"']?\s*[:=]\s*[\"']?)([^\s\"'&,;}]{8,})", re.IGNORECASE)


# (the process environment as raw bytes, its secret values): scanning every variable name costs
# ~0.3 ms, and redact runs several times per judged sample; the snapshot compares in microseconds.
_ENVIRON_SECRETS: tuple[tuple, list[str]] = ((), [])


def secret_values(environ=None) -> list[str]:
    """Values of the configured credentials, longest first (so a key inside another is still masked)."""
    global _ENVIRON_SECRETS
    raw = getattr(os.environ, "_data", None) if environ is None else None
    if not isinstance(raw, dict):  # an explicit mapping (or an unusual os.environ): no memo
        return _secret_values(os.environ if environ is None else environ)
    snapshot = tuple(raw.items())  # any change of any variable changes the snapshot
    seen, values = _ENVIRON_SECRETS
    if snapshot != seen:
        values = _secret_values(os.environ)
        _ENVIRON_SECRETS = (snapshot, values)
    return list(values)


def _secret_values(environ) -> list[str]:
    values = {environ.get(name, "") for name in SECRET_ENV_VARS}
    values |= {value for name, value in environ.items() if _SECRET_ENV_NAME.search(name.upper())}
    return sorted((v for v in values if len(v.strip()) >= _MIN_SECRET_LEN), key=len, reverse=True)


def redact(text: str) -> str:
    """Mask credentials in ``text``. Linear in its length; each pattern runs only when its
    marker word occurs, so a long reply without any costs a few ``str`` scans."""
    if not text:
        return text
    for value in secret_values():
        text = text.replace(value, MASK)
    lowered = text.lower()
    if "sk-" in text or "AIza" in text:
        text = _KEY_SHAPES.sub(MASK, text)
    if "://" in text:
        text = _URL_USERINFO.sub(MASK + "@", text)
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + MASK, text)
    if any(scheme in text for scheme in ("Bearer", "Basic", "Digest", "Token")):
        text = _AUTH_SCHEMES.sub(lambda m: f"{m.group(1)} {MASK}", text)
    if any(word in lowered for word in ("key", "token", "password", "secret")):
        text = _KEY_FIELDS.sub(lambda m: m.group(1) + MASK, text)
    return text


def public_url(url: str) -> str:
    """An endpoint without user:password, query string or fragment (safe to record and hash)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


class RedactingFilter(logging.Filter):
    """Scrubs every record of our loggers, so no message can carry a key to a log file."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the logging module's problem, not ours
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_filter(package: str = "lm_eval_mathjudge") -> None:
    """Attach the filter to the package's logger and every module logger under it (idempotent).

    Logger filters do not propagate to child loggers, so each module's logger needs its own;
    call this after the modules that log (backends included) are imported.
    """
    names = [package] + [n for n in list(logging.Logger.manager.loggerDict) if n.startswith(package + ".")]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
