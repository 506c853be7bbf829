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
_MODELS_PATHS = ("/v1/models", "/models")

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
    object), `status`, `headers`, `raw_body` (sent verbatim).
    Faults from `inject()` apply to chat-completion calls only.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        models: Sequence[str] = ("loopback-model",),
    ) -> None:
        self.models = list(models)
        self._ids = itertools.count(1)
        super().__init__(responder, latency)

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
    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        path = urlsplit(path).path.rstrip("/")
        if method == "POST" and _is_chat(path):
            return self._fault_reply() or self._chat(raw)
        if method == "GET" and path in _MODELS_PATHS:
            return Reply(200, self._model_list())
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
            "model": body.get("model") or self.models[0],
            "choices": [{"index": i, **choice} for i in range(n)],
            "usage": usage,
            "system_fingerprint": None,
        }

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
