"""Media for Gemini: inline parts up to ``INLINE_MAX_BYTES``, larger ones through the File API.

An upload is waited on until ACTIVE and referenced by URI; the caller deletes
it when the call is over (``delete``), batch mode when its job is collected.
Vertex AI has no File API: media over the inline limit are refused there.
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any

from ...calls import stop
from ...core.errors import JudgeRefusal, MediaError
from ...core.redact import redact
from ...core.types import Media
from .._http import about
from .errors import api_error
from .replies import enum_name

log = logging.getLogger(__name__)

INLINE_MAX_BYTES = 14 * 1000 * 1000  # base64 makes this ~18.7 MB, under the ~20 MB request limit
FILE_POLL_SECONDS = 2.0  # wait between File API state checks
FILE_ACTIVE_TIMEOUT = 600.0  # give up on a file still PROCESSING after max(this, judge timeout): the sample fails


def media_part(client: Any, media: Media, uploaded: list[str], *, vertex: bool, endpoint: str, timeout: float,
               name: str | None = None) -> Any:
    """The part that carries ``media``; an upload's name is appended to ``uploaded`` (to delete)."""
    from google.genai import types

    if media.size <= INLINE_MAX_BYTES:
        try:
            return types.Part.from_bytes(data=media.read(), mime_type=media.mime_type)
        except OSError as exc:
            raise MediaError(f"{media.source}: cannot read the media file: {exc}") from None
        except (ValueError, TypeError) as exc:  # pydantic validation: never sent, never retried
            raise MediaError(f"{media.source}: cannot attach it ({media.mime_type}): {exc}"[:500]) from None
    if vertex:
        raise MediaError(f"{media.source}: {media.size} bytes is over the {INLINE_MAX_BYTES}-byte inline "
                         "limit, and Vertex AI has no File API; use the Gemini Developer API "
                         "(GEMINI_API_KEY) for large media")
    uri = upload(client, media, uploaded, endpoint=endpoint, timeout=timeout, name=name)
    return types.Part.from_uri(file_uri=uri, mime_type=media.mime_type)


def upload(client: Any, media: Media, uploaded: list[str], *, endpoint: str, timeout: float,
           name: str | None = None) -> str:
    """Upload through the File API and wait until ACTIVE; returns the file URI.

    A file on disk is streamed by the SDK from its path: a 2 GB video is never held in memory.
    ``name``: batch mode names its uploads to find them again.
    """
    from google.genai import errors as genai_errors
    from google.genai import types

    source = media.path if media.path is not None else io.BytesIO(media.read())
    config = types.UploadFileConfig(mime_type=media.mime_type, display_name=f"mathjudge-{media.sha256[:16]}",
                                    name=name)
    try:
        file = client.files.upload(file=source, config=config)
    except OSError as exc:
        raise MediaError(f"{media.source}: cannot read the media file: {exc}") from None
    except genai_errors.APIError as exc:  # classified like any judge call (a 501 is never retried)
        raise about(api_error(exc, endpoint), f"the File API upload of {media.source}") from None
    uploaded.append(file.name)
    wait = max(FILE_ACTIVE_TIMEOUT, timeout)
    deadline = time.monotonic() + wait
    while True:
        state = enum_name(file.state)
        if state == "ACTIVE":
            return file.uri
        if state == "FAILED":
            detail = getattr(getattr(file, "error", None), "message", None) or "no detail given"
            raise JudgeRefusal(redact(f"{media.source}: Gemini could not process the uploaded "
                                      f"{media.mime_type} file ({detail})"), kind="file_failed")
        if time.monotonic() >= deadline:  # not uploaded again: a retry would wait just as long
            raise JudgeRefusal(
                f"{media.source}: Gemini was still {state or 'PROCESSING'} the uploaded {media.mime_type} "
                f"file after {wait:g}s; it is not uploaded again and this sample counts as a judge failure. "
                f"Long videos can need longer: raise judge_timeout above {wait:g} (the File API wait is the "
                f"larger of {FILE_ACTIVE_TIMEOUT:g}s and judge_timeout) and rerun", kind="media_timeout")
        stop.sleep(FILE_POLL_SECONDS)  # a stop ends the wait (the upload is deleted as usual)
        try:
            file = client.files.get(name=file.name)
        except genai_errors.APIError as exc:
            raise about(api_error(exc, endpoint), f"the File API state of {media.source}") from None


def delete(client: Any, name: str) -> None:
    try:
        client.files.delete(name=name)
    except Exception as exc:  # noqa: BLE001 - files expire on their own after 48 h
        log.debug("could not delete uploaded gemini file %s: %s", name, redact(str(exc)))
