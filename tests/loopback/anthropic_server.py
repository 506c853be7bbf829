"""Loopback server speaking Anthropic's Messages API, its model lookups and its Message Batches.

    POST   /v1/messages                      a Message (content blocks, stop_reason, usage)
    GET    /v1/models, /v1/models/{id}       the model list, one model (404 not_found_error)
    POST   /v1/messages/batches              {requests: [{custom_id, params}]} -> a MessageBatch
    GET    /v1/messages/batches/{id}         the batch (each read moves it on, see below)
    GET    /v1/messages/batches/{id}/results the results, JSONL (once ended)
    POST   /v1/messages/batches/{id}/cancel  ended (cancel_initiated_at set)
    DELETE /v1/messages/batches/{id}         {"id", "type": "message_batch_deleted"} (ended batches only)

Good enough for ``anthropic.Anthropic(base_url=server.url)``. Requests are checked as the API
checks them: an ``x-api-key`` (or bearer token) and ``anthropic-version`` header, ``model``,
``max_tokens`` and ``messages``, image blocks of a media type the API takes with valid base64, a
temperature within 0..1, and none at all for the models in ``no_sampling`` (400, as Claude 4.7 and
later answer). The reply is cut at ``max_tokens`` words (one word per token here) with stop_reason
``max_tokens``. Errors carry the API's body, ``{"type": "error", "error": {"type", "message"}}``,
with the error type of each status (529 ``overloaded_error``).

responder(body) returns the reply text (str) or a dict with optional keys ``content`` (text),
``thinking`` (a thinking block before it), ``stop_reason``, ``usage`` (merged), ``model``,
``status``, ``headers``, ``raw_body``. Batches move on when read (no clock): in_progress for
``polls_in_progress`` reads, then ended; each request is answered by the same responder as online
calls unless ``fate(index, params)`` says "expired", "canceled" or "errored".
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from ._base import LoopbackServer, Reply, Responder, count_words

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_MODEL = re.compile(r"^/v1/models/(?P<id>[^/]+)$")
_BATCH = re.compile(r"^/v1/messages/batches(?:/(?P<id>[^/]+))?(?:/(?P<action>results|cancel))?$")
Fate = Callable[[int, dict], "str | None"]


@dataclass
class _Batch:
    id: str
    results: list[dict] = field(default_factory=list)
    reads: int = 0
    status: str = "in_progress"
    canceled: bool = False


class AnthropicServer(LoopbackServer):
    def __init__(self, responder: Responder | None = None, latency: float = 0.0, models: Sequence[str] | None = None,
                 polls_in_progress: int = 1, fate: Fate | None = None):
        self._models = list(models or ("claude-sonnet-4-6",))
        self.any_model = models is None  # built without models: any name is served (as a gateway's wildcard)
        self.no_sampling: tuple[str, ...] = ("claude-opus-4-7", "claude-sonnet-5")  # model prefixes
        self.models_status: int | None = None
        self.polls_in_progress = polls_in_progress
        self.fate = fate
        self._ids = itertools.count(1)
        super().__init__(responder, latency)

    def _clear(self) -> None:
        super()._clear()
        self.batches: dict[str, _Batch] = {}
        self.deleted: list[str] = []
        self._batch_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The base URL for ``anthropic.Anthropic(base_url=...)`` (the SDK adds /v1/...)."""
        return self.origin

    @property
    def call_count(self) -> int:
        return sum(1 for r in self.requests if self.is_model_call(r.method, r.path))

    @property
    def batches_created(self) -> int:
        return sum(1 for r in self.requests if r.method == "POST" and urlsplit(r.path).path == "/v1/messages/batches")

    # -- protocol ---------------------------------------------------------------
    def is_model_call(self, method: str, path: str) -> bool:
        return method == "POST" and urlsplit(path).path == "/v1/messages"

    def error_body(self, status: int, message: str | None, headers: dict[str, str]) -> dict:
        return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"),
                                           "message": message or f"loopback error {status}"},
                "request_id": f"req_loopback{next(self._ids)}"}

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        path = urlsplit(path).path.rstrip("/")
        refused = self._check_headers(headers)
        if refused is not None:
            return refused
        if method == "POST" and path == "/v1/messages":
            return self._fault_reply() or self._message_reply(raw)
        if method == "GET" and (path == "/v1/models" or _MODEL.match(path)):
            return self._models_route(path)
        batch = _BATCH.match(path)
        if batch is not None:
            with self._batch_lock:
                return self._batches(method, batch["id"], batch["action"], raw)
        return Reply(404, self.error_body(404, f"Not Found: {method} {path}", {}))

    def _check_headers(self, headers: dict[str, str]) -> Reply | None:
        if not headers.get("x-api-key") and not headers.get("authorization", "").startswith("Bearer "):
            return Reply(401, self.error_body(401, "x-api-key header is required", {}))
        if not headers.get("anthropic-version"):
            return Reply(400, self.error_body(400, "anthropic-version: header is required", {}))
        return None

    # -- messages ---------------------------------------------------------------
    def _message_reply(self, raw: bytes) -> Reply:
        try:
            params = json.loads(raw)
        except ValueError:
            return Reply(400, self.error_body(400, "There was an error parsing the body of your request", {}))
        problem = self.invalid(params)
        if problem is not None:
            return Reply(400, self.error_body(400, problem, {}))
        outcome = self.ask_responder(raw, "content")
        if isinstance(outcome, Reply):
            return outcome
        _, spec = outcome
        return Reply(200, self.message(params, spec), dict(spec.get("headers") or {}))

    def invalid(self, params: Any) -> str | None:
        """What the API would say about these params (None: they are valid)."""
        if not isinstance(params, dict):
            return "body: Input should be an object"
        for name in ("model", "max_tokens", "messages"):
            if name not in params:
                return f"{name}: Field required"
        if not isinstance(params["max_tokens"], int) or params["max_tokens"] < 1:
            return "max_tokens: Input should be greater than or equal to 1"
        temperature = params.get("temperature")
        if temperature is not None and str(params["model"]).startswith(self.no_sampling):
            return "`temperature` is deprecated for this model."
        if temperature is not None and not 0 <= temperature <= 1:
            return "temperature: Input should be less than or equal to 1"
        return self._invalid_content(params["messages"])

    def _invalid_content(self, messages: Any) -> str | None:
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        for i, message in enumerate(messages):
            content = message.get("content")
            for j, block in enumerate(content if isinstance(content, list) else []):
                if block.get("type") == "image":
                    source = block.get("source") or {}
                    if source.get("media_type") not in _IMAGE_TYPES:
                        return f"messages.{i}.content.{j}.image.source.base64.media_type: Input should be one of " \
                               + ", ".join(_IMAGE_TYPES)
                    try:
                        base64.b64decode(source.get("data") or "", validate=True)
                    except ValueError:
                        return f"messages.{i}.content.{j}.image.source.base64: invalid base64 data"
        return None

    def message(self, params: dict, spec: dict) -> dict:
        """The Message the API returns for ``params`` when the judge's reply is ``spec``."""
        words = (spec.get("content") or "").split(" ")
        stop = spec.get("stop_reason", "end_turn")
        if len(words) > params["max_tokens"]:  # one word per token: the reply is cut where max_tokens runs out
            words, stop = words[:params["max_tokens"]], "max_tokens"
        text = " ".join(words)
        content = [{"type": "text", "text": text}] if spec.get("content") is not None else []
        if spec.get("thinking"):
            content.insert(0, {"type": "thinking", "thinking": spec["thinking"], "signature": "c2lnbmF0dXJl"})
        prompt = sum(count_words(b.get("text")) for m in params["messages"] for b in _blocks(m.get("content")))
        usage = {"input_tokens": prompt, "output_tokens": count_words(text) + count_words(spec.get("thinking")),
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard",
                 **(spec.get("usage") or {})}
        return {"id": f"msg_loopback{next(self._ids)}", "type": "message", "role": "assistant",
                "model": spec.get("model") or params["model"], "content": content, "stop_reason": stop,
                "stop_sequence": None, "usage": usage}

    # -- models -----------------------------------------------------------------
    def _models_route(self, path: str) -> Reply:
        if self.models_status is not None:
            return Reply(self.models_status, self.error_body(self.models_status, None, {}))
        single = _MODEL.match(path)
        if single is None:
            data = [_model(m) for m in self._models]
            return Reply(200, {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        if single["id"] not in self._models and not self.any_model:
            return Reply(404, self.error_body(404, f"model: {single['id']}", {}))
        return Reply(200, _model(single["id"]))

    # -- batches ----------------------------------------------------------------
    def _batches(self, method: str, batch_id: str | None, action: str | None, raw: bytes) -> Reply:
        if method == "POST" and batch_id is None:
            return self._create(raw)
        batch = self.batches.get(batch_id or "")
        if batch is None:
            return Reply(404, self.error_body(404, f"message_batch: {batch_id}", {}))
        if method == "GET" and action is None:
            batch.reads += 1
            if batch.status == "in_progress" and batch.reads > self.polls_in_progress:
                batch.status = "ended"
            return Reply(200, self._batch_object(batch))
        if method == "GET" and action == "results":
            if batch.status != "ended":
                return Reply(400, self.error_body(400, "Batch is still in progress", {}))
            lines = "".join(json.dumps(r) + "\n" for r in batch.results).encode()
            return Reply(200, lines, {"Content-Type": "application/binary"})
        if method == "POST" and action == "cancel":  # every request was answered at creation: it simply ends
            batch.canceled, batch.status = True, "ended"
            return Reply(200, self._batch_object(batch))
        if method == "DELETE" and action is None:
            if batch.status != "ended":
                return Reply(400, self.error_body(400, "Batch must be ended before it can be deleted", {}))
            self.deleted.append(self.batches.pop(batch.id).id)
            return Reply(200, {"id": batch.id, "type": "message_batch_deleted"})
        return Reply(405, self.error_body(405, "Method Not Allowed", {}))

    def _create(self, raw: bytes) -> Reply:
        try:
            requests = json.loads(raw)["requests"]
        except (ValueError, KeyError, TypeError):
            return Reply(400, self.error_body(400, "requests: Field required", {}))
        ids = [r.get("custom_id") for r in requests]
        bad = [i for i in ids if not isinstance(i, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i)]
        if bad or len(set(ids)) != len(ids) or not requests:
            return Reply(400, self.error_body(400, "requests: custom_id must be unique and match "
                                                   "^[a-zA-Z0-9_-]{1,64}$", {}))
        batch = _Batch(f"msgbatch_loopback{next(self._ids)}")
        batch.results = [self._result(i, r["custom_id"], r.get("params") or {}) for i, r in enumerate(requests)]
        self.batches[batch.id] = batch
        return Reply(200, self._batch_object(batch))

    def _result(self, index: int, custom_id: str, params: dict) -> dict:
        fate = self.fate(index, params) if self.fate else None
        if fate in ("expired", "canceled"):
            return {"custom_id": custom_id, "result": {"type": fate}}
        problem = self.invalid(params) if fate is None else "the request failed"
        if problem is None:
            spec = self.responder(params)
            spec = {"content": spec} if isinstance(spec, str) else spec
            if int(spec.get("status", 200)) < 400:
                return {"custom_id": custom_id, "result": {"type": "succeeded", "message": self.message(params, spec)}}
            problem = spec.get("content") or "error"
        return {"custom_id": custom_id, "result": {"type": "errored", "error": self.error_body(400, problem, {})}}

    def _batch_object(self, batch: _Batch) -> dict:
        kinds = [r["result"]["type"] for r in batch.results]
        ended = batch.status == "ended"
        counts = {"processing": 0 if ended else len(kinds), "succeeded": 0, "errored": 0, "canceled": 0,
                  "expired": 0}
        if ended:
            for kind in kinds:
                counts[kind if kind in counts else "errored"] += 1
        return {"id": batch.id, "type": "message_batch", "processing_status": batch.status,
                "request_counts": counts, "created_at": "2026-12-06T00:00:00Z",
                "expires_at": "2026-12-07T00:00:00Z", "ended_at": "2026-12-06T01:00:00Z" if ended else None,
                "archived_at": None, "cancel_initiated_at": "2026-12-06T00:30:00Z" if batch.canceled else None,
                "results_url": f"{self.origin}/v1/messages/batches/{batch.id}/results" if ended else None}


def _blocks(content: Any) -> list[dict]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _model(name: str) -> dict:
    return {"type": "model", "id": name, "display_name": name, "created_at": "2026-01-01T00:00:00Z"}
