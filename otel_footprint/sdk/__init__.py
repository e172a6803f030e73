"""In-process integration: the FootprintSpanProcessor, its setup helper and the annotating exporter."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from otel_footprint.sdk.buffer import BufferStats
from otel_footprint.sdk.exporter import FootprintOTLPSpanExporter, otlp_span_exporter
from otel_footprint.sdk.processor import FootprintSpanProcessor


def setup(
    tracer_provider: TracerProvider | None = None,
    exporter: SpanExporter | None = None,
    **options: Any,
) -> FootprintSpanProcessor:
    """Annotate agent runs in one call: add a FootprintSpanProcessor to a tracer provider.

    ``tracer_provider`` defaults to the global one when it is an SDK provider, else a new
    ``TracerProvider`` installed as the global one. ``exporter`` defaults to the OTLP exporter the
    ``OTEL_EXPORTER_OTLP_*`` variables describe. ``options`` go to :class:`FootprintSpanProcessor`
    (``grace_seconds``, ``max_wait_seconds``, ``max_runs``, ``annotate_options``, ...).
    Returns the processor (``stats()``, ``force_flush()``, ``shutdown()``).
    """
    provider = tracer_provider
    if provider is None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current
        else:
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
    processor = FootprintSpanProcessor(exporter or otlp_span_exporter(), **options)
    provider.add_span_processor(processor)
    return processor


__all__ = [
    "BufferStats",
    "FootprintOTLPSpanExporter",
    "FootprintSpanProcessor",
    "otlp_span_exporter",
    "setup",
]
