"""Shared pieces for the hop's tests: real downstream OTLP receivers, the hop as a subprocess, an agent.

Nothing here is mocked: the sinks are real gRPC / HTTP servers on 127.0.0.1, the hop is the real
``otel-footprint serve`` process, and the agent emits spans through the OpenTelemetry SDK.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from servers import REPO, HopProcess, Samples  # noqa: F401  (the service tests import them from here)

from otel_footprint import semconv
from otel_footprint.codec import any_value_to_python, encode_payload


def test_support_module_has_no_tests_of_its_own() -> None:
    """(This module only holds helpers; pytest collects it because of its name.)"""
    assert Sink is not None


# ---------------------------------------------------------------------------------------------
# Downstream: real OTLP receivers
# ---------------------------------------------------------------------------------------------


class _Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.trace_requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.log_requests: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.metric_names: set[str] = set()
        self.metric_sums: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        """The latest value of each sum data point, by metric name and (string) attributes."""
        self.changed = threading.Condition(self.lock)

    def add_traces(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.changed:
            self.trace_requests.append(request)
            self.changed.notify_all()

    def add_logs(self, request: logs_service_pb2.ExportLogsServiceRequest) -> None:
        with self.changed:
            self.log_requests.append(request)
            self.changed.notify_all()

    def spans(self) -> list[Span]:
        with self.lock:
            return [
                span
                for req in self.trace_requests
                for rs in req.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]

    def log_records(self) -> list[Any]:
        with self.lock:
            return [
                rec
                for req in self.log_requests
                for rl in req.resource_logs
                for sl in rl.scope_logs
                for rec in sl.log_records
            ]

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.1))
        return True


class _TraceServicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, store: _Store) -> None:
        self.store = store

    def Export(self, request: Any, context: Any) -> Any:
        self.store.add_traces(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class _LogsServicer(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, store: _Store) -> None:
        self.store = store

    def Export(self, request: Any, context: Any) -> Any:
        self.store.add_logs(request)
        return logs_service_pb2.ExportLogsServiceResponse()


class _MetricsServicer(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, store: _Store) -> None:
        self.store = store

    def Export(self, request: Any, context: Any) -> Any:
        with self.store.changed:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    self.store.metric_names.update(m.name for m in sm.metrics)
                    for m in sm.metrics:
                        for dp in m.sum.data_points if m.HasField("sum") else ():
                            labels = frozenset(
                                (kv.key, kv.value.string_value) for kv in dp.attributes
                            )
                            value = dp.as_int if dp.HasField("as_int") else dp.as_double
                            self.store.metric_sums[(m.name, labels)] = value
            self.store.changed.notify_all()
        return metrics_service_pb2.ExportMetricsServiceResponse()


TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
"""The OTLP/gRPC trace export method, spelled here from the OTLP spec (not read from the hop)."""


class Sink(_Store):
    """A real OTLP/gRPC receiver on 127.0.0.1 that can be stopped and restarted on its port."""

    def __init__(self, port: int = 0) -> None:
        super().__init__()
        self.port = port
        self._server: grpc.Server | None = None

    def start(self) -> Sink:
        server = grpc.server(ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceServicer(self), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_LogsServicer(self), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
            _MetricsServicer(self), server
        )
        port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        assert port, "sink could not bind"
        self.port = port
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=1).wait()
            self._server = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"


class HttpSink(_Store):
    """A real OTLP/HTTP receiver (protobuf bodies) on 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__()
        store = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    store.add_traces(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/logs":
                    store.add_logs(logs_service_pb2.ExportLogsServiceRequest.FromString(body))
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> HttpSink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# ---------------------------------------------------------------------------------------------
# The hop as a subprocess
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# A scripted agent through the OpenTelemetry SDK (input schema of docs/schema.md)
# ---------------------------------------------------------------------------------------------

MAPS = [{"id": "skills", "memberIds": ["billing", "shipping"], "toolNames": ["read_skill"]}]


def _event_attrs(payload: dict[str, Any]) -> dict[str, Any]:
    return dict(encode_payload(payload))


def emit_run(
    tracer: Any,
    run_id: str,
    *,
    passes: int = 3,
    as_logs: Any = None,
    extra_child: bool = True,
    run_events: Sequence[str] = (),
    mounted: bool = True,
    first_iteration: int = 1,
) -> tuple[str, str]:
    """One agent run (run span, ``passes`` model calls, a tool call); returns (trace id, run span id).

    With ``as_logs`` (an SDK ``Logger``), the pass events go out as log records instead of span
    events (OpenTelemetry's log-based events).
    """
    from opentelemetry import trace as trace_api

    with tracer.start_as_current_span(
        "invoke_agent ops-assistant",
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: "ops-assistant",
            semconv.RUN_ID: run_id,
        },
    ) as run_span:
        if mounted:
            run_span.add_event(
                semconv.EV_MAPS_MOUNTED,
                _event_attrs({"maps": MAPS, "renewalGrace": 2, "enforced": False}),
            )
        for name in run_events:
            run_span.add_event(name, {})
        for i in range(first_iteration, first_iteration + passes):
            with tracer.start_as_current_span(
                "chat mock-model",
                attributes={
                    semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
                    semconv.PASS_ITERATION: i,
                },
            ) as pass_span:
                evaluated = {
                    "iteration": i,
                    "activeIds": ["billing"],
                    "cursorMove": {"to": "billing", "by": "lexical", "witness": {"text": "refund"}}
                    if i == 1
                    else {"by": "none"},
                }
                injected = {
                    "slot": "system",
                    "source": "skill",
                    "sourceId": "billing",
                    "contentHash": "h1",
                    "contentSummary": "billing body",
                    "chars": 120,
                }
                if as_logs is None:
                    pass_span.add_event(semconv.EV_CONTEXT_EVALUATED, _event_attrs(evaluated))
                    pass_span.add_event(semconv.EV_CONTEXT_INJECTED, _event_attrs(injected))
                else:
                    _log_event(as_logs, semconv.EV_CONTEXT_EVALUATED, _event_attrs(evaluated))
                    _log_event(as_logs, semconv.EV_CONTEXT_INJECTED, _event_attrs(injected))
            if extra_child and i == first_iteration:
                with tracer.start_as_current_span(
                    "execute_tool lookup",
                    attributes={
                        semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
                        semconv.GEN_AI_TOOL_NAME: "lookup",
                        semconv.GEN_AI_TOOL_CALL_ID: f"{run_id}-call-1",
                        semconv.PASS_ITERATION: 1,
                    },
                ):
                    pass
        ctx = run_span.get_span_context()
    del trace_api
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def _log_event(logger: Any, name: str, attributes: dict[str, Any]) -> None:
    from opentelemetry._logs import LogRecord

    logger.emit(LogRecord(event_name=name, attributes=attributes, body=None))


def emit_plain(tracer: Any, name: str = "GET /health") -> tuple[str, str]:
    """A span of no agent run (must be forwarded at once)."""
    with tracer.start_as_current_span(name, attributes={"http.route": "/health"}) as span:
        ctx = span.get_span_context()
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


@dataclass
class SdkClient:
    """A TracerProvider (and LoggerProvider) exporting OTLP to the hop, flushed on demand."""

    tracer: Any
    logger: Any
    flush: Callable[[], None]
    shutdown: Callable[[], None]


def sdk_client(
    endpoint: str, protocol: str = "grpc", service: str = "agent-under-test"
) -> SdkClient:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": service})
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_exporter: Any = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=10)
        log_exporter: Any = OTLPLogExporter(endpoint=endpoint, insecure=True, timeout=10)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        span_exporter = HttpSpanExporter(endpoint=f"http://{endpoint}/v1/traces", timeout=10)
        log_exporter = HttpLogExporter(endpoint=f"http://{endpoint}/v1/logs", timeout=10)
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(span_exporter, schedule_delay_millis=50))
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(log_exporter, schedule_delay_millis=50))

    def flush() -> None:
        lp.force_flush()
        tp.force_flush()

    def shutdown() -> None:
        lp.shutdown()
        tp.shutdown()

    return SdkClient(tp.get_tracer("test-agent"), lp.get_logger("test-agent"), flush, shutdown)


# ---------------------------------------------------------------------------------------------
# Reading what arrived
# ---------------------------------------------------------------------------------------------


def attrs(span: Span | Any) -> dict[str, Any]:
    return {kv.key: any_value_to_python(kv.value) for kv in span.attributes}


def by_id(spans: Sequence[Span]) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for span in spans:
        out.setdefault(span.span_id.hex(), []).append(span)
    return out


def key_values(**values: Any) -> list[KeyValue]:
    from otel_footprint.annotate.otlp import to_any_value

    return [KeyValue(key=k.replace("__", "."), value=to_any_value(v)) for k, v in values.items()]


def iter_lines(path: Path) -> Iterator[str]:
    yield from path.read_text().splitlines()
