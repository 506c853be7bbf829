"""Wire-level: the Gemini batch provider through the real google-genai SDK, against a loopback Batch Mode server.

The server answers batchGenerateContent, batches/{id} and files/{id}:download
like generativelanguage.googleapis.com; each request of a job is answered by
the same responder as an online generateContent call, so online and batch
replies can be compared byte for byte.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json

import pytest

from lm_eval_mathjudge.backends import batch_provider
from lm_eval_mathjudge.backends.gemini import files as gemini_files
from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.batch import base
from lm_eval_mathjudge.backends.gemini import batch as gemini_batch
from lm_eval_mathjudge.backends.gemini.batch import GeminiBatchProvider
from lm_eval_mathjudge.judging.cache import ReplyCache, request_key
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import JudgeCallError, JudgeRefusal, TransientJudgeError
from lm_eval_mathjudge.calls.retry import RetryPolicy
from lm_eval_mathjudge.core.parsing import parse_vlm
from lm_eval_mathjudge.core.types import JudgeRequest, Media, Reply
from tests._helpers import isolate_gemini_sdk
from tests.loopback.gemini_batch_server import GeminiBatchServer
from tests.test_gemini_backend_wire import PROMPT, REPLY_RIGHT, REPLY_WRONG, RIGHT, WRONG  # the same graded pair

CANARY = "AIza-canary-batch-0123456789abcdef"
MODEL = "gemini-2.5-pro"
REPLY_MEDIA = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 1\n"
               "EXPLANATION: The frame shows 16 - 3 - 4 = 9 and 9 * 2 = 18, with a check of the result.")
THOUGHTS = "The student subtracts both uses of the eggs before multiplying by the price."


def judge_like_gemini(body: dict) -> dict:
    """Answers in the four-line contract, with a thought part, like Gemini 2.5 Pro with thinking on."""
    parts = body["contents"][0]["parts"]
    if any("inlineData" in p or "fileData" in p for p in parts):
        return {"text": REPLY_MEDIA, "thoughts": THOUGHTS}
    return {"text": REPLY_RIGHT if "boxed{18}" in parts[-1].get("text", "") else REPLY_WRONG, "thoughts": THOUGHTS}


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch):
    isolate_gemini_sdk(monkeypatch, CANARY)


@pytest.fixture
def server():
    with GeminiBatchServer(responder=judge_like_gemini) as srv:
        yield srv


@pytest.fixture
def backend(server):
    built = GeminiBackend(settings(server))
    yield built
    built.close()


@pytest.fixture(params=["inline", "file"])
def source(request, monkeypatch):
    """Both ways requests reach a job: inline in the create call, or a JSONL file through the File API."""
    if request.param == "file":
        monkeypatch.setattr(gemini_batch, "INLINE_MAX_BYTES", 1)
    return request.param


def settings(server, **overrides) -> JudgeSettings:
    base_settings = {"backend": "gemini", "model": MODEL, "base_url": server.url, "max_tokens": 8192,
                     "temperature": 0.0, "thinking_budget": 1024, "cache": False, "max_retries": 2, "timeout": 10.0}
    return JudgeSettings(**{**base_settings, **overrides})


def items_of(*requests: JudgeRequest) -> list[tuple[str, JudgeRequest]]:
    return [(request_key({"n": i, **r.key_payload()}), r) for i, r in enumerate(requests)]


def run_job(provider: GeminiBatchProvider, items) -> tuple[str, list[base.JobStatus], dict]:
    """Submit, poll to the end (the loopback job moves on with each read), collect."""
    job = provider.submit(items)
    seen = [provider.status(job)]
    while not seen[-1].finished:
        assert len(seen) < 20, "the job never finished"
        seen.append(provider.status(job))
    return job, seen, dict(provider.results(job))


def media_file(tmp_path, name: str, data: bytes, mime_type: str) -> Media:
    path = tmp_path / name
    path.write_bytes(data)
    return Media(source=str(path), mime_type=mime_type, sha256=hashlib.sha256(data).hexdigest(),
                 size=len(data), path=str(path))


def online_bodies(server) -> list[dict]:
    return [r.body for r in server.requests if r.path.endswith(f"/models/{MODEL}:generateContent")]


def create_bodies(server) -> list[dict]:
    return [r.body for r in server.requests if r.path.endswith(f"/models/{MODEL}:batchGenerateContent")]


def uploaded_jsonl(server) -> list[dict]:
    [(mime, data)] = [v for k, v in server.uploaded.items() if k.endswith("-in")]
    return [json.loads(line) for line in data.decode().splitlines()]


# ----------------------------------------------------------------------------- a whole job

def test_job_states_and_replies_keyed_to_their_requests(server, backend, source):
    items = items_of(JudgeRequest(PROMPT, output_text=RIGHT), JudgeRequest(PROMPT, output_text=WRONG),
                     JudgeRequest(PROMPT + " ", output_text=RIGHT))
    server.reverse_output = True  # replies are matched by key, not by position
    provider = batch_provider(backend, "gemini")
    job, seen, results = run_job(provider, items)
    assert job.startswith("batches/") and server.batch_creates == 1
    assert [s.raw_state for s in seen] == ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]
    assert [s.state for s in seen] == [base.RUNNING, base.RUNNING, base.COMPLETED]
    assert [(s.done, s.total) for s in seen] == [(0, 3), (1, 3), (3, 3)]  # batchStats, read through the SDK
    assert {key: reply.text for key, reply in results.items()} == {
        items[0][0]: REPLY_RIGHT, items[1][0]: REPLY_WRONG, items[2][0]: REPLY_RIGHT}
    assert all(THOUGHTS not in reply.text for reply in results.values())  # thought parts stay out, as online
    [create] = create_bodies(server)
    config = create["batch"]["inputConfig"]
    assert ("fileName" in config) == (source == "file") and ("requests" in config) == (source == "inline")
    if source == "file":
        assert [row["key"] for row in uploaded_jsonl(server)] == [key for key, _ in items]
    else:
        assert [r["metadata"]["key"] for r in config["requests"]["requests"]] == [key for key, _ in items]


def test_inline_replies_without_metadata_are_matched_by_position_in_the_submitting_process(server, backend):
    """The API answers inline requests in request order; a process that did not submit the job does not guess."""
    server.echo_metadata = False
    items = items_of(JudgeRequest(PROMPT, output_text=WRONG), JudgeRequest(PROMPT, output_text=RIGHT))
    job, _, results = run_job(batch_provider(backend, "gemini"), items)
    assert [results[key].text for key, _ in items] == [REPLY_WRONG, REPLY_RIGHT]
    other = GeminiBackend(settings(server))
    try:
        assert list(batch_provider(other, "gemini").results(job)) == []  # left to the online pass, not guessed
    finally:
        other.close()


def test_batch_request_and_reply_are_the_online_ones(server, backend, source, tmp_path):
    """Same body on the wire (contents, generation config, thinking budget, image part) and the same Reply."""
    image = media_file(tmp_path, "frame.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "image/png")
    requests = [JudgeRequest(PROMPT, output_text=RIGHT), JudgeRequest(PROMPT, media=(image,))]
    online = [backend.complete(r) for r in requests]
    _, _, results = run_job(batch_provider(backend, "gemini"), items_of(*requests))
    [job] = server.jobs.values()
    assert job.answered == online_bodies(server)  # what the judge read, request for request
    assert job.answered[0]["generationConfig"]["thinkingConfig"] == {"thinking_budget": 1024}
    assert "inlineData" in job.answered[1]["contents"][0]["parts"][1]
    assert list(results.values()) == online
    assert online[0].usage == {"prompt_tokens": len((PROMPT + " " + RIGHT).split()),
                               "completion_tokens": len(REPLY_RIGHT.split()),
                               "thoughts_tokens": len(THOUGHTS.split()),
                               "total_tokens": len((PROMPT + " " + RIGHT + " " + REPLY_RIGHT + " " + THOUGHTS).split())}


REFUSALS = [
    pytest.param({"finish_reason": "SAFETY"}, "safety", id="safety"),
    pytest.param({"finish_reason": "RECITATION"}, "recitation", id="recitation"),
    pytest.param({"finish_reason": "MAX_TOKENS", "thoughts": "Let me check each step carefully " * 20,
                  "text": "INTERMEDIATE_CORRECT: 1\nFINAL_"}, "max_tokens", id="max-tokens"),
    pytest.param({"no_candidates": True}, "no_candidates", id="no-candidates"),
    pytest.param({"block_reason": "SAFETY"}, "blocked_prompt", id="blocked-prompt"),
    pytest.param({"thoughts": "The answer 18 matches the reference."}, "empty_reply", id="thoughts-only"),
]


@pytest.mark.parametrize("spec, kind", REFUSALS)
def test_refusals_map_exactly_as_online(server, backend, source, spec, kind):
    server.responder = lambda body: dict(spec)
    request = JudgeRequest(PROMPT, output_text=RIGHT)
    with pytest.raises(JudgeRefusal) as online:
        backend.complete(request)
    [(key, _)] = items = items_of(request)
    _, _, results = run_job(batch_provider(backend, "gemini"), items)
    refusal = results[key]
    assert isinstance(refusal, JudgeRefusal) and refusal.scored
    assert (refusal.kind, str(refusal)) == (online.value.kind, str(online.value)) and refusal.kind == kind


def test_an_item_error_fails_that_item_only(server, backend, source):
    server.responder = lambda body: ({"status": 500, "text": "Internal error encountered."}
                                     if "boxed{26}" in body["contents"][0]["parts"][-1]["text"]
                                     else judge_like_gemini(body))
    items = items_of(JudgeRequest(PROMPT, output_text=RIGHT), JudgeRequest(PROMPT, output_text=WRONG))
    _, seen, results = run_job(batch_provider(backend, "gemini"), items)
    assert seen[-1].state == base.COMPLETED and (seen[-1].done, seen[-1].failed) == (2, 1)
    assert isinstance(results[items[0][0]], Reply) and results[items[0][0]].text == REPLY_RIGHT
    error = results[items[1][0]]
    assert type(error) is JudgeCallError and not error.scored  # the runner decides: online fallback or a failure
    assert error.kind == base.ITEM_FAILED and "code 500" in str(error) and "Internal error" in str(error)


def test_a_failed_result_download_is_retried(server, backend, monkeypatch):
    monkeypatch.setattr(gemini_batch, "INLINE_MAX_BYTES", 1)
    monkeypatch.setattr(gemini_batch, "RetryPolicy", functools.partial(RetryPolicy, base_delay=0.01))
    server.failing_downloads = 1
    items = items_of(JudgeRequest(PROMPT, output_text=RIGHT))
    _, _, results = run_job(batch_provider(backend, "gemini"), items)
    assert results[items[0][0]].text == REPLY_RIGHT
    downloads = [r for r in server.requests if r.path.split("?")[0].endswith(":download")]
    assert len(downloads) == 2 and server.failing_downloads == 0


def test_sdks_without_streamed_download_read_the_result_file_into_memory(server, backend, monkeypatch):
    """google-genai before 1.5x has files.download(file, config) only; the bytes go to the same reader."""
    files = backend._client.files
    real = files.download
    monkeypatch.setattr(files, "download", lambda *, file, config=None: real(file=file, config=config))
    monkeypatch.setattr(gemini_batch, "INLINE_MAX_BYTES", 1)
    items = items_of(JudgeRequest(PROMPT, output_text=RIGHT), JudgeRequest(PROMPT, output_text=WRONG))
    _, _, results = run_job(batch_provider(backend, "gemini"), items)
    assert [results[key].text for key, _ in items] == [REPLY_RIGHT, REPLY_WRONG]


# ----------------------------------------------------------------------------- job outcomes

@pytest.mark.parametrize("end, state", [
    ("BATCH_STATE_FAILED", base.FAILED),
    ("BATCH_STATE_EXPIRED", base.EXPIRED),
    ("BATCH_STATE_CANCELLED", base.CANCELLED),
])
def test_jobs_that_end_without_replies(server, backend, source, end, state):
    server.end_state = end
    items = items_of(JudgeRequest(PROMPT, output_text=RIGHT), JudgeRequest(PROMPT, output_text=WRONG))
    provider = batch_provider(backend, "gemini")
    job, seen, results = run_job(provider, items)
    assert seen[-1].state == state and seen[-1].finished and end.removeprefix("BATCH_") in seen[-1].message
    assert results == {}  # Gemini keeps nothing of such a job; the runner applies batch_fallback to each request
    if state == base.FAILED:
        assert seen[-1].message.endswith(": loopback: the batch failed")  # the operation's error, shown
    provider.cleanup(job)
    assert server.jobs == {} and server.deleted_jobs == [job]
    assert server.generate_calls == 0


def test_cleanup_deletes_every_upload_and_the_job_even_from_another_process(server, source, tmp_path, monkeypatch):
    """A rerun after a crash knows only the job id: the job's display name leads to its files."""
    monkeypatch.setattr(gemini_files, "INLINE_MAX_BYTES", 1000)  # this video goes through the File API, as online
    video = media_file(tmp_path, "clip.mp4", b"\x00\x00\x00\x18ftypmp42" + b"\x17" * 5000, "video/mp4")
    first, later = GeminiBackend(settings(server)), GeminiBackend(settings(server))
    try:
        job = batch_provider(first, "gemini").submit(items_of(JudgeRequest(PROMPT, media=(video,))))
        provider = batch_provider(later, "gemini")  # a new process: no memory of the submit
        while not (status := provider.status(job)).finished:
            pass
        assert (status.done, status.total) == (1, 1)  # the counts come from the server, not from memory
        [(key, reply)] = list(provider.results(job))
        assert reply.text == REPLY_MEDIA
        [part] = [p for p in server.jobs[job].answered[0]["contents"][0]["parts"] if "fileData" in p]
        [media_name] = [n for n in server.uploaded if n.endswith("-m0")]
        assert server.uploaded[media_name] == ("video/mp4", (tmp_path / "clip.mp4").read_bytes())
        assert part["fileData"]["file_uri"].endswith(media_name)
        assert server.deleted == []  # nothing is deleted before the job is collected
        provider.cleanup(job)
    finally:
        first.close()
        later.close()
    output = [n for n in server.deleted if n.endswith("out")]
    expected = {media_name} | ({f"files/{n.removeprefix('files/')}" for n in server.uploaded if n.endswith("-in")})
    assert set(server.deleted) == expected | set(output) and len(server.deleted) == len(expected | set(output))
    assert bool(output) == (source == "file") and server.deleted_jobs == [job] and server.jobs == {}


def test_a_running_job_is_never_deleted(server, backend):
    server.pending_reads = 100
    provider = batch_provider(backend, "gemini")
    job = provider.submit(items_of(JudgeRequest(PROMPT, output_text=RIGHT)))
    provider.cleanup(job)
    assert job in server.jobs and server.deleted_jobs == []


# ----------------------------------------------------------------------------- what is refused

def test_unbuildable_requests_are_left_out(server, backend):
    broken = JudgeRequest(PROMPT, output_text="a lone surrogate \ud800 here")
    missing = JudgeRequest(PROMPT, media=(Media(source="/nonexistent/frame.png", mime_type="image/png",
                                                sha256="0" * 64, size=10, path="/nonexistent/frame.png"),))
    items = items_of(broken, JudgeRequest(PROMPT, output_text=RIGHT), missing)
    provider = batch_provider(backend, "gemini")
    _, _, results = run_job(provider, items)
    assert list(results) == [items[1][0]]
    assert provider.submit(items_of(broken)) == ""  # nothing to send: no job is created
    assert server.batch_creates == 1


def test_create_errors_are_mapped_and_the_input_file_is_deleted(server, backend, source):
    server.inject(status=429, headers={"Retry-After": "3"})
    with pytest.raises(TransientJudgeError) as caught:
        batch_provider(backend, "gemini").submit(items_of(JudgeRequest(PROMPT, output_text=RIGHT)))
    assert caught.value.status == 429 and caught.value.retry_after == 3.0
    assert server.jobs == {}
    assert sorted(server.deleted) == sorted(server.uploaded)  # the input file (file source) is not left behind
    assert bool(server.uploaded) == (source == "file")


def test_vertex_ai_is_refused_with_a_way_out(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_API_KEY", CANARY)  # Vertex AI express mode: no project needed to build the client
    built = GeminiBackend(JudgeSettings(backend="gemini", model=MODEL, cache=False))
    try:
        with pytest.raises(base.BatchUnavailable, match="GEMINI_API_KEY.*judge_mode=online"):
            batch_provider(built, "gemini")
    finally:
        built.close()
    config = JudgeSettings(backend="gemini", model=MODEL, cache_dir=str(tmp_path), mode="batch")
    later = GeminiBackend(config)
    try:
        with pytest.raises(base.BatchUnavailable, match="Vertex"):  # in batch mode: when the client is built, before generation
            JudgeClient(later, parse_vlm, config, "vlm-test-v1", ReplyCache(str(tmp_path)), progress=False)
    finally:
        later.close()


def test_the_key_never_reaches_the_wire_bodies(server, backend, source):
    run_job(batch_provider(backend, "gemini"), items_of(JudgeRequest(PROMPT, output_text=RIGHT)))
    blob = json.dumps([r.body for r in server.requests if isinstance(r.body, (dict, list))])
    blob += "".join(r.body.decode() for r in server.requests if isinstance(r.body, bytes))  # the JSONL upload
    assert CANARY not in blob and base64.b64encode(CANARY.encode()).decode() not in blob
    batch_calls = [r for r in server.requests if "/batches/" in r.path or r.path.endswith(":batchGenerateContent")]
    assert batch_calls and all(r.headers.get("x-goog-api-key") == CANARY for r in batch_calls)  # the header only
