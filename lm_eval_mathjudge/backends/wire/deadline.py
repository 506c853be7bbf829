"""One wall-clock deadline per exchange, reaching every socket operation.

httpx's timeouts bound each read, not the reply: a server that sends one byte a
second (in the headers or the body) never trips them. So the transport gives each
exchange a ``Deadline``, makes it this thread's (``active``) while the exchange does
I/O, and the connection pool's network backend (``reach_sockets``) shortens every
connect, read and write to the time left. Past the deadline, every operation fails
with the exchange's ``timeout``. The SDK calls we make are synchronous: the thread
that sends a request is the one that reads its reply.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ...core.errors import TransientJudgeError

_local = threading.local()


@dataclass
class Deadline:
    at: float  # on ``clock``'s scale
    seconds: float
    clock: Callable[[], float]
    origin: str  # scheme://host:port of the exchange, for the message
    setting: str  # what raises the deadline, for the message

    def left(self) -> float:
        return self.at - self.clock()

    def bound(self, timeout: float | None) -> float:
        """``timeout`` cut to the time left; the ``timeout`` failure when none is left."""
        left = self.left()
        if left <= 0:
            raise self.error()
        return left if timeout is None else min(timeout, left)

    def error(self) -> TransientJudgeError:
        return TransientJudgeError(
            f"the request to {self.origin} timed out after {self.seconds:g}s without a complete reply (one "
            f"deadline per attempt, from connect to the last byte; retried like any timeout). Raise "
            f"{self.setting} for an endpoint this slow", kind="timeout")


@contextmanager
def active(deadline: Deadline) -> Iterator[None]:
    """``deadline`` bounds the socket operations of this thread inside the block."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = previous


def _bounded(operation: Callable[[float | None], Any], timeout: float | None) -> Any:
    """Run a socket operation within this thread's deadline (if any); one that fails past it is the timeout."""
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return operation(timeout)
    try:
        return operation(deadline.bound(timeout))
    except TransientJudgeError:
        raise
    except Exception as exc:
        if deadline.left() <= 0:
            raise deadline.error() from exc
        raise


class _Stream:
    """An httpcore network stream whose every operation ends by the deadline."""

    def __init__(self, inner: Any):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _bounded(lambda t: self._inner.read(max_bytes, t), timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _bounded(lambda t: self._inner.write(buffer, t), timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        return _Stream(_bounded(lambda t: self._inner.start_tls(ssl_context, server_hostname, t), timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """An httpcore network backend whose connections and streams end by the deadline."""

    def __init__(self, inner: Any):
        self.inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **options: Any) -> _Stream:
        return _Stream(_bounded(lambda t: self.inner.connect_tcp(host, port, timeout=t, **options), timeout))

    def connect_unix_socket(self, path: str, timeout: float | None = None, **options: Any) -> _Stream:
        return _Stream(_bounded(lambda t: self.inner.connect_unix_socket(path, timeout=t, **options), timeout))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def reach_sockets(transport: Any) -> bool:
    """Put the deadline under ``transport``'s connection pool; False when it has no pool we know.

    httpx's ``HTTPTransport`` keeps its httpcore pool in ``_pool`` and the pool its network
    backend in ``_network_backend`` (both private, both unchanged from httpx 0.23 to httpx2
    2.17); ``tests/test_wire.py`` fails if that ever stops being so.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:
        return False
    if not isinstance(backend, _Backend):
        pool._network_backend = _Backend(backend)
    return True
