"""Every stack through ``otel-footprint serve``: the stack's raw spans (with the events the span-start
hook put on them) exported to the hop one span per request in a shuffled order give the same
verdicts, on the same spans, as the in-process processor and the plain recorder.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from fake_openai import FakeOpenAI
from integration_agents import SCRIPT, reference_facts, run_stack, verdict_facts
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_service_support import HopProcess, Sink, attrs

from otel_footprint import semconv
from otel_footprint.commands.explain import Loaded, explain_requests

STACKS = {
    "openai-v2": "opentelemetry.instrumentation.openai_v2",
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
    "openai-agents": "openinference.instrumentation.openai_agents",
    "langgraph": "openinference.instrumentation.langchain",
}
CONTENT_ENV = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hop(sink: Sink, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    base = tmp_path_factory.mktemp("hop-integrations")
    proc = HopProcess(
        base / "data", sink.endpoint, "--set", "processing.release_grace=500ms"
    ).start()
    yield proc
    assert proc.terminate() == 0, proc.stderr()


def _one_request(resource: Any, scope: Any, span: Any) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    out_resource = request.resource_spans.add()
    out_resource.resource.CopyFrom(resource.resource)
    out_scope = out_resource.scope_spans.add()
    out_scope.scope.CopyFrom(scope.scope)
    out_scope.spans.add().CopyFrom(span)
    return request


@pytest.mark.parametrize("name", sorted(STACKS))
def test_the_hop_decides_each_stack_as_the_processor_does(
    name: str, hop: HopProcess, sink: Sink
) -> None:
    pytest.importorskip(STACKS[name], reason="pip install -e '.[integrations]'")
    with FakeOpenAI(SCRIPT) as server:
        raw, annotated = run_stack(name, server.url, env=CONTENT_ENV)
    pieces = [
        _one_request(resource, scope, span)
        for resource in raw.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    trace_ids = {r.resource_spans[0].scope_spans[0].spans[0].trace_id for r in pieces}
    random.Random(name).shuffle(pieces)
    with grpc.insecure_channel(hop.grpc) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        for piece in pieces:
            stub.Export(piece, timeout=10)

    def arrived() -> bool:
        spans = [s for s in sink.spans() if s.trace_id in trace_ids]
        return len(spans) >= len(pieces) and any(semconv.RUN_COMPLETE in attrs(s) for s in spans)

    assert sink.wait_for(arrived, 20), hop.stderr()[-2000:]
    forwarded = [s for s in sink.spans() if s.trace_id in trace_ids]
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(forwarded)
    (verdict,) = explain_requests(Loaded(traces=[request], logs=[]))
    assert verdict_facts(verdict) == reference_facts()

    # The hop annotated the same spans as the in-process processor, with the same values.
    def notes(spans: Any) -> dict[str, dict[str, Any]]:
        return {
            s.span_id.hex(): {
                k: v
                for k, v in attrs(s).items()
                if k in (semconv.ENG_ENGAGED_MAPS, semconv.ENG_PARKED_MAPS, semconv.RUN_PASSES)
            }
            for s in spans
            if any(
                k in attrs(s)
                for k in (semconv.ENG_ENGAGED_MAPS, semconv.RUN_PASSES, semconv.RUN_COMPLETE)
            )
        }

    in_process = [s for r in annotated.resource_spans for sc in r.scope_spans for s in sc.spans]
    assert notes(forwarded) == notes(in_process)
