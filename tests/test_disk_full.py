"""A full or failing disk is not damage: every write the plugin makes survives ENOSPC and EIO.

Two ways to make the disk fail. Without root, a seam: ``files.open_sqlite`` opens every SQLite
file the plugin keeps, and ``FailingDisk`` wraps what it returns, so writes (or reads) fail with
SQLite's own messages on cue; or SQLite itself refuses to grow a file past ``PRAGMA
max_page_count`` (a real SQLITE_FULL). With root, the real thing: the judge cache on a 300 KiB
tmpfs that fills while the real ``lm_eval`` CLI runs (skipped, with the reason, where mounting
is not allowed).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from lm_eval_mathjudge.core import files
from lm_eval_mathjudge.harness import recovery
from lm_eval_mathjudge.backends import build
from lm_eval_mathjudge.batch.jobs import JobStore
from lm_eval_mathjudge.judging.cache import FILE_NAME, Reply, ReplyCache
from lm_eval_mathjudge.judging.client import JudgeClient, preflight_once
from lm_eval_mathjudge.settings.layers import resolve_settings
from lm_eval_mathjudge.core.errors import FatalJudgeError
from lm_eval_mathjudge.generators.store import MediaStore
from lm_eval_mathjudge.core.judges import JUDGES
from lm_eval_mathjudge.core.types import JudgeRequest
from tests import media_fixtures
from tests._helpers import REPLY_CORRECT
from tests.conftest import read_jsonl, write_data_slice
from tests.e2e import CANARY_KEY, exact_match_judge, run_lm_eval
from tests.loopback import ChatCompletionsServer

FULL = "database or disk is full"
IO = "disk I/O error"
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE")


class FailingDisk:
    """Connections whose writes (and, for ``reads=True``, reads) fail as a full or failing disk makes them."""

    def __init__(self, message: str = FULL, reads: bool = False):
        self.message, self.reads, self.armed, self.refused = message, reads, False, 0

    def open(self, path: str, **options):
        return _Connection(sqlite3.connect(path, **options), self)

    def check(self, sql: str) -> None:
        verb = sql.lstrip().split(None, 1)[0].upper()
        if self.armed and (verb in _WRITES or (self.reads and verb == "SELECT")):
            self.refused += 1
            raise sqlite3.OperationalError(self.message)


class _Connection:
    def __init__(self, real: sqlite3.Connection, disk: FailingDisk):
        self._real, self._disk = real, disk

    def execute(self, sql: str, params=()):
        if not self._exists(sql):  # CREATE TABLE IF NOT EXISTS of a table that is there writes nothing
            self._disk.check(sql)
        return self._real.execute(sql, params)

    def _exists(self, sql: str) -> bool:
        words = sql.split()
        if words[:5] != ["CREATE", "TABLE", "IF", "NOT", "EXISTS"]:
            return False
        return self._real.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (words[5],)).fetchone() is not None

    def executemany(self, sql: str, rows):
        self._disk.check(sql)
        return self._real.executemany(sql, rows)

    def __getattr__(self, name: str):  # in_transaction, close, ...
        return getattr(self._real, name)


@pytest.fixture
def disk(monkeypatch):
    failing = FailingDisk()
    monkeypatch.setattr(files, "open_sqlite", failing.open)
    return failing


@pytest.fixture(autouse=True)
def fresh_reports(monkeypatch):
    """Each test sees the once-per-folder warning anew."""
    monkeypatch.setattr(files, "_REPORTED", set())


def _warnings(caplog, text: str = "cannot be written") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


# ---------------------------------------------------------------------------------------- the judge cache
@pytest.mark.parametrize("message", [FULL, IO])
def test_every_cache_write_survives_a_full_or_failing_disk(tmp_path, disk, caplog, message):
    cache = ReplyCache(str(tmp_path))
    cache.put("kept", Reply(text=REPLY_CORRECT), "openai:m")
    disk.message, disk.armed = message, True

    assert cache.claim("new", ttl=30) is True  # the lease cannot be written: this process pays, unshared
    assert cache.put("new", Reply(text=REPLY_CORRECT, usage={"total_tokens": 7}), "openai:m") is False
    assert cache.get("new").usage == {"total_tokens": 7}  # the reply is still used in this process
    cache.release("new")
    cache.set_meta("preflight:x", "1")  # the preflight memory: only the note is lost
    assert cache.wait_for("other", limit=0.01) is None
    assert cache.get("kept").text == REPLY_CORRECT  # reads still work on a full disk

    assert cache.failures == {"lease": 3, "reply": 1, "note": 1}  # claim, the put's own release, release
    [warning] = _warnings(caplog)  # once, however many writes failed
    assert str(tmp_path) in warning and "free of" in warning and message in warning and "not damage" in warning
    cache.close()
    disk.armed = False
    again = ReplyCache(str(tmp_path))
    assert again.get("new") is None and again.get("kept") is not None  # nothing was moved aside or lost
    again.close()
    assert not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]


def test_a_read_the_disk_fails_is_a_miss_not_a_crash(tmp_path, disk, caplog):
    cache = ReplyCache(str(tmp_path))
    cache.put("k", Reply(text=REPLY_CORRECT), "openai:m")
    disk.message, disk.reads, disk.armed = IO, True, True
    assert cache.get("k") is None and cache.get_meta("preflight:x") is None
    assert cache.failures == {"read": 2}
    cache.close()


def test_a_healthy_cache_on_a_full_disk_stays_in_place_and_answers(tmp_path, disk, caplog):
    cache = ReplyCache(str(tmp_path))
    for i in range(50):
        cache.put(f"k{i}", Reply(text=f"{REPLY_CORRECT} {i}"), "openai:m")
    cache.close()
    disk.armed = True  # the write check at open fails as on a full disk

    reopened = ReplyCache(str(tmp_path))
    assert len(reopened) == 50 and reopened.get("k49").text.endswith(" 49")
    assert reopened.failures == {"note": 1}
    reopened.close()
    assert (tmp_path / FILE_NAME).is_file() and not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]
    [warning] = _warnings(caplog)
    assert "not damage" in warning and "damaged" not in caplog.text


@pytest.mark.parametrize("message", [FULL, IO])
def test_a_cache_that_cannot_even_be_created_still_lets_the_run_judge(tmp_path, disk, caplog, message):
    disk.message, disk.armed = message, True
    cache = ReplyCache(str(tmp_path / "cache"))  # no ConfigError: a full disk never fails a run
    assert cache.put("k", Reply(text=REPLY_CORRECT), "openai:m") is False
    assert cache.get("k").text == REPLY_CORRECT and cache.claim("k", ttl=30) is True
    assert cache.failures == {"open": 1, "reply": 1, "lease": 2}
    cache.close()
    [warning] = _warnings(caplog)
    assert message in warning and "not damage" in warning and "free of" in warning
    assert not [p for p in (tmp_path / "cache").iterdir() if ".damaged-" in p.name]


def test_a_disk_with_no_room_to_open_the_cache_reads_it_as_it_is(tmp_path, monkeypatch, caplog):
    """A WAL database needs a -shm file to be opened for writing; on a disk with no room at all, read it."""
    cache = ReplyCache(str(tmp_path))
    for i in range(20):
        cache.put(f"k{i}", Reply(text=f"{REPLY_CORRECT} {i}"), "openai:m")
    cache.close()

    def no_room_to_write(path: str, **options):
        if not options.get("uri"):  # a read-write open: SQLite cannot create the -shm file
            raise sqlite3.OperationalError(IO)
        return sqlite3.connect(path, **options)

    monkeypatch.setattr(files, "open_sqlite", no_room_to_write)
    frozen = ReplyCache(str(tmp_path))
    assert len(frozen) == 20 and frozen.get("k7").text.endswith(" 7")  # every stored reply still answers
    assert frozen.put("new", Reply(text=REPLY_CORRECT), "openai:m") is False and frozen.get("new") is not None
    assert frozen.failures == {"open": 1, "reply": 1, "lease": 1}
    frozen.close()
    assert not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]
    assert len(_warnings(caplog)) == 1 and "only read" in caplog.text


def _capped(pages: int):
    """Connections that SQLite itself stops from growing past ``pages`` pages (a real SQLITE_FULL)."""
    def open_capped(path: str, **options):
        db = sqlite3.connect(path, **options)
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db
    return open_capped


def _judge(server: ChatCompletionsServer, cache_dir: Path, prompts: list[str]):
    settings = resolve_settings("exact_match", None, {"judge_base_url": server.url, "judge_concurrency": 8,
                                                      "judge_max_retries": 0, "judge_cache_dir": str(cache_dir)},
                                environ={"OPENAI_API_KEY": CANARY_KEY})
    backend = build(settings, "exact_match")
    cache = ReplyCache(str(cache_dir))
    preflight_once(backend, settings, cache)  # its memory is a cache write too
    client = JudgeClient(backend, JUDGES["exact_match"].parse, settings, "test-template", cache, progress=False)
    outcomes = client.judge_all([JudgeRequest(prompt=p) for p in prompts])
    client.close()
    return client, outcomes


LONG_REPLY = REPLY_CORRECT.replace("Error Analysis: ", "Error Analysis: " + "I checked each step. " * 150)


def test_a_judge_run_on_a_disk_that_fills_judges_everything_and_the_rerun_pays_only_the_rest(
        tmp_path, monkeypatch, caplog):
    """Real SQLITE_FULL from SQLite, the real openai SDK, 40 requests at concurrency 8."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
    prompts = [f"Grade answer {i}. " + "Working. " * 400 for i in range(40)]  # ~4 KB each: pages run out
    cache_dir = tmp_path / "cache"
    ReplyCache(str(cache_dir)).close()  # the tables exist; then the disk "fills"
    monkeypatch.setattr(files, "open_sqlite", _capped(pages=40))
    with ChatCompletionsServer(lambda body: LONG_REPLY) as server:
        client, outcomes = _judge(server, cache_dir, prompts)
        assert [o.verdict.correct for o in outcomes] == [True] * 40  # every paid reply used for its verdict
        assert server.call_count == 40 and client.stats.calls == 40
        unstored = client.stats.cache_failures["reply"]
        assert 0 < unstored < 40  # the disk filled during the run
        assert client.stats.as_dict()["cache_failures"]["reply"] == unstored  # recorded in the judge stats
        assert len(_warnings(caplog)) == 1

        monkeypatch.setattr(files, "open_sqlite", sqlite3.connect)  # space freed
        with sqlite3.connect(cache_dir / FILE_NAME) as db:
            stored = db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
        assert stored == 40 - unstored
        server.reset()
        rerun, outcomes = _judge(server, cache_dir, prompts)
        assert [o.verdict.correct for o in outcomes] == [True] * 40
        assert server.call_count == unstored and rerun.stats.cache_hits == stored  # pays only for the rest
        assert "cache_failures" not in rerun.stats.as_dict()


# ---------------------------------------------------------------------------------------- other files
def test_batch_job_records_go_on_in_memory_when_the_disk_refuses_them(tmp_path, disk, caplog):
    path = str(tmp_path / FILE_NAME)
    with JobStore(path) as store:
        store.save("batch_1", "openai", ["k1", "k2"], created=1.0)
        disk.armed = True
        store.save("batch_2", "openai", ["k3"], created=2.0)
        assert store.in_memory
        assert store.open_jobs("openai", ["k1", "k3"]) == ["batch_1", "batch_2"]  # the run still finds both
        assert store.keys("batch_2") == ["k3"]
        store.finish("batch_1", "completed")
        assert [row[1:] for row in store.rows()] == [("batch_1", 2, "completed", 1), ("batch_2", 1, "submitted", 0)]
    assert len(_warnings(caplog)) == 1
    assert "batch_2" in caplog.text and "cannot resume it" in caplog.text  # the id a rerun cannot find


def test_batch_job_records_work_when_the_disk_was_full_from_the_start(tmp_path, disk):
    disk.armed = True
    with JobStore(str(tmp_path / FILE_NAME)) as store:
        store.save("batch_1", "gemini", ["k1"], created=1.0)
        assert store.open_jobs("gemini", ["k1"]) == ["batch_1"]


def test_a_media_index_the_disk_refuses_loses_only_its_rows(tmp_path, disk, caplog):
    store = MediaStore(str(tmp_path / "media"))
    disk.armed = True
    stored = store.put("key", media_fixtures.png(), "image/png", "mathjudge-x:m")
    assert Path(stored.path).read_bytes() == media_fixtures.png()  # the file is whole and used in this run
    store.put_failure("other", "content_policy", "refused", "mathjudge-x:m")
    assert store.record_job("video", "operations/1", "mathjudge-x:m") is False
    store.forget_job("video")
    disk.armed = False
    assert store.find("key") is None and store.counts() == {"media": 0, "failures": 0, "jobs": 0}
    store.close()
    assert len(_warnings(caplog)) == 1


def test_media_bytes_the_disk_refuses_stop_generation_with_a_message(tmp_path, monkeypatch):
    from lm_eval_mathjudge.generators import store as store_module

    def no_room(path, data, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    store = MediaStore(str(tmp_path / "media"))
    monkeypatch.setattr(store_module, "write_atomic", no_room)
    with pytest.raises(FatalJudgeError) as raised:
        store.put("key", media_fixtures.png(), "image/png", "mathjudge-x:m")
    assert raised.value.kind == "disk_full"
    assert str(tmp_path / "media") in str(raised.value) and "free of" in str(raised.value)
    store.close()


def test_generations_saved_on_a_full_disk_go_to_the_temporary_folder(tmp_path, monkeypatch, caplog):
    real = recovery.write_atomic

    def full_under_the_cache(path, data, **kwargs):
        if path.startswith(str(tmp_path)):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(path, data, **kwargs)

    monkeypatch.setattr(recovery, "write_atomic", full_under_the_cache)
    path = recovery.save_generations(str(tmp_path / "cache"), [("gsm8k_gpt4em", 0, {"question": "q"}, "42")])
    try:
        assert not path.startswith(str(tmp_path))
        assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
        assert read_jsonl(Path(path)) == [{"task": "gsm8k_gpt4em", "doc_id": 0, "question": "q", "response": "42"}]
        assert "temporary folder" in caplog.text and "No space left" in caplog.text
    finally:
        os.remove(path)
        os.rmdir(os.path.dirname(path))


# ---------------------------------------------------------------------------------------- a real small disk
@contextmanager
def small_disk(folder: Path, size: str):
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs here (mounting needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _resize(folder: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)


def _fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


N_DOCS = 60


def _cli(tmp_path: Path, cache: Path, replay: Path, judge: ChatCompletionsServer, name: str):
    return run_lm_eval(["--model", "mathjudge-replay", "--model_args", f"path={replay}", "--tasks", "gsm8k_gpt4em",
                        "--metadata", json.dumps({"judge_base_url": judge.url, "judge_concurrency": 8})],
                       {"MATHJUDGE_DATA_DIR": str(tmp_path / "data"), "MATHJUDGE_CACHE_DIR": str(cache),
                        "OPENAI_API_KEY": CANARY_KEY}, tmp_path / name)


def _long_judge(body: dict) -> str:
    """The careful loopback judge, with a long analysis (about 4 KB) so a few replies fill the disk."""
    reply = exact_match_judge(body)
    return reply.replace("Error Analysis: ", "Error Analysis: " + "I checked each step again. " * 150, 1)


@pytest.mark.e2e
def test_a_cache_on_a_disk_that_fills_mid_run_never_fails_the_run_nor_moves_the_cache(tmp_path):
    root = write_data_slice(tmp_path / "data", N_DOCS)
    rows = read_jsonl(root / "gsm8k" / "test.jsonl")
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"question": r["question"], "response": "So the answer is \\boxed{"
                                          + r["answer"].split("####")[-1].strip().replace(",", "") + "}."}) + "\n"
                              for r in rows))
    with small_disk(tmp_path / "disk", "300k") as disk, ChatCompletionsServer(_long_judge) as judge:
        cache = disk / "cache"
        first = _cli(tmp_path, cache, replay, judge, "out1")
        assert first.returncode == 0, first.stderr[-3000:]
        assert judge.call_count == N_DOCS
        stats = first.results()["configs"]["gsm8k_gpt4em"]["metadata"]["judge"]["run"]
        unstored = stats["cache_failures"]["reply"]
        assert 0 < unstored < N_DOCS, stats  # the disk filled during the run
        assert first.results()["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"] == 1.0  # every reply used
        assert first.stderr.count("cannot be written") == 1, first.stderr[-3000:]  # reported once
        assert str(cache) in first.stderr and "free of 300.0 KiB" in first.stderr
        assert "Traceback" not in first.stderr

        _resize(disk, "8m")  # space freed: the rerun pays only for what was not stored
        judge.reset()
        second = _cli(tmp_path, cache, replay, judge, "out2")
        assert second.returncode == 0, second.stderr[-3000:]
        assert judge.call_count == unstored
        assert "cannot be written" not in second.stderr

        _fill(disk / "filler")  # now the disk is full before the run starts
        judge.reset()
        third = _cli(tmp_path, cache, replay, judge, "out3")
        assert third.returncode == 0, third.stderr[-3000:]
        assert judge.call_count == 0  # the healthy cache answers everything ...
        assert not [p for p in cache.iterdir() if ".damaged-" in p.name]  # ... and was never moved aside
        assert "damaged" not in third.stderr and "Traceback" not in third.stderr
        assert third.results()["results"]["gsm8k_gpt4em"]["gpt4_exact_match,none"] == 1.0
