"""Loopback server speaking the Gemini Developer API as google-genai uses it.

google-genai 3.x talks to /v1/... by default (v1beta only with
GOOGLE_GENAI_API_VERSION=beta); every route here accepts any v1* version.

Point the SDK at it with
`genai.Client(api_key=..., http_options=types.HttpOptions(base_url=server.url))`
(or GOOGLE_GEMINI_BASE_URL=server.url). Covers generateContent and the File API
(resumable upload, get with PROCESSING -> ACTIVE, delete).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ._base import LoopbackServer, Reply, Responder, count_words

_GENERATE = re.compile(r"^/v1\w*/models/(?P<model>[^/:]+):generateContent$")
_UPLOAD = re.compile(r"^/upload/(?P<version>v1\w*)/files$")
_MODEL = re.compile(r"^/v1\w*/models/(?P<model>[^/:]+)$")
_FILE = re.compile(r"^/(?P<version>v1\w*)/(?P<name>files/[^/]+)$")

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _prompt_tokens(body: dict) -> int:
    """Word count over the text parts of contents + systemInstruction."""
    blocks = list(body.get("contents") or [])
    if body.get("systemInstruction"):
        blocks.append(body["systemInstruction"])
    return sum(count_words(p.get("text")) for b in blocks for p in b.get("parts") or [])


def _field(meta: dict, snake: str) -> Any:
    """Read a File field sent either snake_case (google-genai) or camelCase (REST)."""
    head, *rest = snake.split("_")
    return meta.get(snake, meta.get(head + "".join(w.title() for w in rest)))


@dataclass
class _StoredFile:
    name: str
    mime_type: str
    data: bytes
    display_name: str | None
    created: datetime
    polls_left: int

    def resource(self, origin: str, version: str) -> dict:
        """The File resource JSON, camelCase like the real API."""
        state = "PROCESSING" if self.polls_left > 0 else "ACTIVE"
        resource = {
            "name": self.name,
            "mimeType": self.mime_type,
            "sizeBytes": str(len(self.data)),  # int64 travels as a string
            "createTime": _rfc3339(self.created),
            "updateTime": _rfc3339(self.created),
            "expirationTime": _rfc3339(self.created + timedelta(hours=48)),
            "sha256Hash": base64.b64encode(hashlib.sha256(self.data).hexdigest().encode()).decode(),
            "uri": f"{origin}/{version}/{self.name}",
            "state": state,
            "source": "UPLOADED",
        }
        if self.display_name:
            resource["displayName"] = self.display_name
        return resource


@dataclass
class _UploadSession:
    meta: dict  # "file" of the start request; the SDK sends snake_case keys
    mime_type: str
    data: bytearray


class GeminiServer(LoopbackServer):
    """generateContent + File API on 127.0.0.1.

    responder(body) returns the answer text (str) or a dict with optional keys
    `text`, `thoughts` (a thought part before the answer), `finish_reason`,
    `block_reason` (promptFeedback, no candidates), `no_candidates`, `usage`
    (merged into usageMetadata), `status`, `headers`, `raw_body`.
    Faults from `inject()` apply to generateContent calls only.

    `GET /v1*/models/{model}` (the preflight's model lookup) answers a Model
    resource for names in `models`, else 404 NOT_FOUND like the real API;
    `models_status` makes it answer that error status instead (400 "API key
    not valid" for a bad key, as Gemini does); `upload_status` makes the File
    API's upload answer that error status (a proxy without the File API: 501).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        processing_polls: int = 1,
    ) -> None:
        self.processing_polls = processing_polls
        self.models = ["gemini-2.5-pro", "gemini-2.5-flash"]
        self.models_status: int | None = None
        self.upload_status: int | None = None
        self._ids = itertools.count(1)
        super().__init__(responder, latency)

    def _clear(self) -> None:
        super()._clear()
        self._files: dict[str, _StoredFile] = {}
        self._sessions: dict[str, _UploadSession] = {}
        self._uploaded: dict[str, tuple[str, bytes]] = {}
        self._deleted: list[str] = []

    @property
    def url(self) -> str:
        """Base URL for the SDK (it appends /{api_version}/... itself)."""
        return self.origin

    @property
    def generate_calls(self) -> int:
        paths = (urlsplit(r.path).path for r in self.requests if r.method == "POST")
        return sum(1 for p in paths if _GENERATE.match(p))

    @property
    def uploaded(self) -> dict[str, tuple[str, bytes]]:
        with self._lock:
            return dict(self._uploaded)

    @property
    def deleted(self) -> list[str]:
        with self._lock:
            return list(self._deleted)

    def error_body(self, status: int, message: str | None, headers: dict[str, str]) -> dict:
        error: dict[str, Any] = {
            "code": status,
            "message": message or f"loopback error {status}",
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
        }
        retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after")
        if status == 429 and retry_after:
            # Real Gemini 429s carry the back-off hint as google.rpc.RetryInfo.
            error["details"] = [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after}s"}
            ]
        return {"error": error}

    # -- routing ------------------------------------------------------------------
    def is_model_call(self, method: str, path: str) -> bool:
        return method == "POST" and bool(_GENERATE.match(urlsplit(path).path))

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        parts = urlsplit(path)
        if method == "POST" and (m := _GENERATE.match(parts.path)):
            return self._fault_reply() or self._generate(m["model"], raw)
        if method == "POST" and (m := _UPLOAD.match(parts.path)):
            return self._upload(m["version"], parse_qs(parts.query), headers, raw)
        if method == "GET" and (m := _MODEL.match(parts.path)):
            return self._get_model(m["model"])
        if m := _FILE.match(parts.path):
            if method == "GET":
                return self._get_file(m["version"], m["name"])
            if method == "DELETE":
                return self._delete_file(m["name"])
        return self._error(404, f"Unknown route {method} {parts.path}")

    def _error(self, status: int, message: str) -> Reply:
        return Reply(status, self.error_body(status, message, {}))

    # -- generateContent ----------------------------------------------------------
    def _generate(self, model: str, raw: bytes) -> Reply:
        outcome = self.ask_responder(raw, "text")
        if isinstance(outcome, Reply):
            return outcome
        body, spec = outcome
        return Reply(200, self._response(model, body, spec), dict(spec.get("headers") or {}))

    def _response(self, model: str, body: dict, spec: dict) -> dict:
        response: dict[str, Any] = {
            "usageMetadata": self._usage(body, spec),
            "modelVersion": spec.get("model") or model,  # the version that answered (a spec may name another)
            "responseId": f"loopback-{next(self._ids)}",
        }
        if spec.get("block_reason"):
            response["promptFeedback"] = {"blockReason": spec["block_reason"]}
        elif spec.get("no_candidates"):
            response["candidates"] = []
        else:
            response["candidates"] = [self._candidate(spec)]
        return response

    @staticmethod
    def _candidate(spec: dict) -> dict:
        parts = []
        if spec.get("thoughts") is not None:
            parts.append({"text": spec["thoughts"], "thought": True})
        if spec.get("text") is not None:
            parts.append({"text": spec["text"]})
        candidate: dict[str, Any] = {"finishReason": spec.get("finish_reason", "STOP"), "index": 0}
        if parts:  # blocked candidates (e.g. SAFETY) come back without content
            candidate["content"] = {"role": "model", "parts": parts}
        return candidate

    @staticmethod
    def _usage(body: dict, spec: dict) -> dict:
        prompt, answer = _prompt_tokens(body), count_words(spec.get("text"))
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": answer}
        thoughts = count_words(spec.get("thoughts"))
        if spec.get("thoughts") is not None:
            usage["thoughtsTokenCount"] = thoughts
        usage["totalTokenCount"] = prompt + answer + thoughts
        usage.update(spec.get("usage") or {})
        return usage

    # -- models -------------------------------------------------------------------
    def _get_model(self, model: str) -> Reply:
        if self.models_status is not None:
            message = "API key not valid. Please pass a valid API key." if self.models_status == 400 else None
            return self._error(self.models_status, message or f"loopback error {self.models_status}")
        if model not in self.models:
            return self._error(404, f"models/{model} is not found for API version v1, or is not supported "
                                    "for getModel. Call ListModels to see the list of available models.")
        return Reply(200, {
            "name": f"models/{model}", "baseModelId": model, "version": "2.5", "displayName": model,
            "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens"], "thinking": True,
        })

    # -- File API -----------------------------------------------------------------
    def _upload(self, version: str, query: dict, headers: dict[str, str], raw: bytes) -> Reply:
        if self.upload_status is not None:
            return self._error(self.upload_status, "Method not implemented for this endpoint.")
        command = headers.get("x-goog-upload-command", "")
        if command == "start":
            return self._start_upload(version, headers, raw)
        upload_id = (query.get("upload_id") or [""])[0]
        with self._lock:
            session = self._sessions.get(upload_id)
            if session is None:
                return self._error(404, f"Unknown upload_id {upload_id!r}")
            session.data.extend(raw)
            if "finalize" not in command:
                return Reply(200, None, {"X-Goog-Upload-Status": "active"})
            del self._sessions[upload_id]
        stored = self._store(session)
        return Reply(200, {"file": stored.resource(self.origin, version)}, {"X-Goog-Upload-Status": "final"})

    def _start_upload(self, version: str, headers: dict[str, str], raw: bytes) -> Reply:
        meta = (json.loads(raw) if raw else {}).get("file") or {}
        mime_type = headers.get("x-goog-upload-header-content-type") or _field(meta, "mime_type") or ""
        upload_id = uuid.uuid4().hex
        with self._lock:
            self._sessions[upload_id] = _UploadSession(meta, mime_type, bytearray())
        upload_url = f"{self.origin}/upload/{version}/files?upload_id={upload_id}&upload_protocol=resumable"
        return Reply(200, None, {"X-Goog-Upload-URL": upload_url, "X-Goog-Upload-Status": "active"})

    def _store(self, session: _UploadSession) -> _StoredFile:
        name = session.meta.get("name") or f"files/loopback{uuid.uuid4().hex[:12]}"
        stored = _StoredFile(
            name=name,
            mime_type=session.mime_type,
            data=bytes(session.data),
            display_name=_field(session.meta, "display_name"),
            created=datetime.now(timezone.utc),
            polls_left=self.processing_polls,
        )
        with self._lock:
            self._files[name] = stored
            self._uploaded[name] = (stored.mime_type, stored.data)
        return stored

    def _get_file(self, version: str, name: str) -> Reply:
        with self._lock:
            stored = self._files.get(name)
            if stored is None:
                return self._missing(name)
            resource = stored.resource(self.origin, version)
            stored.polls_left -= 1
        return Reply(200, resource)

    def _delete_file(self, name: str) -> Reply:
        with self._lock:
            if self._files.pop(name, None) is None:
                return self._missing(name)
            self._deleted.append(name)
        return Reply(200, {})

    def _missing(self, name: str) -> Reply:
        # What the real API answers for unknown or already-deleted files.
        message = f"You do not have permission to access the File {name.removeprefix('files/')} or it may not exist."
        return self._error(403, message)
