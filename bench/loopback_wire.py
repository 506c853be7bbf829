"""Per-call cost of the loopback test server's reply writer: two writes vs one write + TCP_NODELAY.

The loopback servers in ``tests/loopback`` used to send a reply in two writes (status line and
headers, then the body) on a socket without TCP_NODELAY. The second small segment then waits for the
client's delayed ACK, about 40 ms per call on Linux, and every benchmark figure measured against these
servers included it. This script measures one call's round trip through the real ``openai`` SDK
against a zero-latency ``ChatCompletionsServer``, with the old writer (reproduced here) and the fixed one,
side by side in one process, interleaved so machine load hits both alike.

    python bench/loopback_wire.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from http.server import BaseHTTPRequestHandler

from _common import machine, now
from tests.loopback import ChatCompletionsServer
from tests.loopback._base import Reply, _Handler


class _TwoWriteHandler(_Handler):
    """The writer before the fix: end_headers() then the body, Nagle on."""

    def setup(self) -> None:
        BaseHTTPRequestHandler.setup(self)  # no TCP_NODELAY
        self.server.owner._track(self.connection, add=True)

    def _write(self, reply: Reply) -> None:
        data, content_type = reply.encoded()
        self.send_response(reply.status)
        self.send_header("Content-Type", content_type)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _OldServer(ChatCompletionsServer):
    handler_class = _TwoWriteHandler


def _one_call(client) -> float:
    start = time.perf_counter()
    client.chat.completions.create(model="loopback-model", messages=[{"role": "user", "content": "2+2?"}])
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per writer")
    args = parser.parse_args(argv)
    import openai

    times: dict[str, list[float]] = {"two writes (before)": [], "one write + TCP_NODELAY (after)": []}
    with _OldServer() as old, ChatCompletionsServer() as new:
        clients = {name: openai.OpenAI(base_url=server.url, api_key="bench", max_retries=0)
                   for name, server in zip(times, (old, new))}
        for client in clients.values():
            _one_call(client)  # connect once: keep-alive from here on, as the plugin's pool does
        for _ in range(args.calls):
            for name, client in clients.items():
                times[name].append(_one_call(client))
    print(f"{args.calls} sequential calls per writer, openai SDK, keep-alive, {now()}")
    print("| server writer | median ms | p10 ms | p90 ms |")
    print("|---|---:|---:|---:|")
    rows = {}
    for name, values in times.items():
        q = statistics.quantiles(values, n=10)
        rows[name] = {"median_ms": statistics.median(values) * 1e3, "p10_ms": q[0] * 1e3, "p90_ms": q[-1] * 1e3}
        print(f"| {name} | {rows[name]['median_ms']:.1f} | {rows[name]['p10_ms']:.1f} | {rows[name]['p90_ms']:.1f} |")
    print(json.dumps({"machine": machine(), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
