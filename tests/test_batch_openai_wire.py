"""The OpenAI batch provider through the real openai SDK, against a loopback Files + Batches server."""

from __future__ import annotations

import json

import pytest

from lm_eval_mathjudge.backends import batch_provider
from lm_eval_mathjudge import backends
from lm_eval_mathjudge.core import prompts
from lm_eval_mathjudge.batch import base
from lm_eval_mathjudge.judging.cache import ReplyCache, request_key
from lm_eval_mathjudge.judging.client import JudgeClient
from lm_eval_mathjudge.settings.schema import JudgeSettings
from lm_eval_mathjudge.core.errors import JudgeRefusal, TransientJudgeError
from lm_eval_mathjudge.core.judges import JUDGES
from lm_eval_mathjudge.core.types import JudgeRequest, Media, Reply
from tests.e2e import CANARY_KEY
from tests.loopback import ChatCompletionsServer
from tests.loopback.openai_batch_server import OpenAIBatchServer

JUDGE = JUDGES["exact_match"]


def grader(body: dict) -> str:
    """Correct when the prompt's last number is even (a deterministic judge both modes share)."""
    number = int(body["messages"][-1]["content"].split()[-1])
    return (f"Error Analysis: the answer {number} is {'even' if number % 2 == 0 else 'odd'}.\n"
            f"Final Verdict: {'Correct' if number % 2 == 0 else 'Incorrect'}")


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", CANARY_KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")


def _settings(url: str, **extra) -> JudgeSettings:
    return JudgeSettings(**{"base_url": url, "max_retries": 0, "batch_poll_seconds": 0.05, **extra})


def _items(n: int) -> list[tuple[str, JudgeRequest]]:
    return [(request_key({"i": i}), JudgeRequest(prompt=f"Is this even? {i}")) for i in range(n)]


def _finish(provider, job: str, limit: int = 20) -> list[base.JobStatus]:
    seen = [provider.status(job)]
    while not seen[-1].finished and len(seen) < limit:
        seen.append(provider.status(job))
    return seen


@pytest.mark.parametrize("model, extra", [("gpt-4-turbo-2024-04-09", {}),
                                          ("o3-mini", {"reasoning_effort": "low"})])
def test_each_line_carries_the_body_the_online_backend_sends(model, extra):
    request = JudgeRequest(prompt="Is this even? 4")
    with OpenAIBatchServer(grader) as server:
        backend = backends.build(_settings(server.url, model=model, **extra), "exact_match")
        backend.complete(request)
        online = server.requests[-1].body
        job = batch_provider(backend, backend.settings.backend).submit([("k" * 64, request)])
        upload = next(r for r in server.requests if r.path == "/v1/files")
        created = server.requests[-1].body
        backend.close()
    assert upload.headers["content-type"].startswith("multipart/form-data")
    assert CANARY_KEY.encode() not in server.contents["file-loopback1"]  # the key travels in headers only
    (line,) = [json.loads(x) for x in server.contents["file-loopback1"].decode().splitlines()]
    assert line == {"custom_id": "k" * 64, "method": "POST", "url": "/v1/chat/completions", "body": online}
    assert ("max_completion_tokens" in online) == (model == "o3-mini")
    assert created == {"input_file_id": "file-loopback1", "endpoint": "/v1/chat/completions",
                       "completion_window": "24h", "metadata": {"created_by": "lm_eval_mathjudge"}}
    assert job == "batch_loopback1" and server.files["file-loopback1"]["purpose"] == "batch"


def test_a_job_moves_through_its_states_and_every_reply_comes_back_by_custom_id():
    items = _items(5)
    with OpenAIBatchServer(grader, polls_in_progress=3) as server:
        backend = backends.build(_settings(server.url), "exact_match")
        provider = batch_provider(backend, backend.settings.backend)
        job = provider.submit(items)
        seen = _finish(provider, job)
        results = dict(provider.results(job))
        provider.cleanup(job)
        backend.close()
        left = dict(server.files)
        deleted = list(server.deleted)
    assert [s.raw_state for s in seen] == ["in_progress", "in_progress", "in_progress", "finalizing", "completed"]
    assert [s.done for s in seen] == [0, 2, 4, 5, 5] and {s.total for s in seen} == {5}
    assert [s.state for s in seen][-1] == base.COMPLETED and not any(s.finished for s in seen[:-1])
    for i, (key, _) in enumerate(items):
        assert isinstance(results[key], Reply)
        assert results[key].text.endswith("Correct" if i % 2 == 0 else "Incorrect")
        assert results[key].usage["prompt_tokens"] == 4  # words of "Is this even? N"
    assert left == {} and deleted == ["file-loopback1", "file-loopback2"]  # input and output, nothing else


def _fate(index: int, body: dict):
    return {0: "expired", 1: "failed"}.get(index)


def test_failed_and_expired_items_come_back_as_their_own_errors():
    items = _items(4)
    with OpenAIBatchServer(grader, fate=_fate) as server:
        backend = backends.build(_settings(server.url), "exact_match")
        provider = batch_provider(backend, backend.settings.backend)
        job = provider.submit(items)
        final = _finish(provider, job)[-1]
        results = dict(provider.results(job))
        provider.cleanup(job)
        backend.close()
        assert server.files == {} and len(server.deleted) == 3  # input, output and error files
    assert (final.state, final.raw_state, final.failed, final.total) == (base.EXPIRED, "expired", 2, 4)
    expired, failed = results[items[0][0]], results[items[1][0]]
    assert expired.kind == base.ITEM_EXPIRED and "completion window expired" in str(expired)
    assert isinstance(failed, TransientJudgeError) and failed.status == 500
    assert all(isinstance(results[k], Reply) for k, _ in items[2:])


@pytest.mark.parametrize("spec, kind", [
    ({"status": 400, "content": "Your request was rejected by our content management policy."}, "content_filter"),
    ({"content": "Error Analysis: the student", "finish_reason": "length"}, "max_tokens"),
])
def test_a_refusal_inside_the_batch_is_the_same_refusal_as_online(spec, kind):
    with OpenAIBatchServer(lambda body: spec) as server:
        backend = backends.build(_settings(server.url), "exact_match")
        provider = batch_provider(backend, backend.settings.backend)
        job = provider.submit(_items(1))
        _finish(provider, job)
        ((_, result),) = list(provider.results(job))
        with pytest.raises(JudgeRefusal) as online:
            backend.complete(_items(1)[0][1])
        backend.close()
    assert isinstance(result, JudgeRefusal) and result.kind == online.value.kind == kind


def test_a_job_rejected_as_a_whole_says_why():
    with OpenAIBatchServer(grader) as server:
        server.fail_job = "Enqueued token limit reached for gpt-4-turbo in organization org-x."
        backend = backends.build(_settings(server.url), "exact_match")
        provider = batch_provider(backend, backend.settings.backend)
        job = provider.submit(_items(2))
        final = _finish(provider, job)[-1]
        assert list(provider.results(job)) == []
        backend.close()
    assert final.state == base.FAILED and "token_limit_exceeded: Enqueued token limit reached" in final.message


def test_items_that_cannot_be_sent_are_left_out_and_an_empty_job_is_never_created(tmp_path):
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42")
    media = Media(source=str(video), mime_type="video/mp4", sha256="0" * 64, size=12, path=str(video))
    unsendable = ("v" * 64, JudgeRequest(prompt="Judge the video", media=(media,)))
    with OpenAIBatchServer(grader) as server:
        backend = backends.build(_settings(server.url), "exact_match")
        provider = batch_provider(backend, backend.settings.backend)
        assert provider.submit([unsendable]) == "" and server.requests == []
        provider.submit([unsendable, *_items(1)])
        backend.close()
        lines = server.contents["file-loopback1"].decode().splitlines()
    assert [json.loads(x)["custom_id"] for x in lines] == [_items(1)[0][0]]


def test_azure_uses_its_own_routes_and_line_url(monkeypatch):
    with OpenAIBatchServer(grader) as server:
        backend = backends.build(_settings(server.origin, backend="azure", model="gpt-4o-batch"), "exact_match")
        provider = batch_provider(backend, backend.settings.backend)
        job = provider.submit(_items(2))
        lines = [json.loads(x) for x in server.contents[server.jobs[job].input_file_id].decode().splitlines()]
        _finish(provider, job)
        results = dict(provider.results(job))
        provider.cleanup(job)
        backend.close()
        paths = {r.path.split("?")[0] for r in server.requests}
        assert server.files == {}
    assert "/openai/files" in paths and "/openai/batches" in paths
    assert server.jobs[job].endpoint == "/chat/completions"
    assert [line["url"] for line in lines] == ["/chat/completions"] * 2
    assert {line["body"]["model"] for line in lines} == {"gpt-4o-batch"}  # the Global-Batch deployment
    assert all(isinstance(r, Reply) for r in results.values()) and len(results) == 2
    assert all(r.headers.get("api-key") == CANARY_KEY for r in server.requests)


@pytest.mark.parametrize("fallback, online_calls, failures", [("online", 2, {}),
                                                              ("fail", 0, {"batch_expired": 1, "batch_failed": 1})])
def test_batch_mode_in_the_client_gives_the_online_verdicts(tmp_path, fallback, online_calls, failures):
    requests = [JudgeRequest(prompt=f"Is this even? {i}") for i in range(6)]
    requests.append(requests[2])  # a duplicate: one item in the batch, two outcomes
    version = prompts.load(JUDGE.template).version

    def client(url, cache_dir, **extra):
        settings = _settings(url, cache_dir=str(cache_dir), batch_fallback=fallback, **extra)
        return JudgeClient(backends.build(settings, "exact_match"), JUDGE.parse, settings, version,
                           ReplyCache(str(cache_dir)), progress=False)

    with ChatCompletionsServer(grader) as online_server, OpenAIBatchServer(grader, fate=_fate) as server:
        online = client(online_server.url, tmp_path / "online")
        batch = client(server.url, tmp_path / "batch", mode="batch")
        expected, got = online.judge_all(requests), batch.judge_all(requests)
        stats = batch.stats.as_dict()
        online.close()
        batch.close()
        assert server.batches_created == 1 and server.call_count == online_calls
        assert len(server.jobs["batch_loopback1"].lines) == 6
    for want, have in zip(expected, got):
        if have.failure:
            assert have.failure in failures and not have.transport_failed
        else:
            assert have.verdict == want.verdict
    assert {f: n for f, n in stats["failures"].items()} == failures
    assert stats["batch"]["submitted"] == 6 and stats["batch"]["succeeded"] == 4
    assert (stats["batch"]["expired"], stats["batch"]["failed"]) == (1, 1)
    assert stats["batch_usage"]["prompt_tokens"] == 4 * 4 and stats["judge_calls"] == online_calls


def test_a_run_larger_than_one_job_is_split_and_every_verdict_comes_back(tmp_path, monkeypatch):
    from lm_eval_mathjudge.backends.openai import batch as openai_batch

    monkeypatch.setattr(openai_batch.OpenAIBatchProvider, "limits", base.Limits(max_requests=3, max_bytes=10**9))
    requests = [JudgeRequest(prompt=f"Is this even? {i}") for i in range(7)]
    with OpenAIBatchServer(grader) as server:
        settings = _settings(server.url, mode="batch", cache_dir=str(tmp_path))
        client = JudgeClient(backends.build(settings, "exact_match"), JUDGE.parse, settings,
                             prompts.load(JUDGE.template).version, ReplyCache(str(tmp_path)), progress=False)
        outcomes = client.judge_all(requests)
        client.close()
        assert server.batches_created == 3 and server.call_count == 0 and server.files == {}
        assert sorted(len(job.lines) for job in server.jobs.values()) == [1, 3, 3]
    assert [o.verdict.correct for o in outcomes] == [i % 2 == 0 for i in range(7)]
