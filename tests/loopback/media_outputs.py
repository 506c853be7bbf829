"""Several outputs per generation call, as the media APIs return them (OpenAI ``n``, Imagen and Veo ``sampleCount``).

``variant(data, i)`` makes the i-th output made for a prompt (counted over all
calls: ``Outputs.numbers``) distinct but still a whole file of its kind (output 0
is the responder's bytes unchanged): a PNG gains a ``tEXt`` chunk before
``IEND``, an MP4 a trailing ``free`` box; ``sample_index`` reads i back. A prompt
only ever asked for one output at a time gets the responder's bytes every time
(a retry or a rerun of a k=1 run sees the same picture). ``Outputs`` counts what
each route returned and plays a short return: ``limit(2)`` makes the next call
return at most 2 of the outputs it asked for.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import Counter, deque

_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"


def variant(data: bytes, index: int) -> bytes:
    """Output ``index`` of one call: distinct bytes for each index, the same kind of whole file."""
    if index == 0 or not data:
        return data
    tag = f"sample {index};".encode()
    if data.startswith(b"\x89PNG") and data.endswith(_IEND):
        body = b"tEXt" + b"Comment\x00" + tag
        chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        return data[:-len(_IEND)] + chunk + _IEND
    if data[4:8] == b"ftyp":
        return data + struct.pack(">I", 8 + len(tag)) + b"free" + tag
    return data + tag


def sample_index(data: bytes) -> int:
    """Which output of its call a file is (``variant``'s tag; 0 when it has none)."""
    for marker in (b"Comment\x00sample ", b"freesample "):
        at = data.rfind(marker)
        if at >= 0:
            return int(data[at + len(marker):].split(b";", 1)[0])
    return 0


class Outputs:
    """Outputs returned per route, and queued short returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._returned: Counter = Counter()
        self._limits: deque[int] = deque()
        self._made: Counter = Counter()  # outputs made per prompt so far, once it was asked for several

    def limit(self, count: int, times: int = 1) -> None:
        """The next ``times`` calls return at most ``count`` outputs each."""
        with self._lock:
            self._limits.extend([count] * times)

    def take(self, asked: int) -> int:
        """How many outputs a call that asked for ``asked`` gets."""
        with self._lock:
            return min(asked, self._limits.popleft()) if self._limits else asked

    def numbers(self, route: str, prompt: str, count: int, asked: int) -> range:
        """Count ``count`` outputs (of ``asked``) returned on ``route`` for ``prompt``; their numbers among that
        prompt's outputs (all 0 while the prompt was never asked for more than one)."""
        with self._lock:
            self._returned[route] += count
            if asked > 1 or prompt in self._made:
                first = self._made[prompt]
                self._made[prompt] += count
                return range(first, first + count)
        return range(count)  # asked for one: output 0

    def count(self, route: str) -> int:
        with self._lock:
            return self._returned[route]
