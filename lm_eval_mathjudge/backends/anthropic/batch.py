"""Anthropic's Message Batches as a ``BatchProvider``.

    submit   messages.batches.create(requests=[{custom_id: cache key, params: body}]), where the
             body is exactly what an online call sends (``body.request_body``)
    status   messages.batches.retrieve: in_progress and canceling are running; ended is final
             (cancelled when a cancel was asked, expired when items expired, else completed)
    results  the results file (JSONL, one line per request: succeeded with its message, errored,
             canceled or expired), streamed to a temporary file within the bounds of the job's
             replies (``batch.base.result_bytes``, ``result_seconds``) and read a line at a time
    cleanup  messages.batches.delete (an ended batch; there are no files to delete)

A batch takes up to 100,000 requests or 256 MB; ``LIMITS`` keeps a margin. Half the online price.
"""

from __future__ import annotations

import json
import logging
import tempfile
from typing import IO, Any, Callable, Iterator, Sequence

import anthropic
from anthropic.types import Message

from ...batch.base import (CANCELLED, COMPLETED, EXPIRED, ITEM_EXPIRED, ITEM_FAILED, MIN_TRANSFER_RATE, RUNNING, Item,
                           JobStatus, Limits, Result, item_error, result_bytes, result_line_bytes, result_lines,
                           result_seconds)
from ...calls.retry import RetryPolicy, call_with_retries
from ...core.errors import JudgeCallError, MediaError, TransientJudgeError
from ...core.redact import redact
from ...core.types import Reply
from ...settings.schema import JudgeSettings
from .. import wire
from .._http import about
from . import body, errors

log = logging.getLogger(__name__)

LIMITS = Limits(max_requests=100_000, max_bytes=240 * 1024 * 1024)  # Anthropic: 100,000 requests or 256 MB
DOWNLOAD_CHUNK = 1 << 20  # bytes of a result file written to disk at a time
_RUNNING = ("in_progress", "canceling")


def create(backend: Any) -> AnthropicBatchProvider:
    """The batch API of an ``AnthropicBackend``'s own client: the same request bodies, one batch."""
    return AnthropicBatchProvider(backend.sdk, backend.settings, backend.api_error, endpoint=backend.endpoint)


class AnthropicBatchProvider:
    """Message Batches on the judge's own client (same endpoint, key variable, timeout; SDK retries off)."""

    name = "anthropic"
    limits = LIMITS

    def __init__(self, client: Any, settings: JudgeSettings, api_error: Callable[[Exception], JudgeCallError], *,
                 endpoint: str):
        self._client, self._settings, self.api_error = client, settings, api_error
        self._endpoint = endpoint
        self._policy = RetryPolicy(max_retries=settings.max_retries)

    # ------------------------------------------------------------------ contract
    def submit(self, items: Sequence[Item]) -> str:
        requests = self.requests(items)
        if not requests:
            return ""
        size = len(json.dumps(requests, ensure_ascii=False).encode("utf-8"))
        job = self._sdk(lambda: self._client.messages.batches.create(
            requests=requests, timeout=max(self._settings.timeout, size / MIN_TRANSFER_RATE)))
        return job.id

    def status(self, job_id: str) -> JobStatus:
        job = self._sdk(lambda: self._client.messages.batches.retrieve(job_id))
        counts = job.request_counts
        done = counts.succeeded + counts.errored + counts.canceled + counts.expired
        return JobStatus(_state(job), done=done, total=done + counts.processing,
                         failed=counts.errored + counts.canceled + counts.expired, raw_state=job.processing_status)

    def results(self, job_id: str) -> Iterator[Result]:
        job = self._sdk(lambda: self._client.messages.batches.retrieve(job_id))
        counts = job.request_counts
        items = counts.succeeded + counts.errored + counts.canceled + counts.expired or LIMITS.max_requests
        limit = result_line_bytes(self._settings.reply_bytes)
        with tempfile.TemporaryFile() as spool:  # streamed to disk: a result file is never held in memory
            call_with_retries(lambda: self._download(job_id, spool, items), self._policy)
            spool.seek(0)
            for line in result_lines(spool, limit):
                if line is None:  # its item is left unanswered: the runner's fallback takes it
                    log.warning("batch %s: a result line is over the %d-byte cap of one reply; skipped", job_id, limit)
                elif line.strip():
                    yield self._line(line)

    def cleanup(self, job_id: str) -> None:
        try:
            self._sdk(lambda: self._client.messages.batches.delete(job_id))
        except JudgeCallError as exc:
            log.warning("could not delete the message batch %s at %s (%s); delete it in the Claude Console",
                        job_id, self._endpoint, exc)

    # ------------------------------------------------------------------ requests and results
    def requests(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        """One request per item; an item whose body cannot be built is left out (the online pass fails it)."""
        requests = []
        for key, request in items:
            try:
                requests.append({"custom_id": key, "params": body.request_body(self._settings, request)})
            except MediaError as exc:  # UnsendableRequest too: this sample only, never sent
                log.debug("batch: request %s left out of the batch (%s)", key[:12], exc)
        return requests

    def _line(self, line: str) -> Result:
        try:
            row = json.loads(line)
            key, result = row["custom_id"], row["result"]
        except (ValueError, KeyError, TypeError):
            raise TransientJudgeError(f"malformed line in a batch result file: {line[:200]!r}",
                                      kind="bad_response") from None
        return key, self._item(result if isinstance(result, dict) else {})

    def _item(self, result: dict) -> Reply | JudgeCallError:
        """One request's result: a reply, or this item's error (the same types an online call raises)."""
        kind = result.get("type")
        if kind == "succeeded":
            try:
                return body.reply_of(Message.model_validate(result.get("message")), self._settings)
            except JudgeCallError as exc:  # max_tokens, a refusal, no text
                return exc
            except ValueError as exc:
                return item_error(ITEM_FAILED, redact(f"malformed message in the batch results: {exc}"[:500]))
        if kind == "errored":
            error = result.get("error") or {}
            status = errors.TYPE_STATUS.get(errors.error_of(error)[0], 500)
            return errors.classified(status, error, self._endpoint)
        if kind == "expired":
            return item_error(ITEM_EXPIRED, "batch item not answered (expired): the batch's 24 hours ran out")
        return item_error(ITEM_FAILED, f"batch item not answered ({kind or 'no result type'})")

    def _download(self, job_id: str, spool: IO[bytes], items: int) -> None:
        """The results file into ``spool``, within the bounds of ``items`` replies (a retry starts over)."""
        spool.seek(0)
        spool.truncate()
        reply_bytes, timeout = self._settings.reply_bytes, self._settings.timeout
        bounds = wire.scoped(max_bytes=result_bytes(items, reply_bytes), seconds=result_seconds(items, timeout))
        timeouts, transport, _ = wire.http_exceptions()
        what = f"the results of message batch {job_id}"
        try:
            with bounds, self._client.messages.batches.with_streaming_response.results(job_id) as response:
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    spool.write(chunk)
        except JudgeCallError as exc:  # a network bound (wire): the file over its cap, past its deadline
            raise about(exc, what) from None
        except anthropic.APIError as exc:
            raise about(self.api_error(exc), what) from None
        except (*timeouts, *transport) as exc:  # the body broke off mid-way: retried
            raise TransientJudgeError(redact(f"{what} broke off at {self._endpoint}: {type(exc).__name__}: {exc}"),
                                      kind="connection") from None

    def _sdk(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except anthropic.APIError as exc:
            raise self.api_error(exc) from None


def _state(job: Any) -> str:
    if job.processing_status in _RUNNING:
        return RUNNING
    if job.cancel_initiated_at is not None:
        return CANCELLED
    return EXPIRED if job.request_counts.expired else COMPLETED
