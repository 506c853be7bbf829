"""Where the judge's requests go, and what the results record: one rule, checked against the real SDKs.

``backends.endpoints`` names the endpoint without importing an SDK; the table
below builds the real google-genai client under each Vertex AI switch and value
and compares the URL it would really send a request to with what we record
(results, cache identity). A switch the rule missed would record the Developer
API while the judge calls Vertex AI.
"""

from __future__ import annotations

import os

import pytest

from lm_eval_mathjudge.backends import endpoints
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.settings.schema import JudgeSettings

KEY = "AIza-canary-endpoints-0123456789abcdef"

RECORDED = [
    # backend, base_url, environment, recorded endpoint
    pytest.param("openai", None, {}, "https://api.openai.com/v1", id="openai-default"),
    pytest.param("openai", None, {"OPENAI_BASE_URL": "http://vllm.lan:8000/v1/"}, "http://vllm.lan:8000/v1",
                 id="openai-sdk-variable"),
    pytest.param("openai", "http://judge:8000/v1", {"OPENAI_BASE_URL": "http://other/v1"}, "http://judge:8000/v1",
                 id="setting-wins-over-variable"),
    pytest.param("openai", "https://user:pw@proxy.example.com/v1?api_key=sk-abc#frag", {},
                 "https://proxy.example.com/v1", id="credentials-removed"),
    # The SDK sends Azure requests under /openai; the record says so, as the cache identity does.
    pytest.param("azure", None, {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com/"},
                 "https://res.openai.azure.com/openai", id="azure-variable"),
    pytest.param("azure", None, {}, None, id="azure-unset"),
    pytest.param("gemini", None, {}, "https://generativelanguage.googleapis.com", id="gemini-default"),
    pytest.param("gemini", None, {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9000"}, "http://127.0.0.1:9000",
                 id="gemini-sdk-variable"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "evals",
                                  "GOOGLE_CLOUD_LOCATION": "us-central1"}, "vertex:evals/us-central1", id="vertex"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_ENTERPRISE": "true", "GOOGLE_CLOUD_PROJECT": "evals",
                                  "GOOGLE_CLOUD_LOCATION": "us-central1"}, "vertex:evals/us-central1",
                 id="vertex-by-the-newer-switch"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_VERTEXAI": "true"}, "vertex:-/global",
                 id="vertex-project-from-default-credentials"),
    pytest.param("local", None, {"OPENAI_BASE_URL": "http://x/v1"}, None, id="local-has-none"),
]


@pytest.mark.parametrize("backend, base_url, environ, expected", RECORDED)
def test_recorded_endpoint(backend, base_url, environ, expected):
    model = "math-verify" if backend == "local" else "m"
    settings = JudgeSettings(backend=backend, model=model, base_url=base_url)
    assert endpoints.recorded_endpoint(settings, environ) == expected


VERTEX = {"GOOGLE_CLOUD_PROJECT": "evals", "GOOGLE_CLOUD_LOCATION": "us-central1"}
SWITCHES = [
    # switches set (with a project and a location), whether google-genai then talks to Vertex AI
    pytest.param({}, False, id="no-switch"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "true"}, True, id="vertexai-true"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "TRUE"}, True, id="vertexai-upper-case"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "1"}, True, id="vertexai-1"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "false"}, False, id="vertexai-false"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "0"}, False, id="vertexai-0"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "yes"}, False, id="vertexai-yes-is-not-on"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": " true"}, False, id="vertexai-padded-is-not-on"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": ""}, False, id="vertexai-empty"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "true"}, True, id="enterprise-true"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "True"}, True, id="enterprise-capitalised"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "1"}, True, id="enterprise-1"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "false"}, False, id="enterprise-false"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "true", "GOOGLE_GENAI_USE_VERTEXAI": "false"}, True,
                 id="enterprise-on-wins-over-vertexai-off"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "false", "GOOGLE_GENAI_USE_VERTEXAI": "true"}, False,
                 id="enterprise-off-wins-over-vertexai-on"),
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "", "GOOGLE_GENAI_USE_VERTEXAI": "true"}, False,
                 id="enterprise-set-but-empty-wins"),
]


def _sdk_target(monkeypatch, environ, base_url=None):
    """(vertexai, project, location, request URL) of the real google-genai client built under ``environ``."""
    from google import genai
    from google.genai import types

    for name in [n for n in os.environ if n.startswith("GOOGLE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    client = genai.Client(http_options=types.HttpOptions(base_url=base_url) if base_url else None)
    api = client._api_client
    path = "publishers/google/models/gemini-2.5-pro:generateContent" if api.vertexai else \
        "models/gemini-2.5-pro:generateContent"
    url = api._build_request("post", path, {}).url  # where a judge call would really go
    client.close()
    return bool(api.vertexai), api.project, api.location, url


@pytest.mark.filterwarnings("ignore:Warning. Both GOOGLE_GENAI_USE_ENTERPRISE:UserWarning")  # the SDK on conflicts
@pytest.mark.parametrize("switches, vertex", SWITCHES)
def test_what_we_record_is_where_the_sdk_sends(switches, vertex, monkeypatch):
    environ = {**VERTEX, **switches}
    on_vertex, project, location, url = _sdk_target(monkeypatch, environ)
    assert on_vertex is vertex  # the row itself is google-genai's behaviour
    assert endpoints.on_vertex(environ) is vertex
    settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro")
    recorded = endpoints.recorded_endpoint(settings, environ)
    if vertex:
        assert url.startswith(f"https://{location}-aiplatform.googleapis.com/")
        assert recorded == f"vertex:{project}/{location}" == "vertex:evals/us-central1"
    else:
        assert url.startswith("https://generativelanguage.googleapis.com/")
        assert recorded == "https://generativelanguage.googleapis.com"
    backend = GeminiBackend(settings)  # the cache identity: resolved without the client where the rule can
    try:
        assert backend.identity()["endpoint"] == recorded == backend.client_endpoint()
    finally:
        backend.close()


@pytest.mark.parametrize("environ, recorded, sent_to", [
    pytest.param({"GOOGLE_GENAI_USE_ENTERPRISE": "true", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/"},
                 "http://127.0.0.1:9", "http://127.0.0.1:9/", id="vertex-behind-a-proxy"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_GEMINI_BASE_URL":
                  "https://europe-west4-aiplatform.googleapis.com"},
                 "vertex:evals/us-central1 at https://europe-west4-aiplatform.googleapis.com",
                 "https://europe-west4-aiplatform.googleapis.com/v1beta1/projects/evals/locations/us-central1/",
                 id="vertex-on-another-google-host"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_VERTEX_BASE_URL": "http://127.0.0.1:9/"},
                 "vertex:evals/us-central1", "https://us-central1-aiplatform.googleapis.com/",
                 id="vertex-url-variable-unread-by-the-environment-switch"),
    pytest.param({"GOOGLE_GENAI_USE_VERTEXAI": "false", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/"},
                 "http://127.0.0.1:9", "http://127.0.0.1:9/", id="developer-api-behind-a-proxy"),
])
def test_a_custom_url_is_recorded_as_the_sdk_uses_it(environ, recorded, sent_to, monkeypatch):
    environ = {**VERTEX, **environ}
    _, _, _, url = _sdk_target(monkeypatch, environ)
    assert url.startswith(sent_to)  # the row is google-genai's behaviour
    settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro")
    assert endpoints.recorded_endpoint(settings, environ) == recorded
    backend = GeminiBackend(settings)
    try:
        assert backend.identity()["endpoint"] == recorded == backend.client_endpoint()
    finally:
        backend.close()
