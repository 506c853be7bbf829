"""Is a generated file whole? A download or a base64 payload cut short must never be stored.

Magic bytes (``media.sniff``) say what a file claims to be; these checks say
whether it ends where its own structure says it ends. Formats without a cheap
end marker (WebP, WebM, GIF) pass here and are judged on their magic bytes.
"""

from __future__ import annotations


def media_problem(data: bytes, mime: str) -> str | None:
    """Why ``data`` is not a complete file of its kind (PNG, JPEG, MP4/MOV), or None."""
    if mime == "image/png":
        return None if data.endswith(b"IEND\xaeB`\x82") else "the PNG has no IEND chunk (cut short)"
    if mime == "image/jpeg":
        return None if data.rstrip(b"\x00").endswith(b"\xff\xd9") else "the JPEG has no end marker (cut short)"
    if mime in ("video/mp4", "video/quicktime"):
        return _iso_boxes_problem(data)
    return None


def _iso_boxes_problem(data: bytes) -> str | None:
    """Top-level ISO BMFF boxes must tile the file exactly, with an ftyp box first."""
    if data[4:8] != b"ftyp":
        return "the video does not start with an ftyp box"
    offset = 0
    while offset < len(data):
        if len(data) - offset < 8:
            return f"{len(data) - offset} stray bytes after the last box"
        size = int.from_bytes(data[offset:offset + 4], "big")
        if size == 1:  # a 64-bit size follows the type
            size = int.from_bytes(data[offset + 8:offset + 16], "big") if len(data) - offset >= 16 else 0
        elif size == 0:  # the box runs to the end of the file
            return None
        if size < 8 or offset + size > len(data):
            box = data[offset + 4:offset + 8].decode("latin-1")
            return f"box {box!r} at byte {offset} needs {size} bytes, the file has {len(data) - offset} left (cut short)"
        offset += size
    return None
