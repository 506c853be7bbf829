"""Persistent store of raw judge replies (stdlib sqlite3, WAL).

One row per request key: the reply text, its token usage and who produced
it. Only replies the server actually returned are stored; transport errors
never reach here. Storing the raw text (not the verdict) means a parser fix
re-scores old runs without a single new call.

Several processes may share one file: WAL lets readers run beside a writer,
writes are single statements, and ``busy_timeout`` makes a process wait for
the lock instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from typing import Any

from .types import Reply  # noqa: F401  -- re-exported: Reply lived here before it moved to the contract module

SCHEMA_VERSION = 1  # part of every key: bump when the key recipe changes
FILE_NAME = "judge_cache.sqlite3"


def request_key(payload: dict[str, Any]) -> str:
    """Hash of everything that determines a reply (built by the client)."""
    blob = json.dumps({"schema": SCHEMA_VERSION, **payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ReplyCache:
    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, FILE_NAME)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout = 60000")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
            "usage TEXT NOT NULL, finish_reason TEXT, judge TEXT NOT NULL, created REAL NOT NULL)")

    def get(self, key: str) -> Reply | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, usage, finish_reason FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return Reply(text=row[0], usage=json.loads(row[1]), finish_reason=row[2])

    def put(self, key: str, reply: Reply, judge: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?)",
                (key, reply.text, json.dumps(reply.usage), reply.finish_reason, judge, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
