"""A minimal real OTLP traces receiver for tests: gRPC (TraceService) and HTTP/protobuf
(``POST /v1/traces``) on 127.0.0.1 free ports, keeping what it receives in a bounded list."""

from __future__ import annotations

import gzip
import io
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

from otel_footprint.codec import any_value_to_python
from otel_footprint.runs.spans import key_values_to_pairs

MAX_REQUESTS: Final = 10_000
"""Requests kept; past it the sink answers RESOURCE_EXHAUSTED / 429 so a runaway client shows."""

MAX_HTTP_BODY: Final = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    """One received span with its resource attributes, as plain Python values."""

    resource: dict[str, Any]
    scope_name: str
    span: trace_pb2.Span
    transport: str

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_span_id(self) -> str | None:
        return self.span.parent_span_id.hex() or None

    @property
    def attributes(self) -> dict[str, Any]:
        return {kv.key: any_value_to_python(kv.value) for kv in self.span.attributes}

    def events_named(self, name: str) -> list[trace_pb2.Span.Event]:
        return [e for e in self.span.events if e.name == name]


def event_pairs(event: trace_pb2.Span.Event) -> list[tuple[str, Any]]:
    """A span event's attributes as (key, python value) pairs, in order."""
    return key_values_to_pairs(event.attributes)


class OtlpSink:
    """Receives OTLP trace exports over gRPC and HTTP until closed; use as a context manager."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[tuple[str, trace_service_pb2.ExportTraceServiceRequest]] = []
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        # The generated registration function carries no annotations.
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _Servicer(self), self._grpc
        )
        self.grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        if self.grpc_port == 0:
            raise RuntimeError("could not bind a gRPC port on 127.0.0.1")
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _http_handler(self))
        self._http.daemon_threads = True
        self.http_port = int(self._http.server_address[1])
        self._http_thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def grpc_endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` (the scheme tells OTLP exporters to use plaintext)."""
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """Base URL for OTLP/HTTP; exporters append ``/v1/traces``."""
        return f"http://127.0.0.1:{self.http_port}"

    def __enter__(self) -> OtlpSink:
        self._grpc.start()
        self._http_thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None).wait(5)

    def accept(self, transport: str, request: trace_service_pb2.ExportTraceServiceRequest) -> bool:
        """Keep one request; False when the bound is reached."""
        with self._lock:
            if len(self._requests) >= MAX_REQUESTS:
                return False
            self._requests.append((transport, request))
            return True

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._lock:
            requests = list(self._requests)
        return list(_flatten(requests))

    def wait_for_spans(self, count: int, *, timeout: float = 20.0) -> list[ReceivedSpan]:
        """Poll until at least ``count`` spans arrived; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.spans()
            if len(found) >= count:
                return found
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{len(found)} span(s) arrived within {timeout} s, wanted {count}"
                )
            time.sleep(0.05)


def _flatten(
    requests: Sequence[tuple[str, trace_service_pb2.ExportTraceServiceRequest]],
) -> Iterator[ReceivedSpan]:
    for transport, request in requests:
        for resource_spans in request.resource_spans:
            resource = dict(key_values_to_pairs(resource_spans.resource.attributes))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    yield ReceivedSpan(resource, scope_spans.scope.name, span, transport)


class _Servicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: OtlpSink) -> None:
        self._sink = sink

    def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        if not self._sink.accept("grpc", request):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "sink is full")
        return trace_service_pb2.ExportTraceServiceResponse()


def _gunzip(body: bytes) -> bytes:
    """Decompress a gzip body, refusing to inflate past the body bound (a zip bomb stays small)."""
    out = gzip.GzipFile(fileobj=io.BytesIO(body)).read(MAX_HTTP_BODY + 1)
    if len(out) > MAX_HTTP_BODY:
        raise ValueError("decompressed body too large")
    return out


def _http_handler(sink: OtlpSink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?")[0] != "/v1/traces":
                self._reply(404, b"not found", "text/plain")
                return
            if self.headers.get("Content-Type", "") != "application/x-protobuf":
                self._reply(415, b"only application/x-protobuf", "text/plain")
                return
            body = self._read_body()
            if body is None:
                self._reply(413, b"body too large", "text/plain")
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            try:
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = _gunzip(body)
                request.ParseFromString(body)
            except (DecodeError, OSError, EOFError, ValueError):
                self._reply(400, b"not an ExportTraceServiceRequest", "text/plain")
                return
            if not sink.accept("http", request):
                self._reply(429, b"sink is full", "text/plain")
                return
            body = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self._reply(200, body, "application/x-protobuf")

        def _read_body(self) -> bytes | None:
            """The request body (plain or chunked, as Node's exporter sends it); None past the bound."""
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                length = int(self.headers.get("Content-Length", "0"))
                return self.rfile.read(length) if 0 <= length <= MAX_HTTP_BODY else None
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields
                    return b"".join(chunks)
                total += size
                if total > MAX_HTTP_BODY:
                    return None
                chunks.append(self.rfile.read(size))
                self.rfile.readline(8)  # the CRLF after each chunk

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # keep test output quiet

    return Handler
