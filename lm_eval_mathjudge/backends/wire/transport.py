"""The bounded transport, its response stream and the client class that uses it, per httpx flavour.

The SDKs send through httpx or its fork httpx2 (same API, separate classes), so each class
here is made for the flavour in use (``flavour``) and kept. ``Bounded`` wraps the transport
httpx would have used and, per exchange (a request and the same-origin redirects followed for
it, which share its deadline through the request's extensions):

1. sets the deadline and puts it under the sockets while the request is sent and the
   headers arrive (``deadline.py``);
2. refuses a redirect to another origin before httpx can follow it (nothing is re-sent);
3. refuses a declared length over the cap, then streams the body: raw bytes counted
   against the cap, Content-Encoding undone within it (``decode.py``), the deadline checked
   before each read. The SDK gets identity-encoded bytes, or the bound's failure.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ...core.errors import FatalJudgeError, JudgeRefusal
from . import decode
from .deadline import Deadline, active, reach_sockets

_EXCHANGE = "lm_eval_mathjudge.exchange"  # request extension: the bounds of the exchange it belongs to
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = (301, 302, 303, 307, 308)  # the statuses httpx follows
_DROPPED = {b"content-encoding", b"content-length"}  # no longer true once the body is decoded here


@dataclass(frozen=True)
class Bounds:
    """A client's bounds. ``seconds``: the deadline when a request names no timeout; the ``*_setting``
    names are what a message tells the user to change."""
    max_bytes: int
    seconds: float
    bytes_setting: str = "judge_max_reply_bytes"
    seconds_setting: str = "judge_timeout"
    url_setting: str = "judge_base_url"
    clock: Callable[[], float] | None = None  # None: ``CLOCK``


CLOCK: Callable[[], float] = time.monotonic  # the deadlines' clock (tests put a counting one here)


@dataclass(frozen=True)
class Exchange:
    deadline: Deadline
    max_bytes: int
    bounds: Bounds

    def too_large(self, detail: str) -> JudgeRefusal:
        return JudgeRefusal(
            f"the reply from {self.deadline.origin} is larger than the {self.max_bytes:,}-byte cap ({detail}); "
            f"it was not read further, is not retried and not cached. Raise {self.bounds.bytes_setting} if this "
            "endpoint's replies are that large", kind="reply_too_large")

    def count(self, total: int, stage: str) -> None:
        """``total`` bytes so far at ``stage`` ("as sent", or after undoing an encoding): over the cap, refused."""
        if total > self.max_bytes:
            raise self.too_large(f"more than {self.max_bytes:,} bytes {stage}")


_scope = threading.local()


@contextmanager
def scoped(*, max_bytes: int | None = None, seconds: float | None = None) -> Iterator[None]:
    """Exchanges started by this thread inside the block get these bounds instead of the client's
    (a batch result file is larger than one reply; a download may take longer than one call)."""
    previous = getattr(_scope, "bounds", (None, None))
    _scope.bounds = (max_bytes, seconds)
    try:
        yield
    finally:
        _scope.bounds = previous


def origin_of(url: Any) -> str:
    scheme = url.scheme
    return f"{scheme}://{url.host}:{url.port or _DEFAULT_PORTS.get(scheme, '')}"


def _seconds(timeouts: Any) -> float | None:
    """The request's own timeout (httpx's per-phase values) as one deadline: the largest one given."""
    values = [v for v in (timeouts or {}).values() if isinstance(v, (int, float))] if isinstance(timeouts, dict) else []
    return max(values) if values else None


def exchange_of(request: Any, bounds: Bounds) -> Exchange:
    """The bounds of ``request``'s exchange: set on its first hop, carried by its redirects."""
    found = request.extensions.get(_EXCHANGE)
    if found is None:
        max_bytes, seconds = getattr(_scope, "bounds", (None, None))
        seconds = seconds or _seconds(request.extensions.get("timeout")) or bounds.seconds
        clock = bounds.clock or CLOCK
        deadline = Deadline(clock() + seconds, seconds, clock, origin_of(request.url), bounds.seconds_setting)
        found = Exchange(deadline, max_bytes or bounds.max_bytes, bounds)
        request.extensions[_EXCHANGE] = found
    return found


def check_redirect(status: int, location: str | None, request: Any, exchange: Exchange) -> None:
    """A redirect to another scheme, host or port is refused: httpx would re-send the request there."""
    if status not in _REDIRECTS or not location:
        return
    try:
        target = request.url.join(location)
    except Exception:  # noqa: BLE001 - a Location httpx cannot read is httpx's to refuse
        return
    here, there = origin_of(request.url), origin_of(target)
    if here != there:
        raise FatalJudgeError(
            f"{here} redirected the request (HTTP {status}) to another origin, {there}; the redirect was not "
            f"followed, so nothing was sent there. Point {exchange.bounds.url_setting} at the endpoint that "
            "answers", kind="redirect", status=status)


def flavour(cls: type) -> Any:
    """The httpx module (httpx or httpx2) a client class is built on."""
    for klass in cls.__mro__:
        name = (klass.__module__ or "").split(".")[0]
        if name in ("httpx", "httpx2"):
            return sys.modules[name]
    raise TypeError(f"{cls!r} is not an httpx client class")


class _Stream:
    """The body of one exchange: raw bytes counted, decoded within the cap, each read by the deadline.
    Made a subclass of the flavour's ``SyncByteStream`` by ``classes``."""

    def __init__(self, inner: Any, exchange: Exchange, encodings: list[str]):
        self._inner, self._exchange, self._encodings = inner, exchange, encodings

    def __iter__(self) -> Iterator[bytes]:
        exchange = self._exchange
        return decode.decoded(self._raw(), self._encodings, exchange.count, exchange.deadline.origin)

    def _raw(self) -> Iterator[bytes]:
        exchange, chunks, total = self._exchange, iter(self._inner), 0
        while True:
            exchange.deadline.bound(None)  # raises once the deadline has passed
            with active(exchange.deadline):
                chunk = next(chunks, None)
            if chunk is None:
                return
            total += len(chunk)
            exchange.count(total, "as sent")
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _Transport:
    """A transport around httpx's own: every exchange within the deadline, the cap and the origin.
    Made a subclass of the flavour's ``BaseTransport`` by ``classes`` (``hx``, ``stream``: that flavour's)."""

    hx: Any
    stream: type

    def __init__(self, inner: Any, bounds: Bounds):
        self.inner, self.bounds = inner, bounds
        self.sockets_bounded = reach_sockets(inner)

    def handle_request(self, request: Any) -> Any:
        exchange = exchange_of(request, self.bounds)
        request.headers["Accept-Encoding"] = decode.ACCEPTED
        with active(exchange.deadline):
            response = self.inner.handle_request(request)
        try:
            encodings = _checked_head(response, request, exchange)
        except BaseException:
            response.close()
            raise
        headers = response.headers.raw
        if encodings:
            headers = [(k, v) for k, v in headers if k.lower() not in _DROPPED]
        return self.hx.Response(response.status_code, headers=headers, extensions=response.extensions,
                                stream=self.stream(response.stream, exchange, encodings))

    def close(self) -> None:
        self.inner.close()


def _checked_head(response: Any, request: Any, exchange: Exchange) -> list[str]:
    """The encodings to undo, once the status line and headers pass: no redirect elsewhere, no length over."""
    headers = response.headers
    check_redirect(response.status_code, headers.get("location"), request, exchange)
    encodings = decode.layers(headers.get_list("content-encoding"), exchange.deadline.origin)
    declared = headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > exchange.max_bytes:
        raise exchange.too_large(f"it declares Content-Length {int(declared):,}")
    return encodings


@functools.cache
def classes(hx: Any) -> tuple[type, type]:
    """(bounded transport, bounded byte stream) as classes of the httpx flavour ``hx``."""
    stream = type("BoundedStream", (_Stream, hx.SyncByteStream), {})
    return type("Bounded", (_Transport, hx.BaseTransport), {"hx": hx, "stream": stream}), stream


@functools.cache
def client_class(base: type) -> type:
    """``base`` (the SDK's httpx client class) with every transport it builds bounded."""
    bounded, _ = classes(flavour(base))

    class BoundedClient(base):
        def __init__(self, *, bounds: Bounds, **kwargs: Any):
            self._mathjudge_bounds = bounds  # read by the two hooks, which run inside base.__init__
            super().__init__(**kwargs)

        def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
            return bounded(super()._init_transport(*args, **kwargs), self._mathjudge_bounds)

        def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
            return bounded(super()._init_proxy_transport(*args, **kwargs), self._mathjudge_bounds)

    BoundedClient.__name__ = BoundedClient.__qualname__ = f"Bounded{base.__name__.lstrip('_')}"
    return BoundedClient
