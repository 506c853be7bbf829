"""Gemini (Developer API or Vertex AI) through the official google-genai SDK.

The SDK reads its own variables: GEMINI_API_KEY / GOOGLE_API_KEY,
GOOGLE_GENAI_USE_VERTEXAI with GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION,
GOOGLE_GEMINI_BASE_URL (GOOGLE_VERTEX_BASE_URL). No key is ever passed in
code. The SDK's retries are off (one attempt): ``retry.py`` is the only retry
layer.

Media up to ``INLINE_MAX_BYTES`` travel inline; larger ones go through the
File API (upload, wait until ACTIVE, reference by URI, always delete).

The SDK is imported, and its client built, on the first real request (a call
or the preflight), so a rerun answered entirely from the judge cache never
imports it. The endpoint that names the judge in cache keys is resolved
without it where the SDK's rule is simple (``sdk_endpoint``: the Developer API,
or Vertex AI with project and location set); otherwise the client is built at once.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import time
from typing import TYPE_CHECKING, Any, Mapping

from ...calls import stop
from ...calls.retry import RetryPolicy, call_with_retries
from ...core.errors import FatalJudgeError, JudgeCallError, JudgeRefusal, MediaError, TransientJudgeError
from ...core.redact import public_url, redact
from ...core.types import JudgeRequest, Media, Reply
from ...settings import credentials
from ...settings.schema import JudgeSettings
from .._http import building_request, check_text, header_retry_after, status_error
from .._lazy import LazyClient

if TYPE_CHECKING:  # annotations only: the SDK is imported on first use
    from google.genai import errors as genai_errors

log = logging.getLogger(__name__)

INLINE_MAX_BYTES = 14 * 1000 * 1000  # base64 makes this ~18.7 MB, under the ~20 MB request limit
FILE_POLL_SECONDS = 2.0  # wait between File API state checks
FILE_ACTIVE_TIMEOUT = 600.0  # give up on a file still PROCESSING after max(this, judge timeout): the sample fails
PREFLIGHT_TIMEOUT = 30.0  # seconds per preflight attempt (at most the judge timeout)
PREFLIGHT_RETRIES = 2  # transient preflight failures retried (at most judge max_retries)
KEYS = "GEMINI_API_KEY / GOOGLE_API_KEY, or the Vertex AI credentials and project"
DEFAULT_ENDPOINT = "https://generativelanguage.googleapis.com"

_OK_FINISH = {"STOP", "FINISH_REASON_UNSPECIFIED"}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


@functools.cache
def _http_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...],
                                tuple[type[BaseException], ...]]:
    """(timeouts, connection errors, bad URL) of whichever httpx flavour the SDK uses.

    google-genai 3.x defaults to httpx2 (a fork under its own namespace), else httpx.
    """
    timeouts, transport, bad_url = [], [], []
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)  # ConnectError, RemoteProtocolError, ReadError, ...
        bad_url += [module.UnsupportedProtocol, module.InvalidURL]
    return tuple(timeouts), tuple(transport), tuple(bad_url)


_HTTP_NAMES = ("_TIMEOUTS", "_TRANSPORT", "_BAD_URL")


def __getattr__(name: str) -> Any:
    """``_TIMEOUTS``, ``_TRANSPORT``, ``_BAD_URL`` (the generators import them), found on first use."""
    if name in _HTTP_NAMES:
        return _http_exceptions()[_HTTP_NAMES.index(name)]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_TRUE = ("true", "1")


def sdk_endpoint(settings: JudgeSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint ``GeminiBackend`` records, without importing the SDK; None when only the SDK can tell.

    Developer API: the base URL given, else GOOGLE_GEMINI_BASE_URL, else the
    default. Vertex AI (GOOGLE_GENAI_USE_ENTERPRISE, else GOOGLE_GENAI_USE_VERTEXAI):
    only with GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION set and no base URL;
    anything else (a project from application default credentials, express mode
    with a key, a proxy) is left to the SDK.
    """
    environ = os.environ if environ is None else environ
    flag = environ.get("GOOGLE_GENAI_USE_ENTERPRISE")
    flag = environ.get("GOOGLE_GENAI_USE_VERTEXAI") if flag is None else flag
    if flag is not None and flag.lower() in _TRUE:
        project, location = environ.get("GOOGLE_CLOUD_PROJECT"), environ.get("GOOGLE_CLOUD_LOCATION")
        custom = settings.base_url or environ.get("GOOGLE_GEMINI_BASE_URL") or environ.get("GOOGLE_VERTEX_BASE_URL")
        return f"vertex:{project}/{location}" if project and location and not custom else None
    return public_url(settings.base_url or environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_ENDPOINT)


def create(settings: JudgeSettings, judge: str) -> "GeminiBackend":
    return GeminiBackend(settings)


class GeminiBackend(LazyClient):
    def __init__(self, settings: JudgeSettings):
        self._settings = settings
        self._vertex = False
        endpoint = sdk_endpoint(settings)
        self._endpoint = endpoint if endpoint is not None else self._connected_endpoint()

    def _connected_endpoint(self) -> str:
        api = getattr(self._client, "_api_client", None)
        return self._resolve_endpoint(api)

    def connect(self) -> None:
        """Build the SDK client now: missing credentials or project fail here, before generation."""
        self._client  # noqa: B018 - the property builds it

    def _build_client(self) -> Any:
        from google import genai
        from google.auth import exceptions as auth_errors
        from google.genai import types

        settings = self._settings
        options = types.HttpOptions(
            timeout=max(1, int(settings.timeout * 1000)),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        if settings.base_url:
            options.base_url = settings.base_url
        try:
            client = genai.Client(http_options=options)
        except (ValueError, auth_errors.GoogleAuthError) as exc:  # no key, no project, no ADC
            raise FatalJudgeError(redact(f"cannot build the gemini client: {exc} {credentials.hint('gemini')}."),
                                  kind="config") from None
        self._vertex = bool(getattr(getattr(client, "_api_client", None), "vertexai", False))
        return client

    def _resolve_endpoint(self, api: Any) -> str:
        if self._vertex:
            project, location = getattr(api, "project", None), getattr(api, "location", None)
            if project or location:
                return f"vertex:{project or '-'}/{location or 'global'}"
        base = (getattr(getattr(api, "_http_options", None), "base_url", None) or self._settings.base_url
                or os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_ENDPOINT)
        return public_url(str(base))

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
            contents = self.contents(self.text_parts(request)
                                      + [self.media_part(m, uploaded) for m in request.media])
            response = client.models.generate_content(model=s.model, contents=contents, config=self.generation_config())
        except genai_errors.APIError as exc:
            raise self.api_error(exc) from None
        except (ValueError, KeyError) as exc:  # a 200 whose body is not JSON / lacks the upload URL
            raise TransientJudgeError(redact(f"malformed judge response: {exc}"[:500]),
                                      kind="bad_response") from None
        except Exception as exc:  # noqa: BLE001 - transport errors, mapped in one place
            raise self.exchange_error(exc) from None
        finally:
            for name in uploaded:
                self.delete_file(name)
        return reply_of(response, s)

    def text_parts(self, request: JudgeRequest) -> list[Any]:
        """The text of the request; a failure here is this sample's, never a judge outage."""
        from google.genai import types

        check_text(request)
        texts = [request.prompt] + ([request.output_text] if request.output_text is not None else [])
        with building_request():
            return [types.Part.from_text(text=t) for t in texts]

    @staticmethod
    def contents(parts: list[Any]) -> list[Any]:
        from google.genai import types

        with building_request():
            return [types.Content(role="user", parts=parts)]

    def generation_config(self) -> Any:
        from google.genai import types

        s = self._settings
        with building_request():
            thinking = None if s.thinking_budget is None else types.ThinkingConfig(thinking_budget=s.thinking_budget)
            return types.GenerateContentConfig(temperature=s.temperature, max_output_tokens=s.max_tokens,
                                               thinking_config=thinking)

    def exchange_error(self, exc: Exception) -> Exception:
        """Timeouts and transport errors of either httpx flavour, and Vertex credential errors."""
        from google.auth import exceptions as auth_errors

        timeouts, transport, bad_url = _http_exceptions()
        if isinstance(exc, timeouts):
            return TransientJudgeError(f"judge request to {self._endpoint} timed out after "
                                       f"{self._settings.timeout:g}s", kind="timeout")
        if isinstance(exc, bad_url):
            return FatalJudgeError(redact(f"bad gemini endpoint {self._endpoint}: {exc} "
                                          "(check judge_base_url / GOOGLE_GEMINI_BASE_URL)"), kind="config")
        if isinstance(exc, (*transport, auth_errors.TransportError)):
            return TransientJudgeError(redact(f"cannot reach the judge at {self._endpoint}: "
                                              f"{type(exc).__name__}: {exc}"), kind="connection")
        if isinstance(exc, auth_errors.GoogleAuthError):  # Vertex credentials could not be refreshed
            return FatalJudgeError(redact(f"gemini credentials were rejected: {exc} (check the Vertex AI "
                                          "application default credentials)"), kind="auth")
        return exc  # not ours to classify (JudgeRefusal, MediaError, a bug): unchanged

    def api_error(self, exc: genai_errors.APIError) -> Exception:
        code = exc.code if isinstance(exc.code, int) else 0
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return status_error(code, str(exc.message or exc.details or ""), keys=KEYS, endpoint=self._endpoint,
                            headers=headers, status_name=exc.status or None, code=exc.status,
                            retry_after=_retry_info(exc))

    # -- preflight --------------------------------------------------------------------
    def preflight(self) -> None:
        """One free call before generation: GET models/{model} checks endpoint, key and model.

        A 404 that is not Google's NOT_FOUND for this model (a proxy without
        the route), or a 405, is let through with a warning.
        """
        from google.genai import types

        s = self._settings
        timeout = min(s.timeout, PREFLIGHT_TIMEOUT)
        self.connect()  # a client that cannot be built is a config error, not an unanswered lookup
        config = types.GetModelConfig(http_options=types.HttpOptions(
            timeout=max(1, int(timeout * 1000)), retry_options=types.HttpRetryOptions(attempts=1)))
        policy = RetryPolicy(max_retries=min(s.max_retries, PREFLIGHT_RETRIES))
        try:
            call_with_retries(lambda: self._lookup(config), policy)
        except _NoRoute:
            log.warning("the gemini judge endpoint %s has no models route; preflight could not check the "
                        "model %s (the first judge call will)", self._endpoint, s.model)
        except JudgeCallError as exc:
            raise FatalJudgeError(
                f"preflight: the gemini judge at {self._endpoint} (model {s.model}) did not answer the model "
                f"lookup: {str(exc).rstrip('.')}. Check judge_base_url / GOOGLE_GEMINI_BASE_URL, the key and "
                "judge_model; judge_preflight=false skips this check", kind="preflight", status=exc.status) from None

    def _lookup(self, config: Any) -> None:
        from google.genai import errors as genai_errors

        try:
            self._client.models.get(model=self._settings.model, config=config)
        except genai_errors.APIError as exc:
            text = str(exc.message or exc.details or "")
            model_unknown = exc.status == "NOT_FOUND" or self._settings.model in text
            if exc.code == 405 or (exc.code == 404 and not model_unknown):
                raise _NoRoute() from None
            raise self.api_error(exc) from None
        except (ValueError, KeyError) as exc:  # a 200 that is not a Model: something answers, not Gemini
            raise TransientJudgeError(redact(f"malformed model lookup response: {exc}"[:500]),
                                      kind="bad_response") from None
        except Exception as exc:  # noqa: BLE001 - mapped in one place
            raise self.exchange_error(exc) from None

    # -- media ----------------------------------------------------------------------
    def media_part(self, media: Media, uploaded: list[str], name: str | None = None) -> Any:
        from google.genai import types

        if media.size <= INLINE_MAX_BYTES:
            try:
                return types.Part.from_bytes(data=media.read(), mime_type=media.mime_type)
            except OSError as exc:
                raise MediaError(f"{media.source}: cannot read the media file: {exc}") from None
            except (ValueError, TypeError) as exc:  # pydantic validation: never sent, never retried
                raise MediaError(f"{media.source}: cannot attach it ({media.mime_type}): {exc}"[:500]) from None
        if self._vertex:
            raise MediaError(f"{media.source}: {media.size} bytes is over the {INLINE_MAX_BYTES}-byte inline "
                             "limit, and Vertex AI has no File API; use the Gemini Developer API "
                             "(GEMINI_API_KEY) for large media")
        return types.Part.from_uri(file_uri=self._upload(media, uploaded, name), mime_type=media.mime_type)

    def _upload(self, media: Media, uploaded: list[str], name: str | None = None) -> str:
        """Upload through the File API and wait until ACTIVE; returns the file URI.

        A file on disk is streamed by the SDK from its path: a 2 GB video is never held in memory.
        """
        from google.genai import types

        source = media.path if media.path is not None else io.BytesIO(media.read())
        config = types.UploadFileConfig(mime_type=media.mime_type, display_name=f"mathjudge-{media.sha256[:16]}",
                                        name=name)  # batch mode names its uploads to find them again
        from google.genai import errors as genai_errors

        try:
            file = self._client.files.upload(file=source, config=config)
        except OSError as exc:
            raise MediaError(f"{media.source}: cannot read the media file: {exc}") from None
        except genai_errors.APIError as exc:  # classified like any judge call (a 501 is never retried)
            raise _about(self.api_error(exc), f"the File API upload of {media.source}") from None
        uploaded.append(file.name)
        wait = max(FILE_ACTIVE_TIMEOUT, self._settings.timeout)
        deadline = time.monotonic() + wait
        while True:
            state = enum_name(file.state)
            if state == "ACTIVE":
                return file.uri
            if state == "FAILED":
                detail = getattr(getattr(file, "error", None), "message", None) or "no detail given"
                raise JudgeRefusal(redact(f"{media.source}: Gemini could not process the uploaded "
                                          f"{media.mime_type} file ({detail})"), kind="file_failed")
            if time.monotonic() >= deadline:  # not uploaded again: a retry would wait just as long
                raise JudgeRefusal(
                    f"{media.source}: Gemini was still {state or 'PROCESSING'} the uploaded {media.mime_type} "
                    f"file after {wait:g}s; it is not uploaded again and this sample counts as a judge failure. "
                    f"Long videos can need longer: raise judge_timeout above {wait:g} (the File API wait is the "
                    f"larger of {FILE_ACTIVE_TIMEOUT:g}s and judge_timeout) and rerun", kind="media_timeout")
            stop.sleep(FILE_POLL_SECONDS)  # a stop ends the wait (the upload is deleted as usual)
            try:
                file = self._client.files.get(name=file.name)
            except genai_errors.APIError as exc:
                raise _about(self.api_error(exc), f"the File API state of {media.source}") from None

    def delete_file(self, name: str) -> None:
        try:
            self._client.files.delete(name=name)
        except Exception as exc:  # noqa: BLE001 - files expire on their own after 48 h
            log.debug("could not delete uploaded gemini file %s: %s", name, redact(str(exc)))

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


class _NoRoute(Exception):
    """The server has no such route (not: no such model)."""


def _about(error: Exception, what: str) -> Exception:
    """The same classified error, its message saying which step of the call failed."""
    if not isinstance(error, JudgeCallError):
        return error
    return type(error)(f"{what}: {error}", kind=error.kind, status=error.status, retry_after=error.retry_after)


# -- replies --------------------------------------------------------------------------

def enum_name(value: Any) -> str | None:
    """An SDK enum (or a plain string for values the SDK does not know) as its name."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def reply_of(response: Any, settings: JudgeSettings) -> Reply:
    feedback = getattr(response, "prompt_feedback", None)
    block = enum_name(getattr(feedback, "block_reason", None))
    if block:
        detail = getattr(feedback, "block_reason_message", None)
        raise JudgeRefusal(f"Gemini blocked the prompt ({block}{': ' + detail if detail else ''})",
                           kind="blocked_prompt")
    candidates = getattr(response, "candidates", None)
    if not candidates:
        raise JudgeRefusal("Gemini returned no candidates", kind="no_candidates")
    candidate = candidates[0]
    finish = enum_name(candidate.finish_reason)
    if finish == "MAX_TOKENS":
        raise JudgeRefusal(
            f"Gemini stopped at max_output_tokens={settings.max_tokens} before finishing the verdict; "
            "Gemini 2.5's thinking tokens count against max_output_tokens, so raise judge_max_tokens",
            kind="max_tokens")
    if finish and finish not in _OK_FINISH:
        raise JudgeRefusal(f"Gemini withheld the reply (finish reason {finish})", kind=finish.lower())
    parts = getattr(candidate.content, "parts", None) or []
    text = "".join(p.text for p in parts if p.text and p.thought is not True)
    if not text.strip():
        raise JudgeRefusal("Gemini replied without any answer text (thoughts only or empty)", kind="empty_reply")
    return Reply(text=text, usage=_usage(getattr(response, "usage_metadata", None)), finish_reason=finish)


def _usage(meta: Any) -> dict[str, int]:
    if meta is None:
        return {}
    fields = {"prompt_tokens": "prompt_token_count", "completion_tokens": "candidates_token_count",
              "thoughts_tokens": "thoughts_token_count", "total_tokens": "total_token_count"}
    values = {name: getattr(meta, attr, None) for name, attr in fields.items()}
    return {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}


# -- errors ---------------------------------------------------------------------------

def _retry_after(exc: genai_errors.APIError) -> float | None:
    """The wait a Gemini/Vertex error asks for: Retry-After header first, else RetryInfo (generators use it)."""
    wait = header_retry_after(getattr(getattr(exc, "response", None), "headers", None))
    return _retry_info(exc) if wait is None else wait


def _retry_info(exc: genai_errors.APIError) -> float | None:
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
