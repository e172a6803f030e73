"""Both delivery paths hold and decide runs through one core: random span orderings, same verdicts.

The demo scenarios are recorded once with a real TracerProvider; their ended spans are then fed in
a random order (and, for the hop, split into random requests) to the in-process processor and to
the hop's run buffer + annotation stage. Every ``footprint.*`` attribute written on every span
must be the same on both paths (and the same as for the spans in their recorded order).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.codec import any_value_to_python
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.sdk import FootprintSpanProcessor
from otel_footprint.sdk.buffer import span_role
from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits, RunBuffer
from otel_footprint.service.pipeline import classify

Verdicts = dict[tuple[int, int], dict[str, Any]]


def _record(names: Sequence[str]) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("paths")
    for name in names:
        run_script(tracer, SCENARIOS[name].script)
    provider.shutdown()
    return list(exporter.get_finished_spans())


RECORDED = {name: _record([name]) for name in SCENARIOS}


def _ours(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in items:
        if key.startswith(sc.PREFIX):
            out[key] = tuple(value) if isinstance(value, list | tuple) else value
    return out


def in_process(spans: Sequence[ReadableSpan]) -> Verdicts:
    exporter = InMemorySpanExporter()
    processor = FootprintSpanProcessor(exporter, grace_seconds=30, bsp_schedule_delay_millis=5)
    try:
        # A run span starts before its children (the processor's on_start); the ends come in any
        # order, all within the grace; the flush then decides every run whose run span ended.
        for span in sorted(spans, key=lambda s: s.start_time or 0):
            if span_role(span) is SpanRole.RUN and span.context is not None:
                processor._buffer.run_started(span.context.trace_id, span)
        for span in spans:
            processor.on_end(span)
        assert processor.force_flush(10_000)
    finally:
        processor.shutdown()
    out: Verdicts = {}
    for span in exporter.get_finished_spans():
        assert span.context is not None
        out[(span.context.trace_id, span.context.span_id)] = _ours((span.attributes or {}).items())
    return out


def on_the_hop(spans: Sequence[ReadableSpan], cuts: Sequence[int]) -> Verdicts:
    buffer = RunBuffer(BufferLimits(release_grace=30.0, max_wait=600.0))
    stage = FootprintAnnotation()
    bounds = sorted({0, len(spans), *(c % (len(spans) + 1) for c in cuts)})
    out: Verdicts = {}

    def keep(trace_id: bytes, span_id: bytes, pb: Span) -> None:
        attrs = ((kv.key, any_value_to_python(kv.value)) for kv in pb.attributes)
        out[(int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big"))] = _ours(attrs)

    for seq, (start, end) in enumerate(itertools.pairwise(bounds), start=1):
        hold, late, passed = buffer.route(classify(encode_spans(spans[start:end])))
        assert late == []
        for info in passed:
            keep(info.trace_id, info.span_id, info.span)
        buffer.hold(hold, seq, now=float(seq))
    for release in buffer.release_everything(float(len(bounds))):
        stage.annotate(release)
        for held in release.spans():
            keep(release.trace_id, held.span_id, held.span)
    assert len(out) == len(spans)
    return out


def test_recorded_order_gives_the_same_verdicts_on_both_paths() -> None:
    for name, spans in RECORDED.items():
        sdk = in_process(spans)
        hop = on_the_hop(spans, [])
        assert sdk == hop, name
        assert any(v.get(sc.RUN_COMPLETE) is not None for v in sdk.values()), name


@settings(max_examples=25, deadline=None)
@given(
    names=st.lists(st.sampled_from(sorted(SCENARIOS)), min_size=1, max_size=3, unique=True),
    data=st.data(),
)
def test_any_span_order_gives_the_same_verdicts_on_both_paths(
    names: list[str], data: st.DataObject
) -> None:
    spans = [s for name in names for s in RECORDED[name]]
    order = data.draw(st.permutations(spans))
    cuts = data.draw(st.lists(st.integers(0, len(spans)), max_size=6))
    expected = on_the_hop(spans, [])
    assert on_the_hop(order, cuts) == expected
    assert in_process(order) == expected
