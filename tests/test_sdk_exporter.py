"""Functional: FootprintOTLPSpanExporter's buffer, settings from the environment, and failures."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.sdk.exporter import FootprintOTLPSpanExporter, otlp_span_exporter


class Failing(SpanExporter):
    """Refuses every batch (a backend that is down)."""

    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


def _pipeline(exporter: SpanExporter) -> TracerProvider:
    # SimpleSpanProcessor hands each span to export() as it ends: the exporter sees them one by one.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_runs_are_held_and_annotated_other_spans_go_on() -> None:
    inner = InMemorySpanExporter()
    exporter = FootprintOTLPSpanExporter(inner, grace_seconds=30)
    provider = _pipeline(exporter)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("GET /"):
        pass
    run_script(tracer, SCENARIOS["routed-not-delivered"].script)
    # Tool spans of a held run go on at once (kept by reference as evidence); run and model-call
    # spans wait for the decision.
    assert [s.name for s in inner.get_finished_spans()] == ["GET /", "execute_tool lookup_order"]
    assert exporter.force_flush()
    (run,) = [s for s in inner.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert (run.attributes or {})[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "not-delivered"
    assert len(inner.get_finished_spans()) == 1 + 4
    provider.shutdown()


def test_a_failed_send_of_a_held_run_is_counted() -> None:
    failing = Failing()
    exporter = FootprintOTLPSpanExporter(failing, grace_seconds=30)
    provider = _pipeline(exporter)
    run_script(provider.get_tracer("t"), SCENARIOS["routed-delivered"].script)
    exporter.force_flush()
    # one call for the tool span that went on at once, one for the held run
    assert failing.calls == 2 and exporter.stats().sink_failures == 1
    provider.shutdown()


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOOTPRINT_WITNESS", "drop")
    monkeypatch.setenv("FOOTPRINT_GRACE_SECONDS", "0.01")
    inner = InMemorySpanExporter()
    exporter = FootprintOTLPSpanExporter(inner)
    provider = _pipeline(exporter)
    run_script(provider.get_tracer("t"), SCENARIOS["stuck-shadow"].script)
    # released by the 10 ms grace from the environment, long before the 2 s default
    deadline = time.monotonic() + 1.5
    while not any(s.name.startswith("invoke_agent") for s in inner.get_finished_spans()):
        assert time.monotonic() < deadline, "the run was not released by the grace"
        time.sleep(0.01)
    witnesses = [
        (e.attributes or {}).get(sc.CH_WITNESS)
        for s in inner.get_finished_spans()
        for e in s.events
        if e.name == sc.EV_ENGAGEMENT_ENGAGED
    ]
    assert witnesses == [None]
    provider.shutdown()


@pytest.mark.parametrize("lines", ["false", "true"])
def test_account_lines_follow_the_environment(monkeypatch: pytest.MonkeyPatch, lines: str) -> None:
    monkeypatch.setenv("FOOTPRINT_ACCOUNT_LINES", lines)
    inner = InMemorySpanExporter()
    exporter = FootprintOTLPSpanExporter(inner, grace_seconds=30)
    provider = _pipeline(exporter)
    run_script(provider.get_tracer("t"), SCENARIOS["stuck-shadow"].script)
    exporter.force_flush()
    (run,) = [s for s in inner.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert sc.CHECK_DECIDED_DELIVERED in (run.attributes or {})
    written = any(e.name == sc.EV_ACCOUNT_LINE for e in run.events)
    assert written is (lines == "true")
    provider.shutdown()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("FOOTPRINT_WITNESS", "blur", "expected keep, hash or drop"),
        ("FOOTPRINT_MAX_RUNS", "many", "not a valid number"),
        ("FOOTPRINT_ACCOUNT_LINES", "maybe", "expected true or false"),
    ],
)
def test_bad_settings_are_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, key: str, value: str, message: str
) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match=message) as error:
        FootprintOTLPSpanExporter(InMemorySpanExporter())
    assert key in str(error.value)


def test_the_inner_exporter_follows_the_otlp_protocol_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    assert isinstance(otlp_span_exporter(), Http)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    assert isinstance(otlp_span_exporter(), Grpc)
    with pytest.raises(ValueError, match="unsupported OTLP protocol"):
        otlp_span_exporter("http/json")
