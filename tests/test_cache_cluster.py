"""Caches on clusters (issue 20): many processes creating one cache at once, network filesystems,
and merging the caches of several hosts."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sqlite3
import stat
import tempfile
from pathlib import Path

import pytest

from lm_eval_mathjudge.core import mounts
from lm_eval_mathjudge.core.errors import ConfigError
from lm_eval_mathjudge.core.types import Reply
from lm_eval_mathjudge.judging import cache as cache_module
from lm_eval_mathjudge.judging.cache import FILE_NAME, ReplyCache
from lm_eval_mathjudge.settings.layers import resolve_settings
from tests._helpers import CACHE_SHAPES, REPLY_CORRECT, cache_opener, older_version_stores, write_cache_file
from tests.e2e import TIMEOUT_S

PROCESSES, ROUNDS = 8, 50


def _open_at_once(root, rounds: int, *model) -> list:
    """PROCESSES processes open a cache in each round folder at the same moment; their reports, after
    checking that none failed (in particular no "database is locked")."""
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=cache_opener, args=(str(root), w, rounds, start, results, *model))
             for w in range(PROCESSES)]
    for p in procs:
        p.start()
    reports = [results.get(timeout=TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join(timeout=TIMEOUT_S)
        assert p.exitcode == 0
    errors = [e for _, _, errs in reports for e in errs]
    assert errors == [], errors[:5]
    return reports


@pytest.mark.e2e
def test_a_fresh_cache_opened_by_many_processes_at_once_never_fails(tmp_path):
    """Creating a cache (WAL mode, schema) waits for the lock like any write; it used to fail at once."""
    reports = _open_at_once(tmp_path, ROUNDS)
    assert sorted(ok for _, ok, _ in reports) == [ROUNDS] * PROCESSES
    for n in range(ROUNDS):  # every round's file holds every process's reply, in WAL mode
        with sqlite3.connect(tmp_path / f"round-{n}" / FILE_NAME) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == PROCESSES


@pytest.mark.e2e
@pytest.mark.parametrize("shape", list(CACHE_SHAPES))
def test_a_cache_file_an_older_version_left_opened_by_many_processes_at_once(tmp_path, shape):
    """Each opener may find the file to rebuild (eight columns); one does it, none fails, nothing is lost."""
    rounds = 10
    for n in range(rounds):
        write_cache_file(tmp_path / f"round-{n}", shape, [("old", REPLY_CORRECT, "gpt-4o-2024-08-06", "fp_0")])
    _open_at_once(tmp_path, rounds, "gpt-4o-2024-11-20")
    old = Reply(REPLY_CORRECT, {}, "stop", *(("gpt-4o-2024-08-06", "fp_0") if CACHE_SHAPES[shape][1] else ()))
    for n in range(rounds):
        folder = tmp_path / f"round-{n}"
        older_version_stores(folder, "older", REPLY_CORRECT)  # six columns again: the older insert works
        cache = ReplyCache(str(folder))
        try:
            assert len(cache) == PROCESSES + 2 and cache.get("old") == old
            assert {cache.get(f"w{w}").model for w in range(PROCESSES)} == {"gpt-4o-2024-11-20"}
        finally:
            cache.close()


def test_a_cache_that_stays_locked_says_how_long_it_was_waited_for(tmp_path, monkeypatch):
    import re
    import time

    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 1)
    holder = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)  # a new file, held by another writer
    holder.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        ReplyCache(str(tmp_path))
    waited = time.monotonic() - started
    holder.close()
    said = float(re.search(r"still locked after ([0-9.]+)s of waiting", str(caught.value))[1])
    assert 0.9 <= said <= waited + 0.05  # it waited the limit, and says so truthfully
    ReplyCache(str(tmp_path)).close()  # once the other writer is gone, the same folder opens


# ---------------------------------------------------------------------- network filesystems
def _mount_table(tmp_path, fmt: str = "mountinfo"):
    """A mount table as the kernel writes it, with network and local filesystems under ``tmp_path``."""
    root = os.path.realpath(tmp_path)
    rows = [  # (point, type, source)
        ("/", "ext4", "/dev/nvme0n1p2"),
        (f"{root}/home", "nfs4", "filer:/export/home"),
        (f"{root}/home/scratch", "xfs", "/dev/sdb1"),  # a local disk mounted inside the network one
        (f"{root}/lustre", "lustre", "10.0.0.1@o2ib:/scratch"),
        (f"{root}/gpfs", "gpfs", "gpfs0"),
        (f"{root}/with space", "fuse.sshfs", "me@login:/data"),
        (f"{root}/smb", "cifs", "//nas/share"),
        (f"{root}/tmpfs", "tmpfs", "tmpfs"),
    ]
    for point, _, _ in rows[1:]:
        os.makedirs(point, exist_ok=True)  # a mount point always exists
    escape = lambda p: p.replace("\\", "\\134").replace(" ", "\\040")  # noqa: E731 - as the kernel does
    if fmt == "mountinfo":
        lines = [f"{20 + i} 1 0:{30 + i} / {escape(p)} rw,relatime shared:{i} - {t} {escape(s)} rw"
                 for i, (p, t, s) in enumerate(rows)]
    else:
        lines = [f"{escape(s)} {escape(p)} {t} rw,relatime 0 0" for p, t, s in rows]
    table = tmp_path / f"mounts.{fmt}"
    table.write_text("\n".join(lines) + "\nnot a mount line\n")
    return table


@pytest.mark.parametrize("fmt", ["mountinfo", "mounts"])
@pytest.mark.parametrize("folder, fstype", [
    ("home/me/.cache/lm_eval_mathjudge", "nfs4"),  # need not exist: its nearest existing parent decides
    ("home", "nfs4"),
    ("home/scratch/cache", None),  # local disk inside the network mount
    ("lustre/project/cache", "lustre"),
    ("gpfs/cache", "gpfs"),
    ("with space/cache", "fuse.sshfs"),
    ("smb/x", "cifs"),
    ("tmpfs/cache", None),
    ("elsewhere/cache", None),  # on / (ext4)
    ("homework/cache", None),  # a name that only starts like a network mount point
])
def test_network_filesystems_are_known_by_their_mount_type(tmp_path, fmt, folder, fstype):
    table = str(_mount_table(tmp_path, fmt))
    mount = mounts.network_filesystem(str(tmp_path / folder), table)
    assert (mount.fstype if mount else None) == fstype
    if fstype:
        assert mount.fstype in mounts.NETWORK_FILESYSTEMS


def test_no_readable_mount_table_means_nothing_is_assumed(tmp_path):
    assert mounts.read_table(str(tmp_path / "missing")) == []
    assert mounts.network_filesystem(str(tmp_path), str(tmp_path / "missing")) is None


@pytest.fixture
def fake_mounts(tmp_path, monkeypatch):
    """The cache module reads ``tmp_path/mounts.mountinfo``; the user cache folder is on a local disk."""
    monkeypatch.setattr(mounts, "MOUNT_TABLES", (str(_mount_table(tmp_path)),))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "local" / ".cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cache_module._MOVED.clear()
    yield tmp_path
    cache_module._MOVED.clear()


def test_a_cache_on_a_network_filesystem_falls_back_to_a_folder_of_this_host(fake_mounts, caplog):
    shared = fake_mounts / "home" / "me" / "cache"
    with caplog.at_level(logging.WARNING, logger="lm_eval_mathjudge.judging.cache"):
        first = ReplyCache(str(shared))
        second = ReplyCache(str(shared))
    try:
        local = fake_mounts / "local" / ".cache" / "lm_eval_mathjudge" / "hosts"
        assert os.path.dirname(first.path) == os.path.dirname(second.path)
        assert Path(first.path).parent.parent == local and Path(first.path).parent.name  # named by host
        assert not shared.exists()  # nothing written on the network filesystem
        assert stat.S_IMODE(Path(first.path).parent.stat().st_mode) == 0o700
        first.put("k", Reply(text="Final Verdict: Correct"), "openai:x")
        assert second.get("k") is not None  # both use the same host-local file
    finally:
        first.close()
        second.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # once per folder and process
    assert "nfs4" in warnings[0] and str(shared) in warnings[0] and "--merge" in warnings[0]
    assert "judge_cache_network_fs" in warnings[0]


def test_when_the_user_cache_folder_is_shared_too_the_temporary_folder_is_used(fake_mounts, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(fake_mounts / "lustre" / ".cache"))
    cache = ReplyCache(str(fake_mounts / "home" / "cache"))
    cache.close()
    folder = Path(cache.path).parent
    assert folder.parent.parent.parent == fake_mounts / "tmp" and folder.parent.name == "hosts"
    assert folder.parent.parent.name == f"lm_eval_mathjudge-{os.geteuid()}"


def test_a_temporary_folder_someone_else_prepared_is_not_used(fake_mounts, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(fake_mounts / "lustre" / ".cache"))
    elsewhere = fake_mounts / "someone-elses"
    elsewhere.mkdir()
    (fake_mounts / "tmp" / f"lm_eval_mathjudge-{os.geteuid()}").symlink_to(elsewhere)  # a link planted first
    with pytest.raises(ConfigError, match="no local folder to use instead"):
        ReplyCache(str(fake_mounts / "home" / "cache"))


def test_refuse_stops_and_allow_uses_the_network_folder(fake_mounts):
    shared = fake_mounts / "gpfs" / "cache"
    with pytest.raises(ConfigError) as caught:
        ReplyCache(str(shared), "refuse")
    assert "IBM Storage Scale (GPFS)" in str(caught.value) and "MATHJUDGE_CACHE_DIR" in str(caught.value)
    assert not shared.exists()
    cache = ReplyCache(str(shared), "allow")
    cache.close()
    assert Path(cache.path).parent == shared
    local = ReplyCache(str(fake_mounts / "home" / "scratch" / "cache"), "refuse")  # a local disk is fine
    local.close()


@pytest.mark.parametrize("environ, expected", [
    ({}, "fallback"),
    ({"MATHJUDGE_CACHE_NETWORK_FS": "refuse"}, "refuse"),
    ({"MATHJUDGE_GPT4EM_CACHE_NETWORK_FS": "allow"}, "allow"),
])
def test_the_network_filesystem_setting_resolves_like_every_setting(environ, expected):
    assert resolve_settings("exact_match", None, None, environ=environ).cache_network_fs == expected
    assert resolve_settings("exact_match", None, {"judge_cache_network_fs": "allow"},
                            environ=environ).cache_network_fs == "allow"


def test_an_unknown_network_filesystem_policy_is_refused():
    with pytest.raises(ConfigError, match="cache_network_fs='maybe' must be one of fallback, refuse, allow"):
        resolve_settings("exact_match", None, {"judge_cache_network_fs": "maybe"}, environ={})


def test_a_lease_left_by_a_closed_cache_of_this_process_is_taken_over_at_once(tmp_path):
    """A full disk can refuse dropping a lease; the next run in the same process must not wait for it."""
    import socket
    import time

    first = ReplyCache(str(tmp_path))
    assert first.claim("k", ttl=600)
    first.close()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:  # the lease as a refused delete leaves it
        db.execute("INSERT OR REPLACE INTO leases VALUES ('k', ?, ?, ?, ?)",
                   (f"{socket.gethostname()}:{os.getpid()}:gone", socket.gethostname(), os.getpid(),
                    time.time() + 600))
    second, third = ReplyCache(str(tmp_path)), ReplyCache(str(tmp_path))
    try:
        assert second.claim("k", ttl=600)  # its owner is closed: nobody is paying for it
        assert not third.claim("k", ttl=600)  # but a lease of a cache still open here is live
    finally:
        second.close()
        third.close()
