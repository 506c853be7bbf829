"""Any OpenAI-compatible chat-completions endpoint (OpenAI, Azure, vLLM, SGLang, Ollama).

The official SDK reads its own variables (OPENAI_API_KEY, OPENAI_BASE_URL;
AZURE_OPENAI_* and OPENAI_API_VERSION for Azure). Its internal retries are
off: ``retry.py`` is the only retry layer.

Reasoning judges (o-series, GPT-5) take ``max_completion_tokens`` instead of
``max_tokens`` and only their default temperature, so neither ``max_tokens``
nor ``temperature`` is sent to them; ``reasoning_effort`` is, when set.

A call has three phases with different failure meanings: building the request
(our bug or bad input: this sample fails, never retried), the exchange (HTTP
errors via ``_http.status_error``, timeouts, connection errors) and reading the
answer (a malformed body: ``bad_response``, retried).

The SDK is imported, and its client built, on the first real request (a call
or the preflight): a rerun answered entirely from the judge cache never pays
the ~0.5 s the ``openai`` package takes to import. The endpoint that names the
judge in cache keys is resolved without it, exactly as the SDK resolves it
(``endpoints.sdk_endpoint``); where that cannot be done, the client is built at once.
"""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING, Any

from ...core.errors import FatalJudgeError, JudgeCallError, JudgeRefusal, MediaError, TransientJudgeError
from ...core.redact import public_url, redact
from ...core.types import JudgeRequest, Media, Reply
from ...settings import credentials
from ...settings.models import is_reasoning_model
from ...settings.schema import JudgeSettings
from .. import endpoints, wire
from .. import _preflight
from .._http import building_request, check_text, malformed, message_content, status_error, unencodable
from .._lazy import LazyClient

if TYPE_CHECKING:  # annotations only: the SDK is imported on first use
    import openai

log = logging.getLogger(__name__)

MODEL_LIST_BYTES = 16 << 20  # a model list (a proxy serving hundreds of models) may be larger than one reply

def create(settings: JudgeSettings, judge: str) -> OpenAIChatBackend:
    return OpenAIChatBackend(settings)


class OpenAIChatBackend(LazyClient):
    def __init__(self, settings: JudgeSettings):
        self._settings = settings
        endpoint = endpoints.sdk_endpoint(settings)
        self._endpoint = public_url(str(self._client.base_url)) if endpoint is None else endpoint

    def _build_client(self) -> Any:
        import openai

        settings = self._settings
        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": settings.timeout}
        if settings.base_url:
            kwargs["azure_endpoint" if settings.backend == "azure" else "base_url"] = settings.base_url
        try:
            kwargs["http_client"] = wire.openai_http_client(wire.judge_bounds(settings))
            return openai.AzureOpenAI(**kwargs) if settings.backend == "azure" else openai.OpenAI(**kwargs)
        except (openai.OpenAIError, ValueError) as exc:  # e.g. missing key, endpoint or Azure API version
            if "http_client" in kwargs:
                kwargs["http_client"].close()
            raise FatalJudgeError(redact(f"cannot build the {settings.backend} client: {exc}"), kind="config") from None

    def identity(self) -> dict[str, Any]:
        s = self._settings
        identity = {"backend": s.backend, "model": s.model, "endpoint": self._endpoint,
                    "temperature": s.temperature, "max_tokens": s.max_tokens}
        if s.reasoning_effort:  # only when set, so the cache keys of other runs stay as they were
            identity["reasoning_effort"] = s.reasoning_effort
        return identity

    def complete(self, request: JudgeRequest) -> Reply:
        import openai

        params = self.request_body(request)
        client = self._client
        try:
            raw = client.chat.completions.with_raw_response.create(**params)
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APIError as exc:
            raise self._exchange_error(exc) from None
        except (ValueError, TypeError) as exc:  # the SDK could not encode our request: nothing was sent
            raise unencodable(exc) from None
        try:
            response = raw.parse()
        except (openai.APIError, ValueError) as exc:  # a 200 whose body is not a completion (bad JSON)
            raise malformed(exc) from None
        return reply_of(response)

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The request body; a failure here is this sample's, never a judge outage."""
        s = self._settings
        check_text(request)
        with building_request():
            content = message_content(request, _image_part)
            params: dict[str, Any] = {"model": s.model, "messages": [{"role": "user", "content": content}]}
        if is_reasoning_model(s.model):
            params["max_completion_tokens"] = s.max_tokens
            if s.reasoning_effort:
                params["reasoning_effort"] = s.reasoning_effort
        else:
            params.update(temperature=s.temperature, max_tokens=s.max_tokens)
        return params

    def preflight(self) -> None:
        """One free call before generation: does the endpoint answer, accept the key and know the model?

        OpenAI and compatible servers: GET /models/{model}. A server without that
        route (404 that is not about the model, or 405) is checked with the model
        list instead; a server with neither is let through with a warning.
        Azure: GET /openai/models checks endpoint, key and API version; deployment
        names are not listed there, so the deployment is first checked by the
        first judge call.
        """
        s = self._settings
        self.connect()  # a client that cannot be built is a config error, not an unanswered lookup
        if s.backend == "azure":
            _preflight.look_up(s, self._endpoint, self._list)
            log.info("azure judge at %s answers; deployment %s is checked by the first call", self._endpoint, s.model)
            return
        _preflight.look_up(s, self._endpoint, self._retrieve, no_route=self._preflight_list)

    def _retrieve(self, timeout: float) -> Any:
        return self._lookup(lambda: self._client.models.retrieve(self._settings.model, timeout=timeout))

    def _list(self, timeout: float) -> Any:
        return self._lookup(lambda: self._client.models.list(timeout=timeout))

    def _preflight_list(self) -> None:
        s = self._settings
        page = _preflight.look_up(s, self._endpoint, self._list)
        served = [m.id for m in getattr(page, "data", None) or []]
        if served and s.model not in served:
            raise FatalJudgeError(
                f"preflight: the judge endpoint {self._endpoint} does not serve model {s.model!r}; it lists "
                f"{', '.join(served[:10])}{' ...' if len(served) > 10 else ''}. Check judge_model, or set "
                "judge_preflight=false if this server accepts models it does not list", kind="preflight")

    def _lookup(self, call):
        """One preflight request, its errors mapped like a judge call's; a missing route is NoRoute."""
        import openai

        try:
            with wire.scoped(max_bytes=max(MODEL_LIST_BYTES, self._settings.reply_bytes)):
                return call()
        except openai.APIStatusError as exc:
            if exc.status_code == 405 or (exc.status_code == 404 and not _about_model(exc, self._settings.model)):
                raise _preflight.NoRoute() from None
            raise self._status_error(exc) from None
        except openai.APIError as exc:
            raise self._exchange_error(exc) from None

    def _status_error(self, exc: openai.APIStatusError) -> JudgeCallError:
        return status_error(exc.status_code, server_message(exc), keys=credentials.SERVICES[self._settings.backend].rejected,
                            endpoint=self._endpoint,
                            headers=exc.response.headers, code=getattr(exc, "code", None))

    def _exchange_error(self, exc: openai.APIError) -> JudgeCallError:
        import openai

        bound = wire.carried(exc)  # a deadline, the byte cap or a redirect (openai 1.x wraps them)
        if bound is not None:
            return bound
        if isinstance(exc, openai.APITimeoutError):
            return TransientJudgeError(f"judge request to {self._endpoint} timed out after "
                                       f"{self._settings.timeout:g}s", kind="timeout")
        if isinstance(exc, openai.APIConnectionError):
            return TransientJudgeError(redact(f"cannot reach the judge at {self._endpoint}: {exc}"),
                                       kind="connection")
        return malformed(exc)

    @property
    def settings(self) -> JudgeSettings:
        return self._settings

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def api_error(self, exc: openai.APIError) -> JudgeCallError:
        import openai

        return self._status_error(exc) if isinstance(exc, openai.APIStatusError) else self._exchange_error(exc)

    def close(self) -> None:
        if self._sdk_client is not None:  # never built: nothing to close, and no SDK to import
            self._sdk_client.close()


def _about_model(exc: openai.APIStatusError, model: str) -> bool:
    """A 404 that says the model is unknown, not that the route is.

    OpenAI sends code model_not_found; other servers name the model ("model
    \"llama3\" not found"). A 404 that only echoes the path (".../models/llama3")
    or says "Not Found" is about the route.
    """
    message = server_message(exc)
    return str(getattr(exc, "code", "") or "") == "model_not_found" or (model in message and "/models/" not in message)


def reply_of(response: Any) -> Reply:
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
    counts = _usage(usage.model_dump() if usage else {})
    model = getattr(response, "model", None)  # the snapshot that answered ("gpt-4o" -> "gpt-4o-2024-08-06")
    fingerprint = getattr(response, "system_fingerprint", None)  # the serving configuration, where given
    return Reply(text=choices[0].message.content or "", usage=counts, finish_reason=choices[0].finish_reason,
                 model=model if isinstance(model, str) and model else None,
                 fingerprint=fingerprint if isinstance(fingerprint, str) and fingerprint else None)


def _usage(raw: dict[str, Any]) -> dict[str, int]:
    """Top-level token counts, plus the reasoning tokens o-series and GPT-5 report in the details."""
    counts = {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}
    details = raw.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if isinstance(reasoning, int) and not isinstance(reasoning, bool):
        counts["reasoning_tokens"] = reasoning
    return counts


def server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        body = body.get("error", body)
        if isinstance(body, dict):
            return str(body.get("message") or body)[:500]
    return str(body or exc.message)[:500]


def _image_part(media: Media) -> dict[str, Any]:
    if media.is_video:
        raise MediaError(f"{media.source}: the openai judge backend cannot watch video ({media.mime_type}); "
                         "judge video outputs with judge_backend=gemini")
    try:
        data = base64.b64encode(media.read()).decode("ascii")
    except OSError as exc:
        raise MediaError(f"{media.source}: cannot read it ({exc.strerror or exc})") from None
    return {"type": "image_url", "image_url": {"url": f"data:{media.mime_type};base64,{data}"}}
