"""Gemini (Developer API or Vertex AI) online: one generate_content call per judge request.

The SDK reads its own variables: GEMINI_API_KEY / GOOGLE_API_KEY; the switch to
Vertex AI (GOOGLE_GENAI_USE_ENTERPRISE, or GOOGLE_GENAI_USE_VERTEXAI) with
GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION; GOOGLE_GEMINI_BASE_URL. No key is
ever passed in code. The SDK's retries are off (one attempt): ``retry.py`` is
the only retry layer.

The jobs around a call live beside it: ``requests`` (the parts of a request),
``files`` (inline media and the File API), ``replies`` (a response as a reply
or a refusal), ``errors`` (failures on the error tree); where the requests go is
``backends.endpoints``' rule.

The SDK is imported, and its client built, on the first real request (a call
or the preflight), so a rerun answered entirely from the judge cache never
imports it. The endpoint that names the judge in cache keys is resolved
without it where the rule can tell (``endpoints.sdk_endpoint``); otherwise the
client is built at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.errors import FatalJudgeError, TransientJudgeError
from ...core.redact import redact
from ...core.types import JudgeRequest, Media, Reply
from ...settings import credentials
from ...settings.schema import JudgeSettings
from .. import _preflight, endpoints, wire
from .._http import malformed
from .._lazy import LazyClient
from . import errors, files, requests
from .replies import reply_of

if TYPE_CHECKING:  # annotations only: the SDK is imported on first use
    from google.genai import errors as genai_errors


def create(settings: JudgeSettings, judge: str) -> GeminiBackend:
    return GeminiBackend(settings)


class GeminiBackend(LazyClient):
    def __init__(self, settings: JudgeSettings):
        self._settings = settings
        self._vertex = False
        self._http: Any = None  # the bounded HTTP client of the SDK client, once built
        endpoint = endpoints.sdk_endpoint(settings)
        self._endpoint = endpoint if endpoint is not None else self.client_endpoint()

    def client_endpoint(self) -> str:
        """Where the built SDK client sends requests (building it now if it was not)."""
        return endpoints.gemini_client_endpoint(getattr(self._client, "_api_client", None), self._settings.base_url)

    def _build_client(self) -> Any:
        from google import genai
        from google.auth import exceptions as auth_errors
        from google.genai import types

        settings = self._settings
        options, self._http = wire.google_http_options(
            wire.judge_bounds(settings), timeout=max(1, int(settings.timeout * 1000)),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1))
        if settings.base_url:
            options.base_url = settings.base_url
        try:
            client = genai.Client(http_options=options)
        except (ValueError, auth_errors.GoogleAuthError) as exc:  # no key, no project, no ADC
            self._close_http()
            raise FatalJudgeError(redact(f"cannot build the gemini client: {exc} {credentials.hint('gemini')}."),
                                  kind="config") from None
        self._vertex = bool(getattr(getattr(client, "_api_client", None), "vertexai", False))
        return client

    def identity(self) -> dict[str, Any]:
        s = self._settings
        identity = {"backend": "gemini", "model": s.model, "endpoint": self._endpoint,
                    "temperature": s.temperature, "max_tokens": s.max_tokens}
        if s.thinking_budget is not None:  # only when set, so the cache keys of other runs stay as they were
            identity["thinking_budget"] = s.thinking_budget
        return identity

    def complete(self, request: JudgeRequest) -> Reply:
        from google.genai import errors as genai_errors

        s = self._settings
        uploaded: list[str] = []
        client = self._client  # before building the request: media parts depend on the API (Vertex or not)
        try:
            contents = requests.contents(requests.text_parts(request)
                                         + [self.media_part(m, uploaded) for m in request.media])
            response = client.models.generate_content(model=s.model, contents=contents,
                                                      config=requests.generation_config(s))
        except genai_errors.APIError as exc:
            raise self.api_error(exc) from None
        except (ValueError, KeyError) as exc:  # a 200 whose body is not JSON / lacks the upload URL
            raise malformed(exc) from None
        except Exception as exc:  # noqa: BLE001 - transport errors, mapped in one place
            raise self.exchange_error(exc) from None
        finally:
            for name in uploaded:
                files.delete(client, name)
        return reply_of(response, s)

    def exchange_error(self, exc: Exception) -> Exception:
        return errors.exchange_error(exc, self._endpoint, self._settings.timeout)

    def api_error(self, exc: genai_errors.APIError) -> Exception:
        return errors.api_error(exc, self._endpoint)

    # -- preflight --------------------------------------------------------------------
    def preflight(self) -> None:
        """One free call before generation: GET models/{model} checks endpoint, key and model.

        A 404 that is not Google's NOT_FOUND for this model (a proxy without
        the route), or a 405, is let through with a warning.
        """
        self.connect()  # a client that cannot be built is a config error, not an unanswered lookup
        _preflight.look_up(self._settings, self._endpoint, self._lookup)

    def _lookup(self, timeout: float) -> None:
        from google.genai import errors as genai_errors
        from google.genai import types

        config = types.GetModelConfig(http_options=types.HttpOptions(
            timeout=max(1, int(timeout * 1000)), retry_options=types.HttpRetryOptions(attempts=1)))
        try:
            self._client.models.get(model=self._settings.model, config=config)
        except genai_errors.APIError as exc:
            text = str(exc.message or exc.details or "")
            model_unknown = exc.status == "NOT_FOUND" or self._settings.model in text
            if exc.code == 405 or (exc.code == 404 and not model_unknown):
                raise _preflight.NoRoute() from None
            raise self.api_error(exc) from None
        except (ValueError, KeyError) as exc:  # a 200 that is not a Model: something answers, not Gemini
            raise TransientJudgeError(redact(f"malformed model lookup response: {exc}"[:500]),
                                      kind="bad_response") from None
        except Exception as exc:  # noqa: BLE001 - mapped in one place
            raise self.exchange_error(exc) from None

    # -- media ----------------------------------------------------------------------
    def media_part(self, media: Media, uploaded: list[str], name: str | None = None) -> Any:
        """Inline, or uploaded through the File API (its name appended to ``uploaded``, to delete)."""
        return files.media_part(self._client, media, uploaded, vertex=self._vertex, endpoint=self._endpoint,
                                timeout=self._settings.timeout, name=name)

    def delete_file(self, name: str) -> None:
        files.delete(self._client, name)

    @property
    def settings(self) -> JudgeSettings:
        return self._settings

    @property
    def on_vertex(self) -> bool:
        """Whether the client talks to Vertex AI (known once it is built: ``connect``)."""
        self.connect()
        return self._vertex

    def close(self) -> None:
        close = getattr(self._sdk_client, "close", None)  # never built: nothing to close
        if callable(close):
            close()
        self._close_http()

    def _close_http(self) -> None:
        """The bounded HTTP client given to the SDK, which leaves closing it to us."""
        if self._http is not None:
            self._http.close()
            self._http = None
