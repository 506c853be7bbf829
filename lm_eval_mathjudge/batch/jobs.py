"""Batch job ids in the cache's own SQLite file: which job holds which request keys, and whether it was collected.

Two tables beside the replies (the file is already 0600 and in WAL mode): ``batch_jobs``
(provider, job id, a hash of its key set, size, creation time, last state, collected) and
``batch_keys`` (one row per request key and job). A job is written with all its keys in one
transaction, before the run waits for it, so any later process can find and resume it.
Only provider job ids and request keys (hashes) are stored: never a key or a prompt.

A full or failing disk (``files.disk_problem``) does not stop the run: the job table moves to
memory for the rest of this process (the run still waits for and collects its jobs), with one
warning naming the job ids that could not be recorded, since a rerun cannot find those.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from typing import Callable, Iterable, Sequence

from ..core import files
from ..core.files import disk_problem, report_disk_problem

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 60
KEYS_PER_QUERY = 500  # SQLite's default limit on bound parameters is 999
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batch_jobs (job_id TEXT PRIMARY KEY, provider TEXT NOT NULL, "
    "keys_hash TEXT NOT NULL, size INTEGER NOT NULL, created REAL NOT NULL, "
    "state TEXT NOT NULL, collected INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS batch_keys (key TEXT NOT NULL, job_id TEXT NOT NULL, PRIMARY KEY (key, job_id))",
)
_TABLES = ("batch_jobs", "batch_keys")


class JobStore:
    """Batch job ids in the cache's SQLite file: which job holds which request keys, and whether it was collected."""

    def __init__(self, path: str):
        self._path = path
        self.in_memory = False  # True once a full disk moved the job table to memory (this process only)
        self._db = files.open_sqlite(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        self._write(lambda db: [db.execute(statement) for statement in _SCHEMA])

    def _write(self, work: Callable[[sqlite3.Connection], object]) -> None:
        """One write; when the disk refuses it, the job table goes on in memory (warned once per folder)."""
        try:
            work(self._db)
            return
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            if disk_problem(exc) is None:
                raise
            error = exc
        self._to_memory()
        work(self._db)
        report_disk_problem(os.path.dirname(os.path.abspath(self._path)), "the batch job records", error,
                            "This is not damage. The job table is kept in memory for this run, which still waits "
                            "for and collects its jobs; free space there to keep job records across runs")

    def _to_memory(self) -> None:
        """Copy the job tables (not the replies) into an in-memory database and use that from now on."""
        memory = sqlite3.connect(":memory:", isolation_level=None)
        for statement in _SCHEMA:
            memory.execute(statement)
        for table in _TABLES:
            try:
                rows = self._db.execute(f"SELECT * FROM {table}").fetchall()
            except sqlite3.Error:  # never created (the disk was full from the start)
                rows = []
            if rows:
                memory.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)
        self._db.close()
        self._db, self.in_memory = memory, True

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def save(self, job: str, provider: str, keys: Sequence[str], created: float) -> None:
        """One transaction: a job is recorded with all its keys or not at all."""
        digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()

        def record(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT OR REPLACE INTO batch_jobs VALUES (?, ?, ?, ?, ?, 'submitted', 0)",
                           (job, provider, digest, len(keys), created))
                db.executemany("INSERT OR IGNORE INTO batch_keys VALUES (?, ?)", [(k, job) for k in keys])
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite may already have rolled back after SQLITE_FULL
                    db.execute("ROLLBACK")
                raise

        self._write(record)
        if self.in_memory:  # each one: a rerun after a stop cannot find it, so its id must be in the log
            log.warning("batch: job %s (%d requests) is recorded in memory only (the disk under the cache refused "
                        "the write): if this run stops before collecting it, a rerun cannot resume it", job,
                        len(keys))

    def open_jobs(self, provider: str, keys: Iterable[str]) -> list[str]:
        """Uncollected jobs of this provider that hold any of ``keys``, oldest first."""
        keys = list(keys)
        found: set[str] = set()
        for start in range(0, len(keys), KEYS_PER_QUERY):
            part = keys[start:start + KEYS_PER_QUERY]
            rows = self._db.execute(
                f"SELECT DISTINCT j.job_id FROM batch_keys k JOIN batch_jobs j ON j.job_id = k.job_id WHERE "
                f"j.collected = 0 AND j.provider = ? AND k.key IN ({','.join('?' * len(part))})", (provider, *part))
            found.update(row[0] for row in rows)
        if not found:
            return []
        order = self._db.execute(f"SELECT job_id FROM batch_jobs WHERE job_id IN ({','.join('?' * len(found))}) "
                                 "ORDER BY created, job_id", tuple(found))
        return [row[0] for row in order]

    def uncollected(self, provider: str) -> list[str]:
        """Every job of this provider not collected yet, oldest first."""
        return [row[0] for row in self._db.execute(
            "SELECT job_id FROM batch_jobs WHERE collected = 0 AND provider = ? ORDER BY created, job_id", (provider,))]

    def keys(self, job: str) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT key FROM batch_keys WHERE job_id = ?", (job,))]

    def oldest(self, jobs: Sequence[str]) -> float:
        rows = self._db.execute(f"SELECT MIN(created) FROM batch_jobs WHERE job_id IN ({','.join('?' * len(jobs))})",
                                tuple(jobs)).fetchone()
        return float(rows[0])

    def finish(self, job: str, state: str) -> None:
        self._write(lambda db: db.execute("UPDATE batch_jobs SET collected = 1, state = ? WHERE job_id = ?",
                                          (state, job)))

    def rows(self) -> list[tuple]:
        """Every job row (provider, job id, size, state, collected), for tests and reports."""
        return self._db.execute("SELECT provider, job_id, size, state, collected FROM batch_jobs "
                                "ORDER BY created").fetchall()
