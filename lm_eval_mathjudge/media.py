"""Responses that are media: recognise them, check them, and describe them for a judge.

A response is a media reference when its whole text is one of

* a local path or ``file://`` URL ending in .png .jpg .jpeg .webp .gif .mp4 .webm .mov
  (a path containing spaces counts only if the file exists: otherwise it is prose);
* a ``data:<mime>;base64,...`` URL of one of those types.

An ``http(s)://`` URL ending in a media extension is recognised too (and never
fetched: ``load_media`` refuses it).

Anything else is judged as text. A media reference is attached only from where
media belong (``attachable``): a data URL carries its own bytes; a local path
or ``file://`` URL only when its real location (``..`` and symlinks resolved)
is inside one of the run's media folders: the generator's ``media_dir``, the
``mathjudge-media`` folder, the folders of ``judge_media_dirs``. Any other path,
and any remote URL, is graded as text and never read (``refused`` says so, for
the sample's flags): a text model must not be able to make the harness send a
local file to the judge.

A reference inside a media folder that cannot be sent (missing, unreadable,
empty, too large, or bytes that are not what the name says) raises
``MediaError`` naming the file: the sample counts as a judge failure, the rest
of the run goes on. The content hash, never the path, identifies the media in
the judge cache.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from typing import Sequence
from urllib.parse import unquote, urlsplit

from .errors import MediaError
from .types import Media

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
               ".gif": "image/gif"}
VIDEO_TYPES = {".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime"}
MAX_IMAGE_BYTES = 20 * 1024 ** 2  # the providers' inline image limit
MAX_VIDEO_BYTES = 2 * 1024 ** 3  # the Gemini File API's per-file limit

_ALL_TYPES = {**IMAGE_TYPES, **VIDEO_TYPES}
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)
_CHUNK = 1 << 20


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
    """The media reference to attach, or None: the response is then graded as text, and nothing is read."""
    reference = media_reference(response)
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
    except OSError as exc:
        raise MediaError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    _check_kind(path, head, mime)
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
    raise MediaError(f"{source}: named as {mime}, but {what}")
