"""FootprintOTLPSpanExporter: an OTLP span exporter that annotates agent runs before sending them.

Registered as the ``footprint_otlp`` traces exporter (:class:`AutoconfiguredFootprintExporter`),
so ``OTEL_TRACES_EXPORTER=footprint_otlp`` (with ``opentelemetry-instrument`` or the SDK's
autoconfiguration) annotates runs without code, and installs the span-start hook that lands the
passes a run states on the instrumentation's model-call spans.

Trade-off against :class:`~otel_footprint.sdk.processor.FootprintSpanProcessor`: autoconfiguration
wraps an exporter in a BatchSpanProcessor, so this exporter only sees spans after they ended, in
batches, and never sees a span start. It therefore holds a trace once a span carrying footprint
events (or a run span) arrives, and releases it ``grace_seconds`` after a run span arrives — a run
span that ended before its trace's other runs did (nested agents) can release the trace early, and
a run whose first model call carries no footprint event loses the tool spans exported before it.
Held runs are exported by the buffer's own worker thread; an export failure there cannot be reported
back to the BatchSpanProcessor (it is counted in ``stats().sink_failures``). The processor knows
each run span's start and has none of these limits: prefer it when you can change code.

Settings without code: the ``FOOTPRINT_*`` variables of
:class:`~otel_footprint.sdk.settings.InProcessSettings` (the README's table is generated from it);
the inner exporter follows ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` and the usual
``OTEL_EXPORTER_OTLP_*`` variables.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_footprint.annotate.form import AnnotateOptions
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.record.attach import install_attach
from otel_footprint.runs.model import RunStore
from otel_footprint.sdk.buffer import BufferStats, RunBuffer, carries_footprint_events, span_role
from otel_footprint.sdk.decide import Decider, make_decider
from otel_footprint.sdk.metrics import register_metrics
from otel_footprint.sdk.processor import processor_limits
from otel_footprint.sdk.settings import inprocess_settings
from otel_footprint.sdk.verdict_metrics import verdict_metrics_on


def otlp_span_exporter(protocol: str | None = None, **kwargs: Any) -> SpanExporter:
    """The SDK's OTLP span exporter for ``protocol`` (default: from the OTLP environment variables)."""
    chosen = (protocol or inprocess_settings(os.environ, "protocol").protocol).strip()
    if chosen == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(**kwargs)
    if chosen == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpOTLPSpanExporter,
        )

        return HttpOTLPSpanExporter(**kwargs)
    raise ValueError(f"unsupported OTLP protocol {chosen!r} (expected 'grpc' or 'http/protobuf')")


class FootprintOTLPSpanExporter(SpanExporter):
    """Buffer agent runs, annotate them, and send them with the wrapped (default: OTLP) exporter."""

    def __init__(
        self,
        exporter: SpanExporter | None = None,
        *,
        grace_seconds: float | None = None,
        max_wait_seconds: float | None = None,
        max_runs: int | None = None,
        max_spans_per_run: int | None = None,
        annotate_options: AnnotateOptions | None = None,
        engine_options: EngineOptions | None = None,
        run_store: RunStore | None = None,
        span_limits: SpanLimits | None = None,
        meter_provider: MeterProvider | None = None,
        decider: Decider | None = None,
        protocol: str | None = None,
        **otlp_kwargs: Any,
    ) -> None:
        env = inprocess_settings(os.environ)
        if annotate_options is None:
            annotate_options = AnnotateOptions(witness=env.witness, include_lines=env.account_lines)
        if engine_options is None:
            engine_options = EngineOptions(observed=env.observed_runs)
        self._inner = exporter or otlp_span_exporter(protocol, **otlp_kwargs)
        self._export_lock = threading.Lock()
        limits = processor_limits(
            release_grace=env.grace_seconds if grace_seconds is None else grace_seconds,
            max_wait=env.max_wait_seconds if max_wait_seconds is None else max_wait_seconds,
            max_runs=env.max_runs if max_runs is None else max_runs,
            max_spans_per_run=env.max_spans_per_run
            if max_spans_per_run is None
            else max_spans_per_run,
        )
        self._buffer = RunBuffer(
            self._export_released,
            decider
            or make_decider(
                store=run_store,
                engine_options=engine_options,
                annotate_options=annotate_options,
                verdict_metrics=verdict_metrics_on(meter_provider),
            ),
            limits=limits,
            span_limits=span_limits,
            name="footprint-otlp-exporter",
            observed=engine_options.observed,
        )
        if meter_provider is not None:
            register_metrics(meter_provider, self.stats, "otlp_exporter")

    @property
    def inner(self) -> SpanExporter:
        """The exporter that sends the spans."""
        return self._inner

    def _send(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        # One send at a time: the batch processor's thread and the buffer's worker both send.
        with self._export_lock:
            return self._inner.export(spans)

    def _export_released(self, spans: Sequence[ReadableSpan]) -> bool:
        return self._send(list(spans)) is SpanExportResult.SUCCESS

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send spans of no agent run now; hold the rest until their run is decided."""
        offer = self._buffer.offer
        passing = [s for s in spans if not offer(s, span_role(s), carries_footprint_events(s))]
        if passing:
            return self._send(passing)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Decide and send every held run now."""
        released = self._buffer.flush(timeout_millis / 1000)
        return self._inner.force_flush(timeout_millis) and released

    def shutdown(self) -> None:
        """Send the runs in flight, then shut the inner exporter down."""
        self._buffer.shutdown()
        self._inner.shutdown()

    def stats(self) -> BufferStats:
        """The buffer's counters (see :class:`~otel_footprint.sdk.buffer.BufferStats`)."""
        return self._buffer.stats()


class AutoconfiguredFootprintExporter(FootprintOTLPSpanExporter):
    """The ``footprint_otlp`` entry point: a :class:`FootprintOTLPSpanExporter` that also adds the
    span-start hook (:class:`~otel_footprint.record.PassAttacher`) to the global tracer provider.

    The SDK's autoconfiguration makes its tracer provider global before it builds the exporters,
    and adds the exporter's span processor after: the hook comes first, as it must (a pass lands
    when its model-call span starts). Without it, what a run states for its next model call
    (``run.evaluated(...)``) would reach no span: ``unattached-pass``. Built by hand, with a
    provider of your own, use :class:`FootprintOTLPSpanExporter` and
    ``otel_footprint.record.install_attach(provider)``.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        provider = trace.get_tracer_provider()
        if isinstance(provider, TracerProvider):
            install_attach(provider)
