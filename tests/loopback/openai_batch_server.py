"""Loopback server speaking the OpenAI Files + Batches wire protocol (and chat completions).

    POST   /v1/files                 multipart upload (purpose=batch) -> file object
    GET    /v1/files/{id}            file object
    GET    /v1/files/{id}/content    the file's bytes
    DELETE /v1/files/{id}            {"id", "object": "file", "deleted": true}
    POST   /v1/batches               {input_file_id, endpoint, completion_window} -> batch object
    GET    /v1/batches/{id}          batch object (each read moves the job on, see below)
    POST   /v1/batches/{id}/cancel   cancelling, then cancelled

Azure OpenAI's routes (``/openai/files``, ``/openai/batches``) are served too.
The request file is validated as api.openai.com does (JSON lines, unique
custom_id, method POST, the batch's url); a bad file fails the job with
``errors``. Jobs move on when read, so tests need no clock: validating, then
in_progress for ``polls_in_progress`` reads (request_counts growing), then
finalizing, then completed (or expired, when ``fate`` let any item expire).
``hold = True`` keeps jobs in_progress until released. Each request line is
answered by the same responder as online chat calls (so a batch and an online
run see the same judge), unless ``fate(index, body)`` says "expired" or
"failed" for it.
"""

from __future__ import annotations

import email.parser
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from ._base import Reply, Responder
from .openai_server import ChatCompletionsServer

_ROUTE = re.compile(r"^(?:/v1|/openai)?/(?P<kind>files|batches)(?:/(?P<id>[^/]+))?(?:/(?P<action>content|cancel))?$")
Fate = Callable[[int, dict], "str | None"]  # (line index, request body) -> None, "expired" or "failed"


@dataclass
class _Job:
    id: str
    input_file_id: str
    endpoint: str
    window: str
    metadata: dict | None
    created: int
    status: str = "validating"
    reads: int = 0
    lines: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    times: dict = field(default_factory=dict)


class OpenAIBatchServer(ChatCompletionsServer):
    """Chat completions plus the Files and Batches APIs, on 127.0.0.1."""

    def __init__(self, responder: Responder | None = None, latency: float = 0.0,
                 polls_in_progress: int = 2, fate: Fate | None = None):
        self.polls_in_progress = polls_in_progress
        self.fate = fate
        self.hold = False
        self.fail_job: str | None = None  # a message: the next jobs fail validation with it
        super().__init__(responder, latency)

    def _clear(self) -> None:
        super()._clear()
        self.files: dict[str, dict] = {}
        self.contents: dict[str, bytes] = {}
        self.deleted: list[str] = []
        self.jobs: dict[str, _Job] = {}
        self._file_ids = itertools.count(1)
        self._job_ids = itertools.count(1)
        self._jobs_lock = threading.Lock()

    # -- what tests read ---------------------------------------------------------
    @property
    def batches_created(self) -> int:
        return sum(1 for r in self.requests if r.method == "POST" and _kind(r.path) == ("batches", None, None))

    @property
    def polls(self) -> int:
        return sum(1 for r in self.requests if r.method == "GET" and _kind(r.path)[0] == "batches")

    def release(self) -> None:
        self.hold = False

    def complete_jobs(self) -> None:
        """Move every job to its final state now (the hours a real batch takes, between two runs)."""
        self.hold = False
        with self._jobs_lock:
            for job in self.jobs.values():
                for _ in range(self.polls_in_progress + 4):
                    if job.status in ("completed", "failed", "expired", "cancelled"):
                        break
                    self._advance(job)

    # -- routing -----------------------------------------------------------------
    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        kind, item, action = _kind(path)
        if kind is None:
            return super().route(method, path, headers, raw)
        with self._jobs_lock:
            if kind == "files":
                return self._files(method, item, action, headers, raw)
            return self._batches(method, item, action, raw)

    def _files(self, method: str, item: str | None, action: str | None, headers: dict, raw: bytes) -> Reply:
        if method == "POST" and item is None:
            return self._upload(headers, raw)
        if item not in self.files:
            return self._missing(f"No such File object: {item}")
        if method == "DELETE" and action is None:
            del self.files[item]
            self.contents.pop(item, None)
            self.deleted.append(item)
            return Reply(200, {"id": item, "object": "file", "deleted": True})
        if method == "GET" and action == "content":
            return Reply(200, self.contents[item], {"Content-Type": "application/octet-stream"})
        if method == "GET" and action is None:
            return Reply(200, self.files[item])
        return self._missing(f"Unknown route {method} files")

    def _upload(self, headers: dict, raw: bytes) -> Reply:
        parts = _multipart(headers.get("content-type", ""), raw)
        if "file" not in parts or "purpose" not in parts:
            return Reply(400, self.error_body(400, "Missing required parameter: 'file' or 'purpose'.", {}))
        purpose = parts["purpose"][1].decode()
        if purpose not in ("batch", "assistants", "fine-tune", "vision", "user_data", "evals"):
            return Reply(400, self.error_body(400, f"Invalid value for 'purpose': {purpose!r}.", {}))
        file_id = f"file-loopback{next(self._file_ids)}"
        name, data = parts["file"]
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                               "filename": name or "upload", "purpose": purpose, "status": "processed",
                               "expires_at": None, "status_details": None}
        self.contents[file_id] = data
        return Reply(200, self.files[file_id])

    def _batches(self, method: str, item: str | None, action: str | None, raw: bytes) -> Reply:
        if method == "POST" and item is None:
            return self._create(raw)
        job = self.jobs.get(item or "")
        if job is None:
            return self._missing(f"No such Batch object: {item}")
        if method == "POST" and action == "cancel":
            if job.status in ("validating", "in_progress", "finalizing"):
                job.status = "cancelling"
            return Reply(200, self._batch(job))
        if method == "GET" and action is None:
            self._advance(job)
            return Reply(200, self._batch(job))
        return self._missing(f"Unknown route {method} batches")

    def _create(self, raw: bytes) -> Reply:
        body = json.loads(raw)
        if body.get("input_file_id") not in self.files:
            return Reply(400, self.error_body(400, f"Invalid 'input_file_id': {body.get('input_file_id')}.", {}))
        if body.get("completion_window") != "24h":
            return Reply(400, self.error_body(400, "Invalid 'completion_window': only '24h' is supported.", {}))
        endpoint = body.get("endpoint")
        if endpoint not in ("/v1/chat/completions", "/chat/completions", "/v1/embeddings", "/v1/responses"):
            return Reply(400, self.error_body(400, f"Invalid 'endpoint': {endpoint!r}.", {}))
        job = _Job(f"batch_loopback{next(self._job_ids)}", body["input_file_id"], endpoint,
                   body["completion_window"], body.get("metadata"), int(time.time()))
        self.jobs[job.id] = job
        return Reply(200, self._batch(job))

    # -- the job's life ----------------------------------------------------------
    def _advance(self, job: _Job) -> None:
        """One read moves the job one step (in_progress lasts polls_in_progress reads)."""
        job.reads += 1
        if job.status == "validating":
            self._validate(job)
        elif job.status == "in_progress" and not self.hold:
            step = max(1, self.polls_in_progress)
            job.counts["completed"] = min(len(job.lines), job.counts["completed"] + -(-len(job.lines) // step))
            if job.counts["completed"] >= len(job.lines):
                job.status = "finalizing"
                job.times["finalizing_at"] = int(time.time())
        elif job.status == "finalizing":
            self._finish(job)
        elif job.status == "cancelling":
            self._finish(job, cancelled=True)

    def _validate(self, job: _Job) -> None:
        errors, seen = [], set()
        for number, line in enumerate(self.contents.get(job.input_file_id, b"").decode().splitlines(), 1):
            try:
                row = json.loads(line)
            except ValueError:
                errors.append(_error("invalid_json_line", "This line is not parseable as valid JSON.", number))
                continue
            if row.get("custom_id") in seen:
                errors.append(_error("duplicate_custom_id", "The custom_id for this request is a duplicate.",
                                     number))
            if row.get("method") != "POST" or row.get("url") != job.endpoint:
                errors.append(_error("invalid_url", f"The url provided for this request does not match the "
                                     f"batch endpoint {job.endpoint}.", number))
            seen.add(row.get("custom_id"))
            job.lines.append(row)
        if self.fail_job:
            errors.append(_error("token_limit_exceeded", self.fail_job, None))
        if not job.lines and not errors:
            errors.append(_error("empty_file", "The batch input file is empty.", None))
        job.counts["total"] = len(job.lines)
        if errors:
            job.status, job.errors = "failed", errors
            job.times["failed_at"] = int(time.time())
        else:
            job.status = "in_progress"
            job.times["in_progress_at"] = int(time.time())

    def _finish(self, job: _Job, cancelled: bool = False) -> None:
        done, failed, expired = [], [], False
        for index, row in enumerate(job.lines):
            fate = "cancelled" if cancelled else (self.fate(index, row["body"]) if self.fate else None)
            if fate is None:
                done.append(self._answer(row))
            else:
                expired = expired or fate == "expired"
                failed.append(self._unanswered(row, fate))
        job.output_file_id = self._store_result(job, done)
        job.error_file_id = self._store_result(job, failed)
        job.counts.update(completed=len(done), failed=len(failed))
        job.status = "cancelled" if cancelled else ("expired" if expired else "completed")
        job.times[f"{job.status}_at"] = int(time.time())

    def _answer(self, row: dict) -> dict:
        reply = self._chat(json.dumps(row["body"]).encode())
        return {"id": f"batch_req_{row['custom_id'][:16]}", "custom_id": row["custom_id"],
                "response": {"status_code": reply.status, "request_id": f"req_{row['custom_id'][:12]}",
                             "body": reply.body}, "error": None}

    @staticmethod
    def _unanswered(row: dict, fate: str) -> dict:
        line = {"id": f"batch_req_{row['custom_id'][:16]}", "custom_id": row["custom_id"]}
        if fate == "failed":  # the request ran and the server failed it
            error = {"message": "The server had an error while processing your request.", "type": "server_error",
                     "param": None, "code": None}
            return {**line, "response": {"status_code": 500, "request_id": "req_failed", "body": {"error": error}},
                    "error": None}
        code = {"expired": "batch_expired", "cancelled": "batch_cancelled"}[fate]
        message = ("This request could not be executed before the completion window expired." if fate == "expired"
                   else "This request was not executed because the batch was cancelled.")
        return {**line, "response": None, "error": {"code": code, "message": message}}

    def _store_result(self, job: _Job, rows: list[dict]) -> str | None:
        if not rows:
            return None
        file_id = f"file-loopback{next(self._file_ids)}"
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                               "filename": f"{job.id}_output.jsonl", "purpose": "batch_output",
                               "status": "processed", "expires_at": None, "status_details": None}
        self.contents[file_id] = data
        return file_id

    def _batch(self, job: _Job) -> dict:
        times = {f"{name}_at": job.times.get(f"{name}_at") for name in
                 ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")}
        return {"id": job.id, "object": "batch", "endpoint": job.endpoint,
                "errors": {"object": "list", "data": job.errors} if job.errors else None,
                "input_file_id": job.input_file_id, "completion_window": job.window, "status": job.status,
                "output_file_id": job.output_file_id, "error_file_id": job.error_file_id,
                "created_at": job.created, "expires_at": job.created + 86400, **times,
                "request_counts": dict(job.counts), "metadata": job.metadata}

    def _missing(self, message: str) -> Reply:
        return Reply(404, self.error_body(404, message, {}))


def _error(code: str, message: str, line: int | None) -> dict:
    return {"code": code, "message": message, "param": None, "line": line}


def _kind(path: str) -> tuple[str | None, str | None, str | None]:
    match = _ROUTE.match(urlsplit(path).path.rstrip("/"))
    return (match["kind"], match["id"], match["action"]) if match else (None, None, None)


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, bytes) of a multipart/form-data body."""
    message = email.parser.BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    parts: dict[str, Any] = {}
    for part in message.get_payload() if message.is_multipart() else []:
        name = part.get_param("name", header="content-disposition")
        if name:
            parts[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return parts
