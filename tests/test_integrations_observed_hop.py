"""Observed runs through ``otel-footprint serve``: the zero-code agents of ``observed_agents.py``
(no footprint code at all) exported to the hop one span per request, in the order they ended, come
out annotated as the in-process processor annotated them; with ``processing.observed_runs=false``
they come out untouched. Either way no span says ``missing-spans``: these traces never had a run
span to miss.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from fake_openai import FakeOpenAI
from observed_agents import INSTRUMENTORS, SCRIPT, run_observed
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_service_support import HopProcess, Sink, attrs

from otel_footprint import semconv

pytest.importorskip("openai", reason="pip install -e '.[integrations]'")
STACK = "openinference"
"""One instrumentation is enough here: the three are compared in-process and through explain
(test_integrations_observed.py); this file is about the hop's holding and stamping."""


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def spans() -> tuple[Any, Any]:
    pytest.importorskip(INSTRUMENTORS[STACK], reason="pip install -e '.[integrations]'")
    with FakeOpenAI(SCRIPT) as server:
        return run_observed(STACK, server.url)


def _pieces(raw: ExportTraceServiceRequest) -> list[ExportTraceServiceRequest]:
    """One request per span, in the order the spans ended (as a batch processor sends them)."""
    found = [
        (span.end_time_unix_nano, resource, scope, span)
        for resource in raw.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    found.sort(key=lambda item: item[0])
    out = []
    for _, resource, scope, span in found:
        request = ExportTraceServiceRequest()
        out_resource = request.resource_spans.add()
        out_resource.resource.CopyFrom(resource.resource)
        out_scope = out_resource.scope_spans.add()
        out_scope.scope.CopyFrom(scope.scope)
        out_scope.spans.add().CopyFrom(span)
        out.append(request)
    return out


def _through_hop(
    tmp_path: Any, sink: Sink, raw: ExportTraceServiceRequest, *settings: str
) -> list[Any]:
    pieces = _pieces(raw)
    trace_ids = {r.resource_spans[0].scope_spans[0].spans[0].trace_id for r in pieces}
    hop = HopProcess(
        tmp_path / "data", sink.endpoint, "--set", "processing.release_grace=300ms", *settings
    ).start()
    try:
        with grpc.insecure_channel(hop.grpc) as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            for piece in pieces:
                stub.Export(piece, timeout=10)

        def arrived() -> bool:
            return len([s for s in sink.spans() if s.trace_id in trace_ids]) >= len(pieces)

        assert sink.wait_for(arrived, 30), hop.stderr()[-2000:]
    finally:
        assert hop.terminate() == 0, hop.stderr()
    return [s for s in sink.spans() if s.trace_id in trace_ids]


def _notes(spans: Any) -> dict[str, dict[str, Any]]:
    keys = (semconv.RUN_MODE, semconv.RUN_PASSES, semconv.PASS_ITERATION, semconv.SIGNALS)
    return {
        s.span_id.hex(): {k: v for k, v in attrs(s).items() if k in keys}
        for s in spans
        if any(k in attrs(s) for k in keys)
    }


def test_the_hop_decides_observed_runs_as_the_processor_does(
    spans: tuple[Any, Any], sink: Sink, tmp_path: Any
) -> None:
    raw, annotated = spans
    forwarded = _through_hop(tmp_path, sink, raw)
    runs = [s for s in forwarded if attrs(s).get(semconv.RUN_MODE) == "observed"]
    assert len(runs) == 6  # clean, invented, empty, two agents, the bare call
    for span in forwarded:
        assert "missing-spans" not in (attrs(span).get(semconv.RUN_REASONS) or ()), span.name
    in_process = [s for r in annotated.resource_spans for sc in r.scope_spans for s in sc.spans]
    assert _notes(forwarded) == _notes(in_process)


def test_switched_off_the_hop_stamps_nothing_on_traces_that_never_had_a_run(
    spans: tuple[Any, Any], sink: Sink, tmp_path: Any
) -> None:
    raw, _ = spans
    forwarded = _through_hop(tmp_path, sink, raw, "--set", "processing.observed_runs=false")
    assert forwarded
    for span in forwarded:
        assert not [k for k in attrs(span) if k.startswith(semconv.PREFIX)], span.name
