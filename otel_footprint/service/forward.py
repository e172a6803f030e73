"""Forwarding to the next hop: OTLP/gRPC or OTLP/HTTP, from the disk journal, with retries and backoff.

Outbound records are sent oldest first; consecutive records of one signal are merged by byte
concatenation (an OTLP export request is a repeated field, so concatenated requests are one valid
request). A record is marked done only after the next hop accepted it. Retryable answers
(UNAVAILABLE, RESOURCE_EXHAUSTED, 429/502/503/504, ...) back off by the senders' one policy
(``annotate/backoff.py``: exponential, jitter, the server's retry hint as a floor); the batch stays in the journal meanwhile, so an outage or a restart
loses nothing. A request over ``max_request_size`` (or refused for its size) is split; one that can
never be delivered (a single item too large, a permanent refusal) goes to the dead-letter file, so
it never blocks the records behind it.
"""

from __future__ import annotations

import collections
import gzip
import http.client
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from otel_footprint.annotate.backoff import Backoff
from otel_footprint.service import jsonlog
from otel_footprint.service.config import Forward
from otel_footprint.service.deadletter import DeadLetterFile
from otel_footprint.service.journal import KIND_OUT_LOGS, KIND_OUT_TRACES, Journal, Record
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.otlp import (
    CONTENT_PROTOBUF,
    LOGS_SERVICE,
    TRACE_SERVICE,
    split_request,
)
from otel_footprint.service.worker import Worker

_log = jsonlog.get("forward")

TRACE_METHOD = f"/{TRACE_SERVICE}/Export"
LOGS_METHOD = f"/{LOGS_SERVICE}/Export"

FORWARD_JITTER = 0.2
"""±20 % on every wait: many hops must not retry in lockstep."""

Verdict = Literal["ok", "retry", "permanent", "too_large"]
"""``too_large``: refused for its size (not retryable as is; split it)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One send attempt's result; ``delay`` is the server's retry hint in seconds, when it gave one."""

    verdict: Verdict
    message: str = ""
    delay: float | None = None
    rejected: int = 0


_GRPC_RETRYABLE = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
        # Not retryable per OTLP, but dropping acknowledged spans for a credentials mistake is
        # worse than holding them on disk until it is fixed (the queue bound gives backpressure).
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
    }
)
_HTTP_RETRYABLE = frozenset({401, 403, 408, 429, 502, 503, 504})


def _grpc_retry_delay(error: grpc.RpcError) -> float | None:
    trailers = dict(getattr(error, "trailing_metadata", lambda: None)() or ())
    raw = trailers.get("grpc-status-details-bin")
    if isinstance(raw, bytes):
        status = status_pb2.Status()
        try:
            status.ParseFromString(raw)
        except DecodeError:
            return None
        for detail in status.details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


class GrpcSender:
    """OTLP/gRPC client sending pre-serialized requests (no re-encoding)."""

    def __init__(self, cfg: Forward) -> None:
        self.cfg, otlp, tls = cfg, cfg.otlp, cfg.otlp.tls
        # Requests are split to max_request_size before sending; this is only a backstop.
        options = [("grpc.max_send_message_length", max(64 << 20, otlp.max_request_size))]
        if cfg.secure:
            creds = grpc.ssl_channel_credentials(
                root_certificates=tls.ca_file.read_bytes() if tls.ca_file else None,
                private_key=tls.key_file.read_bytes() if tls.key_file else None,
                certificate_chain=tls.cert_file.read_bytes() if tls.cert_file else None,
            )
            self.channel = grpc.secure_channel(cfg.traces_target, creds, options=options)
        else:
            self.channel = grpc.insecure_channel(cfg.traces_target, options=options)
        self._traces = self.channel.unary_unary(
            TRACE_METHOD,
            request_serializer=None,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        self._logs = self.channel.unary_unary(
            LOGS_METHOD,
            request_serializer=None,
            response_deserializer=ExportLogsServiceResponse.FromString,
        )
        self._metadata = tuple(sorted(otlp.headers.items()))
        self._compression = grpc.Compression.Gzip if otlp.compression == "gzip" else None

    def send(self, kind: int, payload: bytes) -> Outcome:
        call = self._traces if kind == KIND_OUT_TRACES else self._logs
        try:
            response = call(
                payload,
                timeout=self.cfg.otlp.timeout,
                metadata=self._metadata,
                compression=self._compression,
            )
        except grpc.RpcError as error:
            code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
            details = error.details() if hasattr(error, "details") else str(error)
            message = f"{code.name if code else 'UNKNOWN'}: {details}"
            if code in _GRPC_RETRYABLE:
                return Outcome("retry", message, _grpc_retry_delay(error))
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                # OTLP: retryable only when the server says it can recover (RetryInfo); without it
                # this is a size limit (the next hop's, or this channel's own send limit).
                delay = _grpc_retry_delay(error)
                if delay is not None:
                    return Outcome("retry", message, delay)
                return Outcome("too_large", message)
            return Outcome("permanent", message)
        partial = response.partial_success
        rejected = (
            partial.rejected_spans
            if isinstance(response, ExportTraceServiceResponse)
            else partial.rejected_log_records
        )
        return Outcome("ok", partial.error_message, rejected=int(rejected))

    def close(self) -> None:
        self.channel.close()


class HttpSender:
    """OTLP/HTTP (protobuf) client with one keep-alive connection."""

    def __init__(self, cfg: Forward) -> None:
        self.cfg, self.otlp, tls = cfg, cfg.otlp, cfg.otlp.tls
        self._conn: http.client.HTTPConnection | None = None
        self._ssl: ssl.SSLContext | None = None
        if cfg.secure:
            ctx = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
            if tls.cert_file:
                ctx.load_cert_chain(str(tls.cert_file), str(tls.key_file) if tls.key_file else None)
            self._ssl = ctx

    def _connection(self, url: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        if self._conn is None:
            host = url.hostname or "localhost"
            if url.scheme == "https":
                self._conn = http.client.HTTPSConnection(
                    host, url.port or 443, timeout=self.otlp.timeout, context=self._ssl
                )
            else:
                self._conn = http.client.HTTPConnection(
                    host, url.port or 80, timeout=self.otlp.timeout
                )
        return self._conn

    def send(self, kind: int, payload: bytes) -> Outcome:
        target = self.cfg.traces_target if kind == KIND_OUT_TRACES else self.cfg.logs_target
        if target is None:
            return Outcome("permanent", "no logs endpoint configured")
        url = urllib.parse.urlsplit(target)
        headers = {"Content-Type": CONTENT_PROTOBUF, **self.otlp.headers}
        body = payload
        if self.otlp.compression == "gzip":
            body = gzip.compress(payload, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        try:
            conn = self._connection(url)
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as error:
            self.close()
            return Outcome("retry", f"{type(error).__name__}: {error}")
        if response.will_close:
            self.close()
        status = response.status
        if 200 <= status < 300:
            return Outcome("ok", rejected=_http_rejected(kind, data))
        message = f"HTTP {status}: {_http_error_message(data)}"
        if status in _HTTP_RETRYABLE:
            return Outcome("retry", message, _retry_after(response.getheader("Retry-After")))
        if status == 413:
            return Outcome("too_large", message)
        return Outcome("permanent", message)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _http_rejected(kind: int, data: bytes) -> int:
    if not data:
        return 0
    try:
        if kind == KIND_OUT_TRACES:
            traces = ExportTraceServiceResponse.FromString(data)
            return int(traces.partial_success.rejected_spans)
        logs = ExportLogsServiceResponse.FromString(data)
        return int(logs.partial_success.rejected_log_records)
    except DecodeError:
        return 0


def _http_error_message(data: bytes) -> str:
    try:
        return status_pb2.Status.FromString(data).message or data[:200].decode("utf-8", "replace")
    except DecodeError:
        return data[:200].decode("utf-8", "replace")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


Sender = GrpcSender | HttpSender


def make_sender(cfg: Forward) -> Sender:
    return GrpcSender(cfg) if cfg.protocol == "grpc" else HttpSender(cfg)


class Forwarder:
    """The thread that drains the journal's outbound records to the next hop."""

    def __init__(
        self,
        cfg: Forward,
        journal: Journal,
        metrics: HopMetrics,
        sender: Sender | None = None,
        sleep: Callable[[float], bool] | None = None,
        on_settled: Callable[[list[int], bool], None] | None = None,
        dead_letter: DeadLetterFile | None = None,
    ) -> None:
        self.cfg, self.otlp = cfg, cfg.otlp
        self.dead_letter = dead_letter
        """Where requests the next hop can never take are set aside (None: dropped, logged)."""
        self.journal = journal
        self.metrics = metrics
        self.on_settled = on_settled
        """Told which journal records left the queue, and whether the next hop took them."""
        self.sender = sender or make_sender(cfg)
        self._worker = Worker("otel-footprint-forward", self._step)
        self._stop = self._worker.stopping
        self._sleep = sleep or self._stop.wait
        retry = cfg.otlp.retry
        self.backoff = Backoff(retry.initial_interval, retry.max_interval, jitter=FORWARD_JITTER)
        """Between tries of one batch; the retry budget is ``retry.max_elapsed_time``."""
        self.last_error: str | None = None

    def start(self) -> None:
        self._worker.start()

    def _step(self) -> bool:
        batch = self.journal.take_outbound(self.otlp.queue.batch_max_size, timeout=0.2)
        if not batch:
            return True
        try:
            self._deliver(batch)
        except Exception:  # the batch stays pending on disk; the worker logs and goes on
            self.journal.give_back(batch)
            self._sleep(self.otlp.retry.max_interval)
            raise
        return True

    def _deliver(self, batch: list[Record]) -> None:
        kind = batch[0].kind
        count = sum(r.count for r in batch)
        seqs = [r.seq for r in batch]
        if kind == KIND_OUT_LOGS and self.cfg.logs_target is None:
            self.journal.mark_done(seqs)
            return
        payload = b"".join(self.journal.read(r) for r in batch)
        # Pieces still to send, in order. A request over the next hop's size limit is split (spans
        # are independent); an item too large even alone, or one the next hop refuses for good, is
        # set aside in the dead-letter file: nothing that can never be delivered blocks the queue.
        work: collections.deque[tuple[bytes, int]] = collections.deque()
        if len(payload) <= self.otlp.max_request_size:
            work.append((payload, count))
        else:
            work.extend(self._split(kind, payload, count, self.otlp.max_request_size))
        all_taken = True
        while work:
            piece, items = work.popleft()
            verdict, message = self._send(kind, piece, items)
            if verdict == "stopped":
                # Shutting down: the whole batch stays pending (pieces already sent go again).
                self.journal.give_back(batch)
                return
            if verdict == "ok":
                continue
            if verdict == "too_large" and items > 1:
                work.extendleft(reversed(self._split(kind, piece, items, max(1, len(piece) // 2))))
                continue
            all_taken = False
            self._set_aside(kind, piece, items, message)
        self.journal.mark_done(seqs)
        self._settled(seqs, all_taken)

    def _split(self, kind: int, payload: bytes, items: int, limit: int) -> list[tuple[bytes, int]]:
        """``payload`` as requests of at most ``limit`` bytes; items too large alone are set aside."""
        try:
            pieces, oversized = split_request(kind == KIND_OUT_TRACES, payload, limit)
        except DecodeError as exc:  # cannot happen for our own records (crc-checked); never block
            self._set_aside(kind, payload, items, f"not a valid OTLP request: {exc}")
            return []
        self.metrics.forward_splits.inc()
        for alone, n in oversized:
            self._set_aside(
                kind,
                alone,
                n,
                f"a single item of {len(alone)} bytes exceeds the {limit}-byte limit",
            )
        return pieces

    def _set_aside(self, kind: int, payload: bytes, items: int, reason: str) -> None:
        signal = "traces" if kind == KIND_OUT_TRACES else "logs"
        self.metrics.forward_failed.inc(1, signal)
        kept = self.dead_letter is not None and self.dead_letter.add(kind, payload, items, reason)
        if kept:
            self.metrics.dead_lettered.inc(items, signal)
        else:
            self.metrics.dead_letter_dropped.inc(items, signal)
        _log.error(
            "the next hop can never take this request; set it aside in the dead-letter file"
            if kept
            else "the next hop can never take this request and the dead-letter file is full; "
            "dropping it",
            extra={
                "signal": signal,
                "items": items,
                "bytes": len(payload),
                "error": reason,
                "dead_letter": str(self.dead_letter.path) if self.dead_letter else None,
            },
        )

    def _send(self, kind: int, payload: bytes, count: int) -> tuple[str, str]:
        """Send one request until it is taken, refused for good or the forwarder stops.

        Returns ``("ok" | "too_large" | "refused" | "stopped", message)``.
        """
        started = time.monotonic()
        attempt = 0
        while True:
            outcome = self.sender.send(kind, payload)
            if outcome.verdict == "ok":
                (
                    self.metrics.spans_forwarded
                    if kind == KIND_OUT_TRACES
                    else self.metrics.log_records_forwarded
                ).inc(count)
                if outcome.rejected:
                    self.metrics.spans_rejected_downstream.inc(outcome.rejected)
                    _log.warning(
                        "next hop rejected part of a batch",
                        extra={"rejected": outcome.rejected, "error": outcome.message},
                    )
                if self.last_error is not None:
                    _log.info("next hop reachable again", extra={"after_attempts": attempt + 1})
                self.last_error = None
                return "ok", ""
            if outcome.verdict == "too_large":
                return "too_large", outcome.message
            elapsed = time.monotonic() - started
            max_elapsed = self.otlp.retry.max_elapsed_time
            if outcome.verdict == "permanent" or (max_elapsed > 0 and elapsed >= max_elapsed):
                return "refused", outcome.message
            self.metrics.forward_retries.inc()
            if self.last_error != outcome.message:
                _log.warning(
                    "forward failed; retrying with backoff",
                    extra={"error": outcome.message, "items": count},
                )
            self.last_error = outcome.message
            delay = self.backoff.delay(attempt, outcome.delay)
            attempt += 1
            if self._sleep(delay) or self._stop.is_set():
                return "stopped", outcome.message

    def _settled(self, seqs: list[int], delivered: bool) -> None:
        if self.on_settled is None:
            return
        try:
            self.on_settled(seqs, delivered)
        except Exception:  # a listener's failure is not the batch's
            _log.exception("a forwarding listener failed")

    def drain(self, deadline: float) -> bool:
        """Wait until every outbound record was forwarded, or ``deadline`` (monotonic) passes."""
        while time.monotonic() < deadline:
            if self.journal.outbound_count == 0:
                return True
            time.sleep(0.02)
        return self.journal.outbound_count == 0

    def stop(self, deadline: float | None = None) -> None:
        """Stop forwarding. By ``deadline`` (monotonic) a send under way is cut off by closing
        the connection: its records stay in the journal and are sent after the restart."""
        wait = max(5.0, self.otlp.timeout + 1)
        if deadline is not None:
            wait = max(0.0, deadline - time.monotonic())
        self._worker.stop(wait, wake=self.journal.wake)
        self.sender.close()
        self._worker.join(0.5)
