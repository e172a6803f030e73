"""OTLP receivers: gRPC (TraceService, LogsService) and HTTP (/v1/traces, /v1/logs; protobuf, JSON, gzip).

OTLP/HTTP bodies come with a Content-Length or chunked (the OpenTelemetry JS exporter's way), both
bounded by the receiver's request size.

gRPC uses the synchronous server with a bounded thread pool: the per-request work is CPU-bound
Python under the GIL (parse, classify, journal write) plus an fsync wait, so an event loop would
need the same thread offload; the bounded pool and ``maximum_concurrent_rpcs`` give backpressure
(RESOURCE_EXHAUSTED) for free. HTTP uses the stdlib ``ThreadingHTTPServer`` with a cap on open
connections and on requests in progress. Both answer bad input with the OTLP-specified error and
keep serving.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint.service import jsonlog
from otel_footprint.service.config import HostPort, ReceiverConfig, ServerTls
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.otlp import (
    CONTENT_PROTOBUF,
    LOGS_PATH,
    LOGS_SERVICE,
    TRACE_SERVICE,
    TRACES_PATH,
    BadRequestError,
    Signal,
    decode_body,
    gunzip_bounded,
    media_type,
    read_chunked,
    safe_text,
    status_body,
    success_body,
)
from otel_footprint.service.pipeline import OverloadedError, Pipeline

_log = jsonlog.get("receiver")


def bearer_all_ok(values: Sequence[object], token: str | None) -> bool:
    """True when no token is configured, or there is an ``authorization`` entry and every one of
    them carries the token (a second entry is not a way around the first).
    """
    if token is None:
        return True
    return bool(values) and all(bearer_ok(v if isinstance(v, str) else None, token) for v in values)


def bearer_ok(header: str | None, token: str | None) -> bool:
    """True when no token is configured, or ``header`` is ``Bearer <token>`` (constant-time compare)."""
    if token is None:
        return True
    if not header:
        return False
    scheme, _, value = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        value.strip().encode(), token.encode()
    )


def _retry_trailers(
    code: grpc.StatusCode, message: str, seconds: float
) -> list[tuple[str, str | bytes]]:
    """RetryInfo as the Collector reads it (status details) and as the Python SDK reads it."""
    delay = duration_pb2.Duration(seconds=int(seconds), nanos=int((seconds % 1) * 1e9))
    info = error_details_pb2.RetryInfo(retry_delay=delay)
    status = status_pb2.Status(code=code.value[0], message=message)
    status.details.add().Pack(info)
    return [
        ("grpc-status-details-bin", status.SerializeToString()),
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
    ]


_refusals = jsonlog.Throttled(_log, interval=10.0)


def log_refusal(transport: str, reason: str, message: str, status: str) -> None:
    """One JSON line per (transport, reason) per 10 s; requests_rejected counts every one."""
    _refusals.log(
        logging.INFO,
        f"{transport}:{reason}",
        "refused a request",
        {"transport": transport, "reason": reason, "status": status, "error": safe_text(message)},
    )


# ---------------------------------------------------------------------------------------------
# gRPC
# ---------------------------------------------------------------------------------------------


class GrpcReceiver:
    """The OTLP/gRPC receiver (plus any extra services sharing its port, e.g. the query service)."""

    def __init__(
        self,
        cfg: ReceiverConfig,
        pipeline: Pipeline,
        metrics: HopMetrics,
        *,
        token: str | None,
        workers: int,
        extra_handlers: Sequence[grpc.GenericRpcHandler[Any, Any]] = (),
    ) -> None:
        self.cfg = cfg
        self.pipeline = pipeline
        self.metrics = metrics
        self.token = token
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otel-footprint-grpc"),
            maximum_concurrent_rpcs=cfg.max_concurrent_requests,
            options=[
                ("grpc.max_receive_message_length", cfg.max_request_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )
        handlers: list[grpc.GenericRpcHandler[Any, Any]] = [
            grpc.method_handlers_generic_handler(
                TRACE_SERVICE,
                {"Export": grpc.unary_unary_rpc_method_handler(self._export_traces)},
            ),
            grpc.method_handlers_generic_handler(
                LOGS_SERVICE,
                {"Export": grpc.unary_unary_rpc_method_handler(self._export_logs)},
            ),
            *extra_handlers,
        ]
        self.server.add_generic_rpc_handlers(tuple(handlers))
        self.bound: HostPort | None = None

    def start(self) -> HostPort:
        address = str(self.cfg.endpoint)
        if self.cfg.tls is not None:
            port = self.server.add_secure_port(address, _grpc_credentials(self.cfg.tls))
        else:
            port = self.server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"cannot bind the gRPC receiver to {address}")
        self.server.start()
        self.bound = HostPort(self.cfg.endpoint.host, port)
        return self.bound

    def stop(self, grace: float) -> None:
        self.server.stop(grace).wait(grace + 1)

    def check_auth(self, context: grpc.ServicerContext) -> None:
        if self.token is None:
            return
        values = [v for k, v in context.invocation_metadata() if k.lower() == "authorization"]
        if not bearer_all_ok(values, self.token):
            self.metrics.requests_rejected.inc(1, "grpc", "unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    def _export(
        self,
        data: bytes,
        context: grpc.ServicerContext,
        parse: Callable[[bytes], Any],
        ingest: Callable[[Any, bytes, str], int],
    ) -> bytes:
        self.check_auth(context)
        refusal = self._ingest(data, parse, ingest)
        if refusal is None:
            return b""  # an empty Export*ServiceResponse: full success
        code, reason, message, retry_after = refusal
        self.metrics.requests_rejected.inc(1, "grpc", reason)
        log_refusal("grpc", reason, message, code.name)
        if retry_after is not None:
            context.set_trailing_metadata(tuple(_retry_trailers(code, message, retry_after)))
        context.abort(code, message)
        return b""  # not reached: abort raises

    def _ingest(
        self, data: bytes, parse: Callable[[bytes], Any], ingest: Callable[[Any, bytes, str], int]
    ) -> tuple[grpc.StatusCode, str, str, float | None] | None:
        """Parse and ingest; None on success, else (status, reason, message, retry after s).

        Never raises: whatever the request holds, the sender gets an OTLP status (OTLP: bad data
        is INVALID_ARGUMENT, not retried; overload is RESOURCE_EXHAUSTED with RetryInfo; a disk
        failure UNAVAILABLE with RetryInfo; a fault of ours INTERNAL), never UNKNOWN.
        """
        try:
            request = parse(data)
        except DecodeError as exc:
            return (
                grpc.StatusCode.INVALID_ARGUMENT,
                "malformed",
                f"not a valid OTLP request: {exc}",
                None,
            )
        try:
            ingest(request, data, "grpc")
        except OverloadedError as exc:
            return grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded", str(exc), exc.retry_after
        except OSError as exc:
            _log.error("cannot journal a request", extra={"error": str(exc)})
            return grpc.StatusCode.UNAVAILABLE, "io_error", "journal write failed", 2.0
        except Exception:
            _log.exception("unexpected error handling an OTLP/gRPC request")
            return (
                grpc.StatusCode.INTERNAL,
                "internal",
                "the hop failed to handle this request",
                None,
            )
        return None

    def _export_traces(self, data: bytes, context: grpc.ServicerContext) -> bytes:
        return self._export(
            data, context, ExportTraceServiceRequest.FromString, self.pipeline.ingest_traces
        )

    def _export_logs(self, data: bytes, context: grpc.ServicerContext) -> bytes:
        return self._export(
            data, context, ExportLogsServiceRequest.FromString, self.pipeline.ingest_logs
        )


def _grpc_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    pair = (tls.key_file.read_bytes(), tls.cert_file.read_bytes())
    ca = tls.client_ca_file.read_bytes() if tls.client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=ca, require_client_auth=ca is not None
    )


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------

_PATHS: dict[str, Signal] = {TRACES_PATH: "traces", LOGS_PATH: "logs"}


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], receiver: HttpReceiver) -> None:
        self.receiver = receiver
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._open = 0
        self._open_lock = threading.Lock()
        super().__init__(address, _OtlpHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            full = self._open >= self.receiver.max_connections
            if not full:
                self._open += 1
        if full:
            # No thread for a connection over the cap: answer 503 (plain sockets) and close.
            self.receiver.metrics.requests_rejected.inc(1, "http", "too_many_connections")
            if not isinstance(request, ssl.SSLSocket):
                with contextlib.suppress(OSError):
                    request.sendall(
                        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                        b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                    )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("HTTP connection error", exc_info=True, extra={"client": str(client_address)})


class _OtlpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-footprint"
    sys_version = ""
    timeout = 30.0  # an idle keep-alive connection gives its thread back after this
    server: _HttpServer

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            # Accepted with do_handshake_on_connect=False: shake hands here, on this thread.
            self.request.settimeout(self.timeout)
            self.request.do_handshake()
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("http " + (format % args))

    def _reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _fail(
        self,
        status: int,
        reason: str,
        message: str,
        content_type: str = CONTENT_PROTOBUF,
        retry_after: float | None = None,
        close: bool = False,
    ) -> None:
        self.server.receiver.metrics.requests_rejected.inc(1, "http", reason)
        log_refusal("http", reason, message, str(status))
        codes = {
            400: code_pb2.INVALID_ARGUMENT,
            401: code_pb2.UNAUTHENTICATED,
            404: code_pb2.NOT_FOUND,
            405: code_pb2.UNIMPLEMENTED,
            411: code_pb2.INVALID_ARGUMENT,
            413: code_pb2.INVALID_ARGUMENT,
            415: code_pb2.INVALID_ARGUMENT,
            429: code_pb2.RESOURCE_EXHAUSTED,
            500: code_pb2.INTERNAL,
            501: code_pb2.UNIMPLEMENTED,
            503: code_pb2.UNAVAILABLE,
        }
        body, ctype = status_body(codes.get(status, code_pb2.UNKNOWN), message, content_type)
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["Retry-After"] = str(max(1, round(retry_after)))
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        if close:
            self.close_connection = True
        self._reply(status, body, ctype, headers)

    def do_POST(self) -> None:
        try:
            self._post()
        except (OSError, TimeoutError):
            self.close_connection = True  # the client went away, or stalled past the deadline
        except Exception:
            _log.exception("unexpected error handling an OTLP/HTTP request")
            self.close_connection = True
            with contextlib.suppress(Exception):
                self._fail(500, "internal", "the hop failed to handle this request", close=True)

    def _post(self) -> None:
        receiver = self.server.receiver
        path = self.path.split("?", 1)[0]
        signal = _PATHS.get(path)
        content_type = self.headers.get("Content-Type", "")
        if signal is None:
            self._drain_or_close()
            self._fail(
                404,
                "not_found",
                f"no OTLP endpoint at {path}; use {TRACES_PATH} or {LOGS_PATH}",
                content_type,
            )
            return
        if not bearer_all_ok(self.headers.get_all("Authorization") or [], receiver.token):
            self._drain_or_close()
            self._fail(401, "unauthenticated", "missing or wrong bearer token", content_type)
            return
        try:
            body = self._read_body(receiver.cfg.max_request_bytes)
        except BadRequestError as exc:
            # The body was not (wholly) read: the connection cannot carry another request.
            self._fail(exc.http_status, exc.reason, exc.message, content_type, close=True)
            return
        if body is None:  # the client went away mid-body
            self.close_connection = True
            return
        if not receiver.slots.acquire(blocking=False):
            self._fail(
                429, "overloaded", "too many requests in progress", content_type, retry_after=1
            )
            return
        try:
            self._export(signal, body, content_type)
        finally:
            receiver.slots.release()

    def _read_body(self, limit: int) -> bytes | None:
        """The request body, framed by Content-Length or chunked (as the OpenTelemetry JS exporter
        sends it); None when the connection ended early. Raises BadRequestError (411, 413, 400, 501).
        """
        codings = [
            c.strip().lower()
            for header in self.headers.get_all("Transfer-Encoding") or ()
            for c in header.split(",")
            if c.strip()
        ]
        if codings:
            if self.headers.get("Content-Length") is not None:
                # Both framings: chunked wins (RFC 9112 §6.1), and the connection is not reused,
                # so a disagreeing intermediary cannot smuggle a second request.
                self.close_connection = True
            if codings[-1] != "chunked":
                raise BadRequestError(
                    400, "malformed", "Transfer-Encoding of a request must end with chunked"
                )
            if len(codings) > 1:
                raise BadRequestError(
                    501,
                    "unsupported_encoding",
                    f"unsupported transfer coding {', '.join(codings[:-1])!r} (only chunked is "
                    "accepted); compress with Content-Encoding: gzip",
                )
            return read_chunked(self.rfile, limit)
        try:
            length = int(self.headers.get("Content-Length", ""))
            if length < 0:
                raise ValueError(length)
        except ValueError:
            raise BadRequestError(
                411, "length_required", "a valid Content-Length or chunked body is required"
            ) from None
        if length > limit:
            # Do not read an oversized body: answer and close the connection.
            raise BadRequestError(413, "too_large", f"body of {length} bytes exceeds {limit}")
        body = self.rfile.read(length)
        return body if len(body) == length else None

    def _export(self, signal: Signal, body: bytes, content_type: str) -> None:
        receiver = self.server.receiver
        encoding = self.headers.get("Content-Encoding", "").strip().lower()
        try:
            if encoding == "gzip":
                body = gunzip_bounded(body, receiver.cfg.max_request_bytes)
            elif encoding not in ("", "identity"):
                raise BadRequestError(
                    415,
                    "unsupported_encoding",
                    f"unsupported Content-Encoding {encoding!r}; use gzip",
                )
            request = decode_body(signal, body, content_type)
        except BadRequestError as exc:
            self._fail(exc.http_status, exc.reason, exc.message, content_type)
            return
        wire = body if media_type(content_type) == CONTENT_PROTOBUF else None
        try:
            if isinstance(request, ExportTraceServiceRequest):
                receiver.pipeline.ingest_traces(request, wire, "http")
            else:
                receiver.pipeline.ingest_logs(request, wire, "http")
        except OverloadedError as exc:
            self._fail(503, "overloaded", str(exc), content_type, retry_after=exc.retry_after)
            return
        except OSError as exc:
            _log.error("cannot journal a request", extra={"error": str(exc)})
            self._fail(503, "io_error", "journal write failed", content_type, retry_after=2)
            return
        ok_body, ok_type = success_body(signal, content_type)
        self._reply(200, ok_body, ok_type)

    def _drain_or_close(self) -> None:
        # Keep the connection usable when the body is small; otherwise close it unread.
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if 0 <= length <= 65536 and not self.headers.get("Transfer-Encoding"):
            self.rfile.read(length)
        else:
            self.close_connection = True

    def _not_allowed(self) -> None:
        self._drain_or_close()
        self._fail(
            405,
            "method_not_allowed",
            f"{self.command} is not allowed; OTLP/HTTP takes POST",
            close=True,
        )

    def do_GET(self) -> None:
        self._not_allowed()

    def do_PUT(self) -> None:
        self._not_allowed()

    def do_DELETE(self) -> None:
        self._not_allowed()

    def do_PATCH(self) -> None:
        self._not_allowed()


class HttpReceiver:
    """The OTLP/HTTP receiver."""

    def __init__(
        self, cfg: ReceiverConfig, pipeline: Pipeline, metrics: HopMetrics, *, token: str | None
    ) -> None:
        self.cfg = cfg
        self.pipeline = pipeline
        self.metrics = metrics
        self.token = token
        self.slots = threading.BoundedSemaphore(cfg.max_concurrent_requests)
        self.max_connections = cfg.max_concurrent_requests * 4
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self.bound: HostPort | None = None

    def start(self) -> HostPort:
        server = _HttpServer((self.cfg.endpoint.host, self.cfg.endpoint.port), self)
        if self.cfg.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.cfg.tls.cert_file), str(self.cfg.tls.key_file))
            if self.cfg.tls.client_ca_file is not None:
                ctx.load_verify_locations(str(self.cfg.tls.client_ca_file))
                ctx.verify_mode = ssl.CERT_REQUIRED
            # The handshake happens on the connection's own thread, not in the accept loop.
            server.socket = ctx.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="otel-footprint-http",
            daemon=True,
        )
        self._thread.start()
        self.bound = HostPort(self.cfg.endpoint.host, server.server_address[1])
        return self.bound

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
