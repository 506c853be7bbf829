"""A generator's network bounds (``backends.wire``) and what crossing one means for its sample."""

from __future__ import annotations

from ..backends import wire
from ..core.errors import GenerationFailure, JudgeCallError
from .settings import GeneratorSettings


def bounds(settings: GeneratorSettings, url_setting: str) -> wire.Bounds:
    """Its ``timeout`` as the deadline of each exchange (connect to last byte), its ``max_reply_bytes``."""
    return wire.Bounds(max_bytes=settings.max_reply_bytes, seconds=settings.timeout,
                       bytes_setting="--model_args max_reply_bytes", seconds_setting="--model_args timeout",
                       url_setting=url_setting)


def media_bound(error: JudgeCallError, what: str) -> Exception:
    """A reply over the cap is this prompt's counted failure, not remembered (a rerun with a larger cap
    tries again; a recorded job is polled again, not paid for again); other bounds' failures are kept."""
    if error.kind == "reply_too_large":
        return GenerationFailure(f"{what}: {error}", kind="reply_too_large", remember=False)
    return error
