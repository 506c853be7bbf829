"""Content-Encoding undone here, inside the byte cap: a gzip bomb stops at the cap, never inflated in full.

The SDKs' own decoder (httpx's) inflates whatever arrives. The transport asks only for
``ACCEPTED``, refuses any other encoding, and decodes the reply itself: nested encodings
(``gzip, gzip``) right to left, each stage fed to zlib with an output limit of ``CHUNK``
bytes at a time, and the output of every stage counted against the cap (an inner layer
can be the bomb). The SDK then reads identity-encoded bytes.
"""

from __future__ import annotations

import zlib
from typing import Callable, Iterable, Iterator, Sequence

from ...core.errors import TransientJudgeError

ACCEPTED = "gzip, deflate"  # what the transport asks for: both inflate with the standard library
CHUNK = 64 * 1024  # most bytes one zlib call may produce
MAX_LAYERS = 3  # encodings stacked on one reply; more is no legitimate server (and each costs a zlib window)
_IDENTITY = ("", "identity")


def layers(values: Sequence[str], origin: str) -> list[str]:
    """The encodings to undo, in the order to undo them; a failure for any other encoding."""
    named = [v.strip().lower() for value in values for v in value.split(",")]
    named = [v for v in named if v not in _IDENTITY]
    unknown = sorted({v for v in named if v not in ("gzip", "x-gzip", "deflate")})
    if unknown or len(named) > MAX_LAYERS:
        why = (f"Content-Encoding {', '.join(unknown)}, which was not asked for" if unknown
               else f"{len(named)} stacked Content-Encodings (at most {MAX_LAYERS} are read)")
        raise TransientJudgeError(f"the reply from {origin} came with {why}; it was not read", kind="bad_response")
    return list(reversed(named))


class _Inflate:
    """One zlib stream, inflated at most ``CHUNK`` bytes at a time."""

    def __init__(self, encoding: str, origin: str):
        self._deflate = encoding == "deflate"  # a zlib stream, or (some servers) a raw one
        self._z = zlib.decompressobj(zlib.MAX_WBITS if self._deflate else zlib.MAX_WBITS | 16)
        self._fresh = True  # nothing inflated yet: a deflate stream may still turn out to be raw
        self._origin = origin

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data or not self._z.eof:
            try:
                out = self._z.decompress(data, CHUNK)
            except zlib.error as exc:
                if self._deflate and self._fresh:
                    self._z, self._fresh = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise TransientJudgeError(f"the reply from {self._origin} is not valid {self._name()} data "
                                          f"({exc})", kind="bad_response") from None
            self._fresh = self._fresh and not out
            data = self._z.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < CHUNK:  # input used up, and zlib holds nothing more back
                return

    def finish(self) -> Iterator[bytes]:
        if not self._z.eof:  # a cut stream: keep what inflated (the SDK sees a short body, as httpx would)
            tail = self._z.flush()
            if tail:
                yield tail

    def _name(self) -> str:
        return "deflate" if self._deflate else "gzip"


def decoded(chunks: Iterable[bytes], encodings: Sequence[str], count: Callable[[int, str], None],
            origin: str) -> Iterator[bytes]:
    """``chunks`` with ``encodings`` undone; ``count(n, stage)`` sees every stage's output as it grows."""
    stream: Iterable[bytes] = chunks
    for depth, encoding in enumerate(encodings, 1):
        stage = f"after undoing {depth} of {len(encodings)} Content-Encoding layer(s)"
        stream = _stage(stream, _Inflate(encoding, origin), stage, count)
    return iter(stream)


def _stage(chunks: Iterable[bytes], inflate: _Inflate, stage: str,
           count: Callable[[int, str], None]) -> Iterator[bytes]:
    total = 0
    for chunk in chunks:
        for out in inflate.feed(chunk):
            total += len(out)
            count(total, stage)
            yield out
    for out in inflate.finish():
        total += len(out)
        count(total, stage)
        yield out
