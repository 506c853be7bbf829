"""Loopback server speaking the OpenAI chat-completions wire protocol.

Good enough for `openai.OpenAI(base_url=server.url)` and lm-eval's
`local-chat-completions` adapter (`base_url=server.chat_url`).
"""

from __future__ import annotations

import itertools
import re
import time
from typing import Any, Sequence
from urllib.parse import urlsplit

from ._base import LoopbackServer, Reply, Responder, count_words

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_MODELS_PATHS = ("/v1/models", "/models", "/openai/models")  # the last: Azure OpenAI's model list
_MODEL_PATH = re.compile(r"^(/v1)?/models/(?P<id>[^/]+)$")

# (type, code) pairs mirroring what api.openai.com sends for each status.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def _prompt_tokens(body: dict) -> int:
    """Word count over message contents (plain strings or text parts)."""
    total = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            total += sum(count_words(p.get("text")) for p in content if isinstance(p, dict))
        else:
            total += count_words(content if isinstance(content, str) else None)
    return total


class ChatCompletionsServer(LoopbackServer):
    """`POST /v1/chat/completions` + `GET /v1/models` on 127.0.0.1.

    responder(body) returns the assistant content (str) or a dict with optional
    keys `content` (omitted -> null, as for filtered replies), `finish_reason`, `usage` (merged into the usage
    object), `model` (the snapshot the reply reports; default: the model asked for), `status`, `headers`,
    `raw_body` (sent verbatim).
    Faults from `inject()` apply to chat-completion calls only.

    Model routes (the preflight's): `GET /v1/models` lists `models`; `GET
    /v1/models/{id}` answers the model or 404 `model_not_found`, like
    api.openai.com. `models_status` makes both answer that error status
    instead (401 for a bad key); `model_routes` set to "list" keeps only the
    list (as vLLM), to "none" drops both (a proxy: 404 Unknown route).
    Built without `models`, the server routes any model name it is asked for (as a LiteLLM
    wildcard route does), so end-to-end runs pass the judge's preflight whatever judge_model
    they use; giving or assigning `models` makes the lookup strict.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        models: Sequence[str] | None = None,
    ) -> None:
        self._models = list(models or ("loopback-model",))
        self.any_model = models is None
        self.models_status: int | None = None
        self.model_routes = "all"  # "all", "list" or "none"
        self._ids = itertools.count(1)
        super().__init__(responder, latency)

    @property
    def models(self) -> list[str]:
        return self._models

    @models.setter
    def models(self, value) -> None:
        self._models, self.any_model = list(value), False

    @property
    def url(self) -> str:
        """Base URL for `openai.OpenAI(base_url=...)`."""
        return f"{self.origin}/v1"

    @property
    def chat_url(self) -> str:
        """Full endpoint URL for lm-eval's `local-chat-completions`."""
        return f"{self.url}/chat/completions"

    @property
    def call_count(self) -> int:
        return sum(1 for r in self.requests if r.method == "POST" and _is_chat(r.path))

    # -- protocol ---------------------------------------------------------------
    def is_model_call(self, method: str, path: str) -> bool:
        return method == "POST" and _is_chat(path)

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        path = urlsplit(path).path.rstrip("/")
        if method == "POST" and _is_chat(path):
            return self._fault_reply() or self._chat(raw)
        if method == "GET" and (path in _MODELS_PATHS or _MODEL_PATH.match(path)):
            return self._models_route(path)
        return Reply(404, self.error_body(404, f"Unknown route {method} {path}", {}))

    def error_body(self, status: int, message: str | None, headers: dict[str, str]) -> dict:
        kind, code = _ERROR_KINDS.get(status, ("server_error", None))
        message = message or f"loopback error {status}"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def _chat(self, raw: bytes) -> Reply:
        outcome = self.ask_responder(raw, "content")
        if isinstance(outcome, Reply):
            return outcome
        body, spec = outcome
        return Reply(200, self._completion(body, spec), dict(spec.get("headers") or {}))

    def _completion(self, body: dict, spec: dict) -> dict:
        content = spec.get("content")
        n = int(body.get("n") or 1)
        prompt, completion = _prompt_tokens(body), count_words(content) * n
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            **(spec.get("usage") or {}),
        }
        choice = {
            "message": {"role": "assistant", "content": content, "refusal": None},
            "finish_reason": spec.get("finish_reason", "stop"),
            "logprobs": None,
        }
        return {
            "id": f"chatcmpl-loopback-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": spec.get("model") or body.get("model") or self.models[0],  # a snapshot behind an alias
            "choices": [{"index": i, **choice} for i in range(n)],
            "usage": usage,
            "system_fingerprint": spec.get("system_fingerprint"),
        }

    def _models_route(self, path: str) -> Reply:
        single = _MODEL_PATH.match(path)
        if self.model_routes == "none" or (single and self.model_routes == "list"):
            return Reply(404, {"detail": "Not Found"})  # what a FastAPI server (vLLM, proxies) answers
        if self.models_status is not None:
            return Reply(self.models_status, self.error_body(self.models_status, None, {}))
        if not single:
            return Reply(200, self._model_list())
        if single["id"] not in self.models and not self.any_model:
            message = f"The model `{single['id']}` does not exist or you do not have access to it."
            return Reply(404, self.error_body(404, message, {}))
        return Reply(200, {"id": single["id"], "object": "model", "created": 0, "owned_by": "loopback"})

    def _model_list(self) -> dict:
        models = [
            {"id": m, "object": "model", "created": 0, "owned_by": "loopback"}
            for m in self.models
        ]
        return {"object": "list", "data": models}


_AZURE_CHAT = re.compile(r"^/openai/deployments/[^/]+/chat/completions$")  # Azure OpenAI's route


def _is_chat(path: str) -> bool:
    path = urlsplit(path).path.rstrip("/")
    return path in _CHAT_PATHS or bool(_AZURE_CHAT.match(path))
