"""Anthropic failures on the project's error tree: what the SDK's errors and a batch item's error carry.

The status rule itself is ``backends._http.status_error``; this module reads Anthropic's error
body ``{"type": "error", "error": {"type": ..., "message": ...}}``: the error type names the status
("HTTP 529 overloaded_error"), a prompt over the context window is this sample's refusal, and a
temperature the model no longer takes gets its own hint. Retry-After is read from the headers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ...core.errors import FatalJudgeError, JudgeCallError, TransientJudgeError
from ...core.redact import redact
from ...settings import credentials
from .. import wire
from .._http import MESSAGE_LIMIT, malformed, status_error

if TYPE_CHECKING:  # annotations only: the SDK is imported on first use
    import anthropic

# A batch item's error has a type but no status: the status each type is sent with online.
TYPE_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
               "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
               "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529}
_TOO_LONG = ("prompt is too long", "input length and `max_tokens` exceed context limit")
TEMPERATURE_HINT = "Claude 4.7 and later refuse one; name it by its Claude model ID, e.g. claude-opus-4-7, so none is sent"


def error_of(body: Any) -> tuple[str, str]:
    """(error type, message) of an Anthropic error body (or whatever a proxy sent instead)."""
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        return str(error.get("type") or ""), str(error.get("message") or error)[:MESSAGE_LIMIT]
    return "", str(body or "")[:MESSAGE_LIMIT]


def classified(status: int, body: Any, endpoint: str | None = None,
               headers: Mapping[str, str] | None = None) -> JudgeCallError:
    """An error reply (online, or a batch item's) as transient, refusal or fatal."""
    kind, message = error_of(body)
    code = kind
    if status == 400 and any(phrase in message.lower() for phrase in _TOO_LONG):
        code = "context_length_exceeded"  # this sample's prompt, not the run
    if status == 400 and "temperature" in message and ("deprecated" in message or "not supported" in message):
        return FatalJudgeError(redact(f"judge returned HTTP 400: {message} (the model takes no temperature: "
                                      f"{TEMPERATURE_HINT}; not retried)"),
                               kind="http_400", status=status)
    return status_error(status, message, keys=credentials.SERVICES["anthropic"].rejected, endpoint=endpoint,
                        headers=headers, code=code, status_name=kind or None)


def api_error(exc: anthropic.APIStatusError, endpoint: str) -> JudgeCallError:
    return classified(exc.status_code, exc.body, endpoint, exc.response.headers)


def exchange_error(exc: Exception, endpoint: str, timeout: float) -> JudgeCallError:
    """A call that got no status: a network bound (wire), a timeout, a connection error, a bad body."""
    import anthropic

    bound = wire.carried(exc)
    if bound is not None:
        return bound
    if isinstance(exc, anthropic.APITimeoutError):
        return TransientJudgeError(f"judge request to {endpoint} timed out after {timeout:g}s", kind="timeout")
    if isinstance(exc, anthropic.APIConnectionError):
        return TransientJudgeError(redact(f"cannot reach the judge at {endpoint}: {exc}"), kind="connection")
    return malformed(exc)
