"""In-process integration: the FootprintSpanProcessor, its setup helper and the annotating exporter."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from otel_footprint.record.attach import install_attach
from otel_footprint.sdk.buffer import BufferStats
from otel_footprint.sdk.exporter import FootprintOTLPSpanExporter, otlp_span_exporter
from otel_footprint.sdk.processor import FootprintLogRecordProcessor, FootprintSpanProcessor


def setup(
    tracer_provider: TracerProvider | None = None,
    exporter: SpanExporter | None = None,
    *,
    logger_provider: LoggerProvider | None = None,
    log_exporter: LogRecordExporter | None = None,
    attach: bool = True,
    **options: Any,
) -> FootprintSpanProcessor:
    """Annotate agent runs in one call: add a FootprintSpanProcessor to a tracer provider.

    ``tracer_provider`` defaults to the global one when it is an SDK provider, else a new
    ``TracerProvider`` installed as the global one. ``exporter`` defaults to the OTLP exporter the
    ``OTEL_EXPORTER_OTLP_*`` variables describe. ``options`` go to :class:`FootprintSpanProcessor`
    (``grace_seconds``, ``max_wait_seconds``, ``max_runs``, ``annotate_options``, ...).

    ``logger_provider``: the agent writes its footprint events as log records through it (the
    recorder's ``emit_as="log"``): a :class:`FootprintLogRecordProcessor` is added to it, and the
    log records go on untouched to ``log_exporter`` when given (else only read: add your own log
    processor to the provider to export them as well).
    ``attach``: also install the span-start hook (:class:`~otel_footprint.record.PassAttacher`)
    that lands each pass a run states (``run.evaluated(...)``) on the model-call span an
    instrumentation (GenAI, OpenInference, OpenLLMetry, a framework) starts next inside the run.
    Returns the processor (``stats()``, ``force_flush()``, ``shutdown()``).
    """
    if log_exporter is not None and logger_provider is None:
        raise ValueError(
            "log_exporter needs the logger_provider the agent's log records go through"
        )
    provider = tracer_provider
    if provider is None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current
        else:
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
    processor = FootprintSpanProcessor(exporter or otlp_span_exporter(), **options)
    if attach:
        install_attach(provider)
    provider.add_span_processor(processor)
    if logger_provider is not None:
        logger_provider.add_log_record_processor(processor.log_record_processor(log_exporter))
    return processor


__all__ = [
    "BufferStats",
    "FootprintLogRecordProcessor",
    "FootprintOTLPSpanExporter",
    "FootprintSpanProcessor",
    "otlp_span_exporter",
    "setup",
]
