"""What the HTTP backends share: one table for what an error status means,
the check that a request's text can travel at all, and a chat message's content parts.

    status                              error                 effect
    408 409 425 429, 5xx, odd < 400     TransientJudgeError   retried (Retry-After honoured)
    400 content filter / too long       JudgeRefusal          this sample fails, the run goes on
    400 "API key not valid" (Gemini)    FatalJudgeError auth  the run stops
    any other 4xx; 501 505 506 508      FatalJudgeError       the run stops, with a hint (never retried:
      510 511 (retry.NEVER_TRANSIENT)                         the same request gets the same answer)

The client turns a 400/413/415/422 to a request that carries media into that
sample's ``media_rejected`` failure (``client.MEDIA_STATUSES``). Below this table,
every exchange is bounded (``wire``): past the deadline a ``timeout`` (transient),
over the byte cap ``reply_too_large`` (a refusal), a 301/302/303/307/308 to another
origin ``redirect`` (fatal); none of them reaches an SDK as a status.

Backends pass what they read from their SDK's exception (status, headers,
server message, provider code); the wording of hints lives only here.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from ..calls.retry import parse_retry_after, transient_status
from ..core.errors import FatalJudgeError, JudgeCallError, JudgeRefusal, TransientJudgeError, UnsendableRequest
from ..core.redact import redact
from ..core.types import JudgeRequest, Media

MESSAGE_LIMIT = 500  # characters of server text kept in an error message

# What to check for each fatal status; {keys} is the backend's credential hint.
_FATAL_HINTS = {
    401: "check {keys}",
    403: "the key may lack access to this model; check {keys}",
    404: "check the judge model name (judge_model) and base URL (judge_base_url)",
    405: "the endpoint does not take this request here; check the base URL (judge_base_url)",
    413: "the request is larger than the endpoint accepts",
    415: "the endpoint does not accept this content type",
    501: "the endpoint does not implement this request (a proxy or server without this API, such as the Gemini "
         "File API used for media over 14 MB); check the base URL (judge_base_url)",
    505: "the endpoint does not speak this HTTP version; check the base URL (judge_base_url)",
}

# A reasoning model sent a chat model's parameters: its name did not give it away (an Azure deployment).
_REASONING_PHRASES = ("max_completion_tokens", "'temperature' does not support", "'temperature' is not supported")
_REASONING_HINT = ("the judge looks like a reasoning model (o-series, GPT-5), which takes max_completion_tokens and "
                   "no temperature; they are sent when judge_model names such a model, so name it (for Azure, a "
                   "deployment named after the model, e.g. o3-mini)")

# 400s about this one request, not the run: (kind, provider codes, phrases in the message, explanation).
_PER_REQUEST = (
    ("content_filter", ("content_filter",), ("content management policy", "content_filter"),
     "the provider's content filter"),
    ("context_length", ("context_length_exceeded",),
     ("context length", "maximum context", "exceeds the maximum number of tokens"),
     "the response is too long for the judge's context window"),
)


def status_error(status: int, message: str, *, keys: str, endpoint: str | None = None,
                 headers: Mapping[str, str] | None = None, code: str | None = None,
                 status_name: str | None = None, retry_after: float | None = None) -> JudgeCallError:
    """The typed error for an HTTP error reply.

    ``keys`` names the credentials to check (per backend); ``code`` is the
    provider's error code (OpenAI ``context_length_exceeded``), ``status_name``
    its status word (Gemini ``RESOURCE_EXHAUSTED``); ``retry_after`` is a delay
    the backend read from the body, used when no header gives one.
    """
    label = f"HTTP {status}" + (f" {status_name}" if status_name else "")
    text = redact(f"judge returned {label}: {str(message)[:MESSAGE_LIMIT]}")
    if transient_status(status) or status < 400:  # < 400: an odd code the SDK still raised
        wait = header_retry_after(headers)
        return TransientJudgeError(text, kind="rate_limited" if status == 429 else f"http_{status}",
                                   status=status, retry_after=retry_after if wait is None else wait)
    refusal = _per_request_refusal(status, text, code)
    if refusal is not None:
        return refusal
    where = f"; endpoint {endpoint}" if endpoint else ""
    if status == 400 and ("api key" in text.lower() or "API_KEY" in text):  # Gemini's answer to a bad key
        return FatalJudgeError(f"{text} (check {keys}{where}; not retried)", kind="auth", status=status)
    if status == 400 and any(p in text for p in _REASONING_PHRASES):
        hint = _REASONING_HINT
    else:
        hint = _FATAL_HINTS.get(status, "the request was rejected").format(keys=keys)
    return FatalJudgeError(f"{text} ({hint}{where}; not retried)", kind=f"http_{status}", status=status)


def about(error: Exception, what: str) -> Exception:
    """The same classified error, its message saying which step of the call failed."""
    if not isinstance(error, JudgeCallError):
        return error
    return type(error)(f"{what}: {error}", kind=error.kind, status=error.status, retry_after=error.retry_after)


def header_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from Retry-After, else from OpenAI's retry-after-ms; None when neither parses."""
    if headers is None:
        return None
    try:
        seconds = parse_retry_after(headers.get("retry-after"))
        if seconds is None:
            millis = parse_retry_after(headers.get("retry-after-ms"))
            seconds = None if millis is None else millis / 1000
    except Exception:  # noqa: BLE001 - odd header containers are no reason to lose the error
        return None
    return seconds


def _per_request_refusal(status: int, text: str, code: Any) -> JudgeRefusal | None:
    if status != 400:
        return None
    code, lower = str(code or "").lower(), text.lower()
    for kind, codes, phrases, why in _PER_REQUEST:
        if code in codes or any(p in lower for p in phrases):
            return JudgeRefusal(f"{text} ({why})", kind=kind, status=status)
    return None


def message_content(request: JudgeRequest, image: Callable[[Media], Any]) -> Any:
    """A chat message's content: the prompt alone, or text parts (the prompt, then the output given as
    text) followed by ``image(m)`` for each medium, in the order the judges' templates expect."""
    if not request.media and request.output_text is None:
        return request.prompt
    parts = [{"type": "text", "text": request.prompt}]
    if request.output_text is not None:
        parts.append({"type": "text", "text": request.output_text})
    return parts + [image(m) for m in request.media]


def check_text(request: JudgeRequest) -> None:
    """Text the wire cannot carry (a lone surrogate) fails this sample, naming where, before anything is sent."""
    for name, text in (("prompt", request.prompt), ("response", request.output_text)):
        if text is None:
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UnsendableRequest(f"the judge {name} holds a character UTF-8 cannot encode "
                                    f"({exc.object[exc.start:exc.end]!r} at offset {exc.start})",
                                    kind="invalid_text") from None


def malformed(exc: Exception) -> TransientJudgeError:
    """A 200 (or an exchange) whose body is not the API's reply: a transient ``bad_response``."""
    return TransientJudgeError(redact(f"malformed judge response: {exc}"[:500]), kind="bad_response")


def unencodable(exc: Exception) -> UnsendableRequest:
    """The SDK could not encode our request: nothing was sent; this sample's failure, never retried."""
    return UnsendableRequest(redact(f"cannot encode the judge request: {type(exc).__name__}: {exc}"[:500]))


@contextmanager
def building_request() -> Iterator[None]:
    """Errors while building a request body are this sample's (never sent, never retried), not an outage."""
    try:
        yield
    except (ValueError, TypeError) as exc:  # pydantic validation errors are ValueErrors too
        raise UnsendableRequest(redact(f"cannot build the judge request: {type(exc).__name__}: {exc}"[:500])) \
            from None
