"""OTLP receivers: gRPC (TraceService, LogsService) and HTTP (/v1/traces, /v1/logs; protobuf, JSON, gzip).

gRPC uses the synchronous server with a bounded thread pool: the per-request work is CPU-bound
Python under the GIL (parse, classify, journal write) plus an fsync wait, so an event loop would
need the same thread offload; the bounded pool and ``maximum_concurrent_rpcs`` give backpressure.
HTTP is a small ASGI application on uvicorn (httptools, i.e. llhttp, Node.js's parser): strict
HTTP/1.1 parsing, chunked bodies (the OpenTelemetry JS exporter's way), many idle connections on
one event loop, a deadline for the headers and one for the whole body; the CPU-bound work goes to
a bounded thread pool (docs/design.md has the measurement behind the choice). Both answer every
request with the OTLP-specified status (never UNKNOWN) and keep serving.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
import uvicorn
from google.protobuf import duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from otel_footprint.sdk.settings import HostPort, ReceiverSettings, ServerTlsSettings
from otel_footprint.service import jsonlog
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
    safe_text,
    status_body,
    success_body,
)
from otel_footprint.service.pipeline import JournalBlockedError, OverloadedError, Pipeline

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
        cfg: ReceiverSettings,
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
            # A backstop only (it answers without RetryInfo): _Admission refuses first.
            maximum_concurrent_rpcs=cfg.max_concurrent_requests * 2 + 8,
            options=[
                ("grpc.max_receive_message_length", cfg.max_request_size),
                ("grpc.so_reuseport", 0),
            ],
        )
        otlp = _Admission(
            (
                grpc.method_handlers_generic_handler(
                    TRACE_SERVICE,
                    {"Export": grpc.unary_unary_rpc_method_handler(self._export_traces)},
                ),
                grpc.method_handlers_generic_handler(
                    LOGS_SERVICE,
                    {"Export": grpc.unary_unary_rpc_method_handler(self._export_logs)},
                ),
            ),
            cfg.max_concurrent_requests,
            metrics,
        )
        handlers: list[grpc.GenericRpcHandler[Any, Any]] = [otlp, *extra_handlers]
        self.server.add_generic_rpc_handlers(tuple(handlers))
        self.bound: HostPort | None = None

    def start(self) -> HostPort:
        address = str(self.cfg.endpoint)
        if self.cfg.tls.cert_file is not None:
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
        failure, or a journal blocked until its writes succeed again, UNAVAILABLE with RetryInfo; a fault of ours INTERNAL), never UNKNOWN.
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
        except JournalBlockedError as exc:
            return grpc.StatusCode.UNAVAILABLE, "disk_blocked", str(exc), exc.retry_after
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


class _Admission(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    """At most ``limit`` OTLP exports in progress; beyond, RESOURCE_EXHAUSTED with RetryInfo.

    gRPC's own ``maximum_concurrent_rpcs`` answers RESOURCE_EXHAUSTED without RetryInfo, which
    OTLP makes non-retryable (the Collector would drop the data). ``service`` runs on the server's
    polling thread before the call is queued for a worker, so the decision is made here; an
    admitted call whose handler never runs (its client left while it was queued) frees its slot
    after ``expiry`` seconds.
    """

    def __init__(
        self,
        inner: Sequence[grpc.GenericRpcHandler[Any, Any]],
        limit: int,
        metrics: HopMetrics,
        expiry: float = 60.0,
    ) -> None:
        self.inner = tuple(inner)
        self.limit = limit
        self.metrics = metrics
        self.expiry = expiry
        self._lock = threading.Lock()
        self._admitted: dict[int, float] = {}
        self._tokens = itertools.count()

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        for inner in self.inner:
            handler = inner.service(handler_call_details)
            if handler is not None:
                break
        else:
            return None
        now = time.monotonic()
        with self._lock:
            if len(self._admitted) >= self.limit:
                for token, since in list(self._admitted.items()):
                    if now - since > self.expiry:
                        del self._admitted[token]
            if len(self._admitted) >= self.limit:
                return grpc.unary_unary_rpc_method_handler(self._refuse)
            token = next(self._tokens)
            self._admitted[token] = now
        behavior = handler.unary_unary
        assert behavior is not None

        def admitted(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return behavior(request, context)
            finally:
                with self._lock:
                    self._admitted.pop(token, None)

        return grpc.unary_unary_rpc_method_handler(admitted)

    def _refuse(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        message = "too many requests in progress"
        code = grpc.StatusCode.RESOURCE_EXHAUSTED
        self.metrics.requests_rejected.inc(1, "grpc", "overloaded")
        log_refusal("grpc", "overloaded", message, code.name)
        context.set_trailing_metadata(tuple(_retry_trailers(code, message, 1.0)))
        context.abort(code, message)
        return b""  # not reached: abort raises


def _grpc_credentials(tls: ServerTlsSettings) -> grpc.ServerCredentials:
    assert tls.key_file is not None and tls.cert_file is not None  # config: given together
    pair = (tls.key_file.read_bytes(), tls.cert_file.read_bytes())
    ca = tls.client_ca_file.read_bytes() if tls.client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=ca, require_client_auth=ca is not None
    )


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------

_PATHS: dict[str, Signal] = {TRACES_PATH: "traces", LOGS_PATH: "logs"}
_HTTP_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    404: code_pb2.NOT_FOUND,
    405: code_pb2.UNIMPLEMENTED,
    408: code_pb2.DEADLINE_EXCEEDED,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.INVALID_ARGUMENT,
    415: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    500: code_pb2.INTERNAL,
    501: code_pb2.UNIMPLEMENTED,
    503: code_pb2.UNAVAILABLE,
}
HEADER_TIMEOUT = 10.0
"""Seconds a connection has to deliver a request's line and headers (slow or idle peers)."""
MAX_HEADER_BYTES = 64 << 10
"""Bytes of header names and values one request may carry."""
IDLE_TIMEOUT = 15.0
"""Seconds a keep-alive connection may stay idle between requests."""


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False


class _RefusedError(Exception):
    def __init__(self, answer: _Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


class _OtlpHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools (llhttp) protocol, plus what an internet-facing receiver needs.

    - A deadline for the request line and headers: uvicorn times out idle keep-alive
      connections, but not one that never sends a request or sends its headers a byte at a time;
      those would hold a connection slot forever. (The body has the application's deadline.)
    - A bound on the header bytes of one request (llhttp has none of its own).
    - Malformed requests answered 400 with an OTLP Status body, and the connection closed.
    """

    _header_deadline: asyncio.TimerHandle | None = None
    _header_bytes = 0
    max_connections = 1024
    """Open connections beyond this are answered 503 with Retry-After and closed (per receiver)."""
    metrics: HopMetrics | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if len(self.connections) > self.max_connections:
            # OTLP/HTTP back-pressure: 503 with Retry-After, so the client retries later.
            if self.metrics is not None:
                self.metrics.requests_rejected.inc(1, "http", "too_many_connections")
            self._answer_and_close(
                b"503 Service Unavailable",
                code_pb2.UNAVAILABLE,
                "too many open connections",
                CONTENT_PROTOBUF,
                headers=b"Retry-After: 1\r\n",
            )
            return
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._header_bytes = 0
        self._header_deadline = self.loop.call_later(HEADER_TIMEOUT, self._expire)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _expire(self) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        if self._header_bytes > MAX_HEADER_BYTES:
            self.send_400_response(f"request headers exceed {MAX_HEADER_BYTES} bytes")
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()  # a request is in progress: the application's deadline applies
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol says so
        # The client shut its sending side. With a whole request in hand, keep the connection
        # open to write its answer, then close (a half-closed client sends nothing more);
        # asyncio's default (a falsy answer) closes the transport under the pending response:
        # the spans were journaled and forwarded, the client never told. Otherwise (idle, or a
        # request that can never be completed), close now.
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            cycle.keep_alive = False
            return True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        # llhttp refused the request (two differing Content-Length, a +N or non-digit length,
        # Content-Length beside Transfer-Encoding, bad chunked framing, ...): answer 400 with an
        # OTLP Status body, in the request's encoding when its headers were read, and close.
        if self.transport.is_closing():
            return
        content_type = _header(getattr(self, "headers", None) or [], b"content-type")
        message = f"malformed HTTP/1.1 request: {msg}"
        self._answer_and_close(b"400 Bad Request", code_pb2.INVALID_ARGUMENT, message, content_type)

    def _answer_and_close(
        self, status: bytes, code: int, message: str, content_type: str, *, headers: bytes = b""
    ) -> None:
        """An OTLP Status answer written straight to the transport (``status``: the status line's
        code and reason; ``headers``: header lines before the usual ones), then the connection
        closed."""
        body, ctype = status_body(code, message, content_type)
        self.transport.write(
            b"HTTP/1.1 %s\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (status, headers, ctype.encode(), len(body), body)
        )
        self.transport.close()


class _UvicornNoise(logging.Filter):
    """uvicorn logs one warning per malformed request or over-limit connection: count them as
    rejections (the metric) instead of a log line each; everything else passes (as JSON)."""

    def __init__(self, metrics: HopMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Invalid HTTP request"):
            self.metrics.requests_rejected.inc(1, "http", "malformed")
            return False
        if message.startswith("Exceeded concurrency limit"):
            self.metrics.requests_rejected.inc(1, "http", "too_many_connections")
            return False
        return record.levelno >= logging.WARNING


class HttpReceiver:
    """The OTLP/HTTP receiver: a small ASGI application served by uvicorn on its own thread.

    uvicorn parses HTTP strictly (llhttp: one Content-Length, digits only, not beside
    Transfer-Encoding; chunked framing) and keeps thousands of idle connections on one event
    loop. The application requires Host on HTTP/1.1 (RFC 9112), bounds each body by size and by
    a whole-request deadline, and hands the CPU-bound work (decode, classify, journal) to a
    bounded thread pool.
    """

    def __init__(
        self, cfg: ReceiverSettings, pipeline: Pipeline, metrics: HopMetrics, *, token: str | None
    ) -> None:
        self.cfg = cfg
        self.pipeline = pipeline
        self.metrics = metrics
        self.token = token
        self.max_connections = max(1024, cfg.max_concurrent_requests * 64)
        self.request_timeout = 30.0
        self._busy = 0
        self._pool = ThreadPoolExecutor(
            max_workers=cfg.max_concurrent_requests, thread_name_prefix="otel-footprint-http"
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._noise = _UvicornNoise(metrics)
        self.bound: HostPort | None = None

    def start(self) -> HostPort:
        host, port = self.cfg.endpoint.host, self.cfg.endpoint.port
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        tls = self.cfg.tls if self.cfg.tls.cert_file is not None else None
        config = uvicorn.Config(
            self._app,
            interface="asgi3",
            proxy_headers=False,
            http=type(
                "_ReceiverProtocol",
                (_OtlpHttpProtocol,),
                {"max_connections": self.max_connections, "metrics": self.metrics},
            ),
            loop="asyncio",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            date_header=False,
            timeout_keep_alive=int(IDLE_TIMEOUT),
            backlog=1024,
            timeout_graceful_shutdown=2,
            ssl_certfile=str(tls.cert_file) if tls else None,
            ssl_keyfile=str(tls.key_file) if tls else None,
            ssl_ca_certs=str(tls.client_ca_file) if tls and tls.client_ca_file else None,
            ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.client_ca_file else ssl.CERT_NONE,
        )
        logging.getLogger("uvicorn.error").addFilter(self._noise)
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="otel-footprint-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"the OTLP/HTTP server did not start on {self.cfg.endpoint}")
            time.sleep(0.01)
        self.bound = HostPort(host, sock.getsockname()[1])
        return self.bound

    def stop(self, grace: float = 5.0) -> None:
        """Stop taking connections; requests under way get about ``grace`` seconds to finish
        (uvicorn's own graceful shutdown, then theirs on the pool: an ingest is short)."""
        if self._server is not None:
            self._server.config.timeout_graceful_shutdown = max(1, math.ceil(grace))
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=grace + 1)
        self._pool.shutdown(wait=True)
        logging.getLogger("uvicorn.error").removeFilter(self._noise)

    # -- the ASGI application ------------------------------------------------------------------

    async def _app(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        content_type = _header(headers, b"content-type")
        try:
            answer = await self._answer(scope, headers, content_type, receive)
        except _RefusedError as refused:
            answer = refused.answer
        except Exception:
            _log.exception("unexpected error handling an OTLP/HTTP request")
            answer = self._refuse(
                500, "internal", "the hop failed to handle this request", content_type, close=True
            )
        response_headers = [
            (b"Content-Type", answer.content_type.encode()),
            (b"Content-Length", str(len(answer.body)).encode()),
            *((k.encode(), v.encode()) for k, v in answer.headers),
        ]
        if answer.close:
            response_headers.append((b"Connection", b"close"))
        await send(
            {"type": "http.response.start", "status": answer.status, "headers": response_headers}
        )
        await send({"type": "http.response.body", "body": answer.body})

    async def _answer(
        self, scope: Any, headers: list[tuple[bytes, bytes]], content_type: str, receive: Any
    ) -> _Answer:
        if scope.get("http_version") == "1.1" and not _header(headers, b"host"):
            # RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host.
            raise self._refusal(
                400, "malformed", "an HTTP/1.1 request needs a Host header", content_type
            )
        codings = [c.strip() for c in _header(headers, b"transfer-encoding").lower().split(",")]
        if codings not in ([""], ["chunked"]):
            raise self._refusal(
                501,
                "unsupported_encoding",
                f"unsupported transfer coding {', '.join(codings)!r} (only chunked is "
                "accepted); compress with Content-Encoding: gzip",
                content_type,
            )
        path = scope["path"]
        signal = _PATHS.get(path)
        if scope["method"] != "POST":
            raise self._refusal(
                405,
                "method_not_allowed",
                f"{scope['method']} is not allowed; OTLP/HTTP takes POST",
                content_type,
            )
        if signal is None:
            raise self._refusal(
                404,
                "not_found",
                f"no OTLP endpoint at {path}; use {TRACES_PATH} or {LOGS_PATH}",
                content_type,
            )
        auth = [v.decode("latin-1") for k, v in headers if k == b"authorization"]
        if not bearer_all_ok(auth, self.token):
            raise self._refusal(
                401, "unauthenticated", "missing or wrong bearer token", content_type
            )
        limit = self.cfg.max_request_size
        declared = _header(headers, b"content-length")
        if declared and int(declared) > limit:  # h11 checked it is digits
            raise self._refusal(
                413, "too_large", f"body of {declared} bytes exceeds {limit}", content_type
            )
        try:
            body = await asyncio.wait_for(_read_body(receive, limit), self.request_timeout)
        except TimeoutError:
            raise self._refusal(
                408,
                "timeout",
                f"the request body did not arrive within {self.request_timeout:g} s",
                content_type,
            ) from None
        if body is None:
            raise self._refusal(413, "too_large", f"body exceeds {limit} bytes", content_type)
        if self._busy >= self.cfg.max_concurrent_requests:
            raise _RefusedError(
                self._refuse(
                    429,
                    "overloaded",
                    "too many requests in progress",
                    content_type,
                    retry_after=1.0,
                )
            )
        self._busy += 1
        try:
            loop = asyncio.get_running_loop()
            encoding = _header(headers, b"content-encoding").strip().lower()
            return await loop.run_in_executor(
                self._pool, self._export, signal, body, content_type, encoding
            )
        finally:
            self._busy -= 1

    def _export(self, signal: Signal, body: bytes, content_type: str, encoding: str) -> _Answer:
        """Decode and ingest (on a pool thread); never raises."""
        try:
            if encoding == "gzip":
                body = gunzip_bounded(body, self.cfg.max_request_size)
            elif encoding not in ("", "identity"):
                raise BadRequestError(
                    415,
                    "unsupported_encoding",
                    f"unsupported Content-Encoding {encoding!r}; use gzip",
                )
            request = decode_body(signal, body, content_type)
        except BadRequestError as exc:
            return self._refuse(exc.http_status, exc.reason, exc.message, content_type)
        wire = body if media_type(content_type) == CONTENT_PROTOBUF else None
        try:
            if isinstance(request, ExportTraceServiceRequest):
                self.pipeline.ingest_traces(request, wire, "http")
            else:
                self.pipeline.ingest_logs(request, wire, "http")
        except OverloadedError as exc:
            reason = "disk_blocked" if isinstance(exc, JournalBlockedError) else "overloaded"
            return self._refuse(503, reason, str(exc), content_type, retry_after=exc.retry_after)
        except OSError as exc:
            _log.error("cannot journal a request", extra={"error": str(exc)})
            return self._refuse(
                503, "io_error", "journal write failed", content_type, retry_after=2.0
            )
        except Exception:
            _log.exception("unexpected error handling an OTLP/HTTP request")
            return self._refuse(
                500, "internal", "the hop failed to handle this request", content_type
            )
        ok_body, ok_type = success_body(signal, content_type)
        return _Answer(200, ok_body, ok_type)

    def _refusal(self, status: int, reason: str, message: str, content_type: str) -> _RefusedError:
        """A request refused before its body is decoded: answered, and its connection closed."""
        return _RefusedError(self._refuse(status, reason, message, content_type, close=True))

    def _refuse(
        self,
        status: int,
        reason: str,
        message: str,
        content_type: str,
        *,
        retry_after: float | None = None,
        close: bool = False,
    ) -> _Answer:
        self.metrics.requests_rejected.inc(1, "http", reason)
        log_refusal("http", reason, message, str(status))
        body, ctype = status_body(_HTTP_CODES.get(status, code_pb2.UNKNOWN), message, content_type)
        headers: list[tuple[str, str]] = []
        if retry_after is not None:
            # OTLP/HTTP: 429 and 503 carry Retry-After (whole seconds) when the server knows.
            headers.append(("Retry-After", str(max(1, math.ceil(retry_after)))))
        if status == 401:
            headers.append(("WWW-Authenticate", "Bearer"))
        return _Answer(status, body, ctype, tuple(headers), close)


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return ""


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The whole body, or None once it passes ``limit`` bytes (chunked bodies have no length)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _RefusedError(_Answer(400, b"", CONTENT_PROTOBUF, close=True))
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
