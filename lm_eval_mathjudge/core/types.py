"""The judge contract in one place: what goes to a backend and what comes back.

A judge is a backend (transport) + a template (builds the request) + a parser
(reply text -> verdict). Backends see only ``JudgeRequest``; parsers see only
reply text; the client in between owns caching, retries and concurrency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from .redact import redact

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Text that encodes as UTF-8: lone surrogates (invalid Unicode, e.g. from a JSON
    ``"\\ud800"`` escape) become U+FFFD, so one bad character cannot break a whole task."""
    return _LONE_SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class Reply:
    """A judge's raw answer and what it cost."""
    text: str
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str | None = None  # the model version the API says answered (a snapshot behind an alias)
    fingerprint: str | None = None  # OpenAI's system_fingerprint: the serving configuration (recorded only)


MAX_MODEL_NAME = 200  # characters of a reported model version kept (it is the provider's text)


def clean_reply(reply: Reply) -> Reply:
    """What may be stored and shown: valid Unicode, no credential the judge echoed."""
    text = redact(clean_text(reply.text))
    model, fingerprint = _provider_name(reply.model), _provider_name(reply.fingerprint)
    if text == reply.text and model == reply.model and fingerprint == reply.fingerprint:
        return reply
    return Reply(text=text, usage=reply.usage, finish_reason=reply.finish_reason, model=model, fingerprint=fingerprint)


def _provider_name(value: str | None) -> str | None:
    """A name the provider reported (model version, fingerprint): bounded, valid, never a credential."""
    return redact(clean_text(value))[:MAX_MODEL_NAME] if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Media:
    """A generated image or video attached to the judge request instead of text.

    ``source`` names it in messages (a path, or "data URL"); ``data`` holds the
    bytes of a data URL, otherwise they are read from ``path`` when sent.
    """
    source: str
    mime_type: str
    sha256: str
    size: int
    path: str | None = None
    data: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def is_video(self) -> bool:
        return self.mime_type.startswith("video/")

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        with open(self.path, "rb") as fh:
            return fh.read()


@dataclass(frozen=True)
class Recheck:
    """A request's counterfactual re-check (``judge_counterfactual``): the same request with a wrong reference
    (``core/counterfactual.py``), or why none could be built."""
    request: JudgeRequest | None = None
    answer: str | None = None  # the wrong final answer its reference states
    refused: str | None = None  # why no wrong reference could be built (the verdict then stands, counted)


@dataclass(frozen=True)
class JudgeRequest:
    """One judge call: a single user message made of the prompt, then the output to judge.

    The output to judge is either folded into ``prompt`` (exact match), given
    as a separate text part (``output_text``) or attached as ``media``.
    ``fields`` carries the raw inputs (question, reference, answer, response)
    for backends that do not read prose, such as the local math-verify judge.
    """
    prompt: str
    media: tuple[Media, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)
    output_text: str | None = None
    # judge_counterfactual: asked only after a Correct verdict; not part of this request's key
    recheck: Recheck | None = field(default=None, compare=False, repr=False)

    def key_payload(self) -> dict[str, Any]:
        # Media enter the key by content hash, never by path. The fields too: the local judge
        # reads the gold answer from them, not from the prompt.
        return {"prompt": self.prompt, "output_text": self.output_text, "fields": dict(self.fields),
                "media": [[m.mime_type, m.sha256] for m in self.media]}


@dataclass(frozen=True)
class Outcome:
    """What the client knows about one request after judging.

    Exactly one of ``verdict`` / ``failure`` is set. ``failure`` names what
    went wrong. A judge-level failure (an off-contract reply, a refusal such as
    a safety block, a media file that cannot be sent) is scored: 0 on every
    metric and 1 on judge_failed. A transport failure (``transport=True``: the
    judge could not be reached after all retries, or rejected the request) is
    never scored; the run stops and says how to resume.
    """
    verdict: Any = None
    failure: str | None = None
    transport: bool = False
    error: str | None = None
    raw_reply: str | None = None
    cached: bool = False
    calls: int = 0
    usage: Mapping[str, int] = field(default_factory=dict)
    detail: Mapping[str, Any] = field(default_factory=dict)  # what a panel or a cascade adds to the record

    @property
    def transport_failed(self) -> bool:
        return self.failure is not None and self.transport


class Backend(Protocol):
    """Transport to one judge service. Raises TransientJudgeError / FatalJudgeError."""

    def identity(self) -> dict[str, Any]:
        """Everything about the judge that shapes a reply (no secrets): part of cache keys."""

    def complete(self, request: JudgeRequest) -> Reply:
        """One attempt, no retries."""

    def close(self) -> None:
        """Release clients, uploaded files and other resources."""
