"""Each held span viewed once: its bytes sliced from the request, held without ids, forwarded as they
came unless the decision parsed it (issue 29).

The laws: the ids come off and go back on byte for byte where protobuf writes them (so a span nobody
parsed leaves exactly as a re-serialization would write it), and the span parses the same; the request's own bytes give each span's bytes in the order the parsed request lists them. In the
pipeline: a span the decision never reads leaves as its sender wrote it (never parsed, never
serialized), the ones it annotates carry their notes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits, RunBuffer
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.otlp import (
    Origin,
    group_spans,
    iter_spans,
    serialize_request,
    span_wires,
    with_ids,
    without_ids,
)
from otel_footprint.service.pipeline import Pipeline, PipelineOptions, classify
from tests.test_service_pipeline import _span

_ids = st.sampled_from([b""]) | st.binary(min_size=1, max_size=20)
_spans = st.builds(
    Span,
    trace_id=st.one_of(st.just(b""), st.binary(min_size=16, max_size=16), _ids),
    span_id=st.one_of(st.just(b""), st.binary(min_size=8, max_size=8), _ids),
    parent_span_id=st.one_of(st.just(b""), st.binary(min_size=8, max_size=8), _ids),
    trace_state=st.one_of(st.just(""), st.text(max_size=200)),
    name=st.text(max_size=40),
    flags=st.integers(0, 2**32 - 1),
    start_time_unix_nano=st.integers(0, 2**64 - 1),
)


def _whole(held: bytes, span: Span) -> bytes:
    return with_ids(held, span.trace_id, span.span_id, span.parent_span_id)


@given(_spans)
def test_ids_come_off_and_go_back_where_protobuf_writes_them(span: Span) -> None:
    data = span.SerializeToString()
    held = without_ids(data)
    assert Span.FromString(_whole(held, span)) == span
    if all(len(i) in (0, n) for i, n in ((span.trace_id, 16), (span.span_id, 8))) and len(
        span.parent_span_id
    ) in (0, 8):
        # Ids of their proper length are not held twice, and the span leaves byte for byte.
        assert _whole(held, span) == data
        assert len(held) == len(data) - sum(
            len(i) + 2 for i in (span.trace_id, span.span_id, span.parent_span_id) if i
        )


def _requests() -> st.SearchStrategy[ExportTraceServiceRequest]:
    def build(blocks: list[list[list[Span]]], urls: bool) -> ExportTraceServiceRequest:
        request = ExportTraceServiceRequest()
        for n, scopes in enumerate(blocks):
            rs = request.resource_spans.add(schema_url=f"r{n}" if urls else "")
            rs.resource.attributes.add(key="service.name").value.string_value = f"s{n}"
            for m, spans in enumerate(scopes):
                ss = rs.scope_spans.add(schema_url=f"s{m}" if urls else "")
                ss.scope.name = f"scope{m}"
                ss.spans.extend(spans)
        return request

    spans = st.lists(_spans, max_size=4)
    return st.builds(build, st.lists(st.lists(spans, max_size=3), max_size=3), st.booleans())


@given(_requests())
def test_a_requests_bytes_give_each_span_in_order(request: ExportTraceServiceRequest) -> None:
    wire = request.SerializeToString()
    expected = [span.SerializeToString() for _, span in iter_spans(request)]
    assert span_wires(request, wire) == expected
    # An unknown field in a block (a group, never written by OTLP senders): each span is
    # serialized instead of read from the bytes.
    if request.resource_spans:
        odd = ExportTraceServiceRequest.FromString(wire + b"\x0a\x02\x2b\x2c")
        assert span_wires(odd, odd.SerializeToString()) == [
            span.SerializeToString() for _, span in iter_spans(odd)
        ]


def _forwarded_bytes(journal: Journal) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    while batch := journal.take_outbound(1 << 30, timeout=0):
        for record in batch:
            payload = journal.read(record)
            request = ExportTraceServiceRequest.FromString(payload)
            for data in span_wires(request, payload):
                out[Span.FromString(data).span_id] = data
        journal.mark_done([r.seq for r in batch])
    return out


def test_a_span_the_decision_never_reads_leaves_as_its_sender_wrote_it(tmp_path: Path) -> None:
    now = [100.0]
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=10.0)),
        journal,
        FootprintAnnotation(),
        HopMetrics(),
        clock=lambda: now[0],
    )
    run = _span(7, "invoke_agent", footprint__run__id="r7")
    run.trace_state = "vendor=1"
    chat = _span(7, "chat", parent=run.span_id)
    http = _span(7, None, parent=chat.span_id, http__method="GET")
    # The sender wrote an explicit default (kind = 0): a re-serialization would drop it.
    sent = http.SerializeToString() + b"\x30\x00"
    origin = Origin.of(Resource(), "", InstrumentationScope(name="s"), "")
    spans: list[tuple[Origin, Span | bytes]] = [(origin, run), (origin, chat), (origin, sent)]
    wire = serialize_request(group_spans(spans))
    pipeline.ingest_traces(ExportTraceServiceRequest.FromString(wire), wire, "test")
    now[0] += 1.5
    assert pipeline.process_due() == 1
    out = _forwarded_bytes(journal)
    assert out[http.span_id] == sent
    assert semconv.RUN_COMPLETE.encode() in out[run.span_id]
    assert Span.FromString(out[run.span_id]).trace_state == "vendor=1"


def test_a_run_that_ended_is_written_only_where_its_notes_say() -> None:
    """The contract the pipeline relies on (AnnotationStage): a span of an ended release that the
    decision parsed but named in no note is unchanged, so it leaves as held, unserialized."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_hop import build_requests

    buffer = RunBuffer(BufferLimits(release_grace=1.0, max_wait=600.0))
    for seq, payload in enumerate(build_requests(200, 0, content=True), 1):
        request = ExportTraceServiceRequest.FromString(payload)
        hold, _, _ = buffer.route(classify(request, payload))
        buffer.hold(hold, seq, now=0.0)
    releases = [r for r in buffer.poll(5.0) if r.cause == "ended"]
    stage = FootprintAnnotation()
    read = unnoted = 0
    for release in releases:
        notes = {sid for d in stage.annotate(release) for sid in d.notes}
        noted = notes | release.late_notes.keys()
        for held in release.spans():
            whole = held.wire(noted=False)
            if held.wire(noted=True) == whole:
                continue  # never parsed, or parsed and left as it was
            read += 1
            unnoted += held.span_id not in noted
    assert read and not unnoted, (read, unnoted)
