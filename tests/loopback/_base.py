"""Shared machinery for the loopback protocol servers.

A `LoopbackServer` owns a ThreadingHTTPServer on 127.0.0.1 (ephemeral port)
running in a daemon thread. Subclasses only implement `route()`, which maps a
parsed request to a `Reply`; recording, latency, in-flight accounting and the
fault queue live here so both protocol servers behave identically.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import traceback
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, TypeVar

JsonBody = dict | list | str | bytes | None
# Receives the parsed request JSON; returns reply text or a dict of overrides.
Responder = Callable[[dict], str | dict]
_S = TypeVar("_S", bound="LoopbackServer")


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, raw bytes (non-JSON payloads) or None (empty)
    time: float
    method: str = "POST"


@dataclass(frozen=True)
class Fault:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: JsonBody = None
    delay: float = 0.0
    garbage: bool = False
    drop: bool = False


@dataclass
class Reply:
    status: int = 200
    body: JsonBody = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    # Writes the whole raw response itself (status line, headers, body) to the socket: HTTP-level
    # faults (wire_faults.py). The connection is closed after it.
    write: Callable[[socket.socket], None] | None = None

    def encoded(self) -> tuple[bytes, str]:
        """Body bytes plus a matching default Content-Type."""
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), "text/plain; charset=utf-8"
        if self.body is None:
            return b"", "application/json"
        return json.dumps(self.body).encode(), "application/json"


GARBAGE_BODY = b"<html>oops</html>"


def _answer_ok(body: dict) -> str:
    return "ok"


def count_words(text: str | None) -> int:
    """Crude, deterministic stand-in for a tokenizer."""
    return len(text.split()) if text else 0


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so SDK connection pools keep connections alive like in production.
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep pytest output clean

    def setup(self) -> None:
        super().setup()
        # Replies are written in one piece (`_write`), but small writes must never wait for the
        # client's delayed ACK either (Nagle): that costs ~40 ms per call on loopback.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _serve(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner._record(RecordedRequest(self.path, headers, _parse(raw), time.time(), self.command))
        refused = owner._over_rate(self.command, self.path)
        if refused is not None:  # answered at once, as a provider's rate limiter does
            self._write(refused)
            return
        with owner._in_flight():
            if owner.latency:
                time.sleep(owner.latency)
            reply = owner._misbehaving(self.path) or owner._safe_route(self.command, self.path, headers, raw)
            self._write(reply)
            if not reply.drop:
                owner._sent_reply(self.command, self.path, reply.status)

    def _write(self, reply: Reply) -> None:
        if reply.write is not None:
            self.close_connection = True
            reply.write(self.connection)
            return
        if reply.drop:
            # Abort without a status line: clients see a protocol/connection error.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        data, content_type = reply.encoded()
        self.send_response(reply.status)
        sent = {k.lower() for k in reply.headers}
        if "content-type" not in sent:
            self.send_header("Content-Type", content_type)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        # Status line, headers and body in ONE write: end_headers() + wfile.write(body) would be
        # two segments, and the second waits for the client's delayed ACK (~40 ms per call).
        self._headers_buffer.append(b"\r\n" + data)
        self.flush_headers()


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # listen backlog: 64+ clients connect at once
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (timeouts, cancelled retries) are expected here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """Base class: threaded HTTP server + recording + fault queue."""

    handler_class: type[BaseHTTPRequestHandler] = _Handler  # bench/loopback_wire.py swaps in the old writer

    def __init__(self, responder: Responder | None, latency: float) -> None:
        self.responder: Responder = responder or _answer_ok
        self.latency = latency
        # Rate limit of model calls (`is_model_call`): more than `rate_limit` calls accepted in
        # any `rate_window` seconds -> 429 with Retry-After `rate_retry_after`, answered at
        # once. Refused calls are not counted in the window (they are not served). None = off.
        self.rate_limit: float | None = None
        self.rate_window = 1.0
        self.rate_retry_after = "1"
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._in_flight_now = 0
        self._clear()

    # -- lifecycle ---------------------------------------------------------
    def start(self: _S) -> _S:
        httpd = _HTTPServer(("127.0.0.1", 0), self.handler_class)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        # Keep-alive connections outlive serve_forever; cut them so a pooled
        # client cannot keep talking to a "stopped" server.
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- faults --------------------------------------------------------------
    def inject(
        self,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        body: JsonBody = None,
        *,
        delay: float = 0.0,
        garbage: bool = False,
        drop: bool = False,
        times: int = 1,
    ) -> None:
        """Queue a fault for the next `times` model calls (FIFO).

        status: reply with that HTTP status (protocol-style error body unless
        `body` is given); delay: sleep first (alone: then answer normally);
        garbage: HTTP 200 with a non-JSON HTML body; drop: close the socket
        without any response.
        """
        fault = Fault(status, dict(headers or {}), body, delay, garbage, drop)
        with self._lock:
            self._faults.extend([fault] * times)

    def misbehave(self, path_part: str, reply: Reply, times: int = 1) -> None:
        """Answer the next `times` requests whose path contains `path_part` with `reply` (any route:
        model calls, model lookups, file downloads), before the protocol sees them."""
        with self._lock:
            self._misbehaviour.extend([(path_part, reply)] * times)

    def _misbehaving(self, path: str) -> Reply | None:
        with self._lock:
            for i, (part, reply) in enumerate(self._misbehaviour):
                if part in path:
                    del self._misbehaviour[i]
                    return reply
        return None

    def _fault_reply(self) -> Reply | None:
        """Pop the next fault; returns the reply it dictates or None (normal)."""
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
        if fault is None:
            return None
        if fault.delay:
            time.sleep(fault.delay)
        if fault.drop:
            return Reply(drop=True)
        if fault.garbage:
            return Reply(200, GARBAGE_BODY, {"Content-Type": "text/html", **fault.headers})
        if fault.status is None:
            return None
        body = fault.body
        if body is None:
            body = self.error_body(fault.status, None, fault.headers)
        return Reply(fault.status, body, dict(fault.headers))

    # -- recording -------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    def reset(self) -> None:
        """Forget all recorded traffic, queued faults and server-side state."""
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._requests: list[RecordedRequest] = []
        self._replies_sent: list[float] = []
        self._faults: deque[Fault] = deque()
        self._misbehaviour: list[tuple[str, Reply]] = []
        self._max_in_flight = 0
        self._accepted: deque[float] = deque()  # arrival times of model calls inside the rate window
        self._rate_limited = 0

    @property
    def rate_limited(self) -> int:
        """Model calls refused with 429 by the `rate_limit` window since the last reset."""
        with self._lock:
            return self._rate_limited

    def _over_rate(self, method: str, path: str) -> Reply | None:
        """The 429 reply when this model call is over `rate_limit`, else None (and it is counted)."""
        limit = self.rate_limit
        if limit is None or not self.is_model_call(method, path):
            return None
        with self._lock:
            now = time.monotonic()
            while self._accepted and self._accepted[0] <= now - self.rate_window:
                self._accepted.popleft()
            if len(self._accepted) >= limit * self.rate_window:
                self._rate_limited += 1
                over = True
            else:
                self._accepted.append(now)
                over = False
        if not over:
            return None
        headers = {"Retry-After": self.rate_retry_after}
        message = (f"Rate limit reached: at most {limit * self.rate_window:g} requests per {self.rate_window:g}s. "
                   "Please try again later.")
        return Reply(429, self.error_body(429, message, headers), headers)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _sent_reply(self, method: str, path: str, status: int) -> None:
        if status == 200 and self.is_model_call(method, path):
            with self._lock:
                self._replies_sent.append(time.time())

    @property
    def replies_sent(self) -> list[float]:
        """When each successful model-call reply was written out (a reply the client has paid for)."""
        with self._lock:
            return list(self._replies_sent)

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        with self._lock:
            self._in_flight_now += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight_now)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight_now -= 1

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    def _safe_route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        # A broken test responder should fail loudly as a 500, not hang the client.
        try:
            return self.route(method, path, headers, raw)
        except Exception as exc:
            traceback.print_exc()
            return Reply(500, self.error_body(500, f"loopback handler raised {exc!r}", {}))

    def ask_responder(self, raw: bytes, text_key: str) -> tuple[dict, dict] | Reply:
        """Run `self.responder` on the request JSON.

        Returns (request body, reply spec) with a str reply normalised to
        {text_key: str}, or a finished Reply for bad JSON, `raw_body` or an
        error `status` in the spec.
        """
        try:
            body = json.loads(raw)
        except ValueError:
            return Reply(400, self.error_body(400, "Invalid JSON payload received.", {}))
        spec = self.responder(body)
        if isinstance(spec, str):
            spec = {text_key: spec}
        if isinstance(spec.get("wire"), Reply):  # an HTTP-level fault (wire_faults.py)
            return spec["wire"]
        status = int(spec.get("status", 200))
        headers = dict(spec.get("headers") or {})
        if "raw_body" in spec:
            return Reply(status, spec["raw_body"], headers)
        if status >= 400:
            return Reply(status, self.error_body(status, spec.get(text_key), headers), headers)
        return body, spec

    # -- protocol hooks ----------------------------------------------------------
    def is_model_call(self, method: str, path: str) -> bool:
        """Whether this request is a (rate-limited) model call; subclasses name their routes."""
        return False

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        raise NotImplementedError

    def error_body(self, status: int, message: str | None, headers: dict[str, str]) -> dict:
        """Protocol-style error JSON; `headers` are the reply headers (Retry-After)."""
        raise NotImplementedError
