"""The OpenAI Batch API (and Azure OpenAI's, the same SDK surface) as a ``BatchProvider``.

    submit   one JSONL line per request, {custom_id: cache key, method: POST, url, body},
             where body is exactly what the online backend sends (its own builder);
             files.create(purpose="batch"), then batches.create(completion_window="24h")
    status   batches.retrieve: validating / in_progress / finalizing / cancelling are
             running; completed, failed, expired, cancelled are final
    results  the output file (one line per answered request: status code and body) and
             the error file (requests that failed or expired: ``batch_expired``), each
             streamed to a temporary file within the bounds of the job's replies
             (``batch.base.result_bytes``, ``result_seconds``) and read a line at a time
    cleanup  files.delete of the input, output and error files

OpenAI takes up to 50,000 requests and 200 MB per file; ``LIMITS`` keeps a margin.
Azure differs only in the line's url (``/chat/completions``; the model is a
Global-Batch deployment's name). Imported only by the openai backend, on demand.
"""

from __future__ import annotations

import json
import logging
import tempfile
from typing import IO, Any, Callable, Iterator, Sequence

import openai
from openai.types.chat import ChatCompletion

from ...batch.base import (CANCELLED, COMPLETED, EXPIRED, FAILED, ITEM_EXPIRED, ITEM_FAILED, MIN_TRANSFER_RATE, RUNNING,
                           Item, JobStatus, Limits, Result, item_error, result_bytes, result_line_bytes, result_lines,
                           result_seconds)
from ...calls.retry import RetryPolicy, call_with_retries
from ...core.errors import JudgeCallError, MediaError, TransientJudgeError
from ...core.redact import redact
from ...core.types import JudgeRequest, Reply
from ...settings import credentials
from ...settings.models import DEFAULT_MAX_TOKENS, default_reply_bytes
from .. import wire
from .._http import about, status_error
from .chat import reply_of

log = logging.getLogger(__name__)

LIMITS = Limits(max_requests=50_000, max_bytes=190 * 1024 * 1024)  # OpenAI: 50,000 requests, 200 MB per file
COMPLETION_WINDOW = "24h"  # the only window OpenAI offers
FILE_NAME = "lm_eval_mathjudge-batch.jsonl"
DOWNLOAD_CHUNK = 1 << 20  # bytes of a result file written to disk at a time
_STATES = {"validating": RUNNING, "in_progress": RUNNING, "finalizing": RUNNING, "cancelling": RUNNING,
           "completed": COMPLETED, "failed": FAILED, "expired": EXPIRED, "cancelled": CANCELLED}
_URLS = {"openai": "/v1/chat/completions", "azure": "/chat/completions"}


def create(backend: Any) -> OpenAIBatchProvider:
    """The batch API of an ``OpenAIBackend``'s own client: the same request bodies, sent as one file."""
    s = backend.settings
    return OpenAIBatchProvider(backend.sdk, backend.request_body, backend.api_error, backend=s.backend,
                               endpoint=backend.endpoint, max_retries=s.max_retries, timeout=s.timeout,
                               reply_bytes=s.reply_bytes)


class OpenAIBatchProvider:
    """Batch jobs on the judge's own client (same endpoint, key variable, timeout; SDK retries off)."""

    limits = LIMITS

    def __init__(self, client: Any, body: Callable[[JudgeRequest], dict], api_error: Callable[[Exception],
                 JudgeCallError], *, backend: str, endpoint: str, max_retries: int, timeout: float = 120.0,
                 reply_bytes: int = default_reply_bytes(DEFAULT_MAX_TOKENS)):
        self._client, self._body, self.api_error = client, body, api_error
        self._reply_bytes = reply_bytes  # the judge's cap on one reply: a result line's, times the items a file's
        self.name = backend
        self._url = _URLS[backend]
        self._endpoint = endpoint
        self._policy = RetryPolicy(max_retries=max_retries)
        self._timeout = timeout

    # ------------------------------------------------------------------ contract
    def submit(self, items: Sequence[Item]) -> str:
        data = self.request_file(items)
        if not data:
            return ""
        upload = self._sdk(lambda: self._client.files.create(
            file=(FILE_NAME, data, "application/jsonl"), purpose="batch",
            timeout=max(self._timeout, len(data) / MIN_TRANSFER_RATE)))
        try:
            job = self._sdk(lambda: self._client.batches.create(
                input_file_id=upload.id, endpoint=self._url, completion_window=COMPLETION_WINDOW,
                metadata={"created_by": "lm_eval_mathjudge"}))
        except BaseException:
            self._delete(upload.id)  # no job will ever read it
            raise
        return job.id

    def status(self, job_id: str) -> JobStatus:
        job = self._sdk(lambda: self._client.batches.retrieve(job_id))
        counts = job.request_counts
        total, completed, failed = ((counts.total, counts.completed, counts.failed) if counts else (0, 0, 0))
        errors = getattr(getattr(job, "errors", None), "data", None) or []
        message = "; ".join(f"{e.code or 'error'}: {e.message}" + (f" (line {e.line})" if e.line else "")
                            for e in errors[:5])
        return JobStatus(_STATES.get(job.status, FAILED), done=completed + failed, total=total, failed=failed,
                         raw_state=job.status, message=redact(message)[:1000])

    def results(self, job_id: str) -> Iterator[Result]:
        job = self._sdk(lambda: self._client.batches.retrieve(job_id))
        counts = job.request_counts
        items = (counts.total if counts else 0) or LIMITS.max_requests
        for file_id in (job.output_file_id, job.error_file_id):
            if not file_id:
                continue
            with tempfile.TemporaryFile() as spool:  # streamed to disk: a result file is never held in memory
                call_with_retries(lambda: self._download(file_id, spool, items), self._policy)  # noqa: B023 (called in this iteration)
                spool.seek(0)
                for line in result_lines(spool, result_line_bytes(self._reply_bytes)):
                    if line is None:  # its item is left unanswered: the runner's fallback takes it
                        log.warning("batch job %s: a line of %s is over the %d-byte cap of one reply; skipped",
                                    job_id, file_id, result_line_bytes(self._reply_bytes))
                    elif line.strip():
                        yield self._line(line)

    def cleanup(self, job_id: str) -> None:
        try:
            job = self._sdk(lambda: self._client.batches.retrieve(job_id))
        except JudgeCallError as exc:
            log.warning("batch job %s: could not look up its files to delete them (%s); delete them in the "
                        "provider's console", job_id, exc)
            return
        for file_id in (job.input_file_id, job.output_file_id, job.error_file_id):
            if file_id:
                self._delete(file_id)

    # ------------------------------------------------------------------ request file
    def request_file(self, items: Sequence[Item]) -> bytes:
        """The JSONL request file; an item whose body cannot be built is left out (the online pass fails it)."""
        lines = []
        for key, request in items:
            try:
                body = self._body(request)
            except MediaError as exc:  # UnsendableRequest too: this sample only, never sent
                log.debug("batch: request %s left out of the batch (%s)", key[:12], exc)
                continue
            lines.append(json.dumps({"custom_id": key, "method": "POST", "url": self._url, "body": body},
                                    ensure_ascii=False))
        return "".join(line + "\n" for line in lines).encode("utf-8")

    # ------------------------------------------------------------------ result lines
    def _line(self, line: str) -> Result:
        try:
            row = json.loads(line)
            key = row["custom_id"]
        except (ValueError, KeyError, TypeError):
            raise TransientJudgeError(f"malformed line in a batch result file: {line[:200]!r}",
                                      kind="bad_response") from None
        return key, _item(row, self.name)

    def _download(self, file_id: str, spool: IO[bytes], items: int) -> None:
        """One result file into ``spool``, within the bounds of ``items`` replies (a retry starts over)."""
        spool.seek(0)
        spool.truncate()
        bounds = wire.scoped(max_bytes=result_bytes(items, self._reply_bytes),
                             seconds=result_seconds(items, self._timeout))
        timeouts, transport, _ = wire.http_exceptions()
        try:
            with bounds, self._client.files.with_streaming_response.content(file_id) as response:
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    spool.write(chunk)
        except JudgeCallError as exc:  # a network bound (wire): the file over its cap, past its deadline
            raise about(exc, f"the batch result file {file_id}") from None
        except openai.APIError as exc:
            raise about(self.api_error(exc), f"the batch result file {file_id}") from None
        except (*timeouts, *transport) as exc:  # the body broke off mid-way: retried
            raise TransientJudgeError(redact(f"the batch result file {file_id} broke off at {self._endpoint}: "
                                             f"{type(exc).__name__}: {exc}"), kind="connection") from None

    def _delete(self, file_id: str) -> None:
        try:
            self._sdk(lambda: self._client.files.delete(file_id))
        except JudgeCallError as exc:
            log.warning("could not delete the batch file %s at %s (%s); delete it in the provider's console",
                        file_id, self._endpoint, exc)

    def _sdk(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except openai.APIError as exc:
            raise self.api_error(exc) from None


def _item(row: dict, service: str) -> Reply | JudgeCallError:
    """One result line: a reply, or this item's error (the same types an online call raises)."""
    response, error = row.get("response") or {}, row.get("error") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        try:
            return reply_of(ChatCompletion.model_validate(body))
        except JudgeCallError as exc:  # max_tokens, content filter (refusals), or no choices
            return exc
        except ValueError as exc:
            return item_error(ITEM_FAILED, redact(f"malformed completion in the batch output: {exc}"[:500]))
    if isinstance(status, int) and status >= 400:
        detail = body.get("error", body) if isinstance(body, dict) else body
        message = detail.get("message") if isinstance(detail, dict) else detail
        code = detail.get("code") if isinstance(detail, dict) else None
        return status_error(status, str(message or ""), keys=credentials.SERVICES[service].rejected, code=code)
    code = str(error.get("code") or "error")
    kind = ITEM_EXPIRED if code == "batch_expired" else ITEM_FAILED
    return item_error(kind, redact(f"batch item not answered ({code}): {error.get('message') or 'no message'}"[:500]))
