"""Wire-level: the real google-genai SDK inside GeminiBackend + JudgeClient, against a loopback server.

Nothing here mocks the SDK: requests travel over HTTP to GeminiServer on
127.0.0.1, which answers like generativelanguage.googleapis.com (google.rpc
error bodies, promptFeedback, finish reasons, thought parts, the File API).
"""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import urlsplit

import pytest

from lm_eval_mathjudge.backends.gemini import files as gemini_files
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import FatalJudgeError, TransientJudgeError
from lm_eval_mathjudge.core.parsing import parse_vlm
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.types import JudgeRequest, Media
from tests import media_fixtures
from tests._helpers import isolate_gemini_sdk, side_by_side, wire_faults
from tests.e2e import THREAD_WAIT_S
from tests.loopback import GeminiServer
from tests.loopback._base import Reply as WireReply

CANARY = "AIza-canary-0123456789abcdefXYZ"
MODEL = "gemini-2.5-pro"
TEMPLATE = "vlm-test-v1"

PROMPT = ("You are grading a student's solution to a math problem.\n\n### Problem\nJanet's ducks lay 16 eggs "
          "per day. She eats three for breakfast and bakes muffins with four. She sells the rest at $2 each. "
          "How much does she make every day?\n\n### Reference solution\n16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n"
          "#### 18\n\nReply in exactly four lines: INTERMEDIATE_CORRECT: 0|1, FINAL_CORRECT: 0|1, "
          "ACTION_REFLECTION: 0|1, EXPLANATION: <one sentence>.\n\n### Student's solution")
RIGHT = "Janet has 16 - 3 - 4 = 9 eggs left. She makes 9 * 2 = 18 dollars. The answer is $\\boxed{18}$."
WRONG = "Janet has 16 - 3 = 13 eggs left. She makes 13 * 2 = 26 dollars. The answer is $\\boxed{26}$."

REPLY_RIGHT = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
               "EXPLANATION: The steps match the reference: 9 eggs are left and 9 * 2 = 18.")
REPLY_WRONG = ("INTERMEDIATE_CORRECT: 0\nFINAL_CORRECT: 0\nACTION_REFLECTION: 0\n"
               "EXPLANATION: The student forgot the four eggs used for muffins, so 26 is wrong.")
REPLY_MEDIA = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 1\n"
               "EXPLANATION: The frames show 16 - 3 - 4 = 9 and 9 * 2 = 18, with a check of the result.")


def judge_like_gemini(body: dict) -> str:
    """Reads the user's parts like the VLM judge would and answers in the four-line contract."""
    parts = body["contents"][0]["parts"]
    if any("inlineData" in p or "fileData" in p for p in parts):
        return REPLY_MEDIA
    return REPLY_RIGHT if "boxed{18}" in parts[-1].get("text", "") else REPLY_WRONG


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch):
    isolate_gemini_sdk(monkeypatch, CANARY)


@pytest.fixture
def server():
    with GeminiServer(responder=judge_like_gemini) as srv:
        yield srv


def settings(server: GeminiServer | None, **overrides) -> JudgeSettings:
    base = {"backend": "gemini", "model": MODEL, "base_url": server.url if server else None, "max_tokens": 8192,
            "cache": False, "concurrency": 4, "max_retries": 3, "timeout": 10.0}
    return JudgeSettings(**{**base, **overrides})


def judge(server, requests, store=None, **overrides):
    config = settings(server, **overrides)
    backend = GeminiBackend(config)
    client = JudgeClient(backend, parse_vlm, config, TEMPLATE, store, progress=False)
    try:
        return client, client.judge_all(requests)
    finally:
        backend.close()


def media_file(tmp_path, name: str, data: bytes, mime_type: str) -> Media:
    path = tmp_path / name
    path.write_bytes(data)
    return Media(source=str(path), mime_type=mime_type, sha256=hashlib.sha256(data).hexdigest(),
                 size=len(data), path=str(path))


def text_request(output: str = RIGHT) -> JudgeRequest:
    return JudgeRequest(prompt=PROMPT, output_text=output)


def media_request(*media: Media) -> JudgeRequest:
    return JudgeRequest(prompt=PROMPT, media=tuple(media))


def generate_bodies(server) -> list[dict]:
    return [r.body for r in server.requests if r.path.endswith(f"/models/{MODEL}:generateContent")]


def wire(part: dict, kind: str) -> dict:
    """An inlineData / fileData part as {"mime_type", "data" (bytes) | "file_uri"}.

    google-genai sends the outer key camelCase but the inner keys snake_case
    (proto JSON accepts both) and bytes as URL-safe base64.
    """
    inner = part[kind]
    out = {"mime_type": inner.get("mime_type", inner.get("mimeType"))}
    if kind == "inlineData":
        out["data"] = base64.urlsafe_b64decode(inner["data"])
    else:
        out["file_uri"] = inner.get("file_uri", inner.get("fileUri"))
    return out


def texts(client, outcomes) -> str:
    return "\n".join([str(client.fatal_error or "")] + [o.error or "" for o in outcomes])


# ------------------------------------------------------------------------- happy path

def test_text_output_on_the_wire(server):
    client, [outcome] = judge(server, [text_request(RIGHT)])
    assert (outcome.verdict.intermediate_correct, outcome.verdict.final_correct) == (1, 1)
    assert outcome.verdict.explanation.startswith("The steps match the reference")
    [sent] = server.requests
    assert urlsplit(sent.path).path == f"/v1/models/{MODEL}:generateContent"
    assert sent.headers["x-goog-api-key"] == CANARY
    assert sent.body["contents"] == [{"role": "user", "parts": [{"text": PROMPT}, {"text": RIGHT}]}]
    assert sent.body["generationConfig"] == {"temperature": 0, "maxOutputTokens": 8192}
    assert outcome.usage["total_tokens"] == outcome.usage["prompt_tokens"] + outcome.usage["completion_tokens"] > 0
    assert client.identity == {"backend": "gemini", "model": MODEL, "endpoint": server.url, "temperature": 0.0,
                               "max_tokens": 8192, "template": TEMPLATE}
    assert CANARY not in json.dumps(client.identity)


def test_verdicts_follow_the_output(server):
    client, outcomes = judge(server, [text_request(RIGHT), text_request(WRONG)])
    assert [o.verdict.final_correct for o in outcomes] == [1, 0]
    assert client.stats.calls == 2
    assert client.stats.usage["prompt_tokens"] == sum(o.usage["prompt_tokens"] for o in outcomes)


def test_base_url_from_the_sdk_variable(server, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    client, [outcome] = judge(None, [text_request()])
    assert outcome.verdict.final_correct == 1
    assert server.generate_calls == 1
    assert client.identity["endpoint"] == server.url


def test_image_goes_inline(server, tmp_path):
    data = media_fixtures.png(16, 16, (0, 128, 255))
    _, [outcome] = judge(server, [media_request(media_file(tmp_path, "answer.png", data, "image/png"))])
    assert outcome.verdict.action_reflection == 1
    [body] = generate_bodies(server)
    text, image = body["contents"][0]["parts"]
    assert text == {"text": PROMPT}
    assert wire(image, "inlineData") == {"mime_type": "image/png", "data": data}
    assert server.uploaded == {}


def test_small_video_goes_inline(server, tmp_path):
    data = media_fixtures.mp4(2048)
    _, [outcome] = judge(server, [media_request(media_file(tmp_path, "answer.mp4", data, "video/mp4"))])
    assert outcome.verdict.final_correct == 1
    [body] = generate_bodies(server)
    assert wire(body["contents"][0]["parts"][1], "inlineData") == {"mime_type": "video/mp4", "data": data}
    assert server.uploaded == {}


def test_large_video_goes_through_the_file_api(server, tmp_path, monkeypatch):
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    server.processing_polls = 2
    data = media_fixtures.mp4(4096)
    _, [outcome] = judge(server, [media_request(media_file(tmp_path, "answer.mp4", data, "video/mp4"))])
    assert outcome.verdict.final_correct == 1
    [(name, (mime_type, uploaded))] = server.uploaded.items()
    assert (mime_type, uploaded) == ("video/mp4", data)
    [body] = generate_bodies(server)
    file_part = wire(body["contents"][0]["parts"][1], "fileData")
    assert file_part["mime_type"] == "video/mp4" and file_part["file_uri"].endswith(f"/{name}")
    assert server.deleted == [name]
    steps = [(r.method, urlsplit(r.path).path.split("/")[-1]) for r in server.requests]
    gets = [s for s in steps if s[0] == "GET"]
    assert len(gets) >= 2  # PROCESSING, PROCESSING, then ACTIVE
    assert steps.index(("POST", f"{MODEL}:generateContent")) > steps.index(gets[-1])
    assert steps[-1][0] == "DELETE"


def test_uploaded_file_is_deleted_even_when_the_judge_refuses(server, tmp_path, monkeypatch):
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    server.responder = lambda body: {"finish_reason": "SAFETY"}
    _, [outcome] = judge(server, [media_request(media_file(tmp_path, "a.webm", media_fixtures.webm(2048),
                                                              "video/webm"))])
    assert outcome.failure == "safety"
    assert list(server.uploaded) == server.deleted and len(server.deleted) == 1


class FailingFiles(GeminiServer):
    """A File API whose processing fails (state FAILED), as for a corrupt video."""

    def _get_file(self, version: str, name: str) -> WireReply:
        reply = super()._get_file(version, name)
        reply.body.update(state="FAILED", error={"code": 400, "message": "Video could not be decoded."})
        return reply


def test_failed_file_processing_is_a_judge_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    media = media_file(tmp_path, "broken.mov", media_fixtures.mov(4096), "video/quicktime")
    with FailingFiles(responder=judge_like_gemini) as srv:
        client, [outcome] = judge(srv, [media_request(media)])
        assert outcome.failure == "file_failed" and not outcome.transport_failed
        assert media.source in outcome.error and "could not be decoded" in outcome.error
        assert srv.generate_calls == 0 and len(srv.deleted) == 1
        assert client.stats.retries == 0


def test_file_stuck_processing_fails_that_sample_without_uploading_again(server, tmp_path, monkeypatch):
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    monkeypatch.setattr(gemini_files, "FILE_ACTIVE_TIMEOUT", 0.05)
    server.processing_polls = 10_000
    media = media_file(tmp_path, "slow.mp4", media_fixtures.mp4(4096), "video/mp4")
    client, outcomes = judge(server, [media_request(media), text_request()], max_retries=6, timeout=2.0)
    assert outcomes[0].failure == "media_timeout" and not outcomes[0].transport_failed  # counted, the run goes on
    assert media.source in outcomes[0].error and "raise judge_timeout" in outcomes[0].error
    assert outcomes[1].verdict.final_correct == 1
    assert len(server.uploaded) == len(server.deleted) == 1  # uploaded once, and cleaned up
    assert server.generate_calls == 1 and client.stats.retries == 0


def test_file_processing_waits_at_least_the_judge_timeout(server, tmp_path, monkeypatch):
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    monkeypatch.setattr(gemini_files, "FILE_ACTIVE_TIMEOUT", 0.01)
    server.processing_polls = 20  # about 0.2 s of polls at 0.01 s
    media = media_file(tmp_path, "slow.mp4", media_fixtures.mp4(4096), "video/mp4")
    _, [outcome] = judge(server, [media_request(media)], timeout=60.0)
    assert outcome.verdict.final_correct == 1


def test_same_video_at_two_paths_is_judged_once(server, tmp_path, monkeypatch):
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)
    data = media_fixtures.mp4(4096)
    first = media_file(tmp_path, "run1.mp4", data, "video/mp4")
    second = media_file(tmp_path, "run2.mp4", data, "video/mp4")
    store = ReplyCache(str(tmp_path / "cache"))
    try:
        _, [a] = judge(server, [media_request(first)], store, cache=True, cache_dir=str(tmp_path / "cache"))
        _, [b] = judge(server, [media_request(second)], store, cache=True, cache_dir=str(tmp_path / "cache"))
    finally:
        store.close()
    assert not a.cached and b.cached and a.verdict == b.verdict
    assert server.generate_calls == 1 and len(server.uploaded) == 1


def test_thoughts_are_not_part_of_the_reply(server):
    thoughts = "The student subtracts both 3 and 4, gets 9, doubles it: 18 matches."
    server.responder = lambda body: {"thoughts": thoughts, "text": REPLY_RIGHT}
    _, [outcome] = judge(server, [text_request()])
    assert outcome.raw_reply == REPLY_RIGHT
    assert outcome.usage["thoughts_tokens"] == len(thoughts.split())
    assert outcome.usage["total_tokens"] == (outcome.usage["prompt_tokens"] + outcome.usage["completion_tokens"]
                                             + outcome.usage["thoughts_tokens"])


def test_many_requests_overlap(server):
    server.responder = side_by_side(8, judge_like_gemini)  # each call waits for 7 others to be in flight
    requests = [JudgeRequest(prompt=f"{PROMPT} #{i}", output_text=RIGHT if i % 2 else WRONG) for i in range(16)]
    _, outcomes = judge(server, requests, concurrency=8, timeout=THREAD_WAIT_S)
    assert [o.verdict.final_correct for o in outcomes] == [i % 2 for i in range(16)]
    assert server.max_in_flight == 8


# ---------------------------------------------------------------------------- refusals

REFUSALS = [
    pytest.param({"finish_reason": "SAFETY"}, "safety", id="safety"),
    pytest.param({"finish_reason": "RECITATION"}, "recitation", id="recitation"),
    pytest.param({"finish_reason": "PROHIBITED_CONTENT"}, "prohibited_content", id="prohibited-content"),
    pytest.param({"finish_reason": "MAX_TOKENS", "thoughts": "Let me check each step carefully " * 20,
                  "text": "INTERMEDIATE_CORRECT: 1\nFINAL_"}, "max_tokens", id="max-tokens"),
    pytest.param({"no_candidates": True}, "no_candidates", id="no-candidates"),
    pytest.param({"block_reason": "SAFETY"}, "blocked_prompt", id="blocked-prompt"),
    pytest.param({"thoughts": "The answer 18 matches the reference."}, "empty_reply", id="thoughts-only"),
]


@pytest.mark.parametrize("spec, kind", REFUSALS)
def test_refusals_are_counted_judge_failures(server, tmp_path, spec, kind):
    server.responder = lambda body: dict(spec)
    store = ReplyCache(str(tmp_path))
    try:
        client, [outcome] = judge(server, [text_request()], store, cache=True, cache_dir=str(tmp_path))
        assert len(store) == 0  # a refusal is never cached
    finally:
        store.close()
    assert outcome.failure == kind
    assert not outcome.transport_failed and outcome.verdict is None
    assert server.generate_calls == 1 and client.stats.retries == 0 and client.fatal_error is None
    if kind == "max_tokens":
        assert "judge_max_tokens" in outcome.error and "thinking" in outcome.error


@pytest.mark.parametrize("spec, calls, kind, reason", [
    pytest.param({"finish_reason": "MAX_TOKENS", "text": REPLY_RIGHT}, 1, "max_tokens", "judge_max_tokens",
                 id="max-tokens-after-four-full-lines"),
    pytest.param({"text": REPLY_RIGHT + "\nFINAL_COR"}, 2, "unparseable", "cut short",
                 id="cut-label-without-finish-reason"),
    pytest.param({"text": "INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nEXPLANATION: The steps match. Their notes "
                          "list:\n- ACTION_REFLECTION: 1"}, 2, "unparseable", "only after EXPLANATION",
                 id="field-only-inside-the-explanation"),
])
def test_a_cut_or_misplaced_reply_is_a_counted_failure(server, spec, calls, kind, reason):
    server.responder = lambda body: dict(spec)
    client, [outcome] = judge(server, [text_request()])
    assert outcome.verdict is None and outcome.failure == kind and not outcome.transport_failed
    assert reason in outcome.error
    assert server.generate_calls == calls and client.fatal_error is None


# --------------------------------------------------------------------- transient faults

def test_429_honours_retry_after(server, retry_waits):
    server.inject(status=429, headers={"Retry-After": "1"})
    client, [outcome] = judge(server, [text_request()])
    assert outcome.verdict.final_correct == 1
    assert server.generate_calls == 2 and client.stats.retries == 1
    assert retry_waits == [1.0]  # waited what the server asked, not the 0.01 s backoff


def test_503_twice_then_success(server):
    server.inject(status=503, times=2)
    client, [outcome] = judge(server, [text_request(WRONG)])
    assert outcome.verdict.final_correct == 0
    assert server.generate_calls == 3 and client.stats.retries == 2


@pytest.mark.parametrize("fault, kind", [
    pytest.param({"garbage": True}, "bad_response", id="garbage"),
    pytest.param({"drop": True}, "connection", id="dropped-connection"),
    pytest.param({"delay": 20}, "timeout", id="timeout"),  # far beyond the time-out
])
def test_transport_faults_are_retried(server, caplog, fault, kind):
    caplog.set_level("DEBUG", logger="lm_eval_mathjudge")  # retries are logged at debug (the bar shows a summary)
    server.inject(**fault)
    client, [outcome] = judge(server, [text_request()], timeout=2.0)
    assert outcome.verdict.final_correct == 1
    assert server.generate_calls == 2 and client.stats.retries == 1  # the slow attempt given up, not awaited
    assert any("retrying" in r.getMessage() for r in caplog.records)


def test_retries_exhausted_is_a_transport_failure(server):
    server.inject(status=500, times=10)
    client, [outcome] = judge(server, [text_request()], max_retries=2)
    assert server.generate_calls == 3
    assert outcome.transport_failed and outcome.failure == "http_500" and "HTTP 500" in outcome.error


# ------------------------------------------------------------------------ fatal faults

@pytest.mark.parametrize("status, hint", [
    (400, "GEMINI_API_KEY"),  # what Gemini answers for a bad key: 400 "API key not valid"
    (401, "GEMINI_API_KEY"),
    (403, "Vertex AI credentials"),
    (404, "model name"),
])
def test_client_errors_stop_the_run(server, status, hint):
    server.latency = 0.05
    message = {404: f"models/{MODEL}x is not found for API version v1"}.get(
        status, f"API key not valid. Please pass a valid API key. ({CANARY})")
    server.responder = lambda body: {"status": status, "text": message}
    client, outcomes = judge(server, [text_request(f"{RIGHT} ({i})") for i in range(12)], concurrency=3)
    assert 1 <= server.generate_calls <= 3  # at most the calls already in flight
    assert isinstance(client.fatal_error, FatalJudgeError) and client.fatal_error.status == status
    assert client.stats.retries == 0
    first_kind = "auth" if status == 400 else f"http_{status}"  # Gemini answers a bad key with a 400
    assert {o.failure for o in outcomes} <= {first_kind, "aborted"}
    assert all(o.transport_failed for o in outcomes)
    assert hint in str(client.fatal_error) and str(status) in str(client.fatal_error)
    assert CANARY not in texts(client, outcomes) and "0123456789abcdef" not in texts(client, outcomes)


def test_missing_key_is_a_helpful_fatal_error(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY")
    backend = GeminiBackend(settings(None))  # the SDK client is built on the first request (or the preflight)
    with pytest.raises(FatalJudgeError) as caught:
        backend.connect()
    assert "GEMINI_API_KEY" in str(caught.value) and "GOOGLE_GENAI_USE_VERTEXAI" in str(caught.value)


def test_vertex_identity_names_project_and_location(monkeypatch):
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "math-evals")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    backend = GeminiBackend(settings(None))
    try:
        assert backend.identity()["endpoint"] == "vertex:math-evals/us-central1"
    finally:
        backend.close()


# ---------------------------------------------------------------- backend error mapping

RETRY_INFO = {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                        "status": "RESOURCE_EXHAUSTED",
                        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}

BACKEND_FAULTS = wire_faults(timeout_delay=20) + [
    # Gemini's own: RetryInfo in the error body, and 504
    pytest.param({"status": 429, "body": RETRY_INFO}, TransientJudgeError, "rate_limited", 429, 1.5,
                 id="429-retry-info"),
    pytest.param({"status": 504}, TransientJudgeError, "http_504", 504, None, id="504"),
]


@pytest.mark.parametrize("fault, error_class, kind, status, retry_after", BACKEND_FAULTS)
def test_backend_maps_wire_faults(server, fault, error_class, kind, status, retry_after):
    server.inject(**fault)
    backend = GeminiBackend(settings(server, timeout=2.0))
    try:
        with pytest.raises(error_class) as caught:
            backend.complete(text_request())
        assert backend.complete(text_request()).text == REPLY_RIGHT  # fault consumed
    finally:
        backend.close()
    assert caught.value.kind == kind
    assert caught.value.status == status
    assert caught.value.retry_after == (pytest.approx(retry_after) if retry_after is not None else None)
    assert server.generate_calls == 2  # no hidden SDK retries
    if status:
        assert str(status) in str(caught.value)
    assert CANARY not in str(caught.value)


# ------------------------------------------------------------------------ 400s on media requests

def test_a_400_about_the_media_fails_that_sample_only(server, tmp_path):
    image = media_file(tmp_path, "a.png", media_fixtures.png(), "image/png")

    def respond(body):
        parts = body["contents"][0]["parts"]
        if any("inlineData" in p or "inline_data" in p for p in parts):
            return {"status": 400, "text": "Unsupported MIME type for this model."}
        return judge_like_gemini(body)

    server.responder = respond
    client, outcomes = judge(server, [media_request(image), text_request(), text_request(f"{RIGHT} again")])
    assert outcomes[0].failure == "media_rejected" and not outcomes[0].transport_failed
    assert [o.verdict.final_correct for o in outcomes[1:]] == [1, 1]
    assert client.fatal_error is None


def test_a_bad_key_on_media_requests_still_stops_the_run(server, tmp_path):
    images = [media_file(tmp_path, f"{i}.png", media_fixtures.png(rgb=(i, 0, 0)), "image/png") for i in range(8)]
    server.latency = 0.05
    server.responder = lambda body: {"status": 400, "text": "API key not valid. Please pass a valid API key."}
    client, outcomes = judge(server, [media_request(m) for m in images], concurrency=2)
    assert isinstance(client.fatal_error, FatalJudgeError) and client.fatal_error.kind == "auth"
    assert server.generate_calls <= 2
    assert {o.failure for o in outcomes} <= {"auth", "aborted"} and all(o.transport_failed for o in outcomes)


# ------------------------------------------------------------------- long waits, unsendable requests

HOUR_RETRY_INFO = {"error": {**RETRY_INFO["error"], "details": [
    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3600s"}]}}


@pytest.mark.parametrize("fault, wait", [
    pytest.param({"status": 429, "body": HOUR_RETRY_INFO}, "60 min", id="retry-info"),
    pytest.param({"status": 503, "headers": {"Retry-After": "7200"}}, "2.0 h", id="retry-after-header"),
])
def test_hour_long_retry_delay_fails_the_call_without_waiting(server, fault, wait, retry_waits):
    server.inject(**fault, times=10)
    client, [outcome] = judge(server, [text_request()])
    assert server.generate_calls == 1 and client.stats.retries == 0 and retry_waits == []
    assert outcome.transport_failed and outcome.failure == "retry_after_too_long"
    assert f"asked to wait {wait} before retrying" in outcome.error


def test_text_the_wire_cannot_carry_fails_that_sample_only_and_is_never_sent(server):
    from lm_eval_mathjudge.core.errors import UnsendableRequest
    from lm_eval_mathjudge.calls.retry import call_with_retries

    backend = GeminiBackend(settings(server))
    try:
        with pytest.raises(UnsendableRequest) as caught:
            call_with_retries(lambda: backend.complete(text_request(RIGHT + "\ud800")),
                              RetryPolicy(max_retries=5, base_delay=0.01))
        assert backend.complete(text_request()).text == REPLY_RIGHT
    finally:
        backend.close()
    assert caught.value.kind == "invalid_text" and "response" in str(caught.value)
    assert server.generate_calls == 1


# ------------------------------------------------------------------------------ thinking budget

@pytest.mark.parametrize("budget", [0, 2048, -1])
def test_thinking_budget_on_the_wire_and_in_the_identity(server, budget):
    thoughts = "Check 16 - 3 - 4 = 9 and 9 * 2 = 18."
    server.responder = lambda body: {"thoughts": thoughts, "text": REPLY_RIGHT}
    client, [outcome] = judge(server, [text_request()], thinking_budget=budget)
    [body] = generate_bodies(server)
    config = body["generationConfig"]
    assert (config["temperature"], config["maxOutputTokens"]) == (0, 8192)
    # google-genai sends inner keys snake_case (proto JSON accepts both spellings)
    assert config["thinkingConfig"] in ({"thinkingBudget": budget}, {"thinking_budget": budget})
    assert client.identity["thinking_budget"] == budget
    counted = len(thoughts.split())  # the loopback counts words as tokens
    assert outcome.usage["thoughts_tokens"] == counted and client.stats.usage["thoughts_tokens"] == counted


# --------------------------------------------------------------------------------- preflight

def preflight(server_or_none, **overrides):
    backend = GeminiBackend(settings(server_or_none, **overrides))
    try:
        backend.preflight()
    finally:
        backend.close()


def test_preflight_looks_the_model_up_once_and_generates_nothing(server):
    preflight(server)
    assert [(r.method, urlsplit(r.path).path) for r in server.requests] == [("GET", f"/v1/models/{MODEL}")]
    assert server.requests[0].headers["x-goog-api-key"] == CANARY


@pytest.mark.parametrize("status, model, hint", [
    pytest.param(400, MODEL, "GEMINI_API_KEY", id="bad-key"),  # Gemini answers a bad key with a 400
    pytest.param(403, MODEL, "Vertex AI credentials", id="forbidden"),
    pytest.param(None, "gemini-2.5-pro-typo", "check the judge model name", id="unknown-model"),
])
def test_preflight_failure_names_the_endpoint_and_what_to_check(server, status, model, hint):
    server.models_status = status
    with pytest.raises(FatalJudgeError) as caught:
        preflight(server, model=model)
    message = str(caught.value)
    assert message.startswith(f"preflight: the gemini judge at {server.url}") and hint in message
    assert "judge_preflight=false" in message and CANARY not in message
    assert len(server.requests) == 1 and server.generate_calls == 0


class NoModelRoute(GeminiServer):
    """A proxy that forwards generateContent only: its 404 is not Google's NOT_FOUND."""

    def _get_model(self, model: str) -> WireReply:
        return WireReply(404, {"detail": "Not Found"})


def test_preflight_on_a_proxy_without_the_models_route_warns_and_goes_on(caplog):
    with NoModelRoute() as srv:
        preflight(srv)
        assert len(srv.requests) == 1
        url = srv.url
    assert any("has no models route" in r.getMessage() and url in r.getMessage() for r in caplog.records)


def test_preflight_retries_a_transient_failure_within_the_policy(server):
    server.models_status = 503
    with pytest.raises(FatalJudgeError, match="HTTP 503"):
        preflight(server, max_retries=1)
    assert len(server.requests) == 2  # one retry: min(max_retries, PREFLIGHT_RETRIES)
