"""Small, real media files built in code, so no binary fixture is committed.

Each function returns the bytes of a valid file of its format: images decode
to a tiny picture; the video containers carry real headers and a size-controlled
payload (enough for MIME sniffing, upload paths and size thresholds).
"""

from __future__ import annotations

import struct
import zlib


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width: int = 8, height: int = 8, rgb: tuple[int, int, int] = (255, 0, 0)) -> bytes:
    """An RGB PNG of one flat colour."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))  # filter 0 per row
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(rows)) + _png_chunk(b"IEND", b""))


def gif() -> bytes:
    """A 1x1 GIF89a (two-colour palette, one black pixel)."""
    return (b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff"
            + b",\x00\x00\x00\x00\x01\x00\x01\x00\x00" + b"\x02\x02\x44\x01\x00" + b";")


def jpeg() -> bytes:
    """A 1x1 grey baseline JPEG: one block whose DC and AC symbols each take a 1-bit code."""
    def segment(marker: int, body: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body

    dqt = segment(0xDB, b"\x00" + b"\x01" * 64)  # table 0, all ones
    sof = segment(0xC0, struct.pack(">BHHB", 8, 1, 1, 1) + b"\x01\x11\x00")  # 1 component, table 0
    one_code = b"\x01" + b"\x00" * 15  # a single code of length 1 ...
    dht = segment(0xC4, b"\x00" + one_code + b"\x00"  # ... DC table 0: category 0 (no difference)
                  + b"\x10" + one_code + b"\x00")  # ... AC table 0: symbol 0x00 = end of block
    sos = segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
    return b"\xff\xd8" + dqt + sof + dht + sos + b"\x3f" + b"\xff\xd9"  # bits 00 then 1-padding


class _Bits:
    """LSB-first bit writer (the VP8L bit order)."""

    def __init__(self) -> None:
        self.value, self.count = 0, 0

    def put(self, value: int, nbits: int) -> _Bits:
        self.value |= value << self.count
        self.count += nbits
        return self

    def bytes(self) -> bytes:
        return self.value.to_bytes((self.count + 7) // 8, "little")


def webp(rgba: tuple[int, int, int, int] = (255, 0, 0, 255)) -> bytes:
    """A 1x1 lossless WebP (VP8L) whose five prefix codes each hold a single symbol."""
    r, g, b, a = rgba
    bits = _Bits().put(0, 14).put(0, 14).put(1, 1).put(0, 3)  # width-1, height-1, alpha used, version 0
    bits.put(0, 1).put(0, 1).put(0, 1)  # no transform, no colour cache, no meta prefix codes
    for symbol in (g, r, b, a, 0):  # green, red, blue, alpha, distance: "simple" codes, one 8-bit symbol
        bits.put(1, 1).put(0, 1).put(1, 1).put(symbol, 8)
    data = b"\x2f" + bits.bytes()
    chunk = b"VP8L" + struct.pack("<I", len(data)) + data + b"\x00" * (len(data) % 2)
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def _box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", 8 + len(body)) + kind + body


def _iso_bmff(brand: bytes, payload_bytes: int) -> bytes:
    ftyp = _box(b"ftyp", brand + struct.pack(">I", 0x200) + brand + b"iso2mp41")
    matrix = struct.pack(">9I", 0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x40000000)
    mvhd = _box(b"mvhd", struct.pack(">IIIII", 0, 0, 0, 1000, 1000)  # version/flags, times, timescale, 1 s
                + struct.pack(">IH", 0x10000, 0x100) + b"\x00" * 10 + matrix + b"\x00" * 24
                + struct.pack(">I", 2))
    return ftyp + _box(b"moov", mvhd) + _box(b"mdat", bytes(i % 251 for i in range(payload_bytes)))


def mp4(payload_bytes: int = 1024) -> bytes:
    """ISO BMFF (brand isom): ftyp, moov/mvhd, then an mdat of exactly ``payload_bytes`` filler bytes."""
    return _iso_bmff(b"isom", payload_bytes)


def mov(payload_bytes: int = 1024) -> bytes:
    """QuickTime: the same layout under brand 'qt  '."""
    return _iso_bmff(b"qt  ", payload_bytes)


def _ebml(element_id: bytes, body: bytes) -> bytes:
    return element_id + bytes([0x01]) + struct.pack(">Q", len(body))[1:] + body  # 8-byte size field


def webm(payload_bytes: int = 64) -> bytes:
    """Matroska/WebM: an EBML header with DocType webm, then a Segment holding a Void filler."""
    header = b"".join([b"\x42\x86\x81\x01", b"\x42\xf7\x81\x01", b"\x42\xf2\x81\x04", b"\x42\xf3\x81\x08",
                       b"\x42\x82\x84webm", b"\x42\x87\x81\x04", b"\x42\x85\x81\x02"])
    return _ebml(b"\x1a\x45\xdf\xa3", header) + _ebml(b"\x18\x53\x80\x67", _ebml(b"\xec", bytes(payload_bytes)))
