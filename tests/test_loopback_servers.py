"""The loopback servers must satisfy the real openai and google-genai SDKs."""

from __future__ import annotations

import io
import threading

import openai
import pytest
from google import genai
from google.genai import types

from tests.loopback import ChatCompletionsServer, GeminiServer

MESSAGES = [{"role": "user", "content": "What is 6 times 7?"}]


def openai_client(server: ChatCompletionsServer, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="sk-loopback", max_retries=0, **kwargs)


def gemini_client(server: GeminiServer) -> genai.Client:
    # Keep the returned client referenced while calling it: a garbage-collected
    # genai.Client closes its httpx client under a still-running request.
    return genai.Client(api_key="canary", http_options=types.HttpOptions(base_url=server.url))


# -- OpenAI ---------------------------------------------------------------------------
def test_openai_sdk_gets_content_and_usage() -> None:
    with ChatCompletionsServer(responder=lambda body: "The answer is 42") as server:
        reply = openai_client(server).chat.completions.create(model="judge", messages=MESSAGES)
    assert reply.choices[0].message.content == "The answer is 42"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == 4
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 4
    assert server.call_count == 1
    assert server.requests[0].headers["authorization"] == "Bearer sk-loopback"
    assert server.requests[0].body["messages"] == MESSAGES


def test_openai_429_surfaces_as_rate_limit_error() -> None:
    with ChatCompletionsServer() as server:
        server.inject(status=429, headers={"Retry-After": "1"})
        with pytest.raises(openai.RateLimitError) as caught:
            openai_client(server).chat.completions.create(model="judge", messages=MESSAGES)
        # The fault is consumed: the next call succeeds.
        assert openai_client(server).chat.completions.create(
            model="judge", messages=MESSAGES
        ).choices[0].message.content == "ok"
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.body["code"] == "rate_limit_exceeded"


def test_openai_garbage_body() -> None:
    with ChatCompletionsServer() as server:
        server.inject(garbage=True, times=2)
        strict = openai_client(server, _strict_response_validation=True)
        with pytest.raises(openai.APIResponseValidationError) as caught:
            strict.chat.completions.create(model="judge", messages=MESSAGES)
        # Pitfall the judge client must handle: non-strict clients return the raw text.
        lenient = openai_client(server).chat.completions.create(model="judge", messages=MESSAGES)
    assert isinstance(caught.value, openai.APIError)
    assert isinstance(lenient, str) and lenient.startswith("<html>")


def test_openai_models_listing() -> None:
    with ChatCompletionsServer(models=["judge-a", "judge-b"]) as server:
        ids = [m.id for m in openai_client(server).models.list()]
    assert ids == ["judge-a", "judge-b"]


def test_concurrent_requests_overlap() -> None:
    with ChatCompletionsServer(latency=0.2) as server:
        client = openai_client(server)
        threads = [
            threading.Thread(
                target=client.chat.completions.create, kwargs={"model": "judge", "messages": MESSAGES}
            )
            for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert server.call_count == 8
    assert server.max_in_flight > 1


# -- Gemini ---------------------------------------------------------------------------
def test_gemini_generate_content_returns_text() -> None:
    with GeminiServer(responder=lambda body: {"text": "42", "thoughts": "6*7"}) as server:
        client = gemini_client(server)
        reply = client.models.generate_content(
            model="gemini-2.5-pro",
            contents=["What is 6 times 7?"],
            config=types.GenerateContentConfig(temperature=0),
        )
    assert reply.text == "42"  # thought parts are excluded from .text
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    assert reply.usage_metadata.thoughts_token_count == 1
    assert server.generate_calls == 1
    assert server.requests[0].headers["x-goog-api-key"] == "canary"
    assert server.requests[0].body["contents"][0]["parts"][0]["text"] == "What is 6 times 7?"


def test_gemini_safety_finish_reason_visible() -> None:
    with GeminiServer(responder=lambda body: {"finish_reason": "SAFETY"}) as server:
        client = gemini_client(server)
        reply = client.models.generate_content(model="gemini-2.5-pro", contents="x")
    assert reply.candidates[0].finish_reason == types.FinishReason.SAFETY
    assert reply.text is None


def test_gemini_file_upload_get_delete() -> None:
    payload = bytes(range(256)) * 64
    with GeminiServer(processing_polls=1) as server:
        client = gemini_client(server)
        uploaded = client.files.upload(file=io.BytesIO(payload), config={"mime_type": "image/png"})
        states = [client.files.get(name=uploaded.name).state for _ in range(2)]
        client.files.delete(name=uploaded.name)
        with pytest.raises(genai.errors.ClientError):
            client.files.get(name=uploaded.name)
    assert uploaded.state == types.FileState.PROCESSING
    assert uploaded.size_bytes == len(payload)
    assert states == [types.FileState.PROCESSING, types.FileState.ACTIVE]
    assert server.uploaded[uploaded.name] == ("image/png", payload)
    assert server.deleted == [uploaded.name]


def test_gemini_429_has_google_error_shape() -> None:
    with GeminiServer() as server:
        server.inject(status=429, headers={"Retry-After": "1"})
        client = gemini_client(server)
        with pytest.raises(genai.errors.ClientError) as caught:
            client.models.generate_content(model="gemini-2.5-pro", contents="x")
    assert caught.value.code == 429
    assert caught.value.status == "RESOURCE_EXHAUSTED"
    assert caught.value.response.headers["retry-after"] == "1"
