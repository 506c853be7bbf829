"""Content-addressed store of generated media, so each generation is paid for once.

Layout under ``media_dir`` (folders 0700, files 0600):

    <sha256>.<ext>       the media bytes, named by their own hash
    index.sqlite3        request key -> file; failures worth remembering; started jobs, and which
                         of its job's outputs each key takes

A request key is the hash of everything that shapes the output: adapter, model,
normalised options and the exact prompt text (``request_key``), plus the sample
index when a task asks for k samples per problem (sample 0 has the key it had
before k samples existed, so older folders keep working). Files are
written to a temporary name, fsynced and renamed into place, and indexed only
after the rename: a run killed at any moment leaves either a complete file or
no index row, never a half-written file that is used. A vendor job id is
recorded the moment the job is started, so a rerun after a crash polls that job
instead of paying for a new one; a job that makes several samples at once is
recorded under each of their keys with the position of that key's output among
the job's outputs (``job_outputs``, a side table so that older versions sharing
the folder keep writing ``jobs`` as they did), and its outputs are indexed, and
the job released, in one transaction. A rerun after only some of a job's samples
were stored (a full disk midway, or a run with a smaller k) takes each remaining
key's own output, not the first ones again.

The index is SQLite in WAL mode like the judge cache: several processes may
share one media folder.

A full or failing disk (``files.disk_problem``) is not damage. Media bytes that
cannot be written stop further generation (``FatalJudgeError`` kind
``disk_full``: every further file would be paid for and lost) with a message
naming the folder and its free space; an index row the disk refuses (a file
already written, a remembered failure, a started job) loses only that row, with
one warning per folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ..core import files
from ..core.errors import ConfigError, FatalJudgeError
from ..core.files import describe_disk_problem, disk_problem, report_disk_problem, write_atomic
from ..core.media import IMAGE_TYPES, VIDEO_TYPES

SCHEMA_VERSION = 1  # part of every key: bump when the key recipe changes
INDEX_NAME = "index.sqlite3"
_TMP_PREFIX = ".partial-"
_STALE_TMP_SECONDS = 24 * 3600  # leftovers of killed runs older than this are removed
_INDEX_TOPIC = "the media index"
_INDEX_CONSEQUENCE = ("This is not damage. Files already written are still used in this run; what the index could "
                      "not record (a file, a remembered failure, a started video job) is generated again by a "
                      "rerun. Free space there to keep it")
EXTENSIONS = {mime: ext for ext, mime in reversed(list({**IMAGE_TYPES, **VIDEO_TYPES}.items()))}  # .jpg over .jpeg

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS media (key TEXT PRIMARY KEY, file TEXT NOT NULL, sha256 TEXT NOT NULL, "
    "size INTEGER NOT NULL, mime TEXT NOT NULL, label TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, kind TEXT NOT NULL, message TEXT NOT NULL, "
    "label TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (key TEXT PRIMARY KEY, job_id TEXT NOT NULL, label TEXT NOT NULL, "
    "created REAL NOT NULL)",
    # A row counts only beside a jobs row of the same job_id: an older version replaces or deletes jobs rows
    # without touching this table.
    "CREATE TABLE IF NOT EXISTS job_outputs (key TEXT PRIMARY KEY, job_id TEXT NOT NULL, position INTEGER NOT NULL)",
)


def request_key(adapter: str, model: str, options: dict[str, Any], prompt: str, sample: int = 0) -> str:
    """The key of sample ``sample`` (0..k-1) of one prompt; sample 0's key is the one k=1 runs always had."""
    recipe: dict[str, Any] = {"schema": SCHEMA_VERSION, "adapter": adapter, "model": model, "options": options,
                              "prompt": prompt}
    if sample:
        recipe["sample"] = sample
    blob = json.dumps(recipe, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredMedia:
    path: str
    sha256: str
    size: int
    mime_type: str


class MediaStore:
    def __init__(self, directory: str):
        self.directory = os.path.abspath(os.path.expanduser(directory))
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        self.index_path = os.path.join(self.directory, INDEX_NAME)
        self._lock = threading.Lock()
        self._db = files.open_sqlite(self.index_path, timeout=60, check_same_thread=False, isolation_level=None)
        _private(self.index_path)
        try:
            self._db.execute("PRAGMA busy_timeout = 60000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")  # an indexed file must survive a power cut too
            for statement in _SCHEMA:
                self._db.execute(statement)
        except sqlite3.Error as exc:
            self._db.close()
            if disk_problem(exc) is None:
                raise
            raise ConfigError(f"the media index {self.index_path} cannot be opened: "
                              f"{describe_disk_problem(self.directory, exc)}. Nothing was generated; free space "
                              "there or pass media_dir=... on a disk with room") from None
        self._remove_stale_partials()

    def _guarded(self, work: Callable[[], Any]) -> bool:
        """One index write under the lock; False (warned once per folder) when the disk refused it."""
        with self._lock:
            try:
                work()
                return True
            except sqlite3.Error as exc:
                if self._db.in_transaction:  # SQLite may already have rolled back after SQLITE_FULL
                    self._db.execute("ROLLBACK")
                if disk_problem(exc) is None:
                    raise
                error = exc
        report_disk_problem(self.directory, _INDEX_TOPIC, error, _INDEX_CONSEQUENCE)
        return False

    # ------------------------------------------------------------------ media
    def find(self, key: str) -> StoredMedia | None:
        """The stored media for a request key, if its file is still there and whole."""
        with self._lock:
            row = self._db.execute("SELECT file, sha256, size, mime FROM media WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        path = os.path.join(self.directory, row[0])
        try:
            if os.path.getsize(path) == row[2]:
                return StoredMedia(path, row[1], row[2], row[3])
        except OSError:
            pass
        return None  # deleted or damaged by hand: generate again

    def put(self, key: str, data: bytes, mime_type: str, label: str) -> StoredMedia:
        """Write the bytes under their hash (atomically), then index them for ``key``."""
        return self.put_many([(key, data, mime_type)], label)[0]

    def put_many(self, entries: list[tuple[str, bytes, str]], label: str,
                 release: tuple[str, ...] = ()) -> list[StoredMedia]:
        """Write each (key, bytes, mime) (atomically), then index them all and drop the jobs of their keys and of
        ``release`` (the other keys of the job that made them) in one transaction."""
        stored: list[tuple[str, StoredMedia]] = []
        problem: FatalJudgeError | None = None
        for key, data, mime_type in entries:
            try:
                stored.append((key, self._write(data, mime_type)))
            except FatalJudgeError as exc:  # a full disk: index what is written (it was paid for), then stop
                problem = exc
                break

        def index() -> None:
            for key, media in stored:
                self._db.execute("INSERT OR REPLACE INTO media VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 (key, os.path.basename(media.path), media.sha256, media.size, media.mime_type,
                                  label, time.time()))
                self._db.execute("DELETE FROM failures WHERE key = ?", (key,))
            # The keys of a job stopped by a full disk keep it (and their positions in it) for the rerun.
            self._drop_jobs({key for key, _ in stored} | (set(release) if problem is None else set()))

        if stored:  # not indexed: still this run's answer (the file is whole), made again by a rerun
            self._guarded(lambda: self._transaction(index))
        if problem is not None:
            raise problem
        return [media for _, media in stored]

    def _write(self, data: bytes, mime_type: str) -> StoredMedia:
        sha = hashlib.sha256(data).hexdigest()
        path = os.path.join(self.directory, f"{sha}{EXTENSIONS[mime_type]}")
        if not (os.path.isfile(path) and os.path.getsize(path) == len(data)):
            try:
                write_atomic(path, data, tmp=os.path.join(self.directory, f"{_TMP_PREFIX}{uuid.uuid4().hex}"))
            except OSError as exc:
                if disk_problem(exc) is None:
                    raise
                raise FatalJudgeError(
                    f"cannot save the generated {mime_type} ({len(data)} bytes) in {self.directory}: "
                    f"{describe_disk_problem(self.directory, exc)}. Nothing more is generated in this run (each "
                    "file would be paid for and lost); free space there, or pass media_dir=... on a disk with "
                    "room, and rerun: the files already stored are reused", kind="disk_full") from None
        return StoredMedia(path, sha, len(data), mime_type)

    def _remove_stale_partials(self) -> None:
        cutoff = time.time() - _STALE_TMP_SECONDS
        for entry in os.scandir(self.directory):
            if entry.name.startswith(_TMP_PREFIX):
                try:
                    if entry.stat().st_mtime < cutoff:  # a younger one may belong to a run still writing
                        os.unlink(entry.path)
                except OSError:
                    pass

    # ------------------------------------------------------------------ failures
    def failure(self, key: str) -> tuple[str, str] | None:
        with self._lock:
            row = self._db.execute("SELECT kind, message FROM failures WHERE key = ?", (key,)).fetchone()
        return None if row is None else (row[0], row[1])

    def put_failure(self, key: str, kind: str, message: str, label: str) -> None:
        self._guarded(lambda: self._db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?)",
                                               (key, kind, message, label, time.time())))

    # ------------------------------------------------------------------ long-running jobs
    def job(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT job_id FROM jobs WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def jobs(self, keys: tuple[str, ...]) -> dict[str, tuple[str, int | None]]:
        """The recorded job of each of ``keys`` that has one, and the position of the key's output among the
        job's outputs (None: recorded by a version that kept no positions)."""
        found = {}
        with self._lock:
            for key in keys:
                row = self._db.execute(
                    "SELECT j.job_id, o.position FROM jobs j LEFT JOIN job_outputs o "
                    "ON o.key = j.key AND o.job_id = j.job_id WHERE j.key = ?", (key,)).fetchone()
                if row is not None:
                    found[key] = (row[0], row[1])
        return found

    def record_job(self, key: str | tuple[str, ...], job_id: str, label: str) -> bool:
        """Committed before it returns: on disk before the first poll (False: the disk refused it).
        A job making several samples is recorded under each of their keys, ``keys[i]`` taking output i."""
        keys = (key,) if isinstance(key, str) else key
        now = time.time()

        def record() -> None:
            self._db.executemany("INSERT OR REPLACE INTO jobs (key, job_id, label, created) VALUES (?, ?, ?, ?)",
                                 [(k, job_id, label, now) for k in keys])
            self._db.executemany("INSERT OR REPLACE INTO job_outputs (key, job_id, position) VALUES (?, ?, ?)",
                                 [(k, job_id, i) for i, k in enumerate(keys)])

        return self._guarded(lambda: self._transaction(record))

    def forget_job(self, key: str | tuple[str, ...]) -> None:
        keys = (key,) if isinstance(key, str) else key
        self._guarded(lambda: self._transaction(lambda: self._drop_jobs(keys)))

    def _drop_jobs(self, keys) -> None:
        for table in ("jobs", "job_outputs"):
            self._db.executemany(f"DELETE FROM {table} WHERE key = ?", [(k,) for k in keys])

    def _transaction(self, work: Callable[[], None]) -> None:
        """Several statements, all or none (the connection autocommits each statement on its own)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            work()
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {table: self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                    for table in ("media", "failures", "jobs")}

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _private(path: str) -> None:
    try:
        os.chmod(path, 0o600)
    except OSError:  # e.g. a file system without modes: the folder's 0700 still applies
        pass
