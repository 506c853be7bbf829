"""Gemini failures mapped onto the project's error tree: API statuses, transport errors, the wait asked for.

The status rule itself is ``backends._http.status_error``; this module reads
what google-genai's errors carry (code, status name, RetryInfo); the httpx
exceptions of either flavour are ``wire.http_exceptions``. The generators use
the same mapping.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...core.errors import FatalJudgeError, TransientJudgeError
from ...core.redact import redact
from ...settings import credentials
from .._http import header_retry_after, status_error
from ..wire import http_exceptions

if TYPE_CHECKING:  # annotations only: the SDK is imported on first use
    from google.genai import errors as genai_errors

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def api_error(exc: genai_errors.APIError, endpoint: str) -> Exception:
    """An SDK APIError (an HTTP status) as transient, refusal or fatal, with the wait the service asked for."""
    code = exc.code if isinstance(exc.code, int) else 0
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return status_error(code, str(exc.message or exc.details or ""), keys=credentials.SERVICES["gemini"].rejected,
                        endpoint=endpoint, headers=headers, status_name=exc.status or None, code=exc.status,
                        retry_after=retry_info(exc))


def exchange_error(exc: Exception, endpoint: str, timeout: float) -> Exception:
    """Timeouts and transport errors of either httpx flavour, and Vertex credential errors."""
    from google.auth import exceptions as auth_errors

    timeouts, transport, bad_url = http_exceptions()
    if isinstance(exc, timeouts):
        return TransientJudgeError(f"judge request to {endpoint} timed out after {timeout:g}s", kind="timeout")
    if isinstance(exc, bad_url):
        return FatalJudgeError(redact(f"bad gemini endpoint {endpoint}: {exc} "
                                      "(check judge_base_url / GOOGLE_GEMINI_BASE_URL)"), kind="config")
    if isinstance(exc, (*transport, auth_errors.TransportError)):
        return TransientJudgeError(redact(f"cannot reach the judge at {endpoint}: "
                                          f"{type(exc).__name__}: {exc}"), kind="connection")
    if isinstance(exc, auth_errors.GoogleAuthError):  # Vertex credentials could not be refreshed
        return FatalJudgeError(redact(f"gemini credentials were rejected: {exc} (check the Vertex AI "
                                      "application default credentials)"), kind="auth")
    return exc  # not ours to classify (JudgeRefusal, MediaError, a bug): unchanged


def retry_after(exc: genai_errors.APIError) -> float | None:
    """The wait a Gemini/Vertex error asks for: Retry-After header first, else RetryInfo (generators use it)."""
    wait = header_retry_after(getattr(getattr(exc, "response", None), "headers", None))
    return retry_info(exc) if wait is None else wait


def retry_info(exc: genai_errors.APIError) -> float | None:
    """google.rpc.RetryInfo.retryDelay from the error body (a Retry-After header wins over it)."""
    error = exc.details.get("error", exc.details) if isinstance(exc.details, dict) else None
    items = error.get("details") if isinstance(error, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = item.get("retryDelay")
            if isinstance(delay, dict):  # {"seconds": 1, "nanos": 500000000}
                return float(delay.get("seconds", 0)) + float(delay.get("nanos", 0)) / 1e9
            match = _DURATION.match(str(delay or ""))
            if match:
                return float(match.group(1))
    return None
