"""The cache fails early, keeps what was paid, stays private, and lets processes share in-flight calls."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lm_eval_mathjudge.judging.cache import FILE_NAME, Reply, ReplyCache, request_key
from lm_eval_mathjudge.harness.recovery import save_generations
from tests._helpers import REPLY_CORRECT, shared_cache_judge
from tests.e2e import TIMEOUT_S
from tests.loopback import ChatCompletionsServer


def _filled(directory, rows: int = 400) -> str:
    cache = ReplyCache(str(directory))
    for i in range(rows):
        cache.put(f"key-{i}", Reply(text=f"{REPLY_CORRECT} {'x' * 200} {i}"), "openai:gpt-4-turbo")
    cache.close()
    return os.path.join(str(directory), FILE_NAME)


def _corrupt_pages(path: str) -> bytes:
    """Overwrite the middle of the file (table pages, not the header), as a bad disk or a killed copy would."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xde\xad\xbe\xef" * 2048)
    with open(path, "rb") as fh:
        return fh.read()


@pytest.mark.parametrize("damage", ["pages", "not-a-database"])
def test_a_damaged_cache_is_moved_aside_with_a_message_naming_both_paths(tmp_path, caplog, damage):
    path = _filled(tmp_path)
    if damage == "pages":
        before = _corrupt_pages(path)
    else:
        before = b"this is not an SQLite file" * 100
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        with open(path, "wb") as fh:
            fh.write(before)

    cache = ReplyCache(str(tmp_path))  # opening is the check: before any generation
    assert len(cache) == 0  # a fresh, working cache ...
    cache.put("k", Reply(text=REPLY_CORRECT), "local:math-verify")
    assert cache.get("k").text == REPLY_CORRECT
    cache.close()

    moved = [p for p in tmp_path.iterdir() if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(moved) == 1
    assert moved[0].read_bytes() == before  # ... and the damaged one kept byte for byte, never dropped
    assert path in caplog.text and str(moved[0]) in caplog.text
    # The message says which damage it was (never a full disk: tests/test_disk_full.py).
    assert ("failed its integrity check" if damage == "pages" else "is not an SQLite database") in caplog.text


_READ_ONLY_PROBE = """
import os, sys
from lm_eval_mathjudge.judging.cache import ReplyCache
from lm_eval_mathjudge.core.errors import ConfigError
os.setgid(65534); os.setuid(65534)  # an unprivileged user: root would ignore the file's mode
try:
    ReplyCache(sys.argv[1])
except ConfigError as exc:
    print("CONFIG_ERROR", exc)
"""


@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_a_read_only_cache_is_a_config_error_at_open():
    root = Path(tempfile.mkdtemp(prefix="mj-ro-"))  # /tmp itself is searchable by every user
    folder = root / "ro"
    _filled(folder, rows=3)
    for path in (root, folder):
        os.chmod(path, 0o755)  # readable by the other user, writable only by its owner
    for p in folder.iterdir():
        os.chmod(p, 0o644)
    try:
        probe = subprocess.run([sys.executable, "-c", _READ_ONLY_PROBE, str(folder)], capture_output=True, text=True,
                               timeout=TIMEOUT_S, env={**os.environ, "PYTHONPATH": os.getcwd()})
    finally:
        shutil.rmtree(root)
    assert "CONFIG_ERROR" in probe.stdout, probe.stderr[-2000:]
    assert "cannot be written" in probe.stdout and "MATHJUDGE_CACHE_DIR" in probe.stdout


def test_cache_files_and_folders_are_private(tmp_path):
    folder = tmp_path / "new" / "cache"
    cache = ReplyCache(str(folder))
    cache.put("k", Reply(text=REPLY_CORRECT), "local:math-verify")
    generations = save_generations(str(folder), [("gsm8k_gpt4em", 0, {"question": "q"}, "r")])
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    cache.close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    assert modes[FILE_NAME] == 0o600 and modes[FILE_NAME + "-wal"] == 0o600
    assert modes["generations"] == 0o700
    assert stat.S_IMODE(os.stat(generations).st_mode) == 0o600


def test_a_lone_surrogate_gets_its_own_key():
    # Regression: json.dumps(...).encode("utf-8") raised UnicodeEncodeError and every sample of the task failed.
    broken = request_key({"prompt": "answer \ud800 is 3"})
    assert broken != request_key({"prompt": "answer \ufffd is 3"})
    assert request_key({"prompt": "héllo"}) == request_key({"prompt": "héllo"})


@pytest.mark.e2e
def test_leases_let_one_owner_pay_and_take_over_from_dead_or_expired_owners(tmp_path):
    a, b = ReplyCache(str(tmp_path)), ReplyCache(str(tmp_path))
    assert a.claim("k", ttl=30) and not b.claim("k", ttl=30)  # b must wait for a
    a.put("k", Reply(text=REPLY_CORRECT), "openai:x")  # storing the reply ends the lease
    assert b.wait_for("k", limit=5).text == REPLY_CORRECT

    assert a.claim("k2", ttl=0.2)
    polls: list[float] = []
    assert b.wait_for("k2", limit=30, sleep=lambda s: (polls.append(s), time.sleep(s))) is None
    assert sum(polls) < 15  # expired: bounded by the lease, not the limit
    assert b.claim("k2", ttl=30)

    with sqlite3.connect(a.path) as db:  # a lease of a process that no longer exists
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
        host = db.execute("SELECT host FROM leases LIMIT 1").fetchone()[0]
        db.execute("INSERT OR REPLACE INTO leases VALUES ('k3', 'ghost', ?, ?, ?)", (host, int(dead), time.time() + 999))
    assert a.claim("k3", ttl=30)

    with sqlite3.connect(a.path) as db:  # a lease of this process's earlier cache, closed on a full disk, say
        db.execute("INSERT OR REPLACE INTO leases VALUES ('k4', ?, ?, ?, ?)",
                   (f"{host}:{os.getpid()}:closed00", host, os.getpid(), time.time() + 999))
    polls.clear()
    assert b.wait_for("k4", limit=30, sleep=polls.append) is None and polls == []  # nobody left to finish it
    assert b.claim("k4", ttl=30)
    assert a.claim("k5", ttl=30) and not b.claim("k5", ttl=30)  # an open cache of this process is waited for
    a.close()
    b.close()


@pytest.mark.e2e
def test_two_processes_sharing_a_cache_pay_for_each_call_once(tmp_path):
    """Two real processes, one cache, a loopback judge that counts requests."""
    prompts = [f"Problem {i}: what is {i} + {i}?" for i in range(24)]
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    with ChatCompletionsServer(lambda body: REPLY_CORRECT, latency=0.25,
                               models=("gpt-4-turbo-2024-04-09",)) as judge:
        env_key = os.environ.get("OPENAI_API_KEY")
        os.environ["OPENAI_API_KEY"] = "sk-loopback-not-a-key"
        try:
            procs = [ctx.Process(target=shared_cache_judge, args=(str(tmp_path), judge.url, prompts, start, results))
                     for _ in range(2)]
            for p in procs:
                p.start()
            reports = [results.get(timeout=TIMEOUT_S) for _ in procs]
            for p in procs:
                p.join(timeout=TIMEOUT_S)
        finally:
            if env_key is None:
                os.environ.pop("OPENAI_API_KEY", None)
            else:
                os.environ["OPENAI_API_KEY"] = env_key
        calls_seen = judge.call_count
    assert [r[3] for r in reports] == [[], []]
    assert all(r[0] == [True] * len(prompts) for r in reports)
    assert calls_seen == len(prompts)  # before leases: 77-88% of the calls were paid twice
    assert sum(r[1] for r in reports) == len(prompts)
    assert sum(r[2] for r in reports) > 0  # the waiting process really took replies the other one paid for
