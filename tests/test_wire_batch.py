"""Batch result files and job reads within the network bounds, through the real SDKs against loopback
Batch servers: a result file is streamed to disk within its replies' cap, a line over one reply's cap is
skipped (never held whole), a bomb or a flood ends as ``reply_too_large``, a drip as ``timeout``, and the
job stays uncollected so a rerun (with a larger cap) collects it.
"""

from __future__ import annotations

import json
import logging

import pytest

from lm_eval_mathjudge import backends
from lm_eval_mathjudge.backends import batch_provider
from lm_eval_mathjudge.backends.gemini import batch as gemini_batch
from lm_eval_mathjudge.backends.wire import transport
from lm_eval_mathjudge.batch import base
from lm_eval_mathjudge.core.errors import JudgeRefusal, TransientJudgeError
from lm_eval_mathjudge.core.types import JudgeRequest, Reply
from lm_eval_mathjudge.judging.cache import request_key
from lm_eval_mathjudge.settings.schema import JudgeSettings
from tests._helpers import isolate_gemini_sdk
from tests.loopback import wire_faults as faults
from tests.loopback._base import Reply as WireReply
from tests.loopback.gemini_batch_server import GeminiBatchServer
from tests.loopback.openai_batch_server import OpenAIBatchServer

MiB = 1 << 20
VERDICT = "Error Analysis: the answer is even.\nFinal Verdict: Correct"
CAP = 4096  # judge_max_reply_bytes of these judges: a result line may hold 4 KiB + its envelope


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789abcdef")
    isolate_gemini_sdk(monkeypatch, "AIza-canary-0123456789abcdefXYZ")


@pytest.fixture
def clock(monkeypatch):
    """Each reading of the deadlines' clock is 50 s later: a 600 s download deadline allows about 12 reads."""
    ticks = iter(range(1, 10**9))
    monkeypatch.setattr(transport, "CLOCK", lambda: 50.0 * next(ticks))


def _items(n: int) -> list[tuple[str, JudgeRequest]]:
    return [(request_key({"i": i}), JudgeRequest(prompt=f"Is this even? {2 * i}")) for i in range(n)]


def _finished(provider, job: str) -> None:
    for _ in range(20):
        if provider.status(job).finished:
            return
    raise AssertionError("the job never finished")


def _openai(server, **extra):
    settings = JudgeSettings(base_url=server.url, max_retries=0, max_reply_bytes=CAP, **extra)
    backend = backends.build(settings, "exact_match")
    return backend, batch_provider(backend, "openai")


def _openai_job(server, n: int = 3, **extra):
    backend, provider = _openai(server, **extra)
    job = provider.submit(_items(n))
    _finished(provider, job)
    output = provider._client.batches.retrieve(job).output_file_id
    return backend, provider, job, output


# ------------------------------------------------------------------ OpenAI Batch output files
def test_openai_a_line_over_one_replys_cap_is_skipped_and_the_others_are_read(caplog):
    with OpenAIBatchServer(lambda body: VERDICT) as server:
        backend, provider, job, output = _openai_job(server)
        lines = server.contents[output].decode().splitlines(keepends=True)
        huge = json.dumps({"custom_id": "x" * 64, "response": {"status_code": 200, "body": {"pad": "A" * (1 << 20)}}})
        server.misbehave(f"/files/{output}/content", WireReply(200, "".join([lines[0], huge + "\n", *lines[1:]])
                                                               .encode()))
        with caplog.at_level(logging.WARNING):
            results = dict(provider.results(job))
        backend.close()
    assert len(results) == 3 and all(isinstance(r, Reply) and r.text == VERDICT for r in results.values())
    assert "x" * 64 not in results
    assert any("over the" in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("fault", ["flood", "gzip-bomb"])
def test_openai_a_result_file_over_its_cap_is_refused_and_the_job_kept(fault):
    make = {"flood": lambda: faults.flood(100 * MiB, declare=False), "gzip-bomb": lambda: faults.bomb(1 << 30)}[fault]
    with OpenAIBatchServer(lambda body: VERDICT) as server:
        backend, provider, job, output = _openai_job(server)
        server.misbehave(f"/files/{output}/content", make())
        with pytest.raises(JudgeRefusal) as caught:
            dict(provider.results(job))
        collected_after = dict(provider.results(job))  # the file is still there: a rerun collects it
        backend.close()
        assert output in server.files
    assert caught.value.kind == "reply_too_large" and "judge_max_reply_bytes" in str(caught.value)
    assert f"{base.result_bytes(3, CAP):,}-byte cap" in str(caught.value)
    assert len(collected_after) == 3


def test_openai_a_dripping_result_file_times_out(clock):
    with OpenAIBatchServer(lambda body: VERDICT) as server:
        backend, provider, job, output = _openai_job(server, timeout=3000.0)  # other calls outlast the clock
        server.misbehave(f"/files/{output}/content", faults.drip(server.contents[output], 0.001))
        with pytest.raises(TransientJudgeError) as caught:
            dict(provider.results(job))
        backend.close()
    seconds = base.result_seconds(3, backend.settings.timeout)
    assert caught.value.kind == "timeout" and f"timed out after {seconds:g}s" in str(caught.value)


# ------------------------------------------------------------------ Gemini Batch Mode
def _gemini(server):
    settings = JudgeSettings(backend="gemini", model="gemini-2.5-pro", base_url=server.url, max_tokens=64,
                             max_retries=0, max_reply_bytes=CAP, timeout=10.0)
    backend = backends.build(settings, "vlm")
    return backend, batch_provider(backend, "gemini")


def _gemini_job(server, n: int = 3):
    backend, provider = _gemini(server)
    job = provider.submit(_items(n))
    _finished(provider, job)
    return backend, provider, job


def _file_mode(monkeypatch):
    monkeypatch.setattr(gemini_batch, "INLINE_MAX_BYTES", 1)


@pytest.mark.parametrize("fault", ["flood", "nested-gzip-bomb"])
def test_gemini_a_result_file_over_its_cap_is_refused(monkeypatch, fault):
    _file_mode(monkeypatch)
    make = {"flood": lambda: faults.flood(100 * MiB), "nested-gzip-bomb": lambda: faults.bomb(1 << 30, 2)}[fault]
    with GeminiBatchServer(lambda body: VERDICT) as server:
        backend, provider, job = _gemini_job(server)
        server.misbehave(":download", make())
        with pytest.raises(JudgeRefusal) as caught:
            dict(provider.results(job))
        again = dict(provider.results(job))
        backend.close()
    assert caught.value.kind == "reply_too_large" and f"{base.result_bytes(3, CAP):,}-byte cap" in str(caught.value)
    assert len(again) == 3


def test_gemini_a_line_over_one_replys_cap_is_skipped(monkeypatch, caplog):
    _file_mode(monkeypatch)
    with GeminiBatchServer(lambda body: VERDICT) as server:
        backend, provider, job = _gemini_job(server, n=2)
        name = provider._read(job)[0].dest.file_name
        data = server._files[name].data.decode().splitlines(keepends=True)
        padded = json.dumps({"key": "x" * 64, "response": {"pad": "A" * (1 << 20)}}) + "\n"
        server.misbehave(":download", WireReply(200, "".join([data[0], padded, *data[1:]]).encode()))
        with caplog.at_level(logging.WARNING):
            results = dict(provider.results(job))
        backend.close()
    assert len(results) == 2 and "x" * 64 not in results
    assert any("skipped" in r.getMessage() for r in caplog.records)


def test_gemini_a_job_read_over_its_cap_is_refused(monkeypatch):
    monkeypatch.setattr(gemini_batch, "JOB_READ_BYTES", MiB)
    with GeminiBatchServer(lambda body: VERDICT) as server:
        backend, provider, job = _gemini_job(server)
        server.misbehave(f"/{job}", faults.flood(100 * MiB, declare=False))
        with pytest.raises(JudgeRefusal) as caught:
            provider.status(job)
        backend.close()
    assert caught.value.kind == "reply_too_large" and f"{MiB:,}-byte cap" in str(caught.value)


def test_gemini_replies_go_inline_only_while_they_fit_the_job_read_cap(monkeypatch):
    monkeypatch.setattr(gemini_batch, "INLINE_REPLIES_BYTES", 3 * base.result_line_bytes(CAP))
    with GeminiBatchServer(lambda body: VERDICT) as server:
        backend, provider = _gemini(server)
        for n in (3, 4):
            provider.submit(_items(n))
        creates = [r.body["batch"]["inputConfig"] for r in server.requests if r.path.endswith(":batchGenerateContent")]
        backend.close()
    assert ["requests" in c for c in creates] == [True, False]  # the fourth reply would not fit: a file instead
    assert "fileName" in creates[1]


def test_result_lines_are_read_without_holding_a_long_one(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"B" * 10_000 + b"\n" + b'{"c": 3}\n' + b"D" * 5000)
    with open(path, "rb") as spool:
        assert list(base.result_lines(spool, 100)) == ['{"a": 1}\n', None, '{"c": 3}\n', None]


def test_the_caps_and_deadlines_of_results_grow_with_the_items():
    assert base.result_line_bytes(CAP) == CAP + base.RESULT_OVERHEAD
    assert base.result_bytes(1, CAP) == base.RESULT_BASE + CAP + base.RESULT_OVERHEAD
    assert base.result_bytes(1000, CAP) == base.RESULT_BASE + 1000 * (CAP + base.RESULT_OVERHEAD)
    assert base.result_seconds(1, 120.0) == pytest.approx(base.RESULT_MIN_SECONDS + 1 / 64)
    assert base.result_seconds(50_000, 4000.0) > 4000.0
