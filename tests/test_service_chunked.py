"""Chunked OTLP/HTTP request bodies (``Transfer-Encoding: chunked``, as the OpenTelemetry JS exporter
sends them): accepted like Content-Length bodies, bounded by the request size limit, framing checked.

The framing rules are checked on the reader alone; the receiver's answers (status, body, whether the
connection stays open) against the real ``otel-footprint serve`` process over raw sockets.
"""

from __future__ import annotations

import gzip
import io
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from http.client import HTTPResponse

import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_service_support import HopProcess, Sink, by_id

from otel_footprint.service.otlp import (
    MAX_CHUNK_LINE,
    MAX_TRAILER_LINES,
    BadRequestError,
    read_chunked,
)

LIMIT = 64 * 1024
"""The hop's receivers.otlp.protocols.http.max_request_size in these tests."""


# ---------------------------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------------------------


def _chunked(*chunks: bytes, trailers: bytes = b"", ext: bytes = b"") -> bytes:
    out = b"".join(b"%x%s\r\n%s\r\n" % (len(c), ext, c) for c in chunks)
    return out + b"0\r\n" + trailers + b"\r\n"


def test_reader_joins_chunks_and_skips_extensions_and_trailers() -> None:
    wire = _chunked(b"hello ", b"chunked ", b"world", ext=b';name="v"', trailers=b"X-Sum: 1\r\n")
    stream = io.BytesIO(wire + b"NEXT REQUEST")
    assert read_chunked(stream, LIMIT) == b"hello chunked world"
    assert stream.read() == b"NEXT REQUEST"  # stopped exactly at the end of the body


def test_reader_accepts_upper_case_hex_bare_lf_and_an_empty_body() -> None:
    data = bytes(range(256)) * 2  # CR and LF bytes inside chunk data are data
    assert read_chunked(io.BytesIO(b"1FF\r\n" + data[:511] + b"\r\n0\r\n\r\n"), 1024) == data[:511]
    assert read_chunked(io.BytesIO(b"200\n" + data + b"\n0\n\n"), 1024) == data
    assert read_chunked(io.BytesIO(b"0\r\n\r\n"), 1024) == b""


def test_reader_refuses_a_body_over_the_limit_before_reading_it() -> None:
    stream = io.BytesIO(b"%x\r\n" % (LIMIT + 1) + b"x" * 10)
    with pytest.raises(BadRequestError) as err:
        read_chunked(stream, LIMIT)
    assert err.value.http_status == 413
    assert stream.read() == b"x" * 10  # the oversized chunk's data was never read
    # Many chunks that add up past the limit: refused at the chunk that crosses it.
    many = _chunked(*([b"y" * 1024] * 65))
    with pytest.raises(BadRequestError) as err:
        read_chunked(io.BytesIO(many), LIMIT)
    assert err.value.http_status == 413
    assert read_chunked(io.BytesIO(_chunked(*([b"y" * 1024] * 64))), LIMIT) == b"y" * LIMIT


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"zz\r\nhello\r\n0\r\n\r\n", id="size not hex"),
        pytest.param(b"-5\r\nhello\r\n0\r\n\r\n", id="negative size"),
        pytest.param(b"0x5\r\nhello\r\n0\r\n\r\n", id="0x prefix"),
        pytest.param(b"1_0\r\n" + b"h" * 16 + b"\r\n0\r\n\r\n", id="underscore in size"),
        pytest.param(b"\r\nhello\r\n0\r\n\r\n", id="empty size"),
        pytest.param(b"11111111111111111\r\n", id="17 hex digits"),
        pytest.param(b"5\r\nhelloXX0\r\n\r\n", id="no CRLF after the data"),
        pytest.param(b"5\r\nhel", id="ends inside a chunk"),
        pytest.param(b"5\r\nhello\r\n", id="ends before the last chunk"),
        pytest.param(b"5", id="ends inside the size line"),
        pytest.param(b"0\r\nX-Trailer: 1\r\n", id="ends inside the trailers"),
        pytest.param(b"5" * (MAX_CHUNK_LINE + 1), id="size line too long"),
        pytest.param(b"0\r\n" + b"X: 1\r\n" * (MAX_TRAILER_LINES + 1) + b"\r\n", id="trailers"),
    ],
)
def test_reader_refuses_broken_framing(wire: bytes) -> None:
    with pytest.raises(BadRequestError) as err:
        read_chunked(io.BytesIO(wire), LIMIT)
    assert (err.value.http_status, err.value.reason) == (400, "malformed")
    assert "chunked" in err.value.message


# ---------------------------------------------------------------------------------------------
# The receiver (the real serve process)
# ---------------------------------------------------------------------------------------------


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
        return Reply(response.status, dict(response.getheaders()), response.read())


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
        assert (reply.status, reply.headers["Content-Type"]) == (200, "application/x-protobuf")
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
        # One chunk declaring more than the limit: refused before its data is read.
        reply = conn.post(CHUNKED_PROTO, b"%x\r\n" % (LIMIT + 1) + b"\x00" * 512)
        assert reply.status == 413
        assert reply.headers.get("Connection") == "close"
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
    ("head", "body", "status"),
    [
        pytest.param(CHUNKED_PROTO, b"zz\r\nhello\r\n0\r\n\r\n", 400, id="size not hex"),
        pytest.param(CHUNKED_PROTO, b"5\r\nhelloXX0\r\n\r\n", 400, id="missing CRLF"),
        pytest.param(
            {**CHUNKED_PROTO, "Transfer-Encoding": "chunked, gzip"},
            b"0\r\n\r\n",
            400,
            id="chunked not last",
        ),
        pytest.param(
            {**CHUNKED_PROTO, "Transfer-Encoding": "gzip, chunked"},
            b"0\r\n\r\n",
            501,
            id="a transfer coding other than chunked",
        ),
    ],
)
def test_broken_chunked_framing_is_refused_and_the_connection_closed(
    hop: HopProcess, head: dict[str, str], body: bytes, status: int
) -> None:
    conn = Connection(hop.http)
    try:
        reply = conn.post(head, body)
        assert reply.status == status
        assert "chunked" in status_pb2.Status.FromString(reply.body).message
        assert reply.headers.get("Connection") == "close"
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


def test_a_body_ending_mid_chunk_is_refused(hop: HopProcess) -> None:
    conn = Connection(hop.http)
    try:
        head = "POST /v1/traces HTTP/1.1\r\nHost: hop\r\nTransfer-Encoding: chunked\r\n"
        conn.sock.sendall(head.encode() + b"Content-Type: application/x-protobuf\r\n\r\n")
        conn.sock.sendall(b"40\r\nonly a few bytes")
        conn.sock.shutdown(socket.SHUT_WR)  # the client stops sending mid-chunk
        reply = Reply.read(conn.sock)
        assert reply.status == 400
        assert "ended inside a chunk" in status_pb2.Status.FromString(reply.body).message
    finally:
        conn.close()


def test_chunked_and_content_length_together_use_chunked_and_close(hop: HopProcess) -> None:
    proto = _plain_request(1, "both framings").SerializeToString()
    conn = Connection(hop.http)
    try:
        reply = conn.post({**CHUNKED_PROTO, "Content-Length": "3"}, _chunked(proto))
        assert reply.status == 200
        assert reply.headers.get("Connection") == "close"
        assert conn.closed_by_peer()
    finally:
        conn.close()
