"""ReplyCache and request_key: round trips, key sensitivity, and sharing across threads and processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading

import pytest

from lm_eval_mathjudge.judging.cache import FILE_NAME, Reply, ReplyCache, request_key
from lm_eval_mathjudge.core.types import JudgeRequest, Media
from tests._helpers import REPLY_CORRECT, REPLY_INCORRECT, cache_writer, run_threads
from tests.e2e import THREAD_WAIT_S, TIMEOUT_S

JUDGE = "openai:gpt-4-turbo-2024-04-09"


@pytest.fixture
def cache(tmp_path):
    store = ReplyCache(str(tmp_path))
    yield store
    store.close()


# ------------------------------------------------------------------------ round trip

def test_put_get_round_trip_keeps_text_usage_and_finish_reason(cache):
    reply = Reply(text=REPLY_CORRECT, usage={"prompt_tokens": 412, "completion_tokens": 23, "total_tokens": 435},
                  finish_reason="stop")
    cache.put("k1", reply, JUDGE)
    assert cache.get("k1") == reply
    assert len(cache) == 1


@pytest.mark.parametrize("reply", [
    pytest.param(Reply(text=REPLY_INCORRECT), id="no-usage"),
    pytest.param(Reply(text="", finish_reason="length"), id="empty-text-truncated"),
    pytest.param(Reply(text="Error Analysis: 答案 $\\frac{1}{2}$ 与参考答案一致。\nFinal Verdict: Correct",
                       usage={"total_tokens": 7}), id="unicode-and-latex"),
])
def test_round_trip_variants(cache, reply):
    cache.put("k", reply, JUDGE)
    assert cache.get("k") == reply


def test_missing_key_is_none(cache):
    assert cache.get("never-stored") is None
    assert len(cache) == 0


def test_put_replaces(cache):
    cache.put("k", Reply(text=REPLY_INCORRECT), JUDGE)
    cache.put("k", Reply(text=REPLY_CORRECT, usage={"total_tokens": 1}), JUDGE)
    assert cache.get("k") == Reply(text=REPLY_CORRECT, usage={"total_tokens": 1})
    assert len(cache) == 1


def test_persists_across_instances(tmp_path):
    first = ReplyCache(str(tmp_path))
    first.put("k", Reply(text=REPLY_CORRECT, usage={"completion_tokens": 23}), JUDGE)
    first.close()
    second = ReplyCache(str(tmp_path))
    try:
        assert second.get("k") == Reply(text=REPLY_CORRECT, usage={"completion_tokens": 23})
        assert second.path == str(tmp_path / FILE_NAME)
    finally:
        second.close()


def test_creates_missing_directories(tmp_path):
    store = ReplyCache(str(tmp_path / "a" / "b"))
    store.put("k", Reply(text=REPLY_CORRECT), JUDGE)
    store.close()
    assert (tmp_path / "a" / "b" / FILE_NAME).is_file()


def test_uses_wal(cache):
    with sqlite3.connect(cache.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ----------------------------------------------------------------------- request_key

# What the client hashes: backend identity + template version + the request's own payload.
BASE = {
    "backend": "openai", "model": "gpt-4-turbo-2024-04-09", "endpoint": "https://api.openai.com/v1",
    "temperature": 0.0, "max_tokens": 1024, "template": "exact_match@3f2a9c1d0b7e",
    "prompt": "### Problem\nJanet's ducks lay 16 eggs per day...\n### Student's solution\n... = 18",
    "media": [["image/png", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]],
}


def test_request_key_is_stable_and_ignores_dict_order():
    shuffled = dict(reversed(list(BASE.items())))
    assert request_key(BASE) == request_key(shuffled) == request_key(dict(BASE))
    assert len(request_key(BASE)) == 64 and int(request_key(BASE), 16) >= 0


@pytest.mark.parametrize("field, value", [
    pytest.param("model", "gpt-4o-2024-08-06", id="model"),
    pytest.param("backend", "azure", id="backend"),
    pytest.param("endpoint", "http://127.0.0.1:8000/v1", id="endpoint"),
    pytest.param("template", "exact_match@000000000000", id="template-version"),
    pytest.param("temperature", 0.7, id="temperature"),
    pytest.param("max_tokens", 256, id="max-tokens"),
    pytest.param("prompt", BASE["prompt"] + " ", id="prompt-trailing-space"),
    pytest.param("prompt", BASE["prompt"].replace("18", "16"), id="prompt-answer"),
    pytest.param("media", [["image/png", "0" * 64]], id="media-hash"),
    pytest.param("media", [["image/jpeg", BASE["media"][0][1]]], id="media-type"),
    pytest.param("media", [], id="no-media"),
])
def test_request_key_changes_with_every_field(field, value):
    assert request_key({**BASE, field: value}) != request_key(BASE)


def test_request_key_extra_field_changes_key():
    assert request_key({**BASE, "version": "0.7.0"}) != request_key(BASE)


def test_media_enter_the_key_by_hash_not_path():
    png = Media(source="/data/run1/plot.png", path="/data/run1/plot.png", mime_type="image/png", sha256="ab" * 32, size=1234)
    moved = Media(source="/scratch/elsewhere/plot.png", path="/scratch/elsewhere/plot.png", mime_type="image/png",
                  sha256="ab" * 32, size=1234)
    edited = Media(source="/data/run1/plot.png", path="/data/run1/plot.png", mime_type="image/png", sha256="cd" * 32, size=1234)
    key = lambda m: request_key(JudgeRequest(prompt="Judge the plot.", media=(m,)).key_payload())  # noqa: E731
    assert key(png) == key(moved)
    assert key(png) != key(edited)


def test_request_fields_enter_the_key():
    # The local judge reads the gold answer from `fields`, which the prompt may not contain
    # (MATH-500's answer is not rendered): a changed gold answer must not hit an old verdict.
    a = JudgeRequest(prompt="P", fields={"answer": "18"})
    b = JudgeRequest(prompt="P", fields={"answer": "16"})
    assert request_key(a.key_payload()) != request_key(b.key_payload())


def test_request_key_golden_value():
    # Pinned on purpose: if this changes, old caches silently stop matching.
    # Change the key recipe only together with cache.SCHEMA_VERSION, then update this value.
    assert request_key({"model": "gpt-4-turbo-2024-04-09", "prompt": "2+2?"}) == GOLDEN_KEY


GOLDEN_KEY = "90b7ef3fbdc32eadd339600886e246baa0b92b2fceb792fe2043454d65401ea0"


# ----------------------------------------------------------------------- concurrency

def test_threads_share_one_cache(cache):
    def write(worker: int) -> None:
        for i in range(50):
            cache.put(f"t{worker}-{i}", Reply(text=REPLY_CORRECT, usage={"total_tokens": i}), JUDGE)
            assert cache.get(f"t{worker}-{i}") is not None

    assert run_threads(write, 8) == []
    assert len(cache) == 400
    assert cache.get("t7-49") == Reply(text=REPLY_CORRECT, usage={"total_tokens": 49})


def test_threads_with_their_own_connections(tmp_path):
    barrier = threading.Barrier(8)

    def write(worker: int) -> None:
        store = ReplyCache(str(tmp_path))
        try:
            barrier.wait(timeout=THREAD_WAIT_S)
            for i in range(50):
                store.put(f"t{worker}-{i}", Reply(text=REPLY_INCORRECT), JUDGE)
        finally:
            store.close()

    assert run_threads(write, 8) == []
    reader = ReplyCache(str(tmp_path))
    try:
        assert len(reader) == 400
    finally:
        reader.close()


@pytest.mark.e2e
def test_processes_share_one_cache_directory(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    workers, rows = 4, 100
    start, results = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=cache_writer, args=(str(tmp_path), w, rows, start, results))
             for w in range(workers)]
    for p in procs:
        p.start()
    reports = [results.get(timeout=TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join(timeout=TIMEOUT_S)
        assert p.exitcode == 0
    errors = [e for _, _, errs in reports for e in errs]
    assert errors == []  # in particular no "database is locked"
    assert sorted(written for _, written, _ in reports) == [rows] * workers

    reader = ReplyCache(str(tmp_path))
    try:
        assert len(reader) == workers * rows
        for w in range(workers):
            for i in range(rows):
                got = reader.get(f"proc{w}-row{i}")
                assert got == Reply(text=f"{REPLY_CORRECT} ({w}/{i})", usage={"prompt_tokens": i})
    finally:
        reader.close()
