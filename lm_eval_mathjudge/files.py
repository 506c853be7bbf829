"""Private folders and atomic writes: the two file rules shared by the cache, recovery and media store.

Everything the plugin writes may hold what a run paid for (replies, generations, media), so
folders it creates are 0700, files are 0600, and a file appears whole or not at all (a temporary
file beside it, fsync, rename, then fsync of the folder so the rename survives a crash).
"""

from __future__ import annotations

import os


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
