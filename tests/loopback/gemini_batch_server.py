"""Loopback server speaking Gemini Batch Mode as google-genai 3.x uses it (Developer API).

Everything `GeminiServer` answers (generateContent, the File API, model lookup)
plus the batch routes, with the JSON shapes the SDK's `batches` module reads:

    POST   /v1*/models/{model}:batchGenerateContent   body {"batch": {"displayName", "inputConfig":
           {"requests": {"requests": [{"request": {...}, "metadata": {...}}]}} | {"fileName": "files/x"}}}
           -> an Operation {"name": "batches/x", "metadata": {GenerateContentBatch, "state": BATCH_STATE_*}}
    GET    /v1*/batches/{id}            -> the Operation; each read moves the job on (PENDING, RUNNING, end)
    POST   /v1*/batches/{id}:cancel     -> {} (the job ends CANCELLED, keeping what is done: nothing here)
    DELETE /v1*/batches/{id}            -> {}
    GET    /v1*/files/{id}:download?alt=media   -> the raw bytes of a file the batch wrote

A finished inline job carries `metadata.output.inlinedResponses.inlinedResponses`
(one `{"response" | "error", "metadata"}` per request, in request order); a
file job carries `metadata.output.responsesFile`, a JSONL file of
`{"key", "response" | "error"}` lines. Each request is answered by the same
responder as generateContent (a spec with `status` >= 400 becomes that item's
google.rpc error), so refusals (finish reasons, block reasons) and usage look
exactly like online replies.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from ._base import Reply
from .gemini_server import GeminiServer, _rfc3339, _StoredFile

_BATCH_CREATE = re.compile(r"^/v1\w*/models/(?P<model>[^/:]+):batchGenerateContent$")
_BATCH = re.compile(r"^/v1\w*/batches/(?P<id>[^/:]+)$")
_BATCH_CANCEL = re.compile(r"^/v1\w*/batches/(?P<id>[^/:]+):cancel$")
_DOWNLOAD = re.compile(r"^/(?:download/)?v1\w*/(?P<name>files/[^/:]+):download$")

REQUEST_LIMIT = 20 * 1024 * 1024  # the Gemini API refuses larger request payloads
END_STATES = ("BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED")


@dataclass
class BatchJob:
    """A job as the server keeps it; `requests` are (metadata or key, GenerateContentRequest JSON)."""

    name: str
    model: str
    display_name: str | None
    source: str  # "inline" or "file"
    requests: list[tuple[Any, Any]]
    created: datetime
    state: str = "BATCH_STATE_PENDING"
    reads: int = 0
    finishing: bool = False
    output: dict | None = None
    error: dict | None = None
    answered: list[dict] = field(default_factory=list)  # request bodies the responder saw


class GeminiBatchServer(GeminiServer):
    """GeminiServer + Batch Mode.

    pending_reads / running_reads: how many GETs a job spends in each state
    before it ends; end_state: how jobs end (BATCH_STATE_SUCCEEDED, or FAILED /
    EXPIRED / CANCELLED, which carry no output). `batch_responder`, when
    set, answers batch items instead of `responder` (faults that only the
    batch sees). `jobs` and `deleted_jobs` expose the server side for assertions.
    """

    def __init__(self, responder=None, latency: float = 0.0, processing_polls: int = 1,
                 pending_reads: int = 1, running_reads: int = 1) -> None:
        self.pending_reads = pending_reads
        self.running_reads = running_reads
        self.end_state = "BATCH_STATE_SUCCEEDED"
        self.request_limit = REQUEST_LIMIT
        self.echo_metadata = True  # False: inline responses come back without their request's metadata
        self.reverse_output = False  # answer in reverse request order (clients must match by key)
        self.failing_downloads = 0  # the next N result downloads answer 503 UNAVAILABLE
        self.batch_responder = None  # answers batch items instead of `responder` when set (batch-only faults)
        self._job_ids = itertools.count(1)
        super().__init__(responder, latency, processing_polls)

    def _clear(self) -> None:
        super()._clear()
        self.jobs: dict[str, BatchJob] = {}
        self.deleted_jobs: list[str] = []
        self.cancelled_jobs: list[str] = []

    @property
    def batch_creates(self) -> int:
        return sum(1 for r in self.requests if r.method == "POST" and _BATCH_CREATE.match(urlsplit(r.path).path))

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        parts = urlsplit(path)
        if method == "POST" and (m := _BATCH_CREATE.match(parts.path)):
            return self._fault_reply() or self._create(m["model"], raw)
        if method == "POST" and (m := _BATCH_CANCEL.match(parts.path)):
            return self._cancel(f"batches/{m['id']}")
        if m := _BATCH.match(parts.path):
            if method == "GET":
                return self._read(f"batches/{m['id']}")
            if method == "DELETE":
                return self._delete_job(f"batches/{m['id']}")
        if method == "GET" and (m := _DOWNLOAD.match(parts.path)):
            return self._download(m["name"])
        return super().route(method, path, headers, raw)

    # -- create ---------------------------------------------------------------------
    def _create(self, model: str, raw: bytes) -> Reply:
        if len(raw) > self.request_limit:
            return self._error(400, f"Request payload size exceeds the limit: {self.request_limit} bytes.")
        try:
            batch = json.loads(raw)["batch"]
            source = batch["inputConfig"]
        except (ValueError, KeyError, TypeError):
            return self._error(400, "Invalid JSON payload received: a batch with an inputConfig is required.")
        if "fileName" in source:
            requests = self._file_requests(source["fileName"])
            if isinstance(requests, Reply):
                return requests
            kind = "file"
        else:
            items = (source.get("requests") or {}).get("requests") or []
            requests = [(item.get("metadata"), item.get("request")) for item in items]
            kind = "inline"
        if not requests:
            return self._error(400, "The batch has no requests.")
        name = f"batches/loopback{next(self._job_ids)}{uuid.uuid4().hex[:8]}"
        job = BatchJob(name, f"models/{model}", batch.get("displayName"), kind, requests, datetime.now(timezone.utc))
        with self._lock:
            self.jobs[name] = job
            return Reply(200, self._operation(job))

    def _file_requests(self, file_name: str) -> list[tuple[Any, Any]] | Reply:
        with self._lock:
            stored = self._files.get(file_name)
        if stored is None:
            return self._missing(file_name)
        requests = []
        for line in stored.data.decode("utf-8").splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                return self._error(400, f"Invalid JSON line in the input file {file_name}.")
            requests.append((row.get("key"), row.get("request")))
        return requests

    # -- read / progress --------------------------------------------------------------
    def _read(self, name: str) -> Reply:
        with self._lock:
            job = self.jobs.get(name)
            if job is None:
                return self._error(404, f"Batch {name} not found.")
            job.reads += 1
            if job.state == "BATCH_STATE_PENDING" and job.reads > self.pending_reads:
                job.state = "BATCH_STATE_RUNNING"
            finish = (job.state == "BATCH_STATE_RUNNING" and not job.finishing
                      and job.reads > self.pending_reads + self.running_reads)
            job.finishing = job.finishing or finish
        if finish:  # the responder runs outside the lock, as generateContent does
            self._finish(job, self.end_state)
        with self._lock:
            return Reply(200, self._operation(job))

    def _finish(self, job: BatchJob, state: str) -> None:
        if state != "BATCH_STATE_SUCCEEDED":
            with self._lock:
                job.state = state
                if state == "BATCH_STATE_FAILED":
                    job.error = {"code": 13, "message": "loopback: the batch failed"}
            return
        answers = [(meta, self._answer(job, request)) for meta, request in job.requests]
        if self.reverse_output:
            answers.reverse()
        if job.source == "inline":
            output = {"inlinedResponses": {"inlinedResponses": [
                {**answer, **({"metadata": meta} if meta is not None and self.echo_metadata else {})}
                for meta, answer in answers]}}
        else:
            lines = [json.dumps({"key": key, **answer}) for key, answer in answers]
            output = {"responsesFile": self._write_file(job, "\n".join(lines) + "\n").name}
        with self._lock:
            job.output, job.state = output, "BATCH_STATE_SUCCEEDED"

    def _answer(self, job: BatchJob, request: Any) -> dict:
        if not isinstance(request, dict):
            return {"error": {"code": 3, "message": "Invalid request: a GenerateContentRequest is required."}}
        job.answered.append(request)
        outcome = self._ask_batch_responder(json.dumps(request).encode())
        if isinstance(outcome, Reply):  # an error spec: that item fails with its google.rpc status
            error = outcome.body.get("error") if isinstance(outcome.body, dict) else None
            return {"error": error or {"code": outcome.status, "message": "loopback item error"}}
        body, spec = outcome
        return {"response": self._response(job.model.removeprefix("models/"), body, spec)}

    def _ask_batch_responder(self, raw: bytes) -> Any:
        if self.batch_responder is None:
            return self.ask_responder(raw, "text")
        online, self.responder = self.responder, self.batch_responder
        try:  # ask_responder reads self.responder; batch items are answered one job at a time
            return self.ask_responder(raw, "text")
        finally:
            self.responder = online

    def _write_file(self, job: BatchJob, text: str) -> _StoredFile:
        name = f"files/{job.name.removeprefix('batches/')}out"
        stored = _StoredFile(name, "application/jsonl", text.encode(), None, datetime.now(timezone.utc), 0)
        with self._lock:
            self._files[name] = stored
        return stored

    def _operation(self, job: BatchJob) -> dict:
        """The google.longrunning.Operation the API returns for batches (call with the lock held)."""
        done = job.state in END_STATES
        total = len(job.requests)
        stats = {"requestCount": str(total)}
        if job.state == "BATCH_STATE_SUCCEEDED":
            failed = self._failed_count(job)
            stats.update(successfulRequestCount=str(total - failed), failedRequestCount=str(failed))
        elif job.state == "BATCH_STATE_RUNNING":  # half way: progress a poller can show
            stats.update(successfulRequestCount=str(total // 2), pendingRequestCount=str(total - total // 2))
        else:
            stats["pendingRequestCount"] = str(total)
        metadata = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "name": job.name, "model": job.model, "state": job.state, "batchStats": stats,
            "createTime": _rfc3339(job.created), "updateTime": _rfc3339(datetime.now(timezone.utc)),
        }
        if job.display_name:
            metadata["displayName"] = job.display_name
        if done:
            metadata["endTime"] = _rfc3339(datetime.now(timezone.utc))
        if job.output is not None:
            metadata["output"] = job.output
        operation: dict[str, Any] = {"name": job.name, "metadata": metadata, "done": done}
        if job.error is not None:
            operation["error"] = job.error
        elif job.output is not None:
            operation["response"] = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                **job.output}
        return operation

    def _failed_count(self, job: BatchJob) -> int:
        if job.output is None:
            return 0
        if "inlinedResponses" in job.output:
            return sum(1 for r in job.output["inlinedResponses"]["inlinedResponses"] if "error" in r)
        stored = self._files.get(job.output["responsesFile"])
        lines = stored.data.decode().splitlines() if stored else []
        return sum(1 for line in lines if line.strip() and "error" in json.loads(line))

    # -- cancel / delete / download ---------------------------------------------------
    def _cancel(self, name: str) -> Reply:
        with self._lock:
            job = self.jobs.get(name)
            if job is None:
                return self._error(404, f"Batch {name} not found.")
            if job.state not in END_STATES:
                job.state = "BATCH_STATE_CANCELLED"
            self.cancelled_jobs.append(name)
        return Reply(200, {})

    def _delete_job(self, name: str) -> Reply:
        with self._lock:
            if self.jobs.pop(name, None) is None:
                return self._error(404, f"Batch {name} not found.")
            self.deleted_jobs.append(name)
        return Reply(200, {})

    def _download(self, name: str) -> Reply:
        with self._lock:
            if self.failing_downloads > 0:
                self.failing_downloads -= 1
                return self._error(503, "The service is currently unavailable.")
            stored = self._files.get(name)
        if stored is None:
            return self._missing(name)
        return Reply(200, stored.data, {"Content-Type": stored.mime_type})
