"""Every byte read from a network, bounded: one deadline, a byte cap, no redirect to another origin.

The SDKs (openai, google-genai, ...) send through httpx or its fork httpx2. Every SDK client the
package builds gets its HTTP client here (``sdks.py``): the SDK's own httpx client class, each
transport it makes (the default one, a proxy's) wrapped in a bounded one (``transport.py``).
Per exchange (a request, and the same-origin redirects httpx follows for it):

    bound      default                                      over it: the call fails with
    deadline   the request's timeout (judge_timeout), wall  TransientJudgeError ``timeout``: retried
               clock, from connect to the last byte; every  like any timeout, so a call takes at most
               socket operation is cut to the time left     about judge_timeout x attempts
    bytes      ``Bounds.max_bytes`` (judge_max_reply_bytes:  JudgeRefusal ``reply_too_large``: never
               1 MiB + 64 bytes x max_tokens), counted on   retried, never cached; the sample's
               the raw bytes and after each decoding layer  counted judge failure
    origin     a redirect to another scheme, host or port   FatalJudgeError ``redirect``: the run stops,
               is refused before httpx can follow it        nothing is re-sent elsewhere
    encoding   gzip and deflate are asked for and undone    TransientJudgeError ``bad_response``
               here within the cap; any other is refused

``scoped`` lends other bounds to the exchanges a block starts (a batch result file is larger
than one reply). The SDKs pass our failures on as raised (openai 1.x wraps them in an
``APIConnectionError``: ``carried`` finds them there).
"""

from __future__ import annotations

import functools

from ...core.errors import JudgeCallError
from ...settings.schema import JudgeSettings
from .sdks import bounded_client, google_http_options, openai_http_client
from .transport import Bounds, flavour, scoped

__all__ = ["Bounds", "bounded_client", "carried", "flavour", "google_http_options", "http_exceptions", "judge_bounds",
           "openai_http_client", "scoped"]


def judge_bounds(settings: JudgeSettings) -> Bounds:
    """A judge's bounds: judge_timeout as the deadline of each exchange, judge_max_reply_bytes (or its default)."""
    return Bounds(max_bytes=settings.reply_bytes, seconds=settings.timeout)


def carried(exc: BaseException | None) -> JudgeCallError | None:
    """The bound's failure behind an SDK exception (itself, or its cause), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, JudgeCallError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


@functools.cache
def http_exceptions() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...],
                               tuple[type[BaseException], ...]]:
    """(timeouts, connection errors, bad URL) of whichever httpx flavours are installed (httpx2, httpx)."""
    timeouts, transport, bad_url = [], [], []
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)  # ConnectError, RemoteProtocolError, ReadError, ...
        bad_url += [module.UnsupportedProtocol, module.InvalidURL]
    return tuple(timeouts), tuple(transport), tuple(bad_url)
