"""The run buffer in isolation: release timing, late spans, limits and the decision cache (fake clock)."""

from __future__ import annotations

import itertools

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.service.buffer import (
    HELD_SPAN_OVERHEAD,
    BufferLimits,
    Release,
    RunBuffer,
    SpanInfo,
)
from otel_footprint.service.otlp import Origin, has_footprint_events, span_role

_ids = itertools.count(1)
ORIGIN = Origin.of(Resource(), "", InstrumentationScope(name="t"), "")


def _span(
    trace: int, parent: bytes = b"", op: str | None = None, run_id: str | None = None
) -> Span:
    span = Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=next(_ids).to_bytes(8, "big"),
        parent_span_id=parent,
        name=op or "plain",
    )
    if op is not None:
        span.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = op
    if run_id is None and op == "invoke_agent":
        # An agent span is a run span when it names a run (runs/recognize.py).
        run_id = f"run-{span.span_id.hex()}"
    if run_id is not None:
        span.attributes.add(key=semconv.RUN_ID).value.string_value = run_id
    return span


def info(span: Span) -> SpanInfo:
    return SpanInfo(
        ORIGIN,
        span,
        span_role(span),
        has_footprint_events(span),
        bytes(span.trace_id),
        bytes(span.span_id),
        bytes(span.parent_span_id),
        span.SerializeToString(),
    )


def limits(**overrides: float) -> BufferLimits:
    base = {"release_grace": 1.0, "max_wait": 30.0}
    base.update(overrides)
    return BufferLimits(**base)  # type: ignore[arg-type]


def test_plain_traces_pass_through_and_agent_traces_are_held() -> None:
    buf = RunBuffer(limits())
    root = _span(1, op="invoke_agent", run_id="r1")
    chat = _span(1, parent=root.span_id, op="chat")
    plain = _span(2)
    hold, late, passed = buf.route([info(chat), info(plain)])
    assert [h.span for h in hold] == [chat]
    assert [p.span for p in passed] == [plain]
    assert late == []


def test_a_plain_span_in_a_held_trace_is_held_with_it() -> None:
    buf = RunBuffer(limits())
    root = _span(1, op="invoke_agent")
    chat = _span(1, parent=root.span_id, op="chat")
    step = _span(1, parent=root.span_id)
    hold, _, _ = buf.route([info(chat), info(step)])
    assert len(hold) == 2  # the plain span joins because its trace has a run-ish span
    buf.hold(hold, seq=1, now=0.0)
    hold2, _, passed2 = buf.route([info(_span(1, parent=root.span_id))])
    assert len(hold2) == 1 and passed2 == []


def test_run_released_after_grace_once_its_run_span_arrives() -> None:
    buf = RunBuffer(limits(release_grace=1.0))
    root = _span(1, op="invoke_agent", run_id="r1")
    chat = _span(1, parent=root.span_id, op="chat")
    buf.hold([info(chat)], seq=1, now=0.0)
    assert buf.poll(5.0) == []  # no run span yet, well before max_wait
    buf.hold([info(root)], seq=2, now=5.0)
    assert buf.poll(5.5) == []  # within the grace
    releases = buf.poll(6.01)
    assert len(releases) == 1
    rel = releases[0]
    assert rel.cause == "ended"
    assert {h.info.span_id for h in rel.spans()} == {root.span_id, chat.span_id}
    assert sorted(buf.retire(rel)) == [1, 2]
    assert buf.core.runs_held == 0 and buf.core.spans_held == 0 and buf.core.bytes_held == 0
    assert buf.core.cached_traces() == 1  # kept for late spans (the decision_cache_traces gauge)


def test_timeout_releases_incomplete_runs() -> None:
    buf = RunBuffer(limits(max_wait=10.0))
    root = _span(1, op="invoke_agent")
    chat = _span(1, parent=root.span_id, op="chat")
    buf.hold([info(chat)], seq=1, now=0.0)
    assert buf.poll(9.9) == []
    (rel,) = buf.poll(10.0)
    assert rel.cause == "timeout"
    assert [u.run_span for u in rel.units] == [None]


def _released_run() -> tuple[RunBuffer, Span, Span, Release]:
    """A buffer that held one run (a run span and a model call) and released it."""
    buf = RunBuffer(limits())
    root = _span(1, op="invoke_agent")
    chat = _span(1, parent=root.span_id, op="chat")
    buf.hold([info(chat), info(root)], seq=1, now=0.0)
    (rel,) = buf.poll(2.0)
    return buf, root, chat, rel


def test_late_spans_of_a_decided_run_use_the_decision_cache() -> None:
    buf, root, _, rel = _released_run()
    note = object()
    late_child = _span(1, parent=root.span_id, op="execute_tool")
    buf.remember(rel.trace_id, {late_child.span_id: note})
    hold, late, passed = buf.route([info(late_child)])
    assert hold == [] and passed == []
    assert late[0].note is note and late[0].run_span_id == root.span_id


def test_a_new_run_in_a_finished_trace_is_held_again() -> None:
    buf = RunBuffer(limits())
    # Runs under a (not yet arrived) request span: finishing one leaves the trace open.
    first = _span(1, op="invoke_agent", parent=b"\x09" * 8)
    buf.hold([info(first)], seq=1, now=0.0)
    (rel,) = buf.poll(2.0)
    assert rel.cause == "ended"
    second = _span(1, op="invoke_agent", parent=b"\x09" * 8)
    hold, late, _ = buf.route([info(second)])
    assert len(hold) == 1 and late == []


def test_overflow_on_runs_releases_the_oldest_unannotated() -> None:
    buf = RunBuffer(limits(max_runs=2))
    for trace in (1, 2):
        buf.hold([info(_span(trace, op="chat"))], seq=trace, now=float(trace))
    releases = buf.hold([info(_span(3, op="chat"))], seq=3, now=3.0)
    assert [(r.cause, r.limit, r.trace_id) for r in releases] == [
        ("overflow", "runs", (1).to_bytes(16, "big"))
    ]
    assert buf.core.runs_held == 2


def test_overflow_on_bytes_and_on_spans_per_run() -> None:
    spans = [_span(trace, op="chat") for trace in (1, 2, 3)]
    # A held span counts what it really holds: its wire bytes (less its ids) and its record.
    probe = RunBuffer(limits())
    probe.hold([info(_span(7, op="chat"))], seq=1, now=0.0)
    one = probe.core.bytes_held
    assert HELD_SPAN_OVERHEAD < one < len(spans[0].SerializeToString()) + HELD_SPAN_OVERHEAD
    buf = RunBuffer(limits(max_bytes=int(2.5 * one)))
    buf.hold([info(spans[0])], seq=1, now=0.0)
    assert buf.core.bytes_held == one
    buf.hold([info(spans[1])], seq=2, now=0.0)
    releases = buf.hold([info(spans[2])], seq=3, now=0.0)
    assert [(r.limit, r.trace_id[-1]) for r in releases] == [("bytes", 1)]
    assert buf.core.bytes_held == 2 * one

    buf = RunBuffer(limits(max_spans_per_run=2))
    root = _span(9, op="invoke_agent")
    spans = [info(_span(9, parent=root.span_id, op="chat")) for _ in range(3)]
    (rel,) = buf.hold(spans, seq=1, now=0.0)
    assert (rel.cause, rel.limit, rel.span_count) == ("overflow", "spans", 3)
    # Later spans of that trace are late (decided unannotated), never held again.
    _, late, _ = buf.route([info(root)])
    assert len(late) == 1 and late[0].cause == "overflow"


def test_nested_runs_release_separately() -> None:
    buf = RunBuffer(limits())
    outer = _span(1, op="invoke_agent")
    inner = _span(1, parent=outer.span_id, op="invoke_agent")
    inner_chat = _span(1, parent=inner.span_id, op="chat")
    outer_chat = _span(1, parent=outer.span_id, op="chat")
    buf.hold([info(inner_chat), info(inner), info(outer_chat)], seq=1, now=0.0)
    (rel,) = buf.poll(1.5)
    assert {h.info.span_id for h in rel.spans()} == {inner.span_id, inner_chat.span_id}
    assert buf.core.spans_held == 1
    buf.hold([info(outer)], seq=2, now=2.0)
    (rel2,) = buf.poll(3.5)
    assert {h.info.span_id for h in rel2.spans()} == {outer.span_id, outer_chat.span_id}
    assert buf.holds_record(1)  # until its release is written out
    assert sorted(buf.retire(rel2)) == [2]
    assert buf.retire(rel) == [1]


def test_the_root_span_closes_the_trace() -> None:
    buf = RunBuffer(limits())
    root = _span(1)  # a plain request span above the agent
    run = _span(1, parent=root.span_id, op="invoke_agent")
    stray = _span(1, parent=b"\x07" * 8, op="chat")  # its parent never arrives
    buf.hold([info(run), info(stray)], seq=1, now=0.0)
    (first,) = buf.poll(1.5)
    assert {h.info.span_id for h in first.spans()} == {run.span_id}
    _, _, passed = buf.route([info(root)])
    assert passed == []  # the trace is still active: the root is held
    buf.hold([info(root)], seq=2, now=2.0)
    (last,) = buf.poll(3.5)
    # The stray chat joins the trace's only run (already decided): it leaves as a late span.
    assert [h.info.span_id for h in last.late] == [stray.span_id]
    assert [h.info.span_id for h in last.others] == [root.span_id]
    _, late, _ = buf.route([info(_span(1, parent=root.span_id))])
    assert len(late) == 1  # the root closed the trace


def test_log_events_join_and_are_freed_with_their_span() -> None:
    from otel_footprint.runs.spans import SpanEventView

    buf = RunBuffer(limits())
    root = _span(1, op="invoke_agent")
    chat = _span(1, parent=root.span_id, op="chat")
    event = SpanEventView(semconv.EV_CONTEXT_EVALUATED, 1, (), via="log-record")
    kept, _ = buf.hold_events(
        [(bytes(chat.trace_id), bytes(chat.span_id), event)], seq=7, size_each=5, now=0.0
    )
    assert kept == 1 and buf.core.runs_held == 1 and buf.core.bytes_held == 5
    buf.hold([info(chat), info(root)], seq=8, now=0.0)
    (rel,) = buf.poll(1.5)
    (unit,) = rel.units
    assert {k: [e.event for e in v] for k, v in unit.log_events.items()} == {
        bytes(chat.span_id): [event]
    }
    assert sorted(buf.retire(rel)) == [7, 8]
    spans = sum(h.size for h in rel.spans())
    assert buf.core.bytes_held == 0 and rel.size == spans + 5 and spans > 2 * HELD_SPAN_OVERHEAD


def test_log_events_whose_spans_never_come_are_bounded_by_bytes() -> None:
    """Held log events count against max_bytes: the oldest trace is released, not kept forever."""
    from otel_footprint.runs.spans import SpanEventView

    buf = RunBuffer(limits(max_bytes=100))
    event = SpanEventView(semconv.EV_CONTEXT_EVALUATED, 1, (), via="log-record")
    first = _span(1, op="chat")
    kept, releases = buf.hold_events(
        [(bytes(first.trace_id), bytes(first.span_id), event)], seq=1, size_each=60, now=0.0
    )
    assert kept == 1 and releases == [] and buf.core.bytes_held == 60
    second = _span(2, op="chat")
    kept, releases = buf.hold_events(
        [(bytes(second.trace_id), bytes(second.span_id), event)], seq=2, size_each=60, now=0.1
    )
    assert kept == 1
    assert [(r.cause, r.limit, r.trace_id) for r in releases] == [
        ("overflow", "bytes", bytes(first.trace_id))
    ]
    assert buf.core.bytes_held == 60 and buf.core.runs_held == 1


def test_classification_reads_roles_and_footprint_events() -> None:
    chat = _span(1, op="chat")
    assert span_role(chat) is SpanRole.PASS
    plain = _span(1)
    assert span_role(plain) is SpanRole.OTHER and not has_footprint_events(plain)
    plain.events.add(name=semconv.EV_CONTEXT_INJECTED)
    assert has_footprint_events(plain)
    garbage = _span(1)
    garbage.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.int_value = 42
    assert span_role(garbage) is SpanRole.OTHER
    # A list or a map where a name belongs is read as absent: the span is the run its id names.
    hostile = _span(1)
    names = hostile.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.array_value
    names.values.add().string_value = "chat"
    kinds = hostile.attributes.add(key=semconv.OPENINFERENCE_SPAN_KIND).value.kvlist_value
    kinds.values.add(key="LLM").value.string_value = "LLM"
    hostile.attributes.add(key=semconv.RUN_ID).value.string_value = "r1"
    assert span_role(hostile) is SpanRole.RUN


def test_a_held_span_keeps_its_role_and_whether_it_is_runish() -> None:
    """One slot holds both (``HeldSpan._kind``): each role, with and without footprint events."""
    cases = []
    for op in (None, "agent", "invoke_agent", "chat"):
        for carries in (False, True):
            span = _span(3, op=None if op == "agent" else op)
            if op == "agent":  # an agent span naming no run
                attribute = span.attributes.add(key=semconv.GEN_AI_OPERATION_NAME)
                attribute.value.string_value = "invoke_agent"
            if carries:
                span.events.add(name=semconv.EV_CONTEXT_INJECTED)
            cases.append(info(span))
    cases.append(info(_span(3, op="execute_tool")))
    buf = RunBuffer(limits())
    buf.hold(cases, seq=1, now=0.0)
    (release,) = buf.release_everything(now=0.0)
    held = {h.span_id: h for h in release.spans()}
    assert {s.role for s in cases} == set(SpanRole)
    for s in cases:
        assert (held[s.span_id].role, held[s.span_id].runish) == (s.role, s.runish)
    assert sum(s.runish and s.role in (SpanRole.OTHER, SpanRole.AGENT) for s in cases) == 2


def test_a_held_span_is_its_wire_bytes_parsed_again_only_when_released() -> None:
    _, root, chat, release = _released_run()
    held = {h.span_id: h for h in release.spans()}
    size = held[bytes(chat.span_id)].size
    assert size < len(chat.SerializeToString()) + HELD_SPAN_OVERHEAD  # its ids are kept once
    parsed = held[bytes(chat.span_id)].span
    assert parsed == chat and parsed is not chat and held[bytes(chat.span_id)].span is parsed
    # The origin is a copy: a held span never keeps its whole request's protobuf memory alive.
    assert held[bytes(root.span_id)].origin.resource is not ORIGIN.resource


def test_memory_per_held_span_stays_small() -> None:
    """What bench_held.py measures, on a smaller load: bytes allocated per held span."""
    import gc
    import tracemalloc

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from otel_footprint.service.pipeline import classify

    payloads = []
    for trace in range(200):
        request = ExportTraceServiceRequest()
        scope_spans = request.resource_spans.add().scope_spans.add()
        parent = _span(1000 + trace, parent=b"\x01" * 8, op="chat")
        for _ in range(10):
            span = _span(1000 + trace, parent=parent.span_id, op="chat", run_id="r")
            span.events.add(name=semconv.EV_CONTEXT_EVALUATED, time_unix_nano=1)
            scope_spans.spans.append(span)
        payloads.append(request.SerializeToString())
    buf = RunBuffer(limits(max_wait=3600.0))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for seq, payload in enumerate(payloads, start=1):
        hold, _, _ = buf.route(classify(ExportTraceServiceRequest.FromString(payload)))
        buf.hold(hold, seq, now=0.0)
        del hold
    gc.collect()
    per_span = (tracemalloc.get_traced_memory()[0] - before) / buf.core.spans_held
    tracemalloc.stop()
    wire = sum(map(len, payloads)) / buf.core.spans_held
    assert buf.core.spans_held == 2000
    assert per_span < wire + 300, (per_span, wire)
