"""What the two Google generators share: the client, error mapping and which API a model needs.

google-genai 3.6 runs ``generate_images`` (Imagen) and ``generate_videos`` (Veo)
only on a Vertex AI client, and ``generate_content`` (Gemini image models) on
both. So Imagen and Veo always get a Vertex AI client (``vertexai=True``, even
when GOOGLE_GENAI_USE_VERTEXAI is unset: the Gemini judge can keep the Gemini
API in the same run); a Gemini image model follows ``vertexai=`` or the SDK's
own variable. Passing ``vertexai`` explicitly is also what makes the SDK read
GOOGLE_VERTEX_BASE_URL (it reads GOOGLE_GEMINI_BASE_URL otherwise).

Credentials come only from the SDK's variables, never from ``--model_args``:

* Gemini API: GEMINI_API_KEY or GOOGLE_API_KEY (GOOGLE_GEMINI_BASE_URL honoured);
* Vertex AI: GOOGLE_CLOUD_PROJECT + GOOGLE_CLOUD_LOCATION with application
  default credentials, or an express-mode key in GOOGLE_API_KEY / GEMINI_API_KEY
  (GOOGLE_VERTEX_BASE_URL honoured).

The SDK's own retries are off; ``retry.py`` is the one retry layer. Every read is
bounded (``backends.wire``: the ``timeout`` as one deadline per exchange, ``max_reply_bytes``,
no redirect to another origin).
"""

from __future__ import annotations

import os
from typing import Any, Callable, TypeVar

import google.auth
from google import genai
from google.auth import exceptions as auth_errors
from google.genai import errors as genai_errors, types

from ..backends import endpoints, wire
from ..backends.gemini.errors import retry_after
from ..backends.wire import http_exceptions
from ..calls.retry import transient_status
from ..core.errors import ConfigError, FatalJudgeError, GenerationFailure, JudgeCallError, TransientJudgeError
from ..core.redact import redact
from ..settings import credentials
from ._bounds import bounds, media_bound
from .settings import GeneratorSettings

T = TypeVar("T")


def _requests_transport() -> tuple[type[BaseException], ...]:
    """With an mTLS client certificate the SDK sends through google-auth's requests session instead of httpx."""
    try:
        import requests
    except ImportError:
        return ()
    return (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
            requests.exceptions.ChunkedEncodingError)


_REQUESTS_TRANSPORT = _requests_transport()

# Finish reasons and block reasons that mean "the service refused on policy grounds".
SAFETY_REASONS = {"SAFETY", "PROHIBITED_CONTENT", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "BLOCKLIST",
                  "SPII", "RECITATION", "IMAGE_RECITATION", "JAILBREAK", "MODEL_ARMOR"}


def bare_model(model: str) -> str:
    """'publishers/google/models/veo-3.0-generate-001' -> 'veo-3.0-generate-001'."""
    return model.rsplit("/", 1)[-1]


def vertex_from_env() -> bool:
    """The SDK's own switch to Vertex AI, read by the one endpoint rule."""
    return endpoints.on_vertex()


def parse_vertex(value: Any) -> bool | None:
    """``vertexai=`` model arg: true/false, or auto/unset (None: follow the SDK's variable)."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return None
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"vertexai={value!r}: use true, false or auto")


def make_client(adapter: str, settings: GeneratorSettings, *, vertex: bool) -> tuple[Any, Callable[[], None]]:
    """(a google-genai client with one attempt per call and bounded reads, what closes it), or a ConfigError
    naming the missing credentials."""
    url = "GOOGLE_VERTEX_BASE_URL" if vertex else "GOOGLE_GEMINI_BASE_URL"
    options, http = wire.google_http_options(bounds(settings, url),
                                             timeout=max(1, int(settings.timeout * 1000)),  # milliseconds
                                             retry_options=types.HttpRetryOptions(attempts=1))
    needs = credentials.hint("vertex" if vertex else "gemini_api")
    api = "Vertex AI" if vertex else "the Gemini API"
    try:
        client = genai.Client(vertexai=vertex, http_options=options, **_project(vertex))
    except (ValueError, auth_errors.GoogleAuthError) as exc:
        if http is not None:
            http.close()
        raise ConfigError(redact(f"--model {adapter} with model={settings.model} runs on {api}, which needs "
                                 f"{needs}: the google-genai client could not be built ({exc})")) from None

    def close() -> None:
        client.close()
        if http is not None:  # the SDK leaves a client it was given to its owner
            http.close()
    return client, close


def check_vertex_auth(adapter: str, model: str, client: Any) -> None:
    """Fail before any generation when Vertex AI would need ADC that are not there.

    The SDK loads application default credentials only at the first request, so
    a missing login would otherwise surface after the run has started.
    """
    api = getattr(client, "_api_client", None)
    if not getattr(api, "vertexai", False) or getattr(api, "api_key", None) or getattr(api, "_credentials", None):
        return
    if not (getattr(api, "project", None) or getattr(api, "location", None)):
        return  # a custom GOOGLE_VERTEX_BASE_URL gateway that authenticates on its own
    try:
        google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except auth_errors.GoogleAuthError as exc:
        raise ConfigError(redact(f"--model {adapter} with model={model} runs on Vertex AI, which needs "
                                 f"{credentials.hint('vertex')}; no application default credentials were found ({exc})")
                          ) from None


def _project(vertex: bool) -> dict[str, str]:
    """GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION passed on explicitly when both are set.

    The SDK treats a GOOGLE_VERTEX_BASE_URL as an authenticating gateway (every
    request sent to the bare URL) unless project and location are arguments;
    passed on, the URL is an endpoint override like any other and ADC still apply.
    """
    project, location = os.environ.get("GOOGLE_CLOUD_PROJECT"), os.environ.get("GOOGLE_CLOUD_LOCATION")
    return {"project": project, "location": location} if vertex and project and location else {}


def call(fn: Callable[[], T], what: str) -> T:
    """Run one SDK call; map every failure to the project's error tree."""
    timeouts, transport, bad_url = http_exceptions()
    try:
        return fn()
    except JudgeCallError as exc:  # a network bound (backends/wire), as the SDK passed it on
        raise media_bound(exc, what) from None
    except genai_errors.APIError as exc:
        raise status_error(exc, what) from None
    except timeouts:
        raise TransientJudgeError(f"{what} timed out", kind="timeout") from None
    except bad_url as exc:
        raise FatalJudgeError(redact(f"{what}: bad endpoint: {exc} (check GOOGLE_GEMINI_BASE_URL / "
                                     "GOOGLE_VERTEX_BASE_URL)"), kind="config") from None
    except (*transport, *_REQUESTS_TRANSPORT, auth_errors.TransportError) as exc:
        # A body cut short ends here too (RemoteProtocolError): retried, nothing half-read is kept.
        raise TransientJudgeError(redact(f"{what}: connection failed: {type(exc).__name__}: {exc}"),
                                  kind="connection") from None
    except auth_errors.GoogleAuthError as exc:
        raise FatalJudgeError(redact(f"{what}: Google credentials were rejected: {exc} (check the "
                                     "application default credentials)"), kind="auth") from None
    except (ValueError, KeyError) as exc:  # a 200 whose body is not JSON, or undecodable base64
        raise TransientJudgeError(redact(f"{what}: malformed response: {exc}"[:500]), kind="bad_response") from None


def status_error(exc: genai_errors.APIError, what: str) -> Exception:
    """HTTP status -> transient (429, 5xx, ...), content refusal, or fatal with a hint."""
    code = exc.code if isinstance(exc.code, int) else 0
    text = str(exc.message or exc.details or "")[:500]
    message = redact(f"{what}: HTTP {code} {exc.status or ''}".rstrip() + f": {text}")
    if transient_status(code) or code < 400:
        kind = "rate_limited" if code == 429 else f"http_{code}"
        return TransientJudgeError(message, kind=kind, status=code or None, retry_after=retry_after(exc))
    if code == 400 and policy_words(text):
        # Vertex answers some prompts it will not draw with a 400 naming its usage guidelines.
        return GenerationFailure(message, kind="content_policy")
    hints = {401: "check the API key or Vertex AI credentials", 403: "check the API key or Vertex AI credentials "
             "and that the model is enabled for the project", 404: "check the model name and base URL"}
    return FatalJudgeError(f"{message} ({hints.get(code, 'the request was rejected')}; not retried)",
                           kind=f"http_{code}", status=code)


def policy_words(text: str) -> bool:
    lowered = text.lower()
    return any(w in lowered for w in ("usage guidelines", "responsible ai", "safety", "prohibited", "sensitive words"))


