"""The staging protocol's bad input: each a reason on the run span, never a wrong verdict.

The model-call spans here are made the way an instrumentation makes them (``gen_ai.operation.name``
set at start, outside the recorder); the real instrumentations are in test_integrations_clients.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from integration_agents import explain_spans, verdict_facts
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint import semconv
from otel_footprint.commands.explain import Loaded, explain_requests
from otel_footprint.engine.decide import EngineOptions

MAPS = [footprint.MountedMap("billing-map", ("billing",), ("lookup",))]
CHAT = {semconv.GEN_AI_OPERATION_NAME: "chat", semconv.GEN_AI_REQUEST_MODEL: "m"}


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    footprint.install_attach(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _call(tracer: Any) -> None:
    with tracer.start_as_current_span("chat m", attributes=CHAT):
        pass


def test_events_staged_with_no_model_call_following_are_a_reason() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with footprint.run(tracer, agent="a", maps=MAPS) as run:
        run.evaluated(["billing"], cursor_to="billing", moved_by="entry")
        _call(tracer)
        run.evaluated(["billing"], cursor_to="billing")  # pass 2 never reaches a model
    (verdict,) = explain_spans(exporter.get_finished_spans())
    facts = verdict_facts(verdict)
    assert "unattached-pass" in facts["reasons"] and not facts["complete"]
    assert [p[0] for p in facts["passes"]] == [1]


def test_a_model_call_with_no_run_is_no_recorded_run() -> None:
    provider, exporter = _provider()
    _call(provider.get_tracer("t"))
    spans = exporter.get_finished_spans()
    # No recorder input: an observed run of its own (test_runs_observed.py), or, switched off,
    # no run at all.
    (verdict,) = explain_spans(spans)
    assert verdict.mode == "observed" and len(verdict.passes) == 1
    request = encode_spans(list(spans))
    assert explain_requests(Loaded([request], []), EngineOptions(observed=False)) == []


def test_two_runs_interleaved_on_one_thread_say_so() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with (
        footprint.run(tracer, agent="a", run_id="A", maps=MAPS) as a,
        footprint.run(tracer, agent="b", run_id="B", maps=MAPS) as b,
    ):
        a.evaluated(["billing"], cursor_to="billing", moved_by="entry")  # b is current
        b.evaluated(["billing"], cursor_to="billing", moved_by="entry")
        _call(tracer)  # b's pass
    verdicts = {v.run_id: verdict_facts(v) for v in explain_spans(exporter.get_finished_spans())}
    assert verdicts["B"]["complete"] and [p[0] for p in verdicts["B"]["passes"]] == [1]
    assert "unattached-pass" in verdicts["A"]["reasons"] and verdicts["A"]["passes"] == []


def test_runs_in_asyncio_tasks_keep_their_own_passes() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")

    async def agent(name: str, passes: int) -> None:
        with footprint.run(tracer, agent=name, run_id=name, maps=MAPS) as run:
            for _ in range(passes):
                run.evaluated(["billing"], cursor_to="billing", moved_by="entry")
                await asyncio.sleep(0.001)
                _call(tracer)
                await asyncio.sleep(0.001)

    async def both() -> None:
        await asyncio.gather(agent("x", 2), agent("y", 3))

    asyncio.run(both())
    verdicts = {v.run_id: verdict_facts(v) for v in explain_spans(exporter.get_finished_spans())}
    assert [p[0] for p in verdicts["x"]["passes"]] == [1, 2] and verdicts["x"]["complete"]
    assert [p[0] for p in verdicts["y"]["passes"]] == [1, 2, 3] and verdicts["y"]["complete"]


def test_concurrent_model_calls_in_one_run_are_a_reason() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with footprint.run(tracer, agent="a", maps=MAPS) as run:
        other = tracer.start_span("chat m", attributes=CHAT)  # still open
        run.evaluated(["billing"], cursor_to="billing", moved_by="entry")
        _call(tracer)
        other.end()
    (verdict,) = explain_spans(exporter.get_finished_spans())
    assert "concurrent-model-calls" in verdict_facts(verdict)["reasons"]
    assert verdict.passes == ()
