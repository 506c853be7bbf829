"""Responses that are media: recognise them, check them, and describe them for a judge.

A response is a media reference when its whole text is one of

* a local path or ``file://`` URL ending in .png .jpg .jpeg .webp .gif .mp4 .webm .mov
  (a path containing spaces counts only if the file exists: otherwise it is prose);
* a ``data:<mime>;base64,...`` URL of one of those types.

An ``http(s)://`` URL ending in a media extension is recognised too (and never
fetched: ``load_media`` refuses it).

Anything else is judged as text. Media come only from media models: a task
whose answers came from a text model has no media folders, and nothing in its
answers is ever attached, not a path, not a URL, not a ``data:`` URL. When the
task has media folders (the generator's ``media_dir``, the ``mathjudge-media``
folder, the folders of ``judge_media_dirs``), a reference is attached only from
there (``attachable``): a data URL carries its own bytes; a local path or
``file://`` URL only when its real location (``..`` and symlinks resolved) is
inside one of those folders. Any other path, and any remote URL, is graded as
text and never read (``refused`` says so, for the sample's flags): a text model
must not be able to make the harness send a local file, or an image of its
choice, to the judge. ``embedded`` tells when a text answer carries media in
any wrapping (bare, a markdown image or link, an HTML tag, angle brackets), for
the ``media_in_text`` flag.

A reference inside a media folder that cannot be sent (missing, unreadable,
empty, too large, or bytes that are not what the name says) raises
``MediaError`` naming the file: the sample counts as a judge failure, the rest
of the run goes on, and nothing is sent. Missing, unreadable, empty or too large
files fail as ``media``; bytes that fail the format check fail as ``bad_media``:
bytes that are not what the name says (``sniff``), or a file that does not end
where its own structure says it ends (``media_problem``: a PNG without IEND, a
JPEG without its end marker, a GIF without its trailer, a WebP shorter than its
RIFF header says, an MP4/MOV whose top-level boxes do not tile the file). The
generators run the same check on what a vendor returns. The content hash, never
the path, identifies the media in the judge cache.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from typing import BinaryIO, Callable, Sequence
from urllib.parse import unquote, urlsplit

from .errors import MediaError
from .fold import folded
from .types import Media

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
               ".gif": "image/gif"}
VIDEO_TYPES = {".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime"}
MAX_IMAGE_BYTES = 20 * 1024 ** 2  # the providers' inline image limit
MAX_VIDEO_BYTES = 2 * 1024 ** 3  # the Gemini File API's per-file limit

_ALL_TYPES = {**IMAGE_TYPES, **VIDEO_TYPES}
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)
# Media in a text answer, over its folded, lower-cased text (``embedded``).
_EXTENSIONS = frozenset(_ALL_TYPES) | {".svg", ".bmp", ".tif", ".tiff", ".avif", ".heic", ".ico", ".mkv", ".avi",
                                       ".m4v", ".mpg", ".mpeg", ".ogv"}
_TOKEN = re.compile(r"[^\s<>()\[\]\"'`]+")  # a path or URL ends at a space, a bracket or a quote
_EMBEDDED = tuple(re.compile(p) for p in (
    r"(?<![a-z0-9])data[ \t]*:[ \t]*[a-z]+[ \t]*/[ \t]*[a-z0-9.+-]+[ \t]*[;,]",  # data:image/png;base64, and kin
    r"!\[[^\[\]\n]{0,1000}\][ \t]*[(\[]",  # a markdown image, inline or by reference
    r"<(?:img|image|video|audio|source|picture|svg|iframe|embed|object|track)(?=[\s/>])",  # HTML media
    r"(?<![a-z0-9])(?:src|href|poster|srcset|data)[ \t]*=[ \t]*[\"']?[ \t]*(?:data:|[a-z][a-z0-9+.-]*://|/|\.|~)",
))
_EMBED_SCAN = 200_000  # characters looked at, as for the other flags
_CHUNK = 1 << 20
_TAIL = 1 << 16  # bytes read from a file's end for its end marker (some writers pad with NULs after it)
BAD_MEDIA = "bad_media"  # the failure kind of bytes that fail the format check


def media_reference(response: str) -> str | None:
    """The reference if the whole response names one media item, else None."""
    text = response.strip().strip("<>\"'`").strip()
    if text.startswith("data:"):
        return text if _DATA_URL.match(text) else None
    path = urlsplit(text).path if "://" in text else text
    if os.path.splitext(path)[1].lower() not in _ALL_TYPES:
        return None
    # Prose that merely ends in "fig.png" is text; a path with spaces must exist to count.
    if any(c.isspace() for c in text) and not os.path.isfile(text):
        return None
    return text


def attachable(response: str, roots: Sequence[str]) -> str | None:
    """The media reference to attach, or None: the response is then graded as text, and nothing is read.

    Without media folders (a text model's task) nothing is attached, whatever the response says."""
    reference = media_reference(response) if roots else None
    if reference is None or reference.startswith("data:"):
        return reference
    path = local_path(reference)
    if path is None:  # a remote URL
        return None
    real = os.path.realpath(path)
    return reference if any(inside(os.path.realpath(root), real) for root in roots) else None


def refused(response: str, roots: Sequence[str]) -> bool:
    """The response names media, but not from where media belong (``attachable``)."""
    return media_reference(response) is not None and attachable(response, roots) is None


def embedded(response: str) -> bool:
    """The text carries media as a reader would see it: a ``data:`` URL of any type anywhere (any case,
    spaces around its punctuation), a markdown image, an HTML media tag or a link or source to a
    media file, a path or URL of a media file, or a whole response that is one media reference."""
    text = folded(response[:_EMBED_SCAN]).lower()
    return (media_reference(text) is not None or any(p.search(text) for p in _EMBEDDED)
            or any(_media_location(m.group()) for m in _TOKEN.finditer(text)))


def _media_location(token: str) -> bool:
    """A path (with a slash) or URL whose file is an image or video: ``/runs/q1.png``, ``https://x/a.gif?s=2``."""
    if "/" not in token:
        return False
    path = token.split("?", 1)[0].split("#", 1)[0].rstrip(".,;:!*_")
    return os.path.splitext(path)[1] in _EXTENSIONS


def inside(root: str, path: str) -> bool:
    """``path`` is ``root`` or below it (both already resolved)."""
    try:
        return os.path.commonpath([root, path]) == root
    except ValueError:  # different drives, or one relative and one absolute
        return False


def local_path(reference: str) -> str | None:
    """The absolute local path a reference names; None for a remote URL."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", reference, re.I) and not reference.startswith("file://"):
        return None
    path = unquote(urlsplit(reference).path) if reference.startswith("file://") else reference
    return os.path.abspath(os.path.expanduser(path))


def load_media(reference: str) -> Media:
    if reference.startswith("data:"):
        return _from_data_url(reference)
    path = local_path(reference)
    if path is None:
        raise MediaError(f"{reference}: remote media are not fetched (judging must not depend on a third "
                         "server); download the file and give its local path")
    return _from_file(path)


def _from_data_url(url: str) -> Media:
    match = _DATA_URL.match(url)
    mime = match.group(1).lower() if match else ""
    if mime not in _ALL_TYPES.values():
        raise MediaError(f"data URL of type {mime or '?'} cannot be judged; "
                         f"use one of {', '.join(sorted(set(_ALL_TYPES.values())))}")
    try:
        data = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(f"data URL ({mime}) is not valid base64") from None
    source = f"data URL ({mime}, {len(data)} bytes)"
    _check_size(source, len(data), mime)
    _check_kind(source, data[:32], mime)
    _check_whole(source, media_problem(data, mime))
    return Media(source=source, mime_type=mime, sha256=hashlib.sha256(data).hexdigest(), size=len(data), data=data)


def _from_file(path: str) -> Media:
    mime = _ALL_TYPES[os.path.splitext(path)[1].lower()]
    if not os.path.isfile(path):
        raise MediaError(f"{path}: no such file (the response names it as the generated {mime.split('/')[0]})")
    try:
        size = os.path.getsize(path)
        _check_size(path, size, mime)
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            head = fh.read(32)
            digest.update(head)
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(chunk)
            _check_kind(path, head, mime)
            _check_whole(path, _file_problem(fh, size, mime))
    except OSError as exc:
        raise MediaError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return Media(source=path, mime_type=mime, sha256=digest.hexdigest(), size=size, path=path)


def _check_size(source: str, size: int, mime: str) -> None:
    limit = MAX_VIDEO_BYTES if mime.startswith("video/") else MAX_IMAGE_BYTES
    if size == 0:
        raise MediaError(f"{source}: the file is empty")
    if size > limit:
        raise MediaError(f"{source}: {size / 1024 ** 2:.1f} MB is more than the {limit / 1024 ** 2:.0f} MB "
                         f"a judge accepts for {mime}")


def sniff(head: bytes) -> str | None:
    """The media type the first bytes show, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm"
    if head[4:8] == b"ftyp":
        return "video/quicktime" if head[8:12] == b"qt  " else "video/mp4"
    return None


def _check_kind(source: str, head: bytes, mime: str) -> None:
    found = sniff(head)
    iso_bmff = {"video/mp4", "video/quicktime"}
    if found == mime or (found in iso_bmff and mime in iso_bmff):  # .mov and .mp4 share a container
        return
    what = f"its bytes look like {found}" if found else "its bytes match no supported image or video format"
    raise MediaError(f"{source}: named as {mime}, but {what}; it is not sent to the judge", kind=BAD_MEDIA)


def _check_whole(source: str, problem: str | None) -> None:
    if problem is not None:
        raise MediaError(f"{source}: {problem}, so the file is damaged or was not written to the end; it is not "
                         "sent to the judge", kind=BAD_MEDIA)


# ---------------------------------------------------------------------- is the file whole?
Read = Callable[[int, int], bytes]  # (offset, count) -> at most count bytes from offset


def media_problem(data: bytes, mime: str) -> str | None:
    """Why ``data`` is not a complete file of its kind, or None (WebM and unknown kinds: None)."""
    return _problem(len(data), lambda offset, count: data[offset:offset + count], mime)


def _file_problem(fh: BinaryIO, size: int, mime: str) -> str | None:
    def read(offset: int, count: int) -> bytes:
        fh.seek(offset)
        return fh.read(count)
    return _problem(size, read, mime)


def _problem(size: int, read: Read, mime: str) -> str | None:
    """One copy of the checks, over bytes in memory or a file on disk (reading only what it needs)."""
    def tail() -> bytes:
        return read(max(0, size - _TAIL), _TAIL).rstrip(b"\x00")
    if mime == "image/png":
        return None if read(max(0, size - 8), 8) == b"IEND\xaeB`\x82" else "the PNG has no IEND chunk (cut short)"
    if mime == "image/jpeg":
        return None if tail().endswith(b"\xff\xd9") else "the JPEG has no end marker (cut short)"
    if mime == "image/gif":
        return None if tail().endswith(b"\x3b") else "the GIF has no trailer (cut short)"
    if mime == "image/webp":
        declared = int.from_bytes(read(4, 4), "little") + 8
        return None if size >= declared else f"the WebP's RIFF header says {declared} bytes, the file has {size} " \
                                              "(cut short)"
    if mime in ("video/mp4", "video/quicktime"):
        return _iso_boxes_problem(size, read)
    return None


def _iso_boxes_problem(size: int, read: Read) -> str | None:
    """Top-level ISO BMFF boxes must tile the file exactly, with an ftyp box first."""
    if read(4, 4) != b"ftyp":
        return "the video does not start with an ftyp box"
    offset = 0
    while offset < size:
        if size - offset < 8:
            return f"{size - offset} stray bytes after the last box"
        header = read(offset, 16)
        box = int.from_bytes(header[:4], "big")
        if box == 1:  # a 64-bit size follows the type
            box = int.from_bytes(header[8:16], "big") if size - offset >= 16 else 0
        elif box == 0:  # the box runs to the end of the file
            return None
        if box < 8 or offset + box > size:
            kind = header[4:8].decode("latin-1")
            return f"box {kind!r} at byte {offset} needs {box} bytes, the file has {size - offset} left (cut short)"
        offset += box
    return None
