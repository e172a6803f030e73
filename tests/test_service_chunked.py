"""Chunked OTLP/HTTP request bodies (``Transfer-Encoding: chunked``, as the OpenTelemetry JS exporter
sends them) and strict HTTP/1.1 framing, against the real ``otel-footprint serve`` over raw sockets.

The framing is parsed by h11 (under uvicorn), not by code of ours: these tests pin the receiver's
answers (status, OTLP Status body, whether the connection stays open).
"""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from http.client import HTTPResponse

import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_service_support import HopProcess, Sink, by_id

LIMIT = 64 * 1024
"""The hop's receivers.otlp.protocols.http.max_request_size in these tests."""


def _chunked(*chunks: bytes, trailers: bytes = b"", ext: bytes = b"") -> bytes:
    out = b"".join(b"%x%s\r\n%s\r\n" % (len(c), ext, c) for c in chunks)
    return out + b"0\r\n" + trailers + b"\r\n"


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hop(sink: Sink, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    proc = HopProcess(
        tmp_path_factory.mktemp("chunked") / "data",
        sink.endpoint,
        "--set",
        f"receivers.otlp.protocols.http.max_request_size={LIMIT}",
    ).start()
    yield proc
    code = proc.terminate()
    assert code == 0, proc.stderr()


def _plain_request(n: int, name: str = "GET /orders") -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(n):
        scope.spans.add(
            trace_id=(0xC0FFEE00 + i).to_bytes(16, "big"),
            span_id=(0xC0FFEE00 + i).to_bytes(8, "big"),
            name=name,
        )
    return request


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @staticmethod
    def read(sock: socket.socket) -> Reply:
        response = HTTPResponse(sock)
        response.begin()
        # Header names are case-insensitive: compare them lower-cased.
        headers = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, headers, response.read())


class Connection:
    """One raw keep-alive connection to the hop's HTTP receiver."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)

    def post(self, head: dict[str, str], body: bytes, path: str = "/v1/traces") -> Reply:
        lines = [f"POST {path} HTTP/1.1", "Host: hop"] + [f"{k}: {v}" for k, v in head.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return Reply.read(self.sock)

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


CHUNKED_PROTO = {"Content-Type": "application/x-protobuf", "Transfer-Encoding": "chunked"}


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_chunked_protobuf_json_and_gzip_bodies_are_accepted(hop: HopProcess, sink: Sink) -> None:
    proto = _plain_request(3, "proto chunked").SerializeToString()
    conn = Connection(hop.http)
    try:
        reply = conn.post(CHUNKED_PROTO, _chunked(*_pieces(proto, 17)))
        assert (reply.status, reply.headers["content-type"]) == (200, "application/x-protobuf")
        # The same connection carries the next request: the body was read to its last byte.
        span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "json chunked"}
        body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
        json_head = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        reply = conn.post(json_head, _chunked(*_pieces(body, 10), trailers=b"X-Checksum: 0\r\n"))
        assert reply.status == 200
        # gzip inside chunked framing, as the JS exporter sends with compression on.
        zipped = gzip.compress(_plain_request(2, "gzip chunked").SerializeToString())
        reply = conn.post({**CHUNKED_PROTO, "Content-Encoding": "gzip"}, _chunked(zipped))
        assert reply.status == 200
    finally:
        conn.close()
    assert sink.wait_for(
        lambda: {"proto chunked", "json chunked", "gzip chunked"} <= {s.name for s in sink.spans()},
        10,
    )
    received = by_id(sink.spans())
    assert len(received["cd" * 8]) == 1
    metrics = hop.metrics()
    assert metrics['otel_footprint_spans_received_total{transport="http"}'] >= 6


def test_a_chunked_body_over_the_limit_is_refused_and_the_connection_closed(
    hop: HopProcess,
) -> None:
    conn = Connection(hop.http)
    try:
        # One chunk declaring more than the limit: refused once its data passes the limit.
        reply = conn.post(CHUNKED_PROTO, b"%x\r\n" % (LIMIT * 2) + b"\x00" * (LIMIT + 512))
        assert reply.status == 413
        assert reply.headers.get("connection") == "close"
        assert conn.closed_by_peer()
    finally:
        conn.close()
    # Small chunks adding up past the limit; and gzip + chunked inflating past it.
    conn = Connection(hop.http)
    try:
        big = _chunked(*([b"\x00" * 4096] * 17))
        assert conn.post(CHUNKED_PROTO, big).status == 413
        assert conn.closed_by_peer()
    finally:
        conn.close()
    conn = Connection(hop.http)
    try:
        bomb = gzip.compress(b"\x00" * (LIMIT * 4))
        reply = conn.post({**CHUNKED_PROTO, "Content-Encoding": "gzip"}, _chunked(bomb))
        assert reply.status == 413
    finally:
        conn.close()
    metrics = hop.metrics()
    assert (
        metrics['otel_footprint_requests_rejected_total{transport="http",reason="too_large"}'] >= 3
    )


@pytest.mark.parametrize(
    ("head", "body"),
    [
        pytest.param(CHUNKED_PROTO, b"zz\r\nhello\r\n0\r\n\r\n", id="size not hex"),
        pytest.param(CHUNKED_PROTO, b"5\r\nhelloXX0\r\n\r\n", id="missing CRLF"),
        pytest.param(
            {**CHUNKED_PROTO, "Transfer-Encoding": "chunked, gzip"}, b"0\r\n\r\n", id="not last"
        ),
        pytest.param({**CHUNKED_PROTO, "Content-Length": "3"}, b"0\r\n\r\n", id="both framings"),
        pytest.param(
            {"Content-Type": "application/x-protobuf", "Content-Length": "+3"},
            b"abc",
            id="+N length",
        ),
        pytest.param(
            {"Content-Type": "application/x-protobuf", "Content-Length": "3, 4"},
            b"abcd",
            id="two lengths in one header",
        ),
    ],
)
def test_broken_framing_is_refused_and_the_connection_closed(
    hop: HopProcess, head: dict[str, str], body: bytes
) -> None:
    conn = Connection(hop.http)
    try:
        reply = conn.post(head, body)
        assert reply.status == 400
        assert "malformed HTTP/1.1 request" in status_pb2.Status.FromString(reply.body).message
        assert reply.headers.get("connection") == "close"
        assert conn.closed_by_peer()
    finally:
        conn.close()
    # The receiver keeps serving.
    conn = Connection(hop.http)
    try:
        proto = _plain_request(1, "after broken framing").SerializeToString()
        assert conn.post(CHUNKED_PROTO, _chunked(proto)).status == 200
    finally:
        conn.close()


def _raw(hop: HopProcess, wire: bytes) -> Reply:
    host, port = hop.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(wire)
        return Reply.read(sock)


def test_two_differing_content_lengths_and_a_missing_host_are_refused(hop: HopProcess) -> None:
    body = _plain_request(1, "smuggled").SerializeToString()
    two = (
        b"POST /v1/traces HTTP/1.1\r\nHost: hop\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body) + 1)
    )
    assert _raw(hop, two + body + b"x").status == 400
    no_host = (
        b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    assert _raw(hop, no_host + body).status == 400
    # HTTP/1.0 has no Host requirement.
    old = b"POST /v1/traces HTTP/1.0\r\nContent-Type: application/x-protobuf\r\n"
    assert _raw(hop, old + b"Content-Length: %d\r\n\r\n" % len(body) + body).status == 200


def test_a_body_ending_mid_chunk_is_not_accepted(hop: HopProcess, sink: Sink) -> None:
    conn = Connection(hop.http)
    try:
        head = "POST /v1/traces HTTP/1.1\r\nHost: hop\r\nTransfer-Encoding: chunked\r\n"
        conn.sock.sendall(head.encode() + b"Content-Type: application/x-protobuf\r\n\r\n")
        conn.sock.sendall(b"40\r\nonly a few bytes")
        conn.sock.shutdown(socket.SHUT_WR)  # the client stops sending mid-chunk
        # The hop closes the connection without a 200: nothing was acknowledged.
        assert conn.closed_by_peer()
    finally:
        conn.close()


def test_a_transfer_coding_other_than_chunked_is_not_implemented(hop: HopProcess) -> None:
    conn = Connection(hop.http)
    try:
        head = {**CHUNKED_PROTO, "Transfer-Encoding": "gzip, chunked"}
        reply = conn.post(head, b"0\r\n\r\n")
        assert reply.status == 501
        assert "chunked" in status_pb2.Status.FromString(reply.body).message
        assert reply.headers.get("connection") == "close"
    finally:
        conn.close()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_complete_request_then_a_half_close_is_still_answered(
    hop: HopProcess, sink: Sink, framing: str
) -> None:
    """Issue 22: a client that sends a whole request and then shuts its sending side
    (``shutdown(SHUT_WR)``, as ``curl`` or a one-shot script may) was forwarded but never
    answered: the end of its input closed the connection under the pending response."""
    name = f"half-closed {framing}"
    proto = _plain_request(1, name).SerializeToString()
    if framing == "chunked":
        head, body = CHUNKED_PROTO, _chunked(proto)
    else:
        head = {"Content-Type": "application/x-protobuf", "Content-Length": str(len(proto))}
        body = proto
    conn = Connection(hop.http)
    try:
        lines = ["POST /v1/traces HTTP/1.1", "Host: hop"] + [f"{k}: {v}" for k, v in head.items()]
        conn.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        conn.sock.shutdown(socket.SHUT_WR)
        reply = Reply.read(conn.sock)
        assert reply.status == 200, reply
        assert reply.headers.get("connection") == "close"
        assert conn.closed_by_peer()
    finally:
        conn.close()
    assert sink.wait_for(lambda: name in {s.name for s in sink.spans()}, 10)


def test_a_half_close_before_the_body_is_whole_closes_without_an_answer(hop: HopProcess) -> None:
    """An incomplete request whose client stops sending can never be completed: the connection
    is closed at once (no 408 after the body deadline, nothing ingested)."""
    conn = Connection(hop.http)
    try:
        head = "POST /v1/traces HTTP/1.1\r\nHost: hop\r\nContent-Length: 100\r\n\r\n"
        conn.sock.sendall(head.encode() + b"\x0a\x02")
        conn.sock.shutdown(socket.SHUT_WR)
        conn.sock.settimeout(5)
        assert conn.sock.recv(100) == b""
    finally:
        conn.close()
