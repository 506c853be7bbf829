"""Loopback server speaking the OpenAI Images and Videos APIs as the official SDK uses them.

Point the SDK at it with ``OPENAI_BASE_URL=server.url`` (or
``openai.OpenAI(base_url=server.url)``). Routes:

* ``POST /v1/images/generations`` (JSON) -> ``{"created", "data": [{"b64_json"}] * n, "usage", ...}``:
  ``n`` images (``media_outputs.variant``: distinct bytes each), fewer after ``outputs.limit(count)``
* ``POST /v1/videos`` (multipart form: prompt, model, seconds, size) -> a ``video`` job, ``queued``
* ``GET /v1/videos/{id}`` -> the job: ``queued``, then ``in_progress`` for ``polls`` polls, then
  ``completed`` (or ``failed`` with an ``error`` object)
* ``GET /v1/videos/{id}/content`` -> the MP4 bytes (``application/binary`` accepted)

``image_responder(body)`` returns the image bytes, or a dict with ``image``, or an error
(``status``, ``code``, ``message``, ``headers``). ``video_responder(form)`` returns the MP4
bytes, or a dict with ``video``, ``polls``, ``fail`` (``(code, message)``: the job fails), or
an error as above (the create call fails). Faults are queued per route with
``inject(..., at="images"|"create"|"poll"|"download")``; ``cut=True`` sends the headers
of a full download but only part of the body, then closes the connection.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from ._base import Fault, LoopbackServer, Reply, _Handler, _HTTPServer
from .media_outputs import Outputs, variant

_IMAGES = "/v1/images/generations"
_VIDEOS = "/v1/videos"
_VIDEO = re.compile(r"^/v1/videos/(?P<id>[\w-]+)$")
_CONTENT = re.compile(r"^/v1/videos/(?P<id>[\w-]+)/content$")
ROUTES = ("images", "create", "poll", "download")

_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
MODERATION = {"status": 400, "code": "moderation_blocked", "type": "image_generation_user_error",
              "message": "Your request was rejected by the safety system. If you believe this is an error, "
                         "contact us and include the request ID."}

MediaResponder = Callable[[dict], bytes | dict]


@dataclass
class _Job:
    id: str
    model: str
    prompt: str
    seconds: str
    size: str
    video: bytes = field(repr=False)
    polls_left: int
    fail: tuple[str, str] | None
    created_at: int

    def resource(self) -> dict[str, Any]:
        done = self.polls_left <= 0
        status = ("failed" if self.fail else "completed") if done else ("queued" if self.polls_left > 1 else
                                                                         "in_progress")
        return {"id": self.id, "object": "video", "model": self.model, "status": status,
                "progress": 100 if done else 50, "created_at": self.created_at,
                "completed_at": int(time.time()) if done else None, "expires_at": self.created_at + 3600,
                "prompt": self.prompt, "seconds": self.seconds, "size": self.size, "remixed_from_video_id": None,
                "error": {"code": self.fail[0], "message": self.fail[1]} if done and self.fail else None}


@dataclass
class _CutReply(Reply):
    keep: int = 0  # body bytes actually sent before the connection is cut


class _MediaHandler(_Handler):
    def _write(self, reply: Reply) -> None:
        if not isinstance(reply, _CutReply):
            return super()._write(reply)
        data, _ = reply.encoded()
        self.send_response(200)
        self.send_header("Content-Type", "video/mp4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[:reply.keep])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


class OpenAIMediaServer(LoopbackServer):
    def __init__(self, image_responder: MediaResponder | None = None, video_responder: MediaResponder | None = None,
                 latency: float = 0.0, polls: int = 3) -> None:
        self.image_responder = image_responder or (lambda body: b"")
        self.video_responder = video_responder or (lambda form: b"")
        self.polls = polls
        self._ids = itertools.count(1)
        super().__init__(None, latency)

    def start(self) -> OpenAIMediaServer:  # the base server, with a handler that can cut a body short
        self._httpd = _HTTPServer(("127.0.0.1", 0), _MediaHandler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def _clear(self) -> None:
        super()._clear()
        self._route_faults: dict[str, deque] = {route: deque() for route in ROUTES}
        self._jobs: dict[str, _Job] = {}
        self.outputs = Outputs()  # images returned (route "images"); outputs.limit(k): a short return

    @property
    def url(self) -> str:
        return f"{self.origin}/v1"

    # -- faults ----------------------------------------------------------------
    def inject(self, status: int | None = None, headers: dict[str, str] | None = None, body: Any = None, *,
               at: str = "images", delay: float = 0.0, drop: bool = False, cut: bool = False,
               times: int = 1) -> None:
        if at not in ROUTES:
            raise ValueError(f"at must be one of {ROUTES}")
        fault = Fault(status, dict(headers or {}), body, delay, garbage=cut, drop=drop)  # garbage: cut here
        with self._lock:
            self._route_faults[at].extend([fault] * times)

    def _fault(self, route: str, full_body: bytes = b"") -> Reply | None:
        with self._lock:
            queue = self._route_faults[route]
            fault = queue.popleft() if queue else None
        if fault is None:
            return None
        if fault.delay:
            time.sleep(fault.delay)
        if fault.drop:
            return Reply(drop=True)
        if fault.garbage:
            return _CutReply(200, full_body, keep=len(full_body) // 2)
        if fault.status is None:
            return None
        return Reply(fault.status, fault.body if fault.body is not None else self.error_body(fault.status, None, {}),
                     dict(fault.headers))

    # -- counters ----------------------------------------------------------------
    def count(self, route: str) -> int:
        """Requests that reached a route (faulted ones included)."""
        def matches(method: str, path: str) -> bool:
            return {"images": method == "POST" and path == _IMAGES,
                    "create": method == "POST" and path == _VIDEOS,
                    "poll": method == "GET" and bool(_VIDEO.match(path)),
                    "download": method == "GET" and bool(_CONTENT.match(path))}[route]
        return sum(1 for r in self.requests if matches(r.method, urlsplit(r.path).path))

    @property
    def jobs(self) -> dict[str, _Job]:
        with self._lock:
            return dict(self._jobs)

    def error_body(self, status: int, message: str | None, headers: dict[str, str], code: str | None = None,
                   kind: str | None = None) -> dict:
        default_kind, default_code = _ERROR_KINDS.get(status, ("server_error", None))
        return {"error": {"message": message or f"loopback error {status}", "type": kind or default_kind,
                          "param": None, "code": code or default_code}}

    # -- routing ------------------------------------------------------------------
    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        path = urlsplit(path).path
        if method == "POST" and path == _IMAGES:
            return self._fault("images") or self._image(raw)
        if method == "POST" and path == _VIDEOS:
            return self._fault("create") or self._create(headers, raw)
        if method == "GET" and (m := _CONTENT.match(path)):
            return self._download(m["id"])
        if method == "GET" and (m := _VIDEO.match(path)):
            return self._fault("poll") or self._poll(m["id"])
        return Reply(404, self.error_body(404, f"Unknown route {method} {path}", {}))

    def _spec_error(self, spec: dict) -> Reply | None:
        status = int(spec.get("status", 200))
        if status < 400:
            return None
        return Reply(status, self.error_body(status, spec.get("message"), {}, spec.get("code"), spec.get("type")),
                     dict(spec.get("headers") or {}))

    def _image(self, raw: bytes) -> Reply:
        body = json.loads(raw)
        spec = self.image_responder(body)
        spec = {"image": spec} if isinstance(spec, bytes) else spec
        error = self._spec_error(spec)
        if error:
            return error
        words = len(str(body.get("prompt", "")).split())
        asked = int(body.get("n") or 1)
        numbers = self.outputs.numbers("images", str(body.get("prompt")), self.outputs.take(asked), asked)
        data = [{"b64_json": base64.b64encode(variant(spec["image"], i)).decode()} for i in numbers]
        return Reply(200, {"created": int(time.time()), "background": body.get("background"),
                           "output_format": body.get("output_format", "png"), "quality": body.get("quality"),
                           "size": body.get("size"), "data": data,
                           "usage": {"input_tokens": words, "output_tokens": 1056, "total_tokens": words + 1056,
                                     "input_tokens_details": {"text_tokens": words, "image_tokens": 0}}})

    def _create(self, headers: dict[str, str], raw: bytes) -> Reply:
        form = _multipart(headers.get("content-type", ""), raw)
        spec = self.video_responder(form)
        spec = {"video": spec} if isinstance(spec, bytes) else spec
        error = self._spec_error(spec)
        if error:
            return error
        job = _Job(id=f"video_{next(self._ids):04d}{int(time.time() * 1000) % 100000:05d}",
                   model=form.get("model", "sora-2"), prompt=form.get("prompt", ""),
                   seconds=form.get("seconds", "4"), size=form.get("size", "720x1280"), video=spec["video"],
                   polls_left=int(spec.get("polls", self.polls)), fail=spec.get("fail"), created_at=int(time.time()))
        with self._lock:
            self._jobs[job.id] = job
            resource = job.resource()
        return Reply(200, {**resource, "status": "queued", "progress": 0, "completed_at": None, "error": None})

    def _poll(self, job_id: str) -> Reply:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return Reply(404, self.error_body(404, f"Video {job_id} not found", {}))
            job.polls_left -= 1
            return Reply(200, job.resource())

    def _download(self, job_id: str) -> Reply:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.polls_left > 0 or job.fail:
            return Reply(404, self.error_body(404, f"Video {job_id} has no content (not completed)", {}))
        return self._fault("download", job.video) or Reply(200, job.video, {"Content-Type": "video/mp4"})


def _multipart(content_type: str, raw: bytes) -> dict[str, str]:
    """The fields of a multipart/form-data body (RFC 7578: field values are UTF-8 text)."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not match:
        return {}
    fields = {}
    for part in raw.split(b"--" + match.group(1).encode())[1:]:
        if part.startswith(b"--"):
            break  # the closing delimiter
        part = part.removeprefix(b"\r\n").removesuffix(b"\r\n")  # the delimiters' own line breaks
        head, _, body = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        if name:
            fields[name.group(1).decode()] = body.decode("utf-8")
    return fields
