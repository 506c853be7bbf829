"""Batch job ids in the cache's own SQLite file: which job holds which request keys, and whether it was collected.

Two tables beside the replies (the file is already 0600 and in WAL mode): ``batch_jobs``
(provider, job id, a hash of its key set, size, creation time, last state, collected) and
``batch_keys`` (one row per request key and job). A job is written with all its keys in one
transaction, before the run waits for it, so any later process can find and resume it.
Only provider job ids and request keys (hashes) are stored: never a key or a prompt.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Iterable, Sequence

BUSY_TIMEOUT_S = 60
KEYS_PER_QUERY = 500  # SQLite's default limit on bound parameters is 999


class JobStore:
    """Batch job ids in the cache's SQLite file: which job holds which request keys, and whether it was collected."""

    def __init__(self, path: str):
        self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        self._db.execute("CREATE TABLE IF NOT EXISTS batch_jobs (job_id TEXT PRIMARY KEY, provider TEXT NOT NULL, "
                         "keys_hash TEXT NOT NULL, size INTEGER NOT NULL, created REAL NOT NULL, "
                         "state TEXT NOT NULL, collected INTEGER NOT NULL DEFAULT 0)")
        self._db.execute("CREATE TABLE IF NOT EXISTS batch_keys (key TEXT NOT NULL, job_id TEXT NOT NULL, "
                         "PRIMARY KEY (key, job_id))")

    def __enter__(self) -> "JobStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()

    def save(self, job: str, provider: str, keys: Sequence[str], created: float) -> None:
        """One transaction: a job is recorded with all its keys or not at all."""
        digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("INSERT OR REPLACE INTO batch_jobs VALUES (?, ?, ?, ?, ?, 'submitted', 0)",
                             (job, provider, digest, len(keys), created))
            self._db.executemany("INSERT OR IGNORE INTO batch_keys VALUES (?, ?)", [(k, job) for k in keys])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

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
        self._db.execute("UPDATE batch_jobs SET collected = 1, state = ? WHERE job_id = ?", (state, job))

    def rows(self) -> list[tuple]:
        """Every job row (provider, job id, size, state, collected), for tests and reports."""
        return self._db.execute("SELECT provider, job_id, size, state, collected FROM batch_jobs "
                                "ORDER BY created").fetchall()
