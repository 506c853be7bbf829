"""Caches on clusters (issue 20): many processes creating one cache at once, network filesystems,
and merging the caches of several hosts."""

from __future__ import annotations

import multiprocessing
import sqlite3

from lm_eval_mathjudge.judging.cache import FILE_NAME, ReplyCache
from tests._helpers import cache_opener

PROCESSES, ROUNDS = 8, 50


def test_a_fresh_cache_opened_by_many_processes_at_once_never_fails(tmp_path):
    """Creating a cache (WAL mode, schema) waits for the lock like any write; it used to fail at once."""
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=cache_opener, args=(str(tmp_path), w, ROUNDS, start, results))
             for w in range(PROCESSES)]
    for p in procs:
        p.start()
    reports = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    errors = [e for _, _, errs in reports for e in errs]
    assert errors == [], errors[:5]  # in particular no "database is locked"
    assert sorted(ok for _, ok, _ in reports) == [ROUNDS] * PROCESSES
    for n in range(ROUNDS):  # every round's file holds every process's reply, in WAL mode
        with sqlite3.connect(tmp_path / f"round-{n}" / FILE_NAME) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == PROCESSES


def test_a_cache_that_stays_locked_says_how_long_it_was_waited_for(tmp_path, monkeypatch):
    import re
    import time

    import pytest

    from lm_eval_mathjudge.core.errors import ConfigError
    from lm_eval_mathjudge.judging import cache as cache_module

    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 1)
    holder = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)  # a new file, held by another writer
    holder.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        ReplyCache(str(tmp_path))
    waited = time.monotonic() - started
    holder.close()
    said = float(re.search(r"still locked after ([0-9.]+)s of waiting", str(caught.value))[1])
    assert 0.9 <= said <= waited + 0.05 and waited < 5  # it waited the limit, and says so truthfully
    ReplyCache(str(tmp_path)).close()  # once the other writer is gone, the same folder opens
