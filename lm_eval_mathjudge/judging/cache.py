"""Persistent store of raw judge replies (stdlib sqlite3, WAL).

One row per request key: the reply text, its token usage and who produced
it. Only replies the server actually returned are stored; transport errors
never reach here. Storing the raw text (not the verdict) means a parser fix
re-scores old runs without a single new call.

Guarantees (README, "Reliability"):

* checked when opened, before any generation: ``PRAGMA quick_check`` and a
  real write. Only real damage (a failed ``quick_check``, a file that is not an
  SQLite database) moves the file aside, under a timestamped name (the message
  names both paths and what the check found), never deleted; a read-only file
  is a ``ConfigError``;
* a full or failing disk is not damage (``files.disk_problem``): every write
  (reply, lease, note) that the disk refuses costs only that write. The reply is
  kept in memory and still used for its verdict; the failure is counted
  (``failures``, in the judge stats) and reported once per folder per process
  with the free space. A disk with no room even to open the file for writing
  (a WAL needs its -shm file) gets it read only, as it is, for the whole run;
  a file that cannot be read either is left in place and the run starts from
  an empty cache in memory;
* private: the folder is created 0700, the database and its WAL 0600;
* never on a filesystem shared by hosts (NFS, Lustre, SMB...: ``core/mounts.py``), where SQLite's
  locks do not hold: by default (``cache_network_fs=fallback``) the cache opens in a private folder
  of this host instead and says so once; ``refuse`` stops with a message, ``allow`` uses the folder;
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
import random
import socket
import sqlite3
import stat
import threading
import time
import uuid
from collections import Counter
from typing import Any, Callable, TypeVar

from ..core import files, mounts
from ..core.errors import ConfigError
from ..core.files import disk_problem, private_dir, report_disk_problem
from ..core.types import Reply  # also re-exported: Reply lived here before it moved to the contract module
from ..settings.schema import default_cache_dir

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1  # part of every key: bump when the key recipe changes
FILE_NAME = "judge_cache.sqlite3"
SQLITE_SUFFIXES = ("", "-wal", "-shm")  # the database, its write-ahead log and shared-memory index
BUSY_TIMEOUT_S = 60
# SQLite refuses some statements as locked at once, without its busy handler: switching to WAL while
# another connection reads, and a read turning into a write. Opening retries them, pausing this long
# (doubling, with jitter) up to the same BUSY_TIMEOUT_S as every write.
LOCK_PAUSE_S = (0.002, 0.1)
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6
LEASE_POLL_S = 0.2
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26  # primary result codes that mean the file itself is damaged
_TOPIC = "the judge cache"
_CONSEQUENCE = ("This is not damage: the cache is kept as it is. Every reply is still used for its verdict; "
                "replies that could not be stored are paid again by a rerun. Free space there (or set "
                "MATHJUDGE_CACHE_DIR to a folder with room) to keep them. Reported once; the counts are in the "
                "results file (judge run stats: cache_failures)")
_FROZEN_CONSEQUENCE = ("This is not damage: the cache is left as it is and only read in this run (its replies are "
                       "still used). New replies are still used for their verdicts but not stored, so a rerun pays "
                       "for them again; free space there (or set MATHJUDGE_CACHE_DIR to a folder with room) to keep "
                       "them. Reported once; the counts are in the results file (judge run stats: cache_failures)")
_REPLIES = ("CREATE TABLE IF NOT EXISTS {name} (key TEXT PRIMARY KEY, text TEXT NOT NULL, usage TEXT NOT NULL, "
            "finish_reason TEXT, judge TEXT NOT NULL, created REAL NOT NULL)")
_SCHEMA = (
    _REPLIES.format(name="replies"),
    # The snapshot the API reported, beside the reply rather than in it: every released version writes
    # ``INSERT OR REPLACE INTO replies VALUES`` with six values, so ``replies`` keeps its six columns. A
    # snapshot belongs to the reply stored at ``created``: a reply an older version stores over it has none.
    "CREATE TABLE IF NOT EXISTS reply_meta (key TEXT PRIMARY KEY, created REAL NOT NULL, model TEXT, "
    "fingerprint TEXT)",
    "CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, expires REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)",
)
REPLY_COLUMNS = ("key", "text", "usage", "finish_reason", "judge", "created")  # the replies table, in order
SNAPSHOT_COLUMNS = ("model", "fingerprint")  # in reply_meta; a row of ``add_replies`` ends with them
# A file written between the snapshot columns' arrival and reply_meta has them in ``replies`` itself
# (``ALTER TABLE``), which broke the older versions' six-value insert: opening it for writing rebuilds
# ``replies`` with six columns once, moving those snapshots to reply_meta; a file only read keeps them there.
_INSERT_REPLY = (f"INSERT OR REPLACE INTO replies ({', '.join(REPLY_COLUMNS)}) "
                 f"VALUES ({', '.join('?' * len(REPLY_COLUMNS))})")
T = TypeVar("T")
HOSTS_DIR = "hosts"  # host-local caches, one folder per host, used instead of a folder on a network filesystem
_MOVED: set[str] = set()  # network folders already reported in this process
_MOVED_LOCK = threading.Lock()
# Lease owners of this process still open. A lease of this process whose cache was closed without
# dropping it (a full disk refused the delete) belongs to nobody: the next run in the same process
# (a notebook, simple_evaluate twice) takes it over instead of waiting for it to expire.
_OPEN_OWNERS: set[str] = set()


def request_key(payload: dict[str, Any]) -> str:
    """Hash of everything that determines a reply (built by the client).

    ``surrogatepass``: text with a lone surrogate (invalid Unicode) still gets a
    key of its own instead of failing every sample of the task; valid text
    hashes exactly as before, so existing caches stay valid.
    """
    blob = json.dumps({"schema": SCHEMA_VERSION, **payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def place(directory: str, policy: str = "fallback") -> str:
    """The folder the cache opens in: ``directory``, or this host's own when ``directory`` is shared by hosts.

    ``policy`` is the ``cache_network_fs`` setting. The fallback is a private folder named by host,
    under the user cache folder or else the temporary folder, whichever is on a local filesystem.
    """
    mount = mounts.network_filesystem(directory)
    if mount is None or policy == "allow":
        return directory
    what = (f"{directory} is on {mounts.NETWORK_FILESYSTEMS[mount.fstype]} ({mount.fstype}, mounted at "
            f"{mount.point}), where SQLite cannot lock safely between hosts")
    if policy == "refuse":
        raise ConfigError(f"the judge cache folder {what}. Set MATHJUDGE_CACHE_DIR to a folder on a local disk, or "
                          "judge_cache_network_fs=fallback (a folder of this host) or allow (only if one host at a "
                          "time ever uses this cache)")
    for candidate in _host_folders():
        if mounts.network_filesystem(candidate) is None and _own_private_folder(candidate):
            with _MOVED_LOCK:
                first = directory not in _MOVED
                _MOVED.add(directory)
            if first:
                log.warning("the judge cache folder %s, so this run keeps its judge replies in %s (this host's own). "
                            "Fold the hosts' caches together with `mathjudge cache --merge A B --into C`; set "
                            "judge_cache_network_fs=allow if only one host at a time uses the folder, or refuse to "
                            "stop instead", what, candidate)
            return candidate
    raise ConfigError(f"the judge cache folder {what}, and this host has no local folder to use instead; set "
                      "MATHJUDGE_CACHE_DIR to a folder on a local disk (or judge_cache=false)")


def _host_folders() -> list[str]:
    import tempfile  # only on this rare path

    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname()) or "host"
    user = str(os.geteuid()) if hasattr(os, "geteuid") else os.environ.get("USERNAME", "user")
    return [os.path.join(default_cache_dir(), HOSTS_DIR, host),
            os.path.join(tempfile.gettempdir(), f"lm_eval_mathjudge-{user}", HOSTS_DIR, host)]


def _own_private_folder(folder: str) -> bool:
    """Create ``folder`` 0700; False unless it and its parents we made are real folders of this user.

    In a shared temporary folder another user could have made the path first, or a link in its place.
    """
    try:
        private_dir(folder)
        if not hasattr(os, "geteuid"):
            return os.path.isdir(folder)
        path = folder
        for _ in range(3):  # the host folder, "hosts", and the per-user folder
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                return False
            path = os.path.dirname(path)
        return True
    except OSError:
        return False


class ReplyCache:
    def __init__(self, directory: str, network_fs: str = "fallback"):
        directory = place(directory, network_fs)
        private_dir(directory)
        self.directory = os.path.abspath(directory)
        self.path = os.path.join(directory, FILE_NAME)
        self._lock = threading.Lock()
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        _OPEN_OWNERS.add(self._owner)
        self.failures: Counter = Counter()  # what the disk refused, by kind: reply, lease, note, read, open
        self._unstored: dict[str, Reply] = {}  # replies paid for in this process that the disk refused
        self._frozen: BaseException | None = None  # why the file is only read (a disk with no room to open it)
        self._opening = time.monotonic()  # when the current attempt to open began (a lock message says how long)
        self._db = self._open_checked()
        self._select = _reply_select(self._db)  # a file opened read only may be of any version's shape

    # ------------------------------------------------------------------ opening
    def _open_checked(self) -> sqlite3.Connection:
        """Open, check integrity and writability; move a damaged file aside once; read only on a full disk."""
        try:
            return self._open()
        except _Damaged as damage:
            moved = self._move_aside()
            log.warning("the judge cache %s is damaged: %s. Moved it to %s and started a new one. Replies in "
                        "the old file are not lost: it can be inspected or repaired with sqlite3.",
                        self.path, damage, moved)
        except _DiskRefused as refused:
            return self._open_frozen(refused.error)
        try:
            return self._open()
        except _Damaged as damage:  # the fresh file too: the folder, not the file, is the problem
            raise ConfigError(f"the judge cache {self.path} is damaged again right after it was started afresh "
                              f"({damage}); set MATHJUDGE_CACHE_DIR to another folder, or run with "
                              "judge_cache=false") from None
        except _DiskRefused as refused:
            return self._open_frozen(refused.error)

    def _open(self) -> sqlite3.Connection:
        db = None
        self._opening = time.monotonic()
        deadline = self._opening + BUSY_TIMEOUT_S
        try:
            if not os.path.exists(self.path):
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))  # sqlite gives WAL/SHM the same mode
            db = files.open_sqlite(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
            _check_integrity(db, deadline)
            if _until_unlocked(db, "PRAGMA journal_mode", deadline).fetchone()[0] != "wal":
                _until_unlocked(db, "PRAGMA journal_mode = WAL", deadline)
            _until_unlocked(db, "PRAGMA synchronous = NORMAL", deadline)
            for statement in _SCHEMA:
                _until_unlocked(db, statement, deadline)
        except _Damaged:
            _close_quietly(db)
            raise
        except (sqlite3.Error, OSError) as exc:
            _close_quietly(db)
            raise self._open_error(exc) from None
        try:  # writable? A full disk is not damage: the cache is still read, and writes are counted
            _until_unlocked(db, "INSERT OR REPLACE INTO meta VALUES ('last_opened', ?)", deadline, (str(time.time()),))
            _six_columns(db, deadline)  # a disk with no room for the rebuild leaves the file as it is
        except sqlite3.Error as exc:
            if disk_problem(exc) is None:
                _close_quietly(db)
                raise self._open_error(exc) from None
            self.failures["note"] += 1
            report_disk_problem(self.directory, _TOPIC, exc, _CONSEQUENCE)
        _private_files(self.path)
        return db

    def _open_frozen(self, error: BaseException) -> sqlite3.Connection:
        """The disk cannot even open the file for writing (a WAL needs room): read it as it is, write nothing.

        Read-only first (sees a WAL left behind), then immutable (needs no -shm file); a file that
        cannot be read either is left in place and this run starts from an empty in-memory table.
        """
        import urllib.parse  # only on this rare path

        self._frozen = error
        self.failures["open"] += 1
        report_disk_problem(self.directory, _TOPIC, error, _FROZEN_CONSEQUENCE)
        location = "file:" + urllib.parse.quote(os.path.abspath(self.path))
        for query in ("?mode=ro", "?immutable=1"):
            db = None
            try:
                db = files.open_sqlite(location + query, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                                       isolation_level=None)
                _check_integrity(db)
                db.execute("SELECT COUNT(*) FROM replies").fetchone()
                return db
            except (sqlite3.Error, _Damaged) as exc:
                _close_quietly(db)
                log.debug("the judge cache %s cannot be read%s: %s", self.path, query, exc)
        if os.path.isfile(self.path) and os.path.getsize(self.path) > 0:  # not just a new, empty file
            log.warning("the judge cache %s cannot be read on this disk either; it is left in place, and this run "
                        "starts from an empty cache in memory", self.path)
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)  # memory: no disk to fail
        for statement in _SCHEMA:
            db.execute(statement)
        return db

    def _open_error(self, exc: Exception) -> Exception:
        """The ConfigError that says what to do; ``_Damaged`` (the file is broken) or ``_DiskRefused`` (the disk)."""
        text = str(exc).lower()
        if disk_problem(exc) is not None:
            return _DiskRefused(exc)
        if isinstance(exc, OSError) or "readonly" in text or "read-only" in text or "unable to open" in text \
                or "permission" in text:
            return ConfigError(f"the judge cache {self.path} cannot be written ({exc}); make it writable, set "
                               "MATHJUDGE_CACHE_DIR to a writable folder, or run with judge_cache=false")
        if _locked(exc):
            waited = time.monotonic() - self._opening
            return ConfigError(f"the judge cache {self.path} was still locked after {waited:.1f}s of waiting "
                               f"(the limit is {BUSY_TIMEOUT_S}s; {exc}); another process holds it, or the folder "
                               "is on a network file system without locking: use a local MATHJUDGE_CACHE_DIR")
        code = getattr(exc, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == _SQLITE_NOTADB or "not a database" in text:
            return _Damaged(f"it is not an SQLite database ({exc})")
        if primary == _SQLITE_CORRUPT or "malformed" in text:
            return _Damaged(f"it failed its integrity check ({exc})")
        return ConfigError(f"the judge cache {self.path} cannot be opened ({exc}); the file is left as it is. "
                           "Set MATHJUDGE_CACHE_DIR to another folder, or run with judge_cache=false")

    def _move_aside(self) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = f"{self.path}.damaged-{stamp}-{os.getpid()}"
        for suffix in SQLITE_SUFFIXES:
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, target + suffix)
        return target

    # ------------------------------------------------------------------ writes a full disk may refuse
    def _guarded(self, kind: str, work: Callable[[], T], refused: T) -> T:
        """``work()`` under the lock; when the disk (not the file) fails, count it, warn once, return ``refused``."""
        if self._frozen is not None and kind != "read":  # opened read only: the disk has no room at all
            with self._lock:
                self.failures[kind] += 1
            return refused
        with self._lock:
            try:
                return work()
            except BaseException as exc:
                if self._db.in_transaction:  # SQLite may already have rolled back after SQLITE_FULL
                    _rollback_quietly(self._db)
                if not isinstance(exc, (sqlite3.Error, OSError)) or disk_problem(exc) is None:
                    raise
                self.failures[kind] += 1
                error = exc
        report_disk_problem(self.directory, _TOPIC, error, _CONSEQUENCE)
        return refused

    # ------------------------------------------------------------------ replies
    def get(self, key: str) -> Reply | None:
        held = self._unstored.get(key)
        if held is not None:
            return held
        row = self._guarded("read", lambda: self._read(key), None)
        if row is None:
            return None
        return Reply(text=row[0], usage=json.loads(row[1]), finish_reason=row[2], model=row[3], fingerprint=row[4])

    def _read(self, key: str) -> tuple | None:
        try:
            return self._db.execute(self._select, (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such" not in str(exc):
                raise
            self._select = _reply_select(self._db)  # another process rebuilt the file this one only reads
            return self._db.execute(self._select, (key,)).fetchone()

    def put(self, key: str, reply: Reply, judge: str) -> bool:
        """Store ``reply``; False when the disk refused it (it is then kept in memory for this process)."""
        def write() -> bool:
            self._db.execute("BEGIN IMMEDIATE")  # the reply and its snapshot: both or neither
            _store(self._db, (key, reply.text, json.dumps(reply.usage), reply.finish_reason, judge, time.time(),
                              reply.model, reply.fingerprint))
            self._db.execute("COMMIT")
            return True

        stored = self._guarded("reply", write, False)
        if stored:
            self._unstored.pop(key, None)
        else:
            self._unstored[key] = reply
        self.release(key)
        return stored

    # ------------------------------------------------------------------ leases
    def claim(self, key: str, ttl: float) -> bool:
        """True if this cache now owns the right to pay for ``key`` (for ``ttl`` seconds).

        False: another live process is already asking the judge; wait with ``wait_for``.
        A lease the disk refuses to record is True too: this process pays, unshared.
        """
        now = time.time()
        host, pid = self._owner.split(":")[:2]

        def take() -> bool:
            self._db.execute("BEGIN IMMEDIATE")
            row = self._db.execute("SELECT owner, host, pid, expires FROM leases WHERE key = ?", (key,)).fetchone()
            if row is not None and row[0] != self._owner and _lease_live(row, now):
                self._db.execute("COMMIT")
                return False
            self._db.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?, ?)",
                             (key, self._owner, host, int(pid), now + ttl))
            self._db.execute("COMMIT")
            return True

        return self._guarded("lease", take, True)

    def release(self, key: str) -> None:
        self._guarded("lease", lambda: self._db.execute(
            "DELETE FROM leases WHERE key = ? AND owner = ?", (key, self._owner)), None)

    def wait_for(self, key: str, limit: float, sleep=time.sleep) -> Reply | None:
        """Poll until another process stores ``key``'s reply or gives up its lease (bounded by ``limit``).

        None: no reply came (the owner failed, died or ran out of time); the caller claims the key itself.
        """
        deadline = time.monotonic() + limit
        while True:
            reply = self.get(key)
            if reply is not None:
                return reply
            row = self._guarded("read", lambda: self._db.execute(
                "SELECT owner, host, pid, expires FROM leases WHERE key = ?", (key,)).fetchone(), None)
            if row is None or not _lease_live(row, time.time()) or time.monotonic() >= deadline:
                return self.get(key)
            sleep(LEASE_POLL_S)

    # ------------------------------------------------------------------ notes
    def get_meta(self, name: str) -> str | None:
        """A small named value kept beside the replies (e.g. when a judge last passed its preflight)."""
        row = self._guarded("read", lambda: self._db.execute(
            "SELECT value FROM meta WHERE name = ?", (name,)).fetchone(), None)
        return None if row is None else row[0]

    def set_meta(self, name: str, value: str | None) -> None:
        """Store ``value`` under ``name``; None removes it (a full disk only loses the note)."""
        if value is None:
            self._guarded("note", lambda: self._db.execute("DELETE FROM meta WHERE name = ?", (name,)), None)
        else:
            self._guarded("note", lambda: self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                                           (name, value)), None)

    def add_replies(self, rows: list[tuple]) -> tuple[int, int]:
        """Store rows (``REPLY_COLUMNS + SNAPSHOT_COLUMNS``) whose key is not here yet, in one transaction (merge).

        Returns (added, differing): a key already here keeps its reply; ``differing`` counts those whose
        text was not the same. A disk or lock error is raised: the transaction stores all rows or none.
        """
        if self._frozen is not None:
            raise ConfigError(f"the judge cache {self.path} can only be read on this disk ({self._frozen}); "
                              "free space there, or merge into another folder")
        added = differing = 0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for row in rows:
                    held = self._db.execute("SELECT text FROM replies WHERE key = ?", (row[0],)).fetchone()
                    if held is None:
                        _store(self._db, row)
                        added += 1
                    elif held[0] != row[1]:
                        differing += 1
                self._db.execute("COMMIT")
            except BaseException:
                _rollback_quietly(self._db)
                raise
        return added, differing

    # ------------------------------------------------------------------ housekeeping
    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        _OPEN_OWNERS.discard(self._owner)
        with self._lock:
            try:
                self._db.execute("DELETE FROM leases WHERE owner = ?", (self._owner,))
            except sqlite3.Error:
                pass  # closing must not fail because a lease could not be dropped (it expires anyway)
            self._db.close()


class _Damaged(Exception):
    """The file is not a healthy SQLite database (the message says what the check found)."""


class _DiskRefused(Exception):
    """The disk (full, or failing) refused to open the file for writing; the file itself may be fine."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _check_integrity(db: sqlite3.Connection, deadline: float | None = None) -> None:
    status = (db.execute("PRAGMA quick_check") if deadline is None
              else _until_unlocked(db, "PRAGMA quick_check", deadline)).fetchone()[0]
    if status != "ok":
        raise _Damaged(f"it failed its integrity check (PRAGMA quick_check: {status})")


def _reply_columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(replies)")}


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def snapshot_sql(db: sqlite3.Connection) -> tuple[str, str]:
    """(the two snapshot expressions, the join) that read ``replies AS r`` for the file as it is.

    A snapshot is in reply_meta, or (a file the eight-column version wrote, only read) in ``replies``
    itself, or nowhere (a file of the first versions, only read): NULL.
    """
    inline = _reply_columns(db)
    if not _has_table(db, "reply_meta"):
        return ", ".join(f"r.{c}" if c in inline else "NULL" for c in SNAPSHOT_COLUMNS), ""
    return (", ".join(f"COALESCE(m.{c}, r.{c})" if c in inline else f"m.{c}" for c in SNAPSHOT_COLUMNS),
            " LEFT JOIN reply_meta AS m ON m.key = r.key AND m.created = r.created")


def _reply_select(db: sqlite3.Connection) -> str:
    snapshots, join = snapshot_sql(db)
    return f"SELECT r.text, r.usage, r.finish_reason, {snapshots} FROM replies AS r{join} WHERE r.key = ?"


def _store(db: sqlite3.Connection, row: tuple) -> None:
    """One reply row (``REPLY_COLUMNS + SNAPSHOT_COLUMNS``) into both tables; the caller holds the transaction."""
    reply, (model, fingerprint) = row[:len(REPLY_COLUMNS)], row[len(REPLY_COLUMNS):]
    db.execute(_INSERT_REPLY, reply)
    if model is None and fingerprint is None:
        db.execute("DELETE FROM reply_meta WHERE key = ?", (reply[0],))
    else:
        db.execute("INSERT OR REPLACE INTO reply_meta VALUES (?, ?, ?, ?)", (reply[0], reply[5], model, fingerprint))


def _six_columns(db: sqlite3.Connection, deadline: float) -> None:
    """Rebuild a ``replies`` table that has the snapshot columns with the six every version writes, once.

    One transaction (a crash leaves the file as it was); whoever of several processes opening the
    file at once gets the write lock first rebuilds it, and the others find it done.
    """
    if not set(SNAPSHOT_COLUMNS) & _reply_columns(db):
        return
    _until_unlocked(db, "BEGIN IMMEDIATE", deadline)
    try:
        inline = [c if c in _reply_columns(db) else "NULL" for c in SNAPSHOT_COLUMNS]
        if inline != ["NULL"] * len(inline):
            db.execute(f"INSERT OR REPLACE INTO reply_meta SELECT key, created, {', '.join(inline)} FROM replies "
                       f"WHERE {' OR '.join(f'{c} IS NOT NULL' for c in inline if c != 'NULL')}")
            db.execute("DROP TABLE IF EXISTS replies_rebuilt")
            db.execute(_REPLIES.format(name="replies_rebuilt"))
            db.execute(f"INSERT INTO replies_rebuilt SELECT {', '.join(REPLY_COLUMNS)} FROM replies")
            db.execute("DROP TABLE replies")
            db.execute("ALTER TABLE replies_rebuilt RENAME TO replies")
        db.execute("COMMIT")
    except BaseException:
        _rollback_quietly(db)
        raise


def _locked(exc: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock (by result code where Python gives it)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _until_unlocked(db: sqlite3.Connection, statement: str, deadline: float, params: tuple = ()) -> sqlite3.Cursor:
    """``db.execute``, tried again while another connection holds the lock, until ``deadline`` (monotonic)."""
    pause = LOCK_PAUSE_S[0]
    while True:
        try:
            return db.execute(statement, params)
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if not _locked(exc) or left <= 0:
                raise
        time.sleep(min(left, pause * random.uniform(0.5, 1.5)))  # jitter: openers that collided spread out
        pause = min(pause * 2, LOCK_PAUSE_S[1])


def _lease_live(row: tuple, now: float) -> bool:
    owner, host, pid, expires = row
    if expires <= now:
        return False
    if host == socket.gethostname():  # same machine: a dead owner cannot finish
        return owner in _OPEN_OWNERS if int(pid) == os.getpid() else _pid_alive(int(pid))
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


def _rollback_quietly(db: sqlite3.Connection) -> None:
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:
        pass  # nothing left to roll back: the error being handled is the one that matters


def _close_quietly(db: sqlite3.Connection | None) -> None:
    if db is not None:
        try:
            db.close()
        except sqlite3.Error:
            pass
