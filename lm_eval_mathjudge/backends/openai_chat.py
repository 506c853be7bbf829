"""Any OpenAI-compatible chat-completions endpoint (OpenAI, Azure, vLLM, SGLang, Ollama).

The official SDK reads its own variables (OPENAI_API_KEY, OPENAI_BASE_URL;
AZURE_OPENAI_* and OPENAI_API_VERSION for Azure). Its internal retries are
off: ``retry.py`` is the only retry layer.
"""

from __future__ import annotations

import base64
from typing import Any

import openai

from ..cache import Reply
from ..config import JudgeSettings
from ..errors import FatalJudgeError, JudgeRefusal, MediaError, TransientJudgeError
from ..redact import public_url, redact
from ..retry import parse_retry_after, transient_status
from ..types import JudgeRequest, Media

def create(settings: JudgeSettings, judge: str) -> "OpenAIChatBackend":
    return OpenAIChatBackend(settings)


class OpenAIChatBackend:
    def __init__(self, settings: JudgeSettings):
        self._settings = settings
        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": settings.timeout}
        if settings.base_url:
            kwargs["azure_endpoint" if settings.backend == "azure" else "base_url"] = settings.base_url
        try:
            self._client = openai.AzureOpenAI(**kwargs) if settings.backend == "azure" else openai.OpenAI(**kwargs)
        except openai.OpenAIError as exc:  # e.g. missing key or endpoint
            raise FatalJudgeError(redact(f"cannot build the {settings.backend} client: {exc}"), kind="config") from None

    def identity(self) -> dict[str, Any]:
        s = self._settings
        return {"backend": s.backend, "model": s.model, "endpoint": public_url(str(self._client.base_url)),
                "temperature": s.temperature, "max_tokens": s.max_tokens}

    def complete(self, request: JudgeRequest) -> Reply:
        s = self._settings
        try:
            response = self._client.chat.completions.create(
                model=s.model, messages=[{"role": "user", "content": _content(request)}],
                temperature=s.temperature, max_tokens=s.max_tokens)
        except openai.APIStatusError as exc:
            raise _status_error(exc) from None
        except openai.APITimeoutError:
            raise TransientJudgeError(f"judge request timed out after {s.timeout:g}s", kind="timeout") from None
        except openai.APIConnectionError as exc:
            raise TransientJudgeError(redact(f"cannot reach the judge: {exc}"), kind="connection") from None
        except (openai.APIError, ValueError) as exc:  # a 200 whose body is not a completion (bad JSON)
            raise TransientJudgeError(redact(f"malformed judge response: {exc}"), kind="bad_response") from None
        return _reply(response)

    def close(self) -> None:
        self._client.close()


def _reply(response: Any) -> Reply:
    # A 200 with a non-JSON body comes back from the SDK as a bare string.
    choices = getattr(response, "choices", None)
    if not choices or choices[0].message is None:
        raise TransientJudgeError("judge response has no choices", kind="bad_response")
    finish = choices[0].finish_reason
    if finish == "length":
        raise JudgeRefusal("the judge stopped at max_tokens before finishing its verdict; raise judge_max_tokens "
                           "(reasoning judges spend tokens before they answer)", kind="max_tokens")
    if finish == "content_filter":
        raise JudgeRefusal("the provider's content filter withheld the judge's reply", kind="content_filter")
    usage = getattr(response, "usage", None)
    counts = {k: v for k, v in (usage.model_dump() if usage else {}).items() if isinstance(v, int)}
    return Reply(text=choices[0].message.content or "", usage=counts, finish_reason=choices[0].finish_reason)


def _status_error(exc: openai.APIStatusError) -> Exception:
    status = exc.status_code
    message = redact(f"judge returned HTTP {status}: {_server_message(exc)}")
    if transient_status(status):
        headers = exc.response.headers
        retry_after = parse_retry_after(headers.get("retry-after"))
        if retry_after is None and headers.get("retry-after-ms"):
            retry_after = (parse_retry_after(headers.get("retry-after-ms")) or 0) / 1000
        kind = "rate_limited" if status == 429 else f"http_{status}"
        return TransientJudgeError(message, kind=kind, status=status, retry_after=retry_after)
    refusal = _per_request_refusal(exc, message)
    if refusal is not None:
        return refusal
    hint = {401: "check the API key variable", 403: "the key may lack access to this model",
            404: "check the judge model name and base URL"}.get(status, "the request was rejected")
    return FatalJudgeError(f"{message} ({hint}; not retried)", kind=f"http_{status}", status=status)


def _per_request_refusal(exc: openai.APIStatusError, message: str) -> JudgeRefusal | None:
    """400s about this one request (too long, filtered): the sample fails, the run goes on."""
    if exc.status_code != 400:
        return None
    code = str(getattr(exc, "code", "") or "").lower()
    text = message.lower()
    if code == "content_filter" or "content management policy" in text or "content_filter" in text:
        return JudgeRefusal(f"{message} (the provider's content filter)", kind="content_filter")
    if code == "context_length_exceeded" or "context length" in text or "maximum context" in text:
        return JudgeRefusal(f"{message} (the response is too long for the judge's context window)",
                            kind="context_length")
    return None


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        body = body.get("error", body)
        if isinstance(body, dict):
            return str(body.get("message") or body)[:500]
    return str(body or exc.message)[:500]



def _content(request: JudgeRequest) -> Any:
    if not request.media and request.output_text is None:
        return request.prompt
    parts = [{"type": "text", "text": request.prompt}]
    if request.output_text is not None:
        parts.append({"type": "text", "text": request.output_text})
    return parts + [_image_part(m) for m in request.media]


def _image_part(media: Media) -> dict[str, Any]:
    if media.is_video:
        raise MediaError(f"{media.source}: the openai judge backend cannot watch video ({media.mime_type}); "
                         "judge video outputs with judge_backend=gemini")
    try:
        data = base64.b64encode(media.read()).decode("ascii")
    except OSError as exc:
        raise MediaError(f"{media.source}: cannot read it ({exc.strerror or exc})") from None
    return {"type": "image_url", "image_url": {"url": f"data:{media.mime_type};base64,{data}"}}
