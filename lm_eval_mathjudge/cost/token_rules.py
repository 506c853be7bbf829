"""Prompt tokens of a judge request, estimated without a tokenizer or a call (used by ``cost.estimate``).

* Text (``text_tokens``): ASCII letters and whitespace at ``WORD_CHARS_PER_TOKEN``
  (4.8) characters per token, digits at ``DIGITS_PER_TOKEN`` (2.5), every other
  character (LaTeX symbols, punctuation, non-Latin scripts) one token each, over the
  prompt and the separate output part, + ``MESSAGE_OVERHEAD`` per request (OpenAI's
  count for one chat message and the reply's start). Fitted to OpenAI's cl100k_base
  and o200k_base tokenizers on the judge prompts of all five data sets
  (``bench/token_estimate.py``): within -1%..+13% of the real total on each set,
  where the plain four-characters rule undercounts LaTeX-heavy sets by up to 29%.
  Gemini's tokenizer could not be measured here.
* Images (dimensions read from the PNG, GIF, WebP or JPEG header), by the vendor
  record's rule (``image_tokens``): OpenAI high detail counts 85 + 170 per 512-px
  tile after fitting the image in 2048x2048 and its short side in 768 px; Gemini
  counts 258 for an image up to 384x384, else 258 per 768x768 tile; Claude counts
  width x height / 750 within 1568 px (28-px patches within 2576 px from Claude 4.7
  on). An image whose header cannot be read counts as 1024x1024.
* Video (only a vendor with ``video_tokens_per_second``, Gemini: the others refuse
  video before sending): that many per second, the duration read from the MP4/MOV
  movie header; other containers count as ``DEFAULT_VIDEO_SECONDS``.

The media rules are the providers' documented ones as of their records' price dates;
like the prices, check them.
"""

from __future__ import annotations

import io
import math
import string
import struct
from typing import Any

from .. import vendors
from ..core.types import JudgeRequest, Media

WORD_CHARS_PER_TOKEN = 4.8  # ASCII letters and whitespace
DIGITS_PER_TOKEN = 2.5
MESSAGE_OVERHEAD = 7  # tokens of the chat wrapper around one user message and the reply's start
_DROP_WORDY = {ord(c): None for c in string.ascii_letters + string.whitespace}
_DROP_DIGITS = {ord(c): None for c in string.digits}

# Media: each vendor's rules are in its record (vendors/<vendor>.py: image_tokens, video_tokens_per_second).
DEFAULT_IMAGE_SIDE = 1024  # when the image header cannot be read
DEFAULT_VIDEO_SECONDS = 10.0  # when the duration cannot be read (Veo/Sora clips are 4-12 s)
_HEADER_BYTES = 256 * 1024  # enough for a JPEG frame header after large EXIF blocks

def prompt_tokens(request: JudgeRequest, backend: str, model: str = "") -> int:
    """The documented estimate of one request's prompt tokens (text rule + overhead + media rule)."""
    text = text_tokens(request.prompt) + text_tokens(request.output_text or "")
    return text + MESSAGE_OVERHEAD + sum(media_tokens(m, backend, model) for m in request.media)


def text_tokens(text: str) -> int:
    """Estimated tokens of a text: letters and whitespace / 4.8 + digits / 2.5 + one per other character."""
    rest = text.translate(_DROP_WORDY)  # C-speed counting: a 1 MB response costs milliseconds
    other = rest.translate(_DROP_DIGITS)
    words, digits = len(text) - len(rest), len(rest) - len(other)
    return math.ceil(words / WORD_CHARS_PER_TOKEN + digits / DIGITS_PER_TOKEN + len(other))


def media_tokens(media: Media, backend: str, model: str = "") -> int:
    """Prompt tokens of one image or video on ``backend`` (its vendor record's rules; 0 for a video the
    backend refuses before sending). Images whose header cannot be read count as 1024x1024."""
    vendor = vendors.get(backend) or vendors.OPENAI  # an unknown backend: counted as an OpenAI-compatible one
    if media.is_video:
        if vendor.video_tokens_per_second is None:
            return 0  # refused before sending: only backends that watch video take it
        seconds = video_seconds(media)
        return math.ceil(DEFAULT_VIDEO_SECONDS if seconds is None else seconds) * vendor.video_tokens_per_second
    width, height = image_size(media) or (DEFAULT_IMAGE_SIDE, DEFAULT_IMAGE_SIDE)
    rule = vendor.image_tokens or vendors.OPENAI.image_tokens
    return rule(width, height, model)


def _head(media: Media) -> bytes:
    if media.data is not None:
        return media.data[:_HEADER_BYTES]
    try:
        with open(media.path, "rb") as fh:
            return fh.read(_HEADER_BYTES)
    except (OSError, TypeError):
        return b""


def image_size(media: Media) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, WebP or JPEG header; None when it cannot be read."""
    b = _head(media)
    try:
        if b.startswith(b"\x89PNG") and len(b) >= 24:
            return struct.unpack(">II", b[16:24])
        if b[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", b[6:10])
        if b[:4] == b"RIFF" and b[8:12] == b"WEBP":
            return _webp_size(b)
        if b.startswith(b"\xff\xd8"):
            return _jpeg_size(b)
    except struct.error:
        return None
    return None


def _webp_size(b: bytes) -> tuple[int, int] | None:
    kind = b[12:16]
    if kind == b"VP8X":
        return 1 + int.from_bytes(b[24:27], "little"), 1 + int.from_bytes(b[27:30], "little")
    if kind == b"VP8 ":
        w, h = struct.unpack("<HH", b[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if kind == b"VP8L":
        bits = int.from_bytes(b[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    return None


def _jpeg_size(b: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(b):
        if b[i] != 0xFF:
            return None
        marker, length = b[i + 1], struct.unpack(">H", b[i + 2:i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start-of-frame segment
            height, width = struct.unpack(">HH", b[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None


def video_seconds(media: Media) -> float | None:
    """Duration of an MP4/MOV from its movie header (mvhd); None for other containers or odd files."""
    try:
        if media.data is not None:
            return _mvhd_seconds(io.BytesIO(media.data), len(media.data))
        with open(media.path, "rb") as fh:
            return _mvhd_seconds(fh, media.size)
    except (OSError, TypeError, struct.error):
        return None


def _mvhd_seconds(fh: Any, end: int, start: int = 0, depth: int = 0) -> float | None:
    pos = start
    while pos + 8 <= end and depth < 3:
        fh.seek(pos)
        size, kind = struct.unpack(">I4s", fh.read(8))
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", fh.read(8))[0], 16
        elif size == 0:
            size = end - pos
        if size < header:
            return None
        if kind == b"moov":
            return _mvhd_seconds(fh, pos + size, pos + header, depth + 1)
        if kind == b"mvhd":
            version = fh.read(1)[0]
            fh.read(3)
            if version == 1:
                fh.read(16)
                scale, duration = struct.unpack(">IQ", fh.read(12))
            else:
                fh.read(8)
                scale, duration = struct.unpack(">II", fh.read(8))
            return duration / scale if scale else None
        pos += size
    return None
