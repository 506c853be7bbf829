"""Memory of passed preflights (the judge's free model lookup before generation).

Within a process, ``client.preflight_once`` checks a judge identity once. Across processes, a
successful check is remembered in the judge cache for ``MEMO_SECONDS``: a rerun
of the same evaluation within that time skips the lookup, so a rerun answered
entirely from the cache makes no request and never imports the judge's SDK.

What the memory is keyed by: a SHA-256 digest of the backend identity (backend,
model, endpoint, sampling settings), the base URL and every variable the SDKs
read for endpoint and credentials (``SDK_ENV_PREFIXES``). Change the key, the
endpoint, the Azure API version or the Vertex project and the next run checks
again. The cache stores only that digest and the time of the check.

The trade-off: within the window, a judge that went away since the last check
(a revoked key, a deleted model or deployment, a dead server, expired Vertex
credentials) is found by the first judge call, after generation, instead of
before it. That run then stops with the usual message (every verdict obtained
is cached, the generations are saved) and forgets the check, so the next run
checks first again. ``judge_preflight=false`` skips the check altogether.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from typing import Mapping

from .. import vendors
from ..core.types import Backend
from ..settings.schema import JudgeSettings
from .cache import ReplyCache

log = logging.getLogger(__name__)

MEMO_SECONDS = 24 * 3600  # how long a successful check stands for the same judge
# What the SDKs read (keys, endpoints), from every vendor record.
SDK_ENV_PREFIXES = tuple(dict.fromkeys(p for v in vendors.VENDORS for p in v.env_prefixes))
_META_PREFIX = "preflight:"


def identity(backend: Backend, settings: JudgeSettings) -> str:
    """The judge a preflight checks: the backend's identity and the base URL."""
    return json.dumps({**backend.identity(), "base_url": settings.base_url}, sort_keys=True, default=str)


def memo_name(ident: str, environ: Mapping[str, str] | None = None) -> str:
    """The cache's name for a check of ``ident`` under these credentials: a digest, never a value."""
    environ = os.environ if environ is None else environ
    sdk_env = sorted((k, v) for k, v in environ.items() if k.startswith(SDK_ENV_PREFIXES))
    blob = json.dumps({"judge": ident, "env": sdk_env}, sort_keys=True)
    return _META_PREFIX + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def recently_checked(cache: ReplyCache | None, ident: str) -> bool:
    """Whether this judge passed a preflight within ``MEMO_SECONDS``, under the same credentials."""
    return cache is not None and _recent(cache, memo_name(ident))


def remember(cache: ReplyCache | None, ident: str) -> None:
    if cache is not None:
        _write(cache, memo_name(ident), str(time.time()))


def forget(cache: ReplyCache | None, ident: str) -> None:
    """After a fatal judge error: the next run checks the judge again before generating."""
    if cache is not None:
        _write(cache, memo_name(ident), None)


def _recent(cache: ReplyCache, name: str) -> bool:
    try:
        value = cache.get_meta(name)
    except sqlite3.Error as exc:  # no memory: check as if never checked
        log.debug("could not read the preflight memory: %s", exc)
        return False
    try:
        age = time.time() - float(value) if value is not None else None
    except ValueError:
        return False
    return age is not None and 0 <= age < MEMO_SECONDS


def _write(cache: ReplyCache, name: str, value: str | None) -> None:
    try:
        cache.set_meta(name, value)
    except sqlite3.Error as exc:  # only the memory is lost: the next run checks again
        log.debug("could not write the preflight memory: %s", exc)
