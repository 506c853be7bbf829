"""Replies that misbehave at the HTTP level, for any loopback server.

Each builder returns a ``Reply`` that writes the raw response itself: a responder returns it as
``{"wire": reply}``, or ``server.misbehave(path_part, reply)`` answers any route with it (file
downloads, model lookups). Counters on the builders' objects say how much was actually sent, so
a test asserts on what the client read, never on how long it took.

    drip(body, every)          the reply one byte at a time (``head=True``: the status line and
                               headers too), ``every`` seconds apart
    flood(size)                a 200 whose body is ``size`` bytes (declared, or chunked without a length)
    bomb(inflated, layers)     a small gzip body (``layers`` deep) that inflates to ``inflated`` bytes
    redirect(status, to)       a redirect to ``to`` (another origin, or a path of this one)
"""

from __future__ import annotations

import json
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field

from ._base import Reply

FILL = b'{"choices": [{"message": {"content": "' + b"A" * (1 << 20)  # what a flood repeats


@dataclass
class Sent:
    """What one misbehaving reply wrote, for the test to read back."""
    bytes: int = 0
    done: bool = False  # the whole reply went out (the client read to the end)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, n: int) -> None:
        with self.lock:
            self.bytes += n


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Moved'}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _send(conn: socket.socket, data: bytes, sent: Sent) -> bool:
    """False once the client has hung up."""
    try:
        conn.sendall(data)
    except OSError:
        return False
    sent.add(len(data))
    return True


def drip(body: bytes | dict, every: float, *, head: bool = False, sent: Sent | None = None) -> Reply:
    """A 200 sent one byte every ``every`` seconds (the body; with ``head``, the headers too)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = sent if sent is not None else Sent()
    start = _head(200, {"Content-Type": "application/json", "Content-Length": str(len(data))})

    def write(conn: socket.socket) -> None:
        payload, first = start + data, 0 if head else len(start)
        if first and not _send(conn, payload[:first], sent):
            return
        for i in range(first, len(payload)):
            time.sleep(every)
            if not _send(conn, payload[i:i + 1], sent):
                return
        sent.done = True

    return Reply(write=write)


def flood(size: int, *, declare: bool = True, sent: Sent | None = None) -> Reply:
    """A 200 whose body is ``size`` bytes of one long JSON string, declared or chunked (no Content-Length)."""
    sent = sent if sent is not None else Sent()
    headers = {"Content-Type": "application/json"}
    headers.update({"Content-Length": str(size)} if declare else {"Transfer-Encoding": "chunked"})

    def write(conn: socket.socket) -> None:
        if not _send(conn, _head(200, headers), sent):
            return
        left = size
        while left > 0:
            piece = FILL[:min(left, len(FILL))]
            left -= len(piece)
            frame = piece if declare else b"%x\r\n%s\r\n" % (len(piece), piece)
            if not _send(conn, frame, sent):
                return
        if declare or _send(conn, b"0\r\n\r\n", sent):
            sent.done = True

    return Reply(write=write)


_BOMBS: dict[tuple[int, int], bytes] = {}
_BOMBS_LOCK = threading.Lock()


def bomb_body(inflated: int, layers: int) -> bytes:
    """Zeros, ``inflated`` of them, gzipped ``layers`` times (made once per process, whatever asks at once)."""
    with _BOMBS_LOCK:
        if (inflated, layers) not in _BOMBS:
            data = _gzip_zeros(inflated)
            for _ in range(layers - 1):
                data = zlib.compress(data, 9, wbits=31)
            _BOMBS[inflated, layers] = data
        return _BOMBS[inflated, layers]


def _gzip_zeros(n: int) -> bytes:
    """A valid gzip of n zeros (n a whole number of MiB), built without compressing n bytes: after a full
    flush every MiB of zeros compresses to the same bytes, so one MiB's worth is repeated."""
    block = bytes(1 << 20)
    blocks, rest = divmod(n, len(block))
    assert blocks and not rest, "a whole number of MiB"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
    again = z.compress(block) + z.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(blocks):
        crc = zlib.crc32(block, crc)
    # an empty final block, then the gzip trailer: CRC-32 and length (mod 2**32) of the whole
    return first + again * (blocks - 1) + b"\x03\x00" + crc.to_bytes(4, "little") + (n % 2**32).to_bytes(4, "little")


def bomb(inflated: int, layers: int = 1, *, sent: Sent | None = None) -> Reply:
    """A 200 with Content-Encoding ``gzip`` (``gzip, gzip``, ...) whose body inflates to ``inflated`` bytes."""
    sent = sent if sent is not None else Sent()
    data = bomb_body(inflated, layers)
    headers = {"Content-Type": "application/json", "Content-Encoding": ", ".join(["gzip"] * layers),
               "Content-Length": str(len(data))}

    def write(conn: socket.socket) -> None:
        if _send(conn, _head(200, headers) + data, sent):
            sent.done = True

    return Reply(write=write)


def redirect(status: int, to: str) -> Reply:
    """A redirect (301/302/303/307/308) to ``to``: an absolute URL or a path of this server."""
    return Reply(status, b"", {"Location": to, "Content-Type": "text/plain"})
