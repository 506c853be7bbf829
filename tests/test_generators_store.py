"""The media store: content addressing, atomic files, and resuming after SIGKILL (real subprocesses)."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lm_eval_mathjudge.generators.store import MediaStore, request_key
from tests import media_fixtures as fx
from tests.conftest import REPO
from tests.e2e import CANARY_KEY, TIMEOUT_S
from tests.loopback.openai_media_server import OpenAIMediaServer
from tests.test_generators_openai_wire import Req

PNG, MP4 = fx.png(rgb=(9, 9, 9)), fx.mp4(payload_bytes=4096)


def test_files_are_named_by_content_private_and_indexed_by_request(tmp_path):
    store = MediaStore(str(tmp_path / "media"))
    key = request_key("a", "m", {"size": "1"}, "prompt")
    assert key != request_key("a", "m", {"size": "2"}, "prompt") != request_key("a", "m", {"size": "1"}, "prompt ")
    stored = store.put(key, PNG, "image/png", "a:m")
    assert Path(stored.path).name == hashlib.sha256(PNG).hexdigest() + ".png"
    assert store.find(key) == stored and store.find("other") is None
    assert stat.S_IMODE(os.stat(stored.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "media").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.index_path).st_mode) == 0o600
    twin = store.put("another request", PNG, "image/png", "a:m")  # same bytes: one file
    assert twin.path == stored.path and len(list((tmp_path / "media").glob("*.png"))) == 1


def test_a_damaged_or_deleted_file_is_never_used(tmp_path):
    store = MediaStore(str(tmp_path))
    stored = store.put("k", MP4, "video/mp4", "x")
    Path(stored.path).write_bytes(MP4[:100])  # cut short by hand
    assert store.find("k") is None
    os.unlink(stored.path)
    assert store.find("k") is None


def test_jobs_and_failures_are_cleared_by_the_media_they_lead_to(tmp_path):
    store = MediaStore(str(tmp_path))
    store.record_job("k", "video_1", "x")
    store.put_failure("k", "timeout", "slow", "x")
    assert MediaStore(str(tmp_path)).job("k") == "video_1"  # persisted for the next process
    store.put("k", MP4, "video/mp4", "x")
    assert store.job("k") is None and store.failure("k") is None and store.counts() == {
        "media": 1, "failures": 0, "jobs": 0}


def test_a_job_records_which_output_each_key_takes_and_an_older_index_file_still_opens(tmp_path):
    index = tmp_path / "index.sqlite3"
    with sqlite3.connect(index) as db:  # what versions before positions wrote: a job under each sample's key
        db.execute("CREATE TABLE jobs (key TEXT PRIMARY KEY, job_id TEXT NOT NULL, label TEXT NOT NULL, "
                   "created REAL NOT NULL)")
        db.executemany("INSERT INTO jobs VALUES (?, ?, ?, ?)", [("a", "op1", "x", 1.0), ("b", "op1", "x", 1.0)])
    store = MediaStore(str(tmp_path))
    assert store.jobs(("a", "b", "c")) == {"a": ("op1", None), "b": ("op1", None)}
    assert store.record_job(("c", "d", "e"), "op2", "x")
    assert store.jobs(("c", "d", "e")) == {"c": ("op2", 0), "d": ("op2", 1), "e": ("op2", 2)}
    with sqlite3.connect(index) as db:  # an older version sharing the folder records a job its own way
        db.execute("INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?)", ("e", "op3", "x", 2.0))
    assert store.jobs(("e",)) == {"e": ("op3", None)}  # the position e had in op2 is not op3's
    store.put_many([("c", MP4, "video/mp4")], "x", release=("c", "d"))  # c stored, d released with it
    assert store.jobs(("a", "b", "c", "d", "e")) == {"a": ("op1", None), "b": ("op1", None), "e": ("op3", None)}
    store.forget_job(("a", "b", "e"))
    assert store.counts()["jobs"] == 0 and _rows(tmp_path, "job_outputs") == 0
    store.close()


_DRIVER = """
import sys
from lm_eval_mathjudge.generators.{module} import {cls}
from tests.test_generators_openai_wire import Req
lm = {cls}(model="{model}", media_dir=sys.argv[1], num_concurrent={concurrency}, poll_interval=0.02)
lm.generate_until([Req(f"question {{i}}", doc_id=i) for i in range({n})], disable_tqdm=True)
"""


def _start(tmp_path: Path, server: OpenAIMediaServer, module: str, cls: str, model: str, n: int,
           concurrency: int) -> subprocess.Popen:
    code = _DRIVER.format(module=module, cls=cls, model=model, n=n, concurrency=concurrency)
    env = {**os.environ, "OPENAI_API_KEY": CANARY_KEY, "OPENAI_BASE_URL": server.url, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "media")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _rows(media_dir: Path, table: str) -> int:
    index = media_dir / "index.sqlite3"
    if not index.exists():
        return 0
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=5) as db:
        try:
            return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        except sqlite3.OperationalError:  # tables not created yet
            return 0


def _kill_when(proc: subprocess.Popen, ready, timeout: float = TIMEOUT_S, signum: int = signal.SIGKILL) -> str:
    """Send ``signum`` once ``ready()``; returns the driver's stderr."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "the driver never got there"
        time.sleep(0.02)
    os.kill(proc.pid, signum)
    stderr = proc.communicate(timeout=TIMEOUT_S)[1].decode(errors="replace")
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # a graceful stop: the polls end at once, the jobs stay recorded, one line says how to resume
        assert proc.returncode == 128 + signum and "Traceback" not in stderr, stderr[-3000:]
        assert "stopped by SIGINT" in stderr and "rerun the same command" in stderr
    return stderr


@pytest.mark.e2e
def test_sigkill_mid_run_then_rerun_generates_only_what_is_missing(tmp_path, monkeypatch):
    n = 8
    with OpenAIMediaServer(image_responder=lambda body: PNG, latency=0.3) as server:
        proc = _start(tmp_path, server, "openai_image", "OpenAIImageLM", "gpt-image-1", n, concurrency=2)
        _kill_when(proc, lambda: _rows(tmp_path / "media", "media") >= 3)
        kept = MediaStore(str(tmp_path / "media")).counts()["media"]  # read-write: recovers the dead run's WAL
        calls_before = server.count("images")
        assert 3 <= kept < n
        (tmp_path / "media" / ".partial-0123").write_bytes(PNG[:10])  # what a kill mid-write leaves

        from lm_eval_mathjudge.generators.openai_image import OpenAIImageLM

        monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        lm = OpenAIImageLM(model="gpt-image-1", media_dir=str(tmp_path / "media"), num_concurrent=4)
        answers = lm.generate_until([Req(f"question {i}", doc_id=i) for i in range(n)], disable_tqdm=True)
        assert server.count("images") - calls_before == n - kept == lm.stats["generation_calls"]
    assert all(Path(a).read_bytes() == PNG for a in answers) and not any(".partial" in a for a in answers)


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_killed_or_stopped_while_polling_then_rerun_polls_the_same_jobs(tmp_path, monkeypatch, signum):
    n = 3
    with OpenAIMediaServer(video_responder=lambda form: MP4, polls=10_000) as server:
        proc = _start(tmp_path, server, "sora", "SoraLM", "sora-2", n, concurrency=n)
        _kill_when(proc, lambda: _rows(tmp_path / "media", "jobs") == n and server.count("poll") >= n,
                   signum=signum)
        assert server.count("create") == n
        for job in server.jobs.values():
            job.polls_left = 1  # the renders finish after the crash

        from lm_eval_mathjudge.generators.sora import SoraLM

        monkeypatch.setenv("OPENAI_API_KEY", CANARY_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        lm = SoraLM(model="sora-2", media_dir=str(tmp_path / "media"), poll_interval=0.02)
        answers = lm.generate_until([Req(f"question {i}", doc_id=i) for i in range(n)], disable_tqdm=True)
        assert server.count("create") == n and server.count("download") == n  # no job paid for twice
    assert lm.stats["jobs_resumed"] == n and all(Path(a).read_bytes() == MP4 for a in answers)
    assert _rows(tmp_path / "media", "jobs") == 0


def test_the_default_media_dir_is_under_the_plugin_cache(tmp_path, monkeypatch):
    from lm_eval_mathjudge.generators.base import default_media_dir

    monkeypatch.setenv("MATHJUDGE_CACHE_DIR", str(tmp_path / "c"))
    assert default_media_dir() == str(tmp_path / "c" / "media")
