"""Persistent store of raw judge replies (stdlib sqlite3, WAL).

One row per request key: the reply text, its token usage and who produced
it. Only replies the server actually returned are stored; transport errors
never reach here. Storing the raw text (not the verdict) means a parser fix
re-scores old runs without a single new call.

Guarantees (README, "Reliability"):

* checked when opened, before any generation: ``PRAGMA quick_check`` and a
  real write. A damaged file is moved aside under a timestamped name (the
  message names both paths), never deleted; a read-only file is a
  ``ConfigError``;
* private: the folder is created 0700, the database and its WAL 0600;
* shared in-flight work: several processes may share one file (WAL, single-
  statement writes, ``busy_timeout``). Before paying for a call a process
  *claims* the key in the ``leases`` table; another process that finds a live
  lease waits for the reply instead of paying twice. A lease whose owner died
  or whose time ran out is taken over.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from typing import Any

from .errors import ConfigError
from .files import private_dir
from .types import Reply  # also re-exported: Reply lived here before it moved to the contract module

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1  # part of every key: bump when the key recipe changes
FILE_NAME = "judge_cache.sqlite3"
SQLITE_SUFFIXES = ("", "-wal", "-shm")  # the database, its write-ahead log and shared-memory index
BUSY_TIMEOUT_S = 60
LEASE_POLL_S = 0.2


def request_key(payload: dict[str, Any]) -> str:
    """Hash of everything that determines a reply (built by the client).

    ``surrogatepass``: text with a lone surrogate (invalid Unicode) still gets a
    key of its own instead of failing every sample of the task; valid text
    hashes exactly as before, so existing caches stay valid.
    """
    blob = json.dumps({"schema": SCHEMA_VERSION, **payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class ReplyCache:
    def __init__(self, directory: str):
        private_dir(directory)
        self.path = os.path.join(directory, FILE_NAME)
        self._lock = threading.Lock()
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._db = self._open_checked()

    # ------------------------------------------------------------------ opening
    def _open_checked(self) -> sqlite3.Connection:
        """Open, check integrity and writability; move a damaged file aside once."""
        try:
            return self._open()
        except _Damaged as damage:
            moved = self._move_aside()
            log.warning("the judge cache %s is damaged (%s); moved it to %s and started a new one. "
                        "Replies in the old file are not lost: it can be inspected or repaired with sqlite3.",
                        self.path, damage, moved)
            return self._open()

    def _open(self) -> sqlite3.Connection:
        if not os.path.exists(self.path):
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))  # sqlite gives WAL/SHM the same mode
        db = None
        try:
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
            status = db.execute("PRAGMA quick_check").fetchone()[0]
            if status != "ok":
                raise _Damaged(status)
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
                       "usage TEXT NOT NULL, finish_reason TEXT, judge TEXT NOT NULL, created REAL NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                       "host TEXT NOT NULL, pid INTEGER NOT NULL, expires REAL NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('last_opened', ?)", (str(time.time()),))  # writable?
        except _Damaged:
            _close_quietly(db)
            raise
        except sqlite3.DatabaseError as exc:
            _close_quietly(db)
            text = str(exc).lower()
            if "readonly" in text or "read-only" in text or "unable to open" in text or "permission" in text:
                raise ConfigError(f"the judge cache {self.path} cannot be written ({exc}); make it writable, set "
                                  "MATHJUDGE_CACHE_DIR to a writable folder, or run with judge_cache=false") from None
            if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
                raise ConfigError(f"the judge cache {self.path} stayed locked for {BUSY_TIMEOUT_S}s ({exc}); "
                                  "another process holds it, or the folder is on a network file system "
                                  "without locking: use a local MATHJUDGE_CACHE_DIR") from None
            raise _Damaged(str(exc)) from None  # "file is not a database", "malformed", ...
        _private_files(self.path)
        return db

    def _move_aside(self) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = f"{self.path}.damaged-{stamp}-{os.getpid()}"
        for suffix in SQLITE_SUFFIXES:
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, target + suffix)
        return target

    # ------------------------------------------------------------------ replies
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
            self._db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, self._owner))

    # ------------------------------------------------------------------ leases
    def claim(self, key: str, ttl: float) -> bool:
        """True if this cache now owns the right to pay for ``key`` (for ``ttl`` seconds).

        False: another live process is already asking the judge; wait with ``wait_for``.
        """
        now = time.time()
        host, pid = self._owner.split(":")[:2]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT owner, host, pid, expires FROM leases WHERE key = ?", (key,)).fetchone()
                if row is not None and row[0] != self._owner and _lease_live(row, now):
                    self._db.execute("COMMIT")
                    return False
                self._db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?)",
                                 (key, self._owner, host, int(pid), now + ttl))
                self._db.execute("COMMIT")
                return True
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def release(self, key: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, self._owner))

    def wait_for(self, key: str, limit: float, sleep=time.sleep) -> Reply | None:
        """Poll until another process stores ``key``'s reply or gives up its lease (bounded by ``limit``).

        None: no reply came (the owner failed, died or ran out of time); the caller claims the key itself.
        """
        deadline = time.monotonic() + limit
        while True:
            reply = self.get(key)
            if reply is not None:
                return reply
            with self._lock:
                row = self._db.execute("SELECT owner, host, pid, expires FROM leases WHERE key = ?", (key,)).fetchone()
            if row is None or not _lease_live(row, time.time()) or time.monotonic() >= deadline:
                return self.get(key)
            sleep(LEASE_POLL_S)

    # ------------------------------------------------------------------ notes
    def get_meta(self, name: str) -> str | None:
        """A small named value kept beside the replies (e.g. when a judge last passed its preflight)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, name: str, value: str | None) -> None:
        """Store ``value`` under ``name``; None removes it."""
        with self._lock:
            if value is None:
                self._db.execute("DELETE FROM meta WHERE name = ?", (name,))
            else:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    # ------------------------------------------------------------------ housekeeping
    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            try:
                self._db.execute("DELETE FROM leases WHERE owner = ?", (self._owner,))
            except sqlite3.Error:
                pass  # closing must not fail because a lease could not be dropped (it expires anyway)
            self._db.close()


class _Damaged(Exception):
    """The file is not a healthy SQLite database."""


def _lease_live(row: tuple, now: float) -> bool:
    _, host, pid, expires = row
    if expires <= now:
        return False
    if host == socket.gethostname():  # same machine: a dead owner cannot finish
        return _pid_alive(int(pid))
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else (or the platform cannot tell): assume alive
    return True


def _private_files(path: str) -> None:
    for suffix in SQLITE_SUFFIXES:
        try:
            if os.stat(path + suffix).st_mode & 0o077:
                os.chmod(path + suffix, 0o600)
        except OSError:
            pass  # not there (yet), or not ours to change


def _close_quietly(db: sqlite3.Connection | None) -> None:
    if db is not None:
        try:
            db.close()
        except sqlite3.Error:
            pass
