"""Observed runs on the in-process paths: the ``footprint_otlp`` exporter (no span-start hook: it
sees spans only as they end) holds a trace with no recorder input until its root ends and
annotates it; ``FOOTPRINT_OBSERVED_RUNS=false`` turns that off; a recorded run with nothing to
decide hands on, unannotated, the model-call span it held while it looked like an observed run."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.sdk.exporter import FootprintOTLPSpanExporter

CHAT = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}


def _exported(inner: InMemorySpanExporter) -> dict[str, dict[str, object]]:
    return {s.name: dict(s.attributes or {}) for s in inner.get_finished_spans()}


def _agent(provider: TracerProvider, run_attrs: dict[str, str] | None = None) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("handle", attributes=run_attrs or {}):
        for i in (1, 2):
            with tracer.start_as_current_span(f"chat {i}", attributes=CHAT):
                pass


def _exporter(monkeypatch: pytest.MonkeyPatch, observed: str | None) -> FootprintOTLPSpanExporter:
    if observed is not None:
        monkeypatch.setenv("FOOTPRINT_OBSERVED_RUNS", observed)
    return FootprintOTLPSpanExporter(InMemorySpanExporter(), grace_seconds=0.05)


def test_the_exporter_holds_and_annotates_an_observed_run(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = _exporter(monkeypatch, None)
    inner = exporter.inner
    assert isinstance(inner, InMemorySpanExporter)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _agent(provider)
    assert exporter.force_flush()
    spans = _exported(inner)
    assert spans["handle"][sc.RUN_MODE] == "observed" and spans["handle"][sc.RUN_PASSES] == 2
    assert [spans[f"chat {i}"][sc.PASS_ITERATION] for i in (1, 2)] == [1, 2]
    assert sc.RUN_REASONS not in spans["chat 1"]
    provider.shutdown()


def test_switched_off_by_the_environment_nothing_is_held(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = _exporter(monkeypatch, "false")
    inner = exporter.inner
    assert isinstance(inner, InMemorySpanExporter)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _agent(provider)
    # Handed on as they ended, before any flush, and untouched.
    assert sorted(_exported(inner)) == ["chat 1", "chat 2", "handle"]
    assert not [k for a in _exported(inner).values() for k in a if k.startswith("footprint.")]
    provider.shutdown()


def test_a_recorded_run_with_nothing_to_decide_loses_no_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = _exporter(monkeypatch, None)
    inner = exporter.inner
    assert isinstance(inner, InMemorySpanExporter)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The run span names a run but carries no footprint event; the exporter sees the model calls
    # first (held as for an observed run), then the run span (nothing to decide).
    _agent(provider, {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.RUN_ID: "r"})
    assert sorted(_exported(inner)) == ["chat 1", "chat 2", "handle"]
    assert not [k for a in _exported(inner).values() for k in a if k.startswith("footprint.p")]
    provider.shutdown()
