"""The judge contract in one place: what goes to a backend and what comes back.

A judge is a backend (transport) + a template (builds the request) + a parser
(reply text -> verdict). Backends see only ``JudgeRequest``; parsers see only
reply text; the client in between owns caching, retries and concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from .cache import Reply


@dataclass(frozen=True)
class Media:
    """A file attached to the judge request instead of response text."""
    path: str
    mime_type: str
    sha256: str
    size: int


@dataclass(frozen=True)
class JudgeRequest:
    """One judge call: a single user message of text, optionally followed by media.

    ``fields`` carries the raw inputs (question, reference, answer, response)
    for backends that do not read prose, such as the local math-verify judge.
    """
    prompt: str
    media: tuple[Media, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)

    def key_payload(self) -> dict[str, Any]:
        # Media enter the key by content hash, never by path.
        return {"prompt": self.prompt, "media": [[m.mime_type, m.sha256] for m in self.media]}


@dataclass(frozen=True)
class Outcome:
    """What the client knows about one request after judging.

    Exactly one of ``verdict`` / ``failure`` is set. ``failure`` is
    ``"unparseable"`` for a reply off the contract (a scored judge failure) or
    the error kind of a call that never produced a reply (a transport failure).
    """
    verdict: Any = None
    failure: str | None = None
    error: str | None = None
    raw_reply: str | None = None
    cached: bool = False
    calls: int = 0
    usage: Mapping[str, int] = field(default_factory=dict)

    @property
    def transport_failed(self) -> bool:
        return self.failure is not None and self.failure != "unparseable"


class Backend(Protocol):
    """Transport to one judge service. Raises TransientJudgeError / FatalJudgeError."""

    def identity(self) -> dict[str, Any]:
        """Everything about the judge that shapes a reply (no secrets): part of cache keys."""

    def complete(self, request: JudgeRequest) -> Reply:
        """One attempt, no retries."""

    def close(self) -> None:
        """Release clients, uploaded files and other resources."""
