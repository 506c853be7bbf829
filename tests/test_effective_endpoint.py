"""The judge endpoint recorded in the results: resolved like the SDKs do, never with credentials."""

from __future__ import annotations

import pytest

from lm_eval_mathjudge.backends import effective_endpoint
from lm_eval_mathjudge.settings.schema import JudgeSettings

CASES = [
    # backend, base_url, environment, recorded endpoint
    pytest.param("openai", None, {}, "https://api.openai.com/v1", id="openai-default"),
    pytest.param("openai", None, {"OPENAI_BASE_URL": "http://vllm.lan:8000/v1/"}, "http://vllm.lan:8000/v1",
                 id="openai-sdk-variable"),
    pytest.param("openai", "http://judge:8000/v1", {"OPENAI_BASE_URL": "http://other/v1"}, "http://judge:8000/v1",
                 id="setting-wins-over-variable"),
    pytest.param("openai", "https://user:pw@proxy.example.com/v1?api_key=sk-abc#frag", {},
                 "https://proxy.example.com/v1", id="credentials-removed"),
    pytest.param("azure", None, {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com/"},
                 "https://res.openai.azure.com", id="azure-variable"),
    pytest.param("azure", None, {}, None, id="azure-unset"),
    pytest.param("gemini", None, {}, "https://generativelanguage.googleapis.com", id="gemini-default"),
    pytest.param("gemini", None, {"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9000"}, "http://127.0.0.1:9000",
                 id="gemini-sdk-variable"),
    pytest.param("gemini", None, {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "evals",
                                  "GOOGLE_CLOUD_LOCATION": "us-central1"}, "vertex:evals/us-central1", id="vertex"),
    pytest.param("local", None, {"OPENAI_BASE_URL": "http://x/v1"}, None, id="local-has-none"),
]


@pytest.mark.parametrize("backend, base_url, environ, expected", CASES)
def test_effective_endpoint(backend, base_url, environ, expected):
    model = "math-verify" if backend == "local" else "m"
    assert effective_endpoint(JudgeSettings(backend=backend, model=model, base_url=base_url), environ) == expected
