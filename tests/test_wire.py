"""The bounded transport (backends/wire) on real HTTP: loopback servers that drip, flood, bomb and redirect.

Driven through the httpx client class the SDKs use (the one installed: httpx2, or httpx), built as
the backends build it. Deadlines run on a counting clock (each reading advances it), so a test
asserts on what was read and how the exchange ended, never on how long it took.
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest

from lm_eval_mathjudge.backends import wire
from lm_eval_mathjudge.backends.wire import decode, transport
from lm_eval_mathjudge.core.errors import FatalJudgeError, JudgeCallError, JudgeRefusal, TransientJudgeError
from tests.loopback import ChatCompletionsServer
from tests.loopback import wire_faults as faults
from tests.loopback._base import Reply

CAP = 256 * 1024
MiB = 1 << 20
BODY = b'{"ok": true, "text": "' + b"x" * 2000 + b'"}'


class CountingClock:
    """Advances ``step`` seconds at every reading: a deadline of S seconds allows about S / step readings."""

    def __init__(self, step: float = 1.0):
        self.now, self.step, self.readings = 0.0, step, 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.step
        return self.now


def _client_base():
    try:
        import httpx2 as hx
    except ImportError:  # pragma: no cover - httpx2 is what the SDKs install
        import httpx as hx
    return hx.Client


def client(max_bytes: int = CAP, seconds: float = 10.0, clock=None, **kwargs):
    bounds = wire.Bounds(max_bytes=max_bytes, seconds=seconds, clock=clock)
    return transport.client_class(_client_base())(bounds=bounds, follow_redirects=True, timeout=seconds, **kwargs)


@pytest.fixture
def server():
    with ChatCompletionsServer() as s:
        yield s


def get(server, path: str = "/data", **kwargs):
    with client(**kwargs) as c:
        return c.get(server.origin + path)


# ------------------------------------------------------------------ the deadline
@pytest.mark.parametrize("head", [False, True], ids=["body-drips", "headers-drip"])
def test_a_dripping_reply_ends_at_the_deadline(server, head):
    sent = faults.Sent()
    server.misbehave("/data", faults.drip(BODY, 0.002, head=head, sent=sent))
    clock = CountingClock(step=1.0)
    with pytest.raises(TransientJudgeError) as caught:
        get(server, seconds=20.0, clock=clock)
    assert caught.value.kind == "timeout" and "timed out after 20s" in str(caught.value)
    assert "judge_timeout" in str(caught.value) and server.origin in str(caught.value)
    assert not sent.done and sent.bytes < len(BODY) // 2  # it stopped reading long before the end
    assert clock.readings <= 40  # one reading per socket operation, each a second on this clock


def test_a_reply_inside_the_deadline_is_read_whole(server):
    server.misbehave("/data", faults.drip(BODY[:40], 0.0))
    response = get(server, seconds=1000.0, clock=CountingClock(step=1.0))
    assert response.status_code == 200 and response.content == BODY[:40]


def test_same_origin_redirects_share_one_deadline(server):
    server.misbehave("/data", faults.redirect(307, "/next"))
    server.misbehave("/next", faults.redirect(302, "/last"))
    seen = []
    with client() as c:
        c.event_hooks["response"] = [lambda r: seen.append(r.request.extensions[transport._EXCHANGE])]
        response = c.get(server.origin + "/data")
    assert [r.path for r in server.requests] == ["/data", "/next", "/last"]
    assert response.status_code == 404  # the loopback's own answer at the end of the chain
    assert len(seen) == 3 and seen[0] is seen[1] is seen[2]  # one exchange: one deadline, one cap


@pytest.mark.parametrize("timeouts, expected", [
    ({"connect": 30.0, "read": 30.0, "write": 30.0, "pool": 30.0}, 30.0),
    ({"connect": 5.0, "read": 600.0, "write": None, "pool": None}, 600.0),
    ({"connect": None, "read": None, "write": None, "pool": None}, None),
    (None, None),
])
def test_the_request_timeout_is_the_exchange_deadline(timeouts, expected):
    assert transport._seconds(timeouts) == expected


# ------------------------------------------------------------------ the byte cap
@pytest.mark.parametrize("declare", [True, False], ids=["declared-length", "chunked"])
def test_a_flood_stops_at_the_cap(server, declare):
    sent = faults.Sent()
    server.misbehave("/data", faults.flood(100 * MiB, declare=declare, sent=sent))
    with pytest.raises(JudgeRefusal) as caught:
        get(server)
    assert caught.value.kind == "reply_too_large"
    message = str(caught.value)
    assert f"{CAP:,}-byte cap" in message and "judge_max_reply_bytes" in message and "not cached" in message
    assert ("Content-Length 104,857,600" in message) == declare
    assert not sent.done and sent.bytes < 40 * MiB  # the client hung up: what was sent is socket buffers


@pytest.mark.parametrize("layers", [1, 2, 3], ids=["gzip", "gzip-gzip", "gzip-gzip-gzip"])
def test_a_gzip_bomb_stops_at_the_cap_without_inflating(server, layers):
    server.misbehave("/data", faults.bomb(1 << 30, layers))
    tracemalloc.start()
    try:
        with pytest.raises(JudgeRefusal) as caught:
            get(server, max_bytes=2 * MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.kind == "reply_too_large"
    assert "Content-Encoding layer" in str(caught.value) or "Content-Length" in str(caught.value)
    assert peak < 40 * MiB  # of 1 GiB: the decoded body is never held, let alone whole


def test_an_encoded_reply_within_the_cap_reaches_the_caller_decoded(server):
    inner = gzip.compress(BODY)
    server.misbehave("/data", Reply(200, gzip.compress(inner), {"Content-Encoding": "gzip, gzip"}))
    response = get(server)
    assert response.content == BODY
    assert "content-encoding" not in response.headers and "content-length" not in response.headers
    assert server.requests[-1].headers["accept-encoding"] == decode.ACCEPTED


@pytest.mark.parametrize("encoded", [
    pytest.param(zlib.compress(BODY), id="deflate-zlib-wrapped"),
    pytest.param(zlib.compress(BODY, wbits=-15), id="deflate-raw"),
])
def test_deflate_either_way_is_decoded(server, encoded):
    server.misbehave("/data", Reply(200, encoded, {"Content-Encoding": "deflate"}))
    assert get(server).content == BODY


@pytest.mark.parametrize("encoding, body, says", [
    pytest.param("br", b"\x0b\x02\x80hello\x03", "Content-Encoding br, which was not asked for", id="br"),
    pytest.param("zstd", b"\x28\xb5\x2f\xfd", "Content-Encoding zstd", id="zstd"),
    pytest.param("gzip, gzip, gzip, gzip", gzip.compress(b"x", mtime=0), "4 stacked Content-Encodings",
                 id="four-layers"),
    pytest.param("gzip", b"\x1f\x8b\x08\x00garbage that is not deflate", "not valid gzip data", id="corrupt-gzip"),
])
def test_an_encoding_it_cannot_read_safely_is_refused(server, encoding, body, says):
    server.misbehave("/data", Reply(200, body, {"Content-Encoding": encoding}))
    with pytest.raises(TransientJudgeError) as caught:
        get(server)
    assert caught.value.kind == "bad_response" and says in str(caught.value)


def test_scoped_lends_a_bigger_cap_to_the_exchanges_of_a_block(server):
    server.misbehave("/data", faults.flood(2 * MiB, declare=False), times=2)
    with pytest.raises(JudgeRefusal):
        get(server)
    with wire.scoped(max_bytes=4 * MiB):
        assert len(get(server).content) == 2 * MiB
    assert transport._scope.bounds == (None, None)  # put back after the block


# ------------------------------------------------------------------ decoding, step by step
def test_a_bomb_is_inflated_at_most_one_chunk_past_the_cap():
    produced = []

    def count(total: int, stage: str) -> None:
        produced.append(total)
        if total > CAP:
            raise JudgeRefusal("over", kind="reply_too_large")

    body = faults.bomb_body(64 * MiB, 1)
    chunks = (body[i:i + 4096] for i in range(0, len(body), 4096))
    with pytest.raises(JudgeRefusal):
        for _ in decode.decoded(chunks, decode.layers(["gzip"], "o"), count, "o"):
            pass
    assert produced[-1] <= CAP + decode.CHUNK


@pytest.mark.parametrize("values, expected", [
    ([], []), (["identity"], []), (["gzip"], ["gzip"]), (["gzip, deflate"], ["deflate", "gzip"]),
    (["gzip", "gzip"], ["gzip", "gzip"]), (["X-GZIP"], ["x-gzip"]), ([" identity , gzip "], ["gzip"]),
])
def test_layers_are_undone_right_to_left(values, expected):
    assert decode.layers(values, "o") == expected


# ------------------------------------------------------------------ redirects
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_and_nothing_is_sent_there(server, status):
    with ChatCompletionsServer() as other:
        elsewhere = other.origin
        server.misbehave("/data", faults.redirect(status, elsewhere + "/v1/chat/completions"))
        with client() as c, pytest.raises(FatalJudgeError) as caught:
            c.post(server.origin + "/data", json={"prompt": "the model's answer"})
        assert other.requests == []
    assert caught.value.kind == "redirect" and caught.value.status == status
    assert f"to another origin, {elsewhere}" in str(caught.value) and "judge_base_url" in str(caught.value)


@pytest.mark.parametrize("target", ["https://{host}/data", "http://localhost:{port}/data", "http://127.0.0.1:1/data"],
                         ids=["other-scheme", "other-host-name", "other-port"])
def test_scheme_host_and_port_each_make_another_origin(server, target):
    host = f"127.0.0.1:{server.port}"
    server.misbehave("/data", faults.redirect(307, target.format(host=host, port=server.port)))
    with pytest.raises(FatalJudgeError, match="another origin"):
        get(server)


def test_a_redirect_within_the_origin_is_followed(server):
    server.misbehave("/data", faults.redirect(307, f"{server.origin}/v1/models"))
    response = get(server)
    assert response.status_code == 200 and response.json()["object"] == "list"


# ------------------------------------------------------------------ every transport, down to the sockets
def test_every_transport_a_client_builds_is_bounded_down_to_its_sockets(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "example.org")
    c = client()
    transports = [c._transport, *c._mounts.values()]
    c.close()
    assert len([t for t in transports if t is not None]) >= 2  # the default one and the proxy's
    assert all(t is None or (type(t).__name__ == "Bounded" and t.sockets_bounded) for t in transports)


def test_the_private_pool_attributes_the_deadline_needs_are_there():
    """deadline.reach_sockets relies on HTTPTransport._pool._network_backend: fail here if httpx moves it."""
    hx = transport.flavour(_client_base())
    inner = hx.HTTPTransport()
    bounded, _ = transport.classes(hx)
    assert bounded(inner, wire.Bounds(max_bytes=CAP, seconds=1.0)).sockets_bounded
    assert type(inner._pool._network_backend).__name__ == "_Backend"
    inner.close()


def test_a_bound_wrapped_by_an_sdk_is_found_behind_it():
    """openai 1.x raises APIConnectionError from whatever its send raised; the backends look behind it."""
    bound = JudgeRefusal("too large", kind="reply_too_large")
    try:
        try:
            raise bound
        except JudgeRefusal as exc:
            raise ConnectionError("Connection error.") from exc
    except ConnectionError as wrapped:
        assert wire.carried(wrapped) is bound
    assert wire.carried(ValueError("x")) is None
    assert isinstance(wire.carried(bound), JudgeCallError)
