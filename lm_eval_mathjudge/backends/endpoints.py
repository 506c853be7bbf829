"""Where a judge's requests go: the one rule, resolved the way each SDK resolves it, without the SDK.

Each vendor record names its rule (``vendors.record.Endpoint``): most are ``plain`` (the base
URL given, else the SDK's variable, else the default); the three below have rules of their own.

The endpoint names the judge in cache keys, limits and the results, so every
place that needs it asks here: ``sdk_endpoint`` (what the SDK client will
target; None when only the SDK can tell), ``recorded_endpoint`` (what the
results record before a client exists) and ``gemini_client_endpoint`` (what a
built google-genai client targets). Importing the SDKs costs about half a
second, and a rerun answered from the cache never needs them.

* openai: the base URL given, else OPENAI_BASE_URL, else api.openai.com/v1;
  azure: the endpoint given, else AZURE_OPENAI_ENDPOINT, plus ``/openai``.
* gemini: Vertex AI when the SDK's switch says so (``on_vertex``:
  GOOGLE_GENAI_USE_ENTERPRISE, else the older GOOGLE_GENAI_USE_VERTEXAI; only
  "true"/"1", any case, switch it on), named ``vertex:<project>/<location>``
  (``... at <URL>`` when a base URL on a Google host replaces the regional one);
  else the Developer API at the base URL given, GOOGLE_GEMINI_BASE_URL, or
  generativelanguage.googleapis.com.

``custom_endpoint`` says when that URL is not on the vendor's own hosts (``Endpoint.hosts``): the
list prices do not hold there.
"""

from __future__ import annotations

import os
from typing import Any, Mapping
from urllib.parse import urlsplit

from .. import vendors
from ..core.redact import public_url, redact
from ..settings.schema import JudgeSettings
from ..vendors.record import Endpoint

GEMINI_DEFAULT = vendors.GEMINI.endpoint.default
# google-genai's switches to Vertex AI, the first one set wins (its _api_client.BaseApiClient).
VERTEX_SWITCHES = ("GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GENAI_USE_VERTEXAI")
_SWITCH_ON = ("true", "1")  # compared after lower(), never stripped: the SDK's own test


def on_vertex(environ: Mapping[str, str] | None = None) -> bool:
    """Whether google-genai's environment switch selects Vertex AI (a set but empty switch means no)."""
    environ = os.environ if environ is None else environ
    for name in VERTEX_SWITCHES:
        value = environ.get(name)
        if value is not None:
            return value.lower() in _SWITCH_ON
    return False


def sdk_endpoint(settings: JudgeSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint the backend's SDK client will target; None when only the SDK can tell (or no SDK)."""
    environ = os.environ if environ is None else environ
    endpoint = _endpoint_of(settings.backend)
    if endpoint is None:
        return None
    if endpoint.rule in ("openai", "azure"):
        return _openai(settings, environ)
    if endpoint.rule == "gemini":
        return _gemini(settings, environ)
    return public_url(plain_url(settings, environ))


def plain_url(settings: JudgeSettings, environ: Mapping[str, str] | None = None) -> str:
    """The plain rule: the base URL given, else the vendor's variable, else its default (no trailing slash).
    The URL itself, for the SDK client (the results and cache keys name it by ``public_url``)."""
    environ = os.environ if environ is None else environ
    endpoint = _endpoint_of(settings.backend)
    url = settings.base_url or (environ.get(endpoint.variable) if endpoint.variable else None) or endpoint.default
    return str(url).rstrip("/")


def _endpoint_of(backend: str) -> Endpoint | None:
    vendor = vendors.get(backend)
    return vendor.endpoint if vendor is not None else None


def recorded_endpoint(settings: JudgeSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """What the results record as the judge's endpoint, without building a client; None for the local judge.

    ``sdk_endpoint`` where it can tell; otherwise the URL given or the API's name:
    ``vertex:<project or ->/<location or global>`` on Vertex AI, the Azure endpoint as given."""
    environ = os.environ if environ is None else environ
    known = sdk_endpoint(settings, environ)
    endpoint = _endpoint_of(settings.backend)
    if known is not None or endpoint is None:
        return known
    if endpoint.rule == "gemini" and on_vertex(environ):
        project, location = environ.get("GOOGLE_CLOUD_PROJECT"), environ.get("GOOGLE_CLOUD_LOCATION")
        custom = settings.base_url or environ.get(endpoint.variable)
        if not custom:
            return _vertex_name(project, location)
        # The SDK keeps project and location for a Google host (a regional endpoint), else sends to the bare URL.
        google_host = custom.endswith(".googleapis.com") and project and location
        return f"{_vertex_name(project, location)} at {public_url(custom)}" if google_host else public_url(custom)
    url = settings.base_url or environ.get(endpoint.variable or "")
    return public_url(url) if url else None


def custom_endpoint(settings: JudgeSettings, environ: Mapping[str, str] | None = None) -> str | None:
    """Where a judge's requests go when that is not its vendor's own service (the record's ``hosts``): a
    local vLLM, a gateway, another provider speaking the protocol; None on the vendor's service and for
    the local judge. Its list prices hold on its own service only, whatever the model is called.

    The URL is the one every rule above starts from: judge_base_url, else the SDK's variable (on Vertex AI
    too, see ``_gemini``); none means the vendor's default. Shown as ``public_url`` (no user name, no query)
    and redacted (a gateway's key in the path): the cost table is printed, not logged through the filter."""
    environ = os.environ if environ is None else environ
    endpoint = _endpoint_of(settings.backend)
    if endpoint is None:
        return None
    url = getattr(settings, "base_url", None) or (environ.get(endpoint.variable) if endpoint.variable else None)
    if not url or on_hosts(url, endpoint.hosts):
        return None
    try:
        return redact(public_url(url))
    except ValueError:  # a port out of range, a broken IPv6 literal: say so, never echo it (it may hold a key)
        return "a URL that does not parse"


def on_hosts(url: str, hosts: tuple[str, ...]) -> bool:
    """Whether ``url`` is an http(s) URL on one of ``hosts`` or a subdomain of one (on a dot boundary).

    Read strictly, since parsers disagree on odd URLs: with a user name (``https://api.openai.com@10.0.0.1/``
    goes to 10.0.0.1), a backslash, a space or a control character anywhere, the URL is not the vendor's;
    the host is compared in lower case, whole (``api.openai.com.example`` and ``evilapi.openai.com`` are not
    ``api.openai.com``; a percent-escaped or look-alike host matches nothing)."""
    if "\\" in url or any(c.isspace() or not c.isprintable() for c in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or "@" in parts.netloc:
        return False
    host = host[:-1] if host.endswith(".") else host  # the root's dot: the same name
    return any(host == domain or host.endswith("." + domain) for domain in hosts)


def gemini_client_endpoint(api_client: Any, base_url: str | None) -> str:
    """What a built google-genai client targets (its ``_api_client``), named as ``sdk_endpoint`` names it."""
    if getattr(api_client, "vertexai", False):
        project, location = getattr(api_client, "project", None), getattr(api_client, "location", None)
        if project or location:
            custom = getattr(api_client, "custom_base_url", None)  # another host, same project and location
            return f"{_vertex_name(project, location)} at {public_url(custom)}" if custom else \
                _vertex_name(project, location)
    base = getattr(getattr(api_client, "_http_options", None), "base_url", None) or base_url or GEMINI_DEFAULT
    return public_url(str(base))


def _vertex_name(project: str | None, location: str | None) -> str:
    return f"vertex:{project or '-'}/{location or 'global'}"


def _gemini(settings: JudgeSettings, environ: Mapping[str, str]) -> str | None:
    # The client reads GOOGLE_GEMINI_BASE_URL even on Vertex AI when the switch comes from the
    # environment (get_base_url sees vertexai=None), and GOOGLE_VERTEX_BASE_URL only when asked in code.
    custom = settings.base_url or environ.get(vendors.GEMINI.endpoint.variable)
    if not on_vertex(environ):
        return public_url(custom or GEMINI_DEFAULT)
    project, location = environ.get("GOOGLE_CLOUD_PROJECT"), environ.get("GOOGLE_CLOUD_LOCATION")
    # A project from application default credentials, express mode with a key, or a proxy: the SDK decides.
    return _vertex_name(project, location) if project and location and not custom else None


def _openai(settings: JudgeSettings, environ: Mapping[str, str]) -> str | None:
    """As ``public_url(str(client.base_url))``: the SDK's URL type (httpx2) adds a slash, drops a default port."""
    rule = _endpoint_of(settings.backend)
    if rule.rule == "azure":
        endpoint = settings.base_url or environ.get(rule.variable)
        if endpoint is None:
            return None  # the SDK raises: let it say so
        url = f"{endpoint.rstrip('/')}/openai"
    else:
        url = settings.base_url or environ.get(rule.variable)
        url = rule.default if url is None else url
    try:
        import httpx2  # the URL type of openai >= 3; imported by huggingface_hub in every lm-eval run
    except ImportError:
        return None
    try:
        parsed = httpx2.URL(url)
        path, separator, query = parsed.raw_path.partition(b"?")
        if not path.endswith(b"/"):  # the SDK's trailing slash; copy_with also drops a default port
            parsed = parsed.copy_with(raw_path=path + b"/" + separator + query)
        return public_url(str(parsed))
    except Exception:  # noqa: BLE001 - a URL the SDK would refuse: let the SDK say so, now
        return None
