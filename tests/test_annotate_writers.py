"""Unit: the two writers (OTLP protobuf in place, SDK copy) apply one SpanNote identically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_footprint import semconv as sc
from otel_footprint.annotate.form import NoteEvent, NoteLink, SpanNote
from otel_footprint.annotate.otlp import apply_note, to_any_value
from otel_footprint.annotate.sdk import annotated_copy
from otel_footprint.runs.spans import OtlpSpanView, key_values_to_pairs

LINKED_TRACE = "0af7651916cd43dd8448eb211c80319c"
LINKED_SPAN = "b7ad6b7169203331"

NOTE = SpanNote(
    attributes=(
        (sc.RUN_PASSES, 6),
        (sc.RUN_COMPLETE, True),
        (sc.RUN_PARKED_MAPS, ("skill-map",)),
        (sc.ENG_SERVED_WHILE_PARKED, ()),
        ("ratio", 0.5),
        ("existing", "replaced"),
    ),
    events=(
        NoteEvent(
            sc.EV_ENGAGEMENT_PARKED, ((sc.CH_MAP_ID, "skill-map"), (sc.CH_IDLE_CALLS, 3)), "start"
        ),
        NoteEvent(sc.EV_EVALUATION_RESULT, ((sc.EVAL_NAME, "footprint.decided-delivered"),)),
    ),
    links=(NoteLink(LINKED_TRACE, LINKED_SPAN, ((sc.LINK_EVIDENCE, ("decided-delivered",)),)),),
)


def _sdk_span(limits: SpanLimits | None = None) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits) if limits else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span(
        "invoke_agent demo", kind=SpanKind.INTERNAL, attributes={"existing": "old", "keep": 1}
    ) as span:
        span.add_event("footprint.agent.turn_start", {"footprint.user_prompt": "hi"})
        span.set_status(Status(StatusCode.ERROR, "boom"))
    (finished,) = exporter.get_finished_spans()
    return finished


def _pb(span: ReadableSpan) -> PbSpan:
    request = encode_spans([span])
    return request.resource_spans[0].scope_spans[0].spans[0]


def _shape(pb: PbSpan) -> tuple[object, ...]:
    return (
        sorted(key_values_to_pairs(pb.attributes)),
        [(e.name, e.time_unix_nano, key_values_to_pairs(e.attributes)) for e in pb.events],
        [
            (
                link.trace_id.hex(),
                link.span_id.hex(),
                link.flags,
                key_values_to_pairs(link.attributes),
            )
            for link in pb.links
        ],
    )


def test_protobuf_and_sdk_writers_produce_identical_spans() -> None:
    span = _sdk_span()
    in_place = _pb(span)
    apply_note(in_place, NOTE)
    copied = _pb(annotated_copy(span, NOTE))
    assert _shape(in_place) == _shape(copied)
    assert in_place == copied  # every field, not only the annotations


def test_apply_note_replaces_keys_and_anchors_event_times() -> None:
    pb = _pb(_sdk_span())
    apply_note(pb, NOTE)
    keys = [kv.key for kv in pb.attributes]
    assert keys.count("existing") == 1
    attrs = dict(key_values_to_pairs(pb.attributes))
    assert attrs["existing"] == "replaced" and attrs["keep"] == 1
    assert attrs[sc.ENG_SERVED_WHILE_PARKED] == ()
    parked, evaluation = pb.events[1], pb.events[2]
    assert parked.time_unix_nano == pb.start_time_unix_nano
    assert evaluation.time_unix_nano == pb.end_time_unix_nano
    assert pb.links[0].trace_id == bytes.fromhex(LINKED_TRACE)


def test_to_any_value_keeps_bools_ints_floats_and_empty_arrays_apart() -> None:
    assert to_any_value(True).WhichOneof("value") == "bool_value"
    assert to_any_value(3).WhichOneof("value") == "int_value"
    assert to_any_value(0.5).WhichOneof("value") == "double_value"
    assert to_any_value(()).WhichOneof("value") == "array_value"
    reused = AnyValue(string_value="x")
    to_any_value(("a", "b"), reused)
    assert [v.string_value for v in reused.array_value.values] == ["a", "b"]


def test_annotated_copy_keeps_identity_and_leaves_the_original_untouched() -> None:
    span = _sdk_span()
    copy = annotated_copy(span, NOTE)
    assert copy.context == span.context and copy.parent == span.parent
    assert copy.resource is span.resource
    assert copy.instrumentation_scope == span.instrumentation_scope
    assert copy.status.status_code is StatusCode.ERROR and copy.kind is span.kind
    assert (copy.start_time, copy.end_time) == (span.start_time, span.end_time)
    assert span.attributes["existing"] == "old" and len(span.events) == 1
    assert annotated_copy(span, SpanNote()) is span


def test_annotated_copy_respects_limits_and_counts_what_did_not_fit() -> None:
    limits = SpanLimits(max_span_attributes=4, max_events=2, max_links=0)
    span = _sdk_span(limits)
    copy = annotated_copy(span, NOTE, limits)
    attrs = dict(copy.attributes or {})
    # The span's own attributes are never evicted for ours; a replaced key needs no room.
    assert attrs["keep"] == 1 and attrs["existing"] == "replaced"
    assert len(attrs) == 4
    assert copy.dropped_attributes == 3
    assert [e.name for e in copy.events] == ["footprint.agent.turn_start", sc.EV_ENGAGEMENT_PARKED]
    assert copy.dropped_events == 1
    assert copy.links == () and copy.dropped_links == 1
    pb = _pb(copy)
    assert pb.dropped_attributes_count == 3 and pb.dropped_events_count == 1


# ── the protobuf writer against a plain message-by-message reference ────────────────────────────


def _reference_apply(pb: PbSpan, note: SpanNote) -> None:
    """The obvious implementation: one KeyValue message per value, equal keys replaced in place."""

    def put(target: Any, pairs: Sequence[tuple[str, Any]]) -> None:
        index = {kv.key: kv for kv in target}
        for key, value in pairs:
            kv = index.get(key)
            if kv is None:
                kv = index[key] = target.add(key=key)
            else:
                kv.value.Clear()
            to_any_value(value, kv.value)

    put(pb.attributes, note.attributes)
    for event in note.events:
        at = pb.start_time_unix_nano if event.anchor == "start" else pb.end_time_unix_nano
        put(pb.events.add(name=event.name, time_unix_nano=at).attributes, event.attributes)
    for link in note.links:
        pb_link = pb.links.add(
            trace_id=bytes.fromhex(link.trace_id),
            span_id=bytes.fromhex(link.span_id),
            flags=SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
        )
        put(pb_link.attributes, link.attributes)


_KEYS = st.sampled_from(["existing", "keep", sc.RUN_ID, sc.RUN_PASSES, "a", "b", "ünï"])
_SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.floats(allow_nan=False),
    st.text(max_size=300),
)
_VALUES = st.one_of(
    _SCALARS,
    st.lists(st.text(max_size=20), max_size=4).map(tuple),
    st.lists(_SCALARS, max_size=3).map(tuple),
)
_PAIRS = st.lists(st.tuples(_KEYS, _VALUES), max_size=8).map(tuple)
_NOTES = st.builds(
    SpanNote,
    attributes=_PAIRS,
    events=st.lists(
        st.builds(
            NoteEvent,
            name=st.sampled_from([sc.EV_EVALUATION_RESULT, sc.EV_ENGAGEMENT_PARKED, "é"]),
            attributes=_PAIRS,
            anchor=st.sampled_from(["start", "end"]),
        ),
        max_size=4,
    ).map(tuple),
    links=st.lists(
        st.builds(NoteLink, st.just(LINKED_TRACE), st.just(LINKED_SPAN), _PAIRS), max_size=2
    ).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(_NOTES, st.booleans())
def test_apply_note_writes_the_same_message_as_the_plain_reference(
    note: SpanNote, twice: bool
) -> None:
    base = _pb(_sdk_span())
    base.attributes.add(key=sc.RUN_ID).value.string_value = "run-1"
    ours, reference = PbSpan(), PbSpan()
    ours.CopyFrom(base)
    reference.CopyFrom(base)
    for _ in range(2 if twice else 1):  # the second time every value comes from the cache
        apply_note(ours, note)
        _reference_apply(reference, note)
    assert ours == reference
    keys = [kv.key for kv in ours.attributes]
    assert len(keys) == len(set(keys))  # never a duplicate key, even when the note repeats one


@settings(max_examples=100, deadline=None)
@given(_NOTES, st.booleans())
def test_apply_note_through_a_views_index_writes_the_same_message(
    note: SpanNote, twice: bool
) -> None:
    """The hop passes the view's attribute index (read while grouping) to spare a pass over the
    span's attributes: the same message, even once the index misses what a first note added."""
    base = _pb(_sdk_span())
    base.attributes.add(key=sc.RUN_ID).value.string_value = "run-1"
    indexed, plain = PbSpan(), PbSpan()
    indexed.CopyFrom(base)
    plain.CopyFrom(base)
    index = OtlpSpanView(indexed).attribute_values()
    for _ in range(2 if twice else 1):
        apply_note(indexed, note, index)
        apply_note(plain, note)
    assert indexed == plain


def test_apply_note_through_an_index_of_a_span_holding_a_key_twice() -> None:
    # The index keeps a key's last value; each of the span's copies is compared and replaced.
    base = PbSpan()
    for value in ("old", "again"):
        base.attributes.add(key="existing").value.string_value = value
    note = SpanNote(attributes=(("existing", "again"),))
    indexed, plain = PbSpan(), PbSpan()
    indexed.CopyFrom(base)
    plain.CopyFrom(base)
    apply_note(indexed, note, OtlpSpanView(indexed).attribute_values())
    apply_note(plain, note)
    assert indexed == plain
    assert [kv.value.string_value for kv in indexed.attributes] == ["again", "again"]


def test_apply_note_never_confuses_values_that_compare_equal() -> None:
    # True == 1 == 1.0 and 0.0 == -0.0 in Python; on the wire they are different values.
    for value in (True, 1, 1.0, (True,), (1,), ("1",), 0.0, -0.0, (), ("",), ""):
        pb = PbSpan()
        apply_note(pb, SpanNote(attributes=(("k", value),)))
        reference = PbSpan()
        _reference_apply(reference, SpanNote(attributes=(("k", value),)))
        assert pb == reference, value
        assert pb.attributes[0].value == to_any_value(value)


def test_apply_note_leaves_off_a_value_otlp_cannot_hold_and_counts_it() -> None:
    """Issue 22: an integer past int64 (a sum of hostile counts) costs that attribute, not the
    note: the rest is written and the span, event or link says how many were left off."""
    pb = PbSpan()
    pb.attributes.add(key="kept").value.int_value = 1
    note = SpanNote(
        attributes=(
            ("too-big", 1 << 63),
            ("kept", -(1 << 64)),
            ("fine", 3),
            ("list", (1, 1 << 70)),
        ),
        events=(NoteEvent("e", (("x", 1 << 63), ("y", "ok"))),),
        links=(NoteLink("ab" * 16, "cd" * 8, (("z", -(1 << 63) - 1),)),),
    )
    apply_note(pb, note)
    assert [(kv.key, kv.value.int_value) for kv in pb.attributes] == [("kept", 1), ("fine", 3)]
    assert pb.dropped_attributes_count == 3
    (event,) = pb.events
    assert [kv.key for kv in event.attributes] == ["y"] and event.dropped_attributes_count == 1
    (link,) = pb.links
    assert not link.attributes and link.dropped_attributes_count == 1
    # Nothing left off: no dropped count written.
    plain = PbSpan()
    apply_note(plain, SpanNote(attributes=(("fine", 3),), events=(NoteEvent("e", (("y", 1),)),)))
    assert plain.dropped_attributes_count == 0 and plain.events[0].dropped_attributes_count == 0


def test_apply_note_refuses_what_is_no_attribute_value() -> None:
    with pytest.raises(TypeError):
        apply_note(PbSpan(), SpanNote(attributes=(("none", None),)))  # type: ignore[arg-type]
    # A list where the form gives tuples still encodes (it cannot be cached).
    pb = PbSpan()
    apply_note(pb, SpanNote(attributes=(("list", ["a", "b"]),)))  # type: ignore[arg-type]
    assert [v.string_value for v in pb.attributes[0].value.array_value.values] == ["a", "b"]


def test_apply_note_never_confuses_events_whose_values_compare_equal() -> None:
    # Encoded values are cached: an event holding True must not be served the bytes of an
    # equal-comparing event holding 1 or 1.0 (nor -0.0 those of 0.0), in either order.
    values = (True, 1, 1.0, (True,), (1,), ("1",), 0.0, -0.0, (), ("",), "", "x", ("x",))
    for order in (values, tuple(reversed(values))):
        for value in order:
            note = SpanNote(events=(NoteEvent("e", (("k", value), ("t", "same"))),))
            pb, reference = PbSpan(), PbSpan()
            apply_note(pb, note)
            _reference_apply(reference, note)
            assert pb == reference, value
    # An event holding a list (unhashable) still encodes, uncached.
    pb = PbSpan()
    apply_note(pb, SpanNote(events=(NoteEvent("e", (("list", ["a"]),)),)))  # type: ignore[arg-type]
    assert pb.events[0].attributes[0].value.array_value.values[0].string_value == "a"
