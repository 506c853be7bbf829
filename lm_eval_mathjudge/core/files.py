"""The file rules shared by the cache, recovery, batch job records and the media store.

Everything the plugin writes may hold what a run paid for (replies, generations, media), so
folders it creates are 0700, files are 0600, and a file appears whole or not at all (a temporary
file beside it, fsync, rename, then fsync of the folder so the rename survives a crash).

A full or failing disk is not a damaged file. ``disk_problem`` tells the two apart (ENOSPC,
EDQUOT, EIO; SQLite's ``database or disk is full`` and ``disk I/O error``), and
``report_disk_problem`` says so once per folder and topic per process, with the free space:
a run on a full disk warns once instead of once per reply.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Any

log = logging.getLogger(__name__)

DISK_FULL = "the disk is full"
DISK_IO = "the disk reported an I/O error"
_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}
_SQLITE_IOERR, _SQLITE_FULL = 10, 13  # primary result codes (the low byte of an extended code)
_REPORTED: set[tuple[str, str]] = set()
_REPORTED_LOCK = threading.Lock()


def private_dir(directory: str) -> None:
    """Create missing folders 0700 (an existing folder keeps its mode: it may be shared on purpose)."""
    missing = []
    path = os.path.abspath(directory)
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask


def write_atomic(path: str, data: str | bytes, *, tmp: str | None = None) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through ``tmp`` (default: beside it), mode 0600."""
    tmp = tmp or f"{path}.tmp-{os.getpid()}"
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(os.path.dirname(path) or ".")


def append_line(path: str, line: str) -> None:
    """Append one record (a line) to ``path`` (created 0600) in one write, fsynced before returning: a kill
    leaves whole records, at most the last one cut short (a reader skips a last line without its newline)."""
    created = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        payload = line.encode("utf-8")
        while payload:
            payload = payload[os.write(fd, payload):]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def open_sqlite(path: str, **options: Any) -> Any:
    """Every SQLite file the plugin keeps (judge cache, batch jobs, media index) is opened here.

    One place, so a test can wrap the connections to make the disk fail on cue.
    """
    import sqlite3  # here: the folder and file rules above need no database

    return sqlite3.connect(path, **options)


def disk_problem(exc: BaseException) -> str | None:
    """``DISK_FULL`` or ``DISK_IO`` when ``exc`` is the disk failing (not the file), else None.

    SQLite errors are read by their result code where Python gives it (3.11+), else by
    SQLite's fixed wording; OSErrors by errno.
    """
    if isinstance(exc, OSError):
        if exc.errno in _FULL_ERRNOS:
            return DISK_FULL
        return DISK_IO if exc.errno == errno.EIO else None
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return {_SQLITE_FULL: DISK_FULL, _SQLITE_IOERR: DISK_IO}.get(code & 0xFF)
    text = str(exc).lower()
    if "database or disk is full" in text:
        return DISK_FULL
    return DISK_IO if "disk i/o error" in text else None


def free_space(folder: str) -> str:
    """``"12.0 KiB free of 300.0 KiB"`` for the disk holding ``folder`` (or what can be told)."""
    import shutil  # only when a disk has failed

    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return "free space unknown"
    return f"{_size(usage.free)} free of {_size(usage.total)}"


def describe_disk_problem(folder: str, exc: BaseException) -> str:
    """What happened, in words: ``disk I/O error (the disk reported an I/O error; 0 B free of 1 GiB in /x)``."""
    what = disk_problem(exc) or "a write failed"
    return f"{exc} ({what}; {free_space(folder)} in {folder})"


def report_disk_problem(folder: str, topic: str, exc: BaseException, consequence: str) -> bool:
    """Warn once per (folder, topic) in this process that ``topic`` cannot be written; True when this call warned."""
    key = (os.path.abspath(folder), topic)
    with _REPORTED_LOCK:
        if key in _REPORTED:
            return False
        _REPORTED.add(key)
    log.warning("%s cannot be written: %s. %s", topic, describe_disk_problem(folder, exc), consequence)
    return True


def _size(count: float) -> str:
    if count < 1024:
        return f"{count:.0f} B"
    for unit in ("KiB", "MiB"):
        count /= 1024
        if count < 1024:
            return f"{count:.1f} {unit}"
    return f"{count / 1024:.1f} GiB"
