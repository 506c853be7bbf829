"""Gemini Batch Mode (Gemini Developer API) behind the batch runner's provider contract.

A job is one ``batches.create`` call. Its requests are built as the online
calls build theirs (``requests``: text parts, generation config with the thinking
budget; media parts through the online backend), and its replies go through the
online reply mapping
(``replies.reply_of``: blocked prompt, safety/recitation finish reasons, max tokens,
empty reply, usage), so a batch verdict is the online verdict at batch price.

Where the requests travel:
- inline in the create call while they encode under ``INLINE_MAX_BYTES``
  (the API refuses request payloads over 20 MB) and their replies, each at the
  judge's reply cap, fit in ``INLINE_REPLIES_BYTES``; replies come back inside
  the job, whose reads are bounded by ``JOB_READ_BYTES``;
- otherwise as a JSONL file (``{"key", "request"}`` per line) uploaded through
  the File API; replies come back as a JSONL file the job writes, downloaded to
  a temporary file within the bounds of its replies (``batch.base.result_bytes``,
  ``result_seconds``) and read line by line, no line longer than one reply's cap.
- Media over the online inline limit are uploaded through the File API as
  online, but kept until the job is collected (the job reads them hours later).

Everything a job uploads is named after a tag kept in the job's display name
(``mathjudge <tag> media=<n> file=<0|1>``), so ``cleanup`` finds and deletes
the input file and media from the job id alone, in this process or in a
rerun after a crash; the output file and the finished job are deleted too.
Uploads left behind by a killed process expire after 48 hours.

Vertex AI batch prediction reads and writes Cloud Storage or BigQuery, not the
File API: it is refused with ``BatchUnavailable`` (use the Developer API, or
judge_mode=online).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import re
import secrets
import tempfile
from typing import Any, Callable, Iterator, Sequence, TypeVar

from google.genai import _common, batches as genai_batches, errors as genai_errors, types

from ...batch.base import (CANCELLED, COMPLETED, EXPIRED, FAILED, ITEM_FAILED, RUNNING, BatchUnavailable, Item,
                           JobStatus, Limits, RESULT_BASE, Result, item_error, result_bytes, result_line_bytes,
                           result_lines, result_seconds)
from ...calls.retry import RetryPolicy, call_with_retries
from ...core.errors import JudgeCallError, JudgeRefusal, MediaError, TransientJudgeError
from ...core.redact import redact
from ...core.types import JudgeRequest
from .. import wire
from .._http import about
from . import requests
from .online import GeminiBackend
from .replies import enum_name, reply_of

log = logging.getLogger(__name__)

INLINE_MAX_BYTES = 18 * 1000 * 1000  # encoded requests under this go inline (the API's payload limit is 20 MB)
# Inline replies come back inside the job itself, read whole: a job goes inline only while its replies, each at
# the judge's reply cap, fit in this, so reading the job is bounded by ``JOB_READ_BYTES`` whoever submitted it.
INLINE_REPLIES_BYTES = 64 << 20
JOB_READ_BYTES = RESULT_BASE + INLINE_REPLIES_BYTES
FILE_MAX_BYTES = 1_900_000_000  # a JSONL input file may hold 2 GB; the runner splits larger runs
MAX_REQUESTS = 50_000  # no documented cap; keeps one job's result file far below the file limit
NAME_PREFIX = "mj-"  # File API names: lowercase letters, digits and dashes, at most 40 characters

# Gemini's job states (as the SDK names them) onto the runner's; every other state means "poll again".
_STATES = {
    "JOB_STATE_SUCCEEDED": COMPLETED,
    "JOB_STATE_PARTIALLY_SUCCEEDED": COMPLETED,
    "JOB_STATE_FAILED": FAILED,
    "JOB_STATE_CANCELLED": CANCELLED,
    "JOB_STATE_EXPIRED": EXPIRED,
}
_DISPLAY = re.compile(r"^mathjudge (?P<tag>[a-z0-9]+) media=(?P<media>\d+) file=(?P<file>[01])$")

T = TypeVar("T")


def create(backend: GeminiBackend) -> GeminiBatchProvider:
    return GeminiBatchProvider(backend)


class GeminiBatchProvider:
    """Gemini Batch Mode for one GeminiBackend (its client, model and settings)."""

    name = "gemini"
    limits = Limits(max_requests=MAX_REQUESTS, max_bytes=FILE_MAX_BYTES)

    def __init__(self, backend: GeminiBackend):
        if backend.on_vertex:
            raise BatchUnavailable(
                "judge_mode=batch with a Gemini judge on Vertex AI is not supported: Vertex batch prediction "
                "reads its requests from Cloud Storage or BigQuery. Use the Gemini Developer API "
                "(GEMINI_API_KEY) for batch mode, or judge_mode=online")
        self._backend = backend
        self._client = backend.sdk
        self._settings = backend.settings
        self._keys: dict[str, list[str]] = {}  # job -> keys in request order (inline replies without metadata)

    # -- submit -----------------------------------------------------------------------
    def submit(self, items: Sequence[Item]) -> str:
        tag = _tag(items)
        uploaded: list[str] = []
        try:
            with tempfile.TemporaryFile() as spool:
                keys, inline = self._encode(items, tag, uploaded, spool)
                if not keys:  # the runner leaves these to the online pass, which fails them without a call
                    self._drop(uploaded)
                    return ""
                src: Any = inline
                if inline is None:
                    spool.seek(0)
                    src = self._upload_input(spool, tag, uploaded)
                display = f"mathjudge {tag} media={_media_count(uploaded)} file={int(inline is None)}"
                job = self._call(lambda: self._client.batches.create(
                    model=self._settings.model, src=src, config=types.CreateBatchJobConfig(display_name=display)))
        except BaseException:
            self._drop(uploaded)  # nothing was submitted: nothing will read them
            raise
        self._keys[job.name] = keys
        log.info("submitted Gemini batch %s: %d requests (%s)", job.name, len(keys),
                 "inline" if inline is not None else "JSONL file")
        return job.name

    def _encode(self, items: Sequence[Item], tag: str, uploaded: list[str],
                spool: Any) -> tuple[list[str], list[types.InlinedRequest] | None]:
        """Build every request; spool its JSONL line; keep the objects while they fit inline.

        A request that cannot be built (unreadable media, text UTF-8 cannot carry)
        is left out: the online pass fails that sample the way online mode does.
        """
        keys: list[str] = []
        inline: list[types.InlinedRequest] | None = []
        size = 0
        most_inline = max(1, INLINE_REPLIES_BYTES // result_line_bytes(self._settings.reply_bytes))
        for key, request in items:
            try:
                inlined = self._call(lambda: self._inlined(key, request, tag, uploaded))  # noqa: B023 (called in this iteration)
                line = json.dumps({"key": key, "request": _wire(self._client, inlined)}) + "\n"
            except (MediaError, JudgeRefusal) as exc:  # UnsendableRequest; a media file Gemini could not process
                log.debug("batch: request %s left out: %s", key[:12], redact(str(exc)))
                continue
            data = line.encode("utf-8")
            spool.write(data)
            size += len(data)
            keys.append(key)
            if inline is not None and size <= INLINE_MAX_BYTES and len(keys) <= most_inline:
                inline.append(inlined)
            else:
                inline = None  # too big to go inline: the spooled JSONL file is uploaded instead
        return keys, inline

    def _inlined(self, key: str, request: JudgeRequest, tag: str, uploaded: list[str]) -> types.InlinedRequest:
        backend = self._backend
        media = [backend.media_part(m, uploaded, name=f"{NAME_PREFIX}{tag}-m{len(uploaded)}")
                 for m in request.media]
        contents = requests.contents(requests.text_parts(request) + media)
        return types.InlinedRequest(contents=contents, config=requests.generation_config(backend.settings),
                                    metadata={"key": key})

    def _upload_input(self, spool: Any, tag: str, uploaded: list[str]) -> str:
        name = f"files/{NAME_PREFIX}{tag}-in"
        config = types.UploadFileConfig(name=name, mime_type="jsonl", display_name=f"mathjudge batch {tag}")
        file = self._call(lambda: self._client.files.upload(file=spool, config=config))
        uploaded.append(file.name)
        return file.name

    # -- status / results ---------------------------------------------------------------
    def status(self, job_id: str) -> JobStatus:
        job, stats, why = self._read(job_id)
        raw = enum_name(job.state) or "JOB_STATE_UNSPECIFIED"
        state = _STATES.get(raw, RUNNING)
        message = ""
        if state in (FAILED, EXPIRED, CANCELLED):
            message = redact(f"the Gemini batch {job_id} ended {raw}" + (f": {why}" if why else ""))
        failed = _count(stats, "failedRequestCount")
        return JobStatus(state=state, done=_count(stats, "successfulRequestCount") + failed, failed=failed,
                         total=_count(stats, "requestCount") or len(self._keys.get(job_id, ())), raw_state=raw,
                         message=message)

    def results(self, job_id: str) -> Iterator[Result]:
        job, stats, _ = self._retrying(lambda: self._read(job_id))
        dest = job.dest
        if dest is None:  # an expired or cancelled job keeps nothing: the runner applies the fallback
            return
        if dest.inlined_responses:
            order = self._keys.get(job_id, [])
            for index, answer in enumerate(dest.inlined_responses):
                key = (answer.metadata or {}).get("key") or (order[index] if index < len(order) else None)
                if key is not None:  # an answer we cannot place is not guessed at
                    yield key, self._result(answer)
        elif dest.file_name:
            items = _count(stats, "requestCount") or len(self._keys.get(job_id, ())) or MAX_REQUESTS
            yield from self._file_results(dest.file_name, items)

    def _file_results(self, file_name: str, items: int) -> Iterator[Result]:
        handle, path = tempfile.mkstemp(prefix="mathjudge-batch-", suffix=".jsonl")
        os.close(handle)
        line_cap = result_line_bytes(self._settings.reply_bytes)
        try:  # streamed to disk: a large result file is never held in memory, nor a long line of it
            self._retrying(lambda: self._download(file_name, path, items))
            with open(path, "rb") as spool:
                for line in result_lines(spool, line_cap):
                    if line is None:
                        log.warning("a line of the Gemini batch result file %s is over the %d-byte cap of one "
                                    "reply; skipped (its request is left to the fallback)", file_name, line_cap)
                    elif line.strip():
                        yield from self._file_line(line)
        finally:
            os.unlink(path)

    def _download(self, file_name: str, path: str, items: int) -> None:
        """The result file into ``path``, within the bounds of ``items`` replies."""
        download = self._client.files.download
        with wire.scoped(max_bytes=result_bytes(items, self._settings.reply_bytes),
                         seconds=result_seconds(items, self._settings.timeout)):
            try:
                if "destination" in inspect.signature(download).parameters:  # google-genai >= 1.5x: to disk
                    self._call(lambda: download(file=file_name, destination=path))
                    return
                data = self._call(lambda: download(file=file_name))
            except JudgeCallError as exc:
                raise about(exc, f"the batch result file {file_name}") from None
        with open(path, "wb") as out:
            out.write(data)

    def _file_line(self, line: str) -> Iterator[Result]:
        try:
            row = json.loads(line)
            key = row["key"]
            answer = types.InlinedResponse._from_response(
                response=genai_batches._InlinedResponse_from_mldev(
                    {k: row[k] for k in ("response", "error") if k in row}), kwargs={})
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipped a malformed line of a Gemini batch result file: %s", redact(str(exc))[:200])
            return
        yield str(key), self._result(answer)

    def _result(self, answer: Any) -> Any:
        """One item's reply, mapped exactly as online; an item error stays that item's."""
        if answer.error is not None:
            error = answer.error
            return item_error(ITEM_FAILED, redact(f"the Gemini batch could not answer this request "
                                                  f"(code {error.code}): {error.message or 'no detail given'}"))
        if answer.response is None:
            return item_error(ITEM_FAILED, "the Gemini batch returned neither a response nor an error")
        try:
            return reply_of(answer.response, self._settings)
        except JudgeRefusal as exc:
            return exc

    # -- cleanup --------------------------------------------------------------------------
    def cleanup(self, job_id: str) -> None:
        """Delete the output, the input file and the media of the job, then the finished job. Never raises."""
        try:
            job = self._get(job_id)
        except Exception as exc:  # noqa: BLE001 - uploads expire on their own after 48 h
            log.debug("could not read Gemini batch %s for cleanup: %s", job_id, redact(str(exc)))
            return
        for name in _uploads(job):
            self._delete_file(name)
        if _STATES.get(enum_name(job.state) or "") is not None:  # a running job is never deleted
            try:
                self._client.batches.delete(name=job_id)
            except Exception as exc:  # noqa: BLE001
                log.debug("could not delete Gemini batch %s: %s", job_id, redact(str(exc)))
        self._keys.pop(job_id, None)

    def _delete_file(self, name: str) -> None:
        self._backend.delete_file(name)

    def _drop(self, uploaded: list[str]) -> None:
        for name in uploaded:
            self._delete_file(name)

    # -- SDK calls ----------------------------------------------------------------------
    def _get(self, job_id: str) -> Any:
        with wire.scoped(max_bytes=JOB_READ_BYTES):  # a finished inline job holds its replies
            return self._call(lambda: self._client.batches.get(name=job_id))

    def _read(self, job_id: str) -> tuple[Any, dict, str]:
        """The job, its batchStats (request, success, failure counts) and why it failed: ``batches.get`` drops both.

        The same GET the SDK sends, read raw once and converted by the SDK's own parser.
        """
        def read() -> tuple[Any, dict, str]:
            body = json.loads(self._client._api_client.request("get", job_id, {}).body or "{}")
            if not isinstance(body, dict):
                raise ValueError(f"a batch job read returned {type(body).__name__}, not an operation")
            job = types.BatchJob._from_response(response=genai_batches._BatchJob_from_mldev(body), kwargs={})
            stats = (body.get("metadata") or {}).get("batchStats")
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            return job, stats if isinstance(stats, dict) else {}, str(error.get("message") or "")[:500]
        with wire.scoped(max_bytes=JOB_READ_BYTES):  # a finished inline job holds its replies
            return self._call(read)

    def _retrying(self, call: Callable[[], T]) -> T:
        """Collection reads retried by retry.py's policy (the runner retries submit and status itself)."""
        return call_with_retries(call, RetryPolicy(max_retries=self._settings.max_retries))

    def _call(self, call: Callable[[], T]) -> T:
        """One SDK call, its errors mapped by the online backend's rules (status, transport, auth)."""
        try:
            return call()
        except genai_errors.APIError as exc:
            raise self._backend.api_error(exc) from None
        except (ValueError, KeyError) as exc:  # a 200 whose body is not what the SDK expects
            raise TransientJudgeError(redact(f"malformed Gemini batch response: {exc}"[:500]),
                                      kind="bad_response") from None
        except JudgeCallError:
            raise
        except Exception as exc:  # noqa: BLE001 - transport errors, mapped in one place
            raise self._backend.exchange_error(exc) from None


def _wire(client: Any, inlined: types.InlinedRequest) -> dict:
    """The GenerateContentRequest JSON of one request, converted by the SDK exactly as for an inline job."""
    body = genai_batches._InlinedRequest_to_mldev(client._api_client, inlined)
    return _common.encode_unserializable_types(_common.convert_to_dict(body))["request"]


def _tag(items: Sequence[Item]) -> str:
    """Names this job's uploads: a digest of its keys plus randomness (a resubmission never collides)."""
    digest = hashlib.sha256("\n".join(key for key, _ in items).encode()).hexdigest()[:16]
    return digest + secrets.token_hex(4)


def _count(stats: dict, name: str) -> int:
    """An int64 count of batchStats (JSON carries them as strings); 0 when absent or malformed."""
    try:
        return max(0, int(stats.get(name, 0)))
    except (TypeError, ValueError):
        return 0


def _media_count(uploaded: list[str]) -> int:
    return sum(1 for name in uploaded if not name.endswith("-in"))


def _uploads(job: Any) -> list[str]:
    """What the job's display name says was uploaded for it, and the output file it wrote."""
    names = []
    dest = getattr(job, "dest", None)
    if dest is not None and dest.file_name:
        names.append(dest.file_name)
    match = _DISPLAY.match(job.display_name or "")
    if match:
        tag = match["tag"]
        names += [f"files/{NAME_PREFIX}{tag}-m{n}" for n in range(int(match["media"]))]
        if match["file"] == "1":
            names.append(f"files/{NAME_PREFIX}{tag}-in")
    return names
