"""Anthropic's Messages API (POST /v1/messages): one call per judge request, through the official SDK.

The SDK is an optional extra (``pip install 'lm-eval-mathjudge[anthropic]'``; ``backends.build``
refuses the backend before generation when it is missing). It reads ANTHROPIC_API_KEY (or
ANTHROPIC_AUTH_TOKEN); no key is ever passed in code. The base URL is the vendor record's plain
rule (judge_base_url, else ANTHROPIC_BASE_URL, else api.anthropic.com), passed to the SDK so that
the endpoint in cache keys is the one called. The SDK's retries are off (``retry.py`` is the only
retry layer) and it sends through a bounded HTTP client (``wire``). The SDK is imported, and its
client built, on the first real request (a call or the preflight).

The body and the reply are ``body``'s (shared with the Message Batches); failures are ``errors``'.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import FatalJudgeError, JudgeCallError, TransientJudgeError
from ...core.redact import public_url, redact
from ...core.types import JudgeRequest, Reply
from ...settings.schema import JudgeSettings
from .. import _preflight, endpoints, wire
from .._http import malformed, unencodable
from .._lazy import LazyClient
from . import body, errors

MODEL_BYTES = 1 << 20  # a model lookup's reply


def create(settings: JudgeSettings, judge: str) -> AnthropicBackend:
    return AnthropicBackend(settings)


class AnthropicBackend(LazyClient):
    def __init__(self, settings: JudgeSettings):
        body.check_settings(settings)
        self._settings = settings
        self._url = endpoints.plain_url(settings)
        self._endpoint = public_url(self._url)

    def _build_client(self) -> Any:
        import anthropic

        s = self._settings
        http = wire.bounded_client(wire.flavour(anthropic.DefaultHttpxClient).Client, wire.judge_bounds(s),
                                   "anthropic", follow_redirects=True, timeout=s.timeout,
                                   limits=anthropic.DEFAULT_CONNECTION_LIMITS)
        try:
            return anthropic.Anthropic(base_url=self._url, max_retries=0, timeout=s.timeout, http_client=http)
        except (anthropic.AnthropicError, ValueError, TypeError) as exc:
            http.close()
            raise FatalJudgeError(redact(f"cannot build the anthropic client: {exc}"), kind="config") from None

    def identity(self) -> dict[str, Any]:
        s = self._settings
        identity = {"backend": s.backend, "model": s.model, "endpoint": self._endpoint,
                    "temperature": s.temperature, "max_tokens": s.max_tokens}
        if s.thinking_budget is not None:  # only when set, so other runs' cache keys stay as they are
            identity["thinking_budget"] = s.thinking_budget
        return identity

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        return body.request_body(self._settings, request)

    def complete(self, request: JudgeRequest) -> Reply:
        import anthropic

        params = self.request_body(request)
        # The SDK declares only the parameters its newest models take (no temperature): the rest of the
        # body goes as it is, so every model gets the body the batch sends too.
        required = {name: params.pop(name) for name in ("model", "max_tokens", "messages")}
        client = self._client
        try:
            raw = client.messages.with_raw_response.create(**required, extra_body=params or None)
        except anthropic.APIError as exc:
            raise self.api_error(exc) from None
        except (ValueError, TypeError) as exc:  # the SDK could not encode our request: nothing was sent
            raise unencodable(exc) from None
        try:
            message = raw.parse()
        except (anthropic.APIError, ValueError) as exc:  # a 200 whose body is not a message
            raise malformed(exc) from None
        if not hasattr(message, "content"):  # a 200 with a non-JSON body comes back as a bare string
            raise TransientJudgeError("malformed judge response: not a Messages API message", kind="bad_response")
        return body.reply_of(message, self._settings)

    # -- preflight --------------------------------------------------------------------
    def preflight(self) -> None:
        """One free call before generation: GET /v1/models/{model} checks endpoint, key and model.

        A 404 that does not name the model (a gateway without the route), or a 405, is let
        through with a warning: the first judge call checks the model.
        """
        self.connect()  # a client that cannot be built is a config error, not an unanswered lookup
        _preflight.look_up(self._settings, self._endpoint, self._lookup)

    def _lookup(self, timeout: float) -> None:
        import anthropic

        model = self._settings.model
        try:
            with wire.scoped(max_bytes=max(MODEL_BYTES, self._settings.reply_bytes)):
                self._client.models.retrieve(model, timeout=timeout)
        except anthropic.APIStatusError as exc:
            if exc.status_code == 405 or (exc.status_code == 404 and model not in errors.error_of(exc.body)[1]):
                raise _preflight.NoRoute() from None
            raise self.api_error(exc) from None
        except anthropic.APIError as exc:
            raise self.api_error(exc) from None

    # -- what the batch provider shares ------------------------------------------------
    def api_error(self, exc: Exception) -> JudgeCallError:
        import anthropic

        if isinstance(exc, anthropic.APIStatusError):
            return errors.api_error(exc, self._endpoint)
        return errors.exchange_error(exc, self._endpoint, self._settings.timeout)

    @property
    def settings(self) -> JudgeSettings:
        return self._settings

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def close(self) -> None:
        if self._sdk_client is not None:  # never built: nothing to close, and no SDK to import
            self._sdk_client.close()
