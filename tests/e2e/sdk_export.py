"""Export spans with the real OpenTelemetry Python SDK and OTLP exporters (gRPC or HTTP/protobuf),
failing loudly when an export does not succeed (the SDK itself only logs export failures)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Literal, TypeAlias

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_footprint import semconv

OtlpProtocol: TypeAlias = Literal["grpc", "http/protobuf"]

E2E_SERVICE_NAME = "otel-footprint-e2e"


class CheckedExporter(SpanExporter):
    """Delegates to a real exporter and remembers every result, so a test can assert delivery."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.exported = 0
        self.failures: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failures.append(f"{len(spans)} span(s): {result.name}")
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def make_exporter(
    protocol: OtlpProtocol,
    *,
    http_url: str,
    grpc_endpoint: str | None,
    headers: Mapping[str, str] | None = None,
) -> SpanExporter:
    """An OTLP span exporter: ``http_url`` is the full ``.../v1/traces`` URL, ``grpc_endpoint``
    is ``host:port`` (plaintext); ``headers`` go with every export (OTLP/HTTP only)."""
    if protocol == "http/protobuf":
        return HttpSpanExporter(
            endpoint=http_url, timeout=10, headers=dict(headers) if headers else None
        )
    if grpc_endpoint is None:
        raise ValueError("an OTLP/gRPC export needs a gRPC endpoint")
    return GrpcSpanExporter(endpoint=grpc_endpoint, insecure=True, timeout=10)


@contextmanager
def exporting_provider(
    exporter: SpanExporter, project: str, *, min_spans: int = 1
) -> Iterator[TracerProvider]:
    """A TracerProvider whose spans land in Phoenix project ``project``; on exit it flushes, shuts
    down, and raises AssertionError unless at least ``min_spans`` spans were exported and none failed.
    """
    checked = CheckedExporter(exporter)
    provider = TracerProvider(
        resource=Resource.create({semconv.OI_PROJECT_NAME: project, SERVICE_NAME: E2E_SERVICE_NAME})
    )
    provider.add_span_processor(BatchSpanProcessor(checked, schedule_delay_millis=100))
    try:
        yield provider
    finally:
        provider.force_flush(10_000)
        provider.shutdown()
    if checked.failures or checked.exported < min_spans:
        raise AssertionError(
            f"OTLP export to project {project!r}: exported {checked.exported} span(s), "
            f"failures {checked.failures}"
        )
