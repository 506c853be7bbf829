"""Loopback server speaking Google's media-generation APIs as google-genai 3.6 uses them.

Routes (any API version ``v1*``; with or without ``projects/P/locations/L/`` and
``publishers/google/``, so Gemini API and Vertex AI clients both reach them):

* ``models/M:generateContent`` - Gemini image models: the image comes back as an
  ``inlineData`` part (base64 PNG), beside an optional text part;
* ``models/M:predict`` - Imagen on Vertex AI: ``predictions[].bytesBase64Encoded``;
* ``models/M:predictLongRunning`` - Veo on Vertex AI: returns an operation name;
* ``models/M:fetchPredictOperation`` - what ``client.operations.get`` posts on
  Vertex AI (body ``{"operationName": ...}``); the operation stays ``done: false``
  for ``polls`` fetches, then carries ``response.videos[].bytesBase64Encoded``.

``responder(kind, model, body)`` decides each generation; ``kind`` is
``"content"``, ``"imagen"`` or ``"veo"``. It returns a dict with one of
``image`` / ``video`` (bytes), ``text`` (extra text part), ``block_reason``
(promptFeedback), ``finish_reason`` (e.g. ``IMAGE_SAFETY``, no image),
``rai_reason`` (Imagen/Veo filtered the output), ``error`` (a failed operation:
``{"code": 3, "message": ...}``), ``polls`` (fetches before a Veo operation is
done), ``cut`` (send only the first N bytes of the body, then hang up).

``parameters.sampleCount`` (Imagen ``number_of_images``, Veo ``number_of_videos``)
asks for several outputs: each is ``media_outputs.variant`` of the responder's
bytes (distinct files, numbered over the prompt's outputs), fewer after
``outputs.limit(count)``; ``outputs.count(kind)`` says how many were made (a Veo
operation's when it is created).

``POST /token`` plays Google's OAuth token endpoint for application default
credentials whose ``token_uri`` points here (``adc_file``), so the Vertex AI
project/location path runs with a bearer token and no network.

Faults: ``inject()`` applies to create calls (generateContent, predict,
predictLongRunning); ``inject_poll()`` to fetchPredictOperation calls.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

from ._base import Fault, LoopbackServer, Reply, _Handler
from .gemini_server import _STATUS_NAMES
from .media_outputs import Outputs, variant

_MODEL = r"^/v1\w*/(?:projects/[^/]+/locations/[^/]+/)?(?:publishers/google/)?models/(?P<model>[^/:]+)"
_ROUTES = {
    "content": re.compile(_MODEL + r":generateContent$"),
    "imagen": re.compile(_MODEL + r":predict$"),
    "veo": re.compile(_MODEL + r":predictLongRunning$"),
    "poll": re.compile(_MODEL + r":fetchPredictOperation$"),
}
PROJECT = "projects/loopback-project/locations/us-central1"
ACCESS_TOKEN = "ya29.loopback-access-token"

MediaResponder = Callable[[str, str, dict], dict]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class CutReply(Reply):
    """A reply whose body stops after ``cut`` bytes although Content-Length promises all of it."""

    cut: int = 0


class _CuttingHandler(_Handler):
    def _write(self, reply: Reply) -> None:
        if not isinstance(reply, CutReply):
            return super()._write(reply)
        data, content_type = reply.encoded()
        self.send_response(reply.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: reply.cut])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


@dataclass
class _Operation:
    name: str
    model: str
    spec: dict
    polls_left: int
    numbers: range = range(1)  # the videos it returns, numbered among its prompt's outputs
    fetches: int = 0


class GoogleMediaServer(LoopbackServer):
    """Gemini image output, Imagen predict and Veo long-running operations on 127.0.0.1."""

    def __init__(self, responder: MediaResponder, latency: float = 0.0) -> None:
        self.media_responder = responder
        self._ids = itertools.count(1)
        super().__init__(None, latency)

    def start(self) -> GoogleMediaServer:
        super().start()
        # Same server, a handler that can also cut a body short.
        self._httpd.RequestHandlerClass = _CuttingHandler  # type: ignore[union-attr]
        return self

    def _clear(self) -> None:
        super()._clear()
        self._poll_faults: deque[Fault] = deque()
        self._operations: dict[str, _Operation] = {}
        self.outputs = Outputs()

    @property
    def url(self) -> str:
        return self.origin

    # -- what the tests look at -----------------------------------------------------
    def calls(self, kind: str) -> list[str]:
        """Paths of the POSTs that hit one route ("content", "imagen", "veo", "poll")."""
        paths = (urlsplit(r.path).path for r in self.requests if r.method == "POST")
        return [p for p in paths if _ROUTES[kind].match(p)]

    def operation_names(self) -> list[str]:
        with self._lock:
            return list(self._operations)

    def fetches(self, name: str) -> int:
        with self._lock:
            return self._operations[name].fetches

    def finish_operations(self) -> None:
        """Let every pending operation complete on its next fetch."""
        with self._lock:
            for operation in self._operations.values():
                operation.polls_left = 0

    def inject_poll(self, status: int | None = None, headers: dict[str, str] | None = None, *,
                    drop: bool = False, times: int = 1) -> None:
        with self._lock:
            self._poll_faults.extend([Fault(status, dict(headers or {}), None, 0.0, False, drop)] * times)

    def error_body(self, status: int, message: str | None, headers: dict[str, str]) -> dict:
        error: dict[str, Any] = {"code": status, "message": message or f"loopback error {status}",
                                 "status": _STATUS_NAMES.get(status, "UNKNOWN")}
        return {"error": error}

    # -- routing --------------------------------------------------------------------
    def adc_file(self, path: str) -> str:
        """Write a service-account ADC file whose token endpoint is this server; returns its path.

        (google-auth ignores ``token_uri`` in authorized_user files, but honours it for service accounts.)
        """
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        info = {"type": "service_account", "project_id": "loopback-project", "private_key_id": "loopback-key",
                "private_key": pem, "client_email": "generator@loopback-project.iam.gserviceaccount.com",
                "client_id": "1234567890", "token_uri": f"{self.origin}/token"}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(info, fh)
        return path

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        parts = urlsplit(path)
        if method == "POST" and parts.path == "/token":
            return Reply(200, {"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer",
                               "scope": "https://www.googleapis.com/auth/cloud-platform"})
        for kind, pattern in _ROUTES.items():
            match = pattern.match(parts.path) if method == "POST" else None
            if match is None:
                continue
            if kind == "poll":
                return self._poll_fault() or self._fetch(raw)
            body = json.loads(raw or b"{}")
            return self._fault_reply() or self._create(kind, match["model"], body)
        return Reply(404, self.error_body(404, f"Unknown route {method} {parts.path}", {}))

    def _poll_fault(self) -> Reply | None:
        with self._lock:
            fault = self._poll_faults.popleft() if self._poll_faults else None
        if fault is None:
            return None
        if fault.drop:
            return Reply(drop=True)
        return Reply(fault.status or 500, self.error_body(fault.status or 500, None, fault.headers), fault.headers)

    def _create(self, kind: str, model: str, body: dict) -> Reply:
        spec = self.media_responder(kind, model, body)
        if "status" in spec:
            return Reply(spec["status"], self.error_body(spec["status"], spec.get("message"), {}))
        if kind == "content":
            return self._finish(spec, _content_response(model, spec))
        asked = int((body.get("parameters") or {}).get("sampleCount") or 1)
        count = self.outputs.take(asked)
        made = spec.get("image" if kind == "imagen" else "video") is not None and not spec.get("rai_reason") \
            and not spec.get("error")
        prompt = str(((body.get("instances") or [{}])[0]).get("prompt"))
        numbers = self.outputs.numbers(kind, prompt, count if made else 0, asked)
        if kind == "imagen":
            return self._finish(spec, _imagen_response(spec, numbers))
        name = f"{PROJECT}/publishers/google/models/{model}/operations/{next(self._ids):04d}-loopback"
        with self._lock:
            self._operations[name] = _Operation(name, model, spec, int(spec.get("polls", 2)), numbers)
        return Reply(200, {"name": name})

    @staticmethod
    def _finish(spec: dict, body: dict) -> Reply:
        if "cut" in spec:
            return CutReply(200, body, cut=int(spec["cut"]))
        return Reply(200, body)

    def _fetch(self, raw: bytes) -> Reply:
        name = json.loads(raw or b"{}").get("operationName", "")
        with self._lock:
            operation = self._operations.get(name)
            if operation is None:
                return Reply(404, self.error_body(404, f"Operation {name!r} not found", {}))
            operation.fetches += 1
            operation.polls_left -= 1
            done = operation.polls_left < 0
        if not done:
            return Reply(200, {"name": name, "done": False,
                               "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1."
                                                     "GenericOperationMetadata"}})
        return self._finish(operation.spec, _operation_response(name, operation.spec, operation.numbers))


def _content_response(model: str, spec: dict) -> dict:
    if spec.get("block_reason"):
        return {"promptFeedback": {"blockReason": spec["block_reason"]}, "modelVersion": model}
    parts: list[dict] = []
    if spec.get("text") is not None:
        parts.append({"text": spec["text"]})
    if spec.get("image") is not None:
        parts.append({"inlineData": {"mimeType": spec.get("mime_type", "image/png"), "data": _b64(spec["image"])}})
    candidate: dict[str, Any] = {"finishReason": spec.get("finish_reason", "STOP"), "index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": parts}
    return {"candidates": [candidate], "modelVersion": model,
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 1290, "totalTokenCount": 1330}}


def _imagen_response(spec: dict, numbers: range = range(1)) -> dict:
    if spec.get("rai_reason"):
        # What Vertex answers with includeRaiReason when every image was filtered.
        return {"predictions": [{"raiFilteredReason": spec["rai_reason"]}]}
    if spec.get("image") is None:
        return {}  # all filtered, no reason asked for
    return {"predictions": [{"bytesBase64Encoded": _b64(variant(spec["image"], i)),
                             "mimeType": spec.get("mime_type", "image/png")} for i in numbers]}


def _operation_response(name: str, spec: dict, numbers: range = range(1)) -> dict:
    if spec.get("error"):
        return {"name": name, "done": True, "error": spec["error"]}
    response: dict[str, Any] = {"@type": "type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse"}
    if spec.get("rai_reason"):
        response.update(raiMediaFilteredCount=1, raiMediaFilteredReasons=[spec["rai_reason"]])
    elif spec.get("gcs_only"):
        response["videos"] = [{"gcsUri": "gs://loopback-bucket/sample_0.mp4", "mimeType": "video/mp4"}]
    else:
        response["videos"] = [{"bytesBase64Encoded": _b64(variant(spec["video"], i)), "mimeType": "video/mp4"}
                              for i in numbers]
    return {"name": name, "done": True, "response": response}


__all__ = ["ACCESS_TOKEN", "CutReply", "GoogleMediaServer", "PROJECT"]
