"""judge_mode=batch with a Gemini judge: JudgeClient -> batch runner -> GeminiBatchProvider -> google-genai -> loopback.

Nothing is faked: the client pre-fills its cache through a Batch Mode job on
GeminiBatchServer, then its online pass finds those replies (or calls online
what the batch could not answer).
"""

from __future__ import annotations

import hashlib

import pytest

from lm_eval_mathjudge.backends.gemini.online import GeminiBackend
from lm_eval_mathjudge.backends.gemini import batch as gemini_batch
from lm_eval_mathjudge.batch.base import BatchPending
from lm_eval_mathjudge.judging.batch import JobStore
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.parsing import parse_vlm
from lm_eval_mathjudge.core.types import JudgeRequest, Media
from tests._helpers import isolate_gemini_sdk
from tests.loopback.gemini_batch_server import GeminiBatchServer

CANARY = "AIza-canary-batch-runner-0123456789"
MODEL = "gemini-2.5-pro"
TEMPLATE = "vlm-test-v1"
PROMPT = ("You are grading a student's solution to a math problem.\n\n### Problem\nA train travels 60 km in "
          "45 minutes. What is its average speed in km/h?\n\n### Reference solution\n60 / 0.75 = 80.\n#### 80\n\n"
          "Reply in exactly four lines: INTERMEDIATE_CORRECT: 0|1, FINAL_CORRECT: 0|1, ACTION_REFLECTION: 0|1, "
          "EXPLANATION: <one sentence>.\n\n### Student's solution")
ANSWERS = [
    "45 minutes is 0.75 h, so the speed is 60 / 0.75 = 80 km/h. The answer is $\\boxed{80}$.",
    "The train covers 60 km in 45 minutes, so 60 / 45 = 1.33 km/h. The answer is $\\boxed{1.33}$.",
    "In one hour it goes 60 * 60 / 45 = 80 km. Checking: 80 * 0.75 = 60. The answer is $\\boxed{80}$.",
    "Speed = 60 * 45 = 2700 km/h. The answer is $\\boxed{2700}$.",
]
RIGHT = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 0\n"
         "EXPLANATION: 45 minutes is 0.75 h and 60 / 0.75 = 80, as in the reference.")
WRONG = ("INTERMEDIATE_CORRECT: 0\nFINAL_CORRECT: 0\nACTION_REFLECTION: 0\n"
         "EXPLANATION: The student did not convert minutes to hours, so the speed is wrong.")
FRAME = ("INTERMEDIATE_CORRECT: 1\nFINAL_CORRECT: 1\nACTION_REFLECTION: 1\n"
         "EXPLANATION: The frame shows 60 / 0.75 = 80 and a check that 80 * 0.75 = 60.")


def judge_like_gemini(body: dict) -> dict:
    parts = body["contents"][0]["parts"]
    if any("inlineData" in p or "fileData" in p for p in parts):
        return {"text": FRAME, "thoughts": "The frame holds the worked solution."}
    return {"text": RIGHT if "boxed{80}" in parts[-1].get("text", "") else WRONG,
            "thoughts": "Compare the student's speed with 80 km/h."}


@pytest.fixture(autouse=True)
def sdk_env(monkeypatch):
    isolate_gemini_sdk(monkeypatch, CANARY)


@pytest.fixture
def server():
    with GeminiBatchServer(responder=judge_like_gemini) as srv:
        yield srv


def settings(server, cache_dir, **overrides) -> JudgeSettings:
    base = {"backend": "gemini", "model": MODEL, "base_url": server.url, "max_tokens": 8192, "thinking_budget": 512,
            "cache": True, "cache_dir": str(cache_dir), "concurrency": 4, "max_retries": 2, "timeout": 10.0,
            "mode": "batch", "batch_poll_seconds": 0.05}
    return JudgeSettings(**{**base, **overrides})


def judge(config: JudgeSettings, requests):
    backend = GeminiBackend(config)
    store = ReplyCache(config.cache_dir) if config.cache else None
    client = JudgeClient(backend, parse_vlm, config, TEMPLATE, store, progress=False)
    try:
        return client, client.judge_all(requests)
    finally:
        backend.close()
        if store is not None:
            store.close()


def requests_with_a_frame(tmp_path) -> list[JudgeRequest]:
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    path = tmp_path / "frame.png"
    path.write_bytes(data)
    frame = Media(source=str(path), mime_type="image/png", sha256=hashlib.sha256(data).hexdigest(),
                  size=len(data), path=str(path))
    return [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS] + [JudgeRequest(PROMPT, media=(frame,))]


def verdicts(outcomes) -> list:
    return [(o.verdict.intermediate_correct, o.verdict.final_correct, o.verdict.action_reflection)
            if o.verdict else o.failure for o in outcomes]


@pytest.mark.parametrize("source", ["inline", "file"])
def test_batch_mode_gives_the_online_verdicts_and_usage(server, tmp_path, monkeypatch, source):
    if source == "file":
        monkeypatch.setattr(gemini_batch, "INLINE_MAX_BYTES", 1)
    requests = requests_with_a_frame(tmp_path)
    online_client, online = judge(settings(server, tmp_path / "online", mode="online"), requests)
    assert server.generate_calls == len(requests) and server.batch_creates == 0
    server.reset()
    client, batch = judge(settings(server, tmp_path / "batch"), requests)
    assert verdicts(batch) == verdicts(online) == [(1, 1, 0), (0, 0, 0), (1, 1, 0), (0, 0, 0), (1, 1, 1)]
    assert server.generate_calls == 0 and server.batch_creates == 1  # every verdict came from the one job
    assert client.stats.batch["submitted"] == client.stats.batch["succeeded"] == len(requests)
    assert dict(client.stats.batch_usage) == dict(online_client.stats.usage)  # same tokens, billed at batch price
    assert [o.raw_reply for o in batch] == [o.raw_reply for o in online]
    assert server.jobs == {} and len(server.deleted_jobs) == 1  # collected, then deleted
    output = [f"files/{server.deleted_jobs[0].removeprefix('batches/')}out"] if source == "file" else []
    assert sorted(server.deleted) == sorted([n for n in server.uploaded if n.endswith("-in")] + output)
    server.reset()
    judge(settings(server, tmp_path / "batch"), requests)  # a rerun: all cached, nothing submitted or called
    assert server.requests == []


@pytest.mark.parametrize("fallback", ["online", "fail"])
def test_an_item_the_batch_failed_goes_online_or_counts_as_a_failure(server, tmp_path, fallback):
    server.batch_responder = lambda body: ({"status": 503, "text": "The model is overloaded."}
                                           if "2700" in body["contents"][0]["parts"][-1]["text"]
                                           else judge_like_gemini(body))
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS]
    client, outcomes = judge(settings(server, tmp_path, batch_fallback=fallback), requests)
    assert verdicts(outcomes)[:3] == [(1, 1, 0), (0, 0, 0), (1, 1, 0)]
    assert client.stats.batch["failed"] == 1 and client.stats.batch["succeeded"] == 3
    if fallback == "online":
        assert verdicts(outcomes)[3] == (0, 0, 0) and server.generate_calls == 1
    else:
        assert outcomes[3].failure == "batch_failed" and not outcomes[3].transport_failed
        assert "code 503" in outcomes[3].error and "batch_fallback=fail" in outcomes[3].error
        assert server.generate_calls == 0


def test_a_refusal_in_the_batch_is_scored_as_online_without_a_second_call(server, tmp_path):
    server.responder = lambda body: ({"finish_reason": "SAFETY"} if "2700" in body["contents"][0]["parts"][-1]["text"]
                                     else judge_like_gemini(body))
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS]
    _, online = judge(settings(server, tmp_path / "online", mode="online"), requests)
    server.reset()
    client, batch = judge(settings(server, tmp_path / "batch"), requests)
    assert verdicts(batch) == verdicts(online) and batch[3].failure == "safety" and batch[3].error == online[3].error
    assert client.stats.batch["refused"] == 1 and server.generate_calls == 0


def test_an_expired_job_falls_back_to_online_calls(server, tmp_path):
    server.end_state = "BATCH_STATE_EXPIRED"
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS]
    client, outcomes = judge(settings(server, tmp_path), requests)
    assert verdicts(outcomes) == [(1, 1, 0), (0, 0, 0), (1, 1, 0), (0, 0, 0)]
    assert client.stats.batch["expired"] == len(requests) and server.generate_calls == len(requests)


def test_a_job_that_expires_after_a_resume_follows_the_fallback(server, tmp_path):
    """The process that collects the expired job did not submit it: the job table names its requests."""
    server.pending_reads, server.end_state = 3, "BATCH_STATE_EXPIRED"
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS[:2]]
    with pytest.raises(BatchPending):
        judge(settings(server, tmp_path, batch_wait=False), requests)
    client, outcomes = judge(settings(server, tmp_path, batch_fallback="fail"), requests)
    assert [o.failure for o in outcomes] == ["batch_expired", "batch_expired"]
    assert client.stats.batch["expired"] == 2 and server.generate_calls == 0 and server.batch_creates == 1


def test_submit_and_stop_then_a_new_process_collects_the_same_job(server, tmp_path):
    server.pending_reads = 3
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS]
    with pytest.raises(BatchPending) as stopped:
        judge(settings(server, tmp_path, batch_wait=False), requests)
    [job] = stopped.value.job_ids
    assert job in str(stopped.value) and "Rerun the same command" in str(stopped.value)
    assert list(server.jobs) == [job] and server.generate_calls == 0
    with JobStore(str(ReplyCache(str(tmp_path)).path)) as store:
        assert [(row[0], row[1], row[2], row[4]) for row in store.rows()] == [("gemini", job, 4, 0)]
    client, outcomes = judge(settings(server, tmp_path), requests)  # a rerun: resumes, does not pay twice
    assert client.stats.batch["resumed"] == 1 and server.batch_creates == 1 and server.generate_calls == 0
    assert verdicts(outcomes) == [(1, 1, 0), (0, 0, 0), (1, 1, 0), (0, 0, 0)]
    assert server.deleted_jobs == [job]


def test_a_failed_job_fails_each_of_its_requests_with_gemini_s_reason(server, tmp_path):
    server.end_state = "BATCH_STATE_FAILED"
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS[:2]]
    client, outcomes = judge(settings(server, tmp_path, batch_fallback="fail"), requests)
    assert [o.failure for o in outcomes] == ["batch_failed", "batch_failed"]
    assert all("JOB_STATE_FAILED: loopback: the batch failed" in o.error for o in outcomes)
    assert client.stats.batch["failed"] == 2 and server.generate_calls == 0


def test_a_job_gemini_no_longer_knows_is_submitted_again(server, tmp_path):
    server.pending_reads = 3
    requests = [JudgeRequest(PROMPT, output_text=a) for a in ANSWERS[:2]]
    with pytest.raises(BatchPending):
        judge(settings(server, tmp_path, batch_wait=False), requests)
    server.jobs.clear()  # deleted at Google's side (or another account's job id): GET batches/{id} is a 404
    server.pending_reads = 0
    client, outcomes = judge(settings(server, tmp_path), requests)
    assert verdicts(outcomes) == [(1, 1, 0), (0, 0, 0)]
    assert server.batch_creates == 2 and server.generate_calls == 0 and client.stats.batch["succeeded"] == 2
