"""The decision path's shortcuts give what the plain rules give: memoized name conversion (and
names too long to memoize), per-view id and attribute memos, an OTLP event decoded straight off
its protobuf as from its pairs, one decode for a re-read leg, the stable time sort of a leg's
events and their index by type, and no carried verdict computed when no run store keeps it.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from otel_footprint import semconv
from otel_footprint.codec import (
    EventDecodeError,
    EventPointer,
    FootprintEvent,
    camel_case,
    decode_attributes,
    decode_event,
    field_attribute,
    snake_case,
)
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.engine.decide import decide_run
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.passes import decode_run, read_run
from otel_footprint.runs.spans import SdkSpanView, SpanEventView, key_values_to_pairs
from otel_footprint.runs.store import MemoryRunStore

POINTER = EventPointer("0" * 32, "1" * 16, "footprint.context.evaluated", 0)


def _spans(*names: str) -> list[SdkSpanView]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for name in names:
        run_script(provider.get_tracer("fastpaths"), SCENARIOS[name].script)
    provider.shutdown()
    return [SdkSpanView(s) for s in exporter.get_finished_spans()]


@pytest.mark.parametrize("length", [1, 63, 64, 65, 300])
def test_field_names_convert_the_same_on_both_sides_of_the_memo_limit(length: int) -> None:
    words = ["part"] * (length // 5 + 1)
    snake = "_".join(words)[:length].rstrip("_") or "x"
    head, *rest = snake.split("_")
    camel = camel_case(snake)
    assert camel == head + "".join(w[:1].upper() + w[1:] for w in rest)
    assert snake_case(camel) == snake
    assert field_attribute(camel) == semconv.PREFIX + snake
    # Asked twice (the second answer may come from the memo): the same.
    assert camel_case(snake) == camel
    assert field_attribute(camel) == semconv.PREFIX + snake


def test_a_long_attribute_key_decodes_like_a_short_one() -> None:
    long_field = "very_" * 30 + "long"
    attributes = [
        (semconv.PREFIX + long_field, ("a", "b")),
        (semconv.PREFIX + "cursor_move", '{"to": "x", "by": "stay"}'),
        (semconv.PREFIX + "iteration", 3),
        (semconv.COMPOSITION_ID, "c-1"),
        (semconv.PASS_ITERATION, 3),  # dotted: span identity, not payload
        ("other.key", "ignored"),
    ]
    event = decode_event(semconv.EV_CONTEXT_EVALUATED, attributes, POINTER, 7)
    assert event is not None
    assert dict(event.payload) == {
        camel_case(long_field): ["a", "b"],
        "cursorMove": {"to": "x", "by": "stay"},
        "iteration": 3,
    }
    assert event.composition_id == "c-1"
    assert event.time_unix_nano == 7
    with pytest.raises(TypeError):
        event.payload["iteration"] = 4  # type: ignore[index]


def test_a_map_event_witness_stays_text_and_bad_json_still_names_the_attribute() -> None:
    engaged = decode_event(
        semconv.event_name_of(semconv.T_MAP_ENGAGED),
        [(semconv.PREFIX + "witness", "[zone]")],
        POINTER,
    )
    assert engaged is not None and engaged.payload["witness"] == "[zone]"
    with pytest.raises(ValueError, match=r"footprint\.cursor_move is not valid JSON"):
        decode_event(
            semconv.EV_CONTEXT_EVALUATED, [(semconv.PREFIX + "cursor_move", "{nope")], POINTER
        )


def test_the_sdk_view_memo_answers_what_the_span_says() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("fastpaths").start_span("s", attributes={"a": 1, "b": "two"})
    span.add_event("e", {"k1": "v1", "k2": 2, "k3": (1, 2)}, timestamp=5)
    span.end()
    (finished,) = exporter.get_finished_spans()
    view = SdkSpanView(finished)
    for _ in range(2):
        assert view.attribute("a") == 1
        assert view.attribute("b") == "two"
        assert view.attribute("missing") is None
        assert view.span_id == format(finished.context.span_id, "016x")
        assert view.trace_id == format(finished.context.trace_id, "032x")
    (event,) = view.events()
    assert event == SpanEventView("e", 5, [("k1", "v1"), ("k2", 2), ("k3", (1, 2))])


def test_otlp_pairs_keep_every_value_kind() -> None:
    items = [
        KeyValue(key="s", value=AnyValue(string_value="text")),
        KeyValue(key="i", value=AnyValue(int_value=3)),
        KeyValue(key="b", value=AnyValue(bool_value=True)),
        KeyValue(key="d", value=AnyValue(double_value=1.5)),
        KeyValue(key="y", value=AnyValue(bytes_value=b"\x01")),
        KeyValue(
            key="a",
            value=AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="x")])),
        ),
        KeyValue(
            key="m",
            value=AnyValue(
                kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(int_value=1))])
            ),
        ),
        KeyValue(key="n", value=AnyValue()),
    ]
    expected: list[tuple[str, Any]] = [
        ("s", "text"),
        ("i", 3),
        ("b", True),
        ("d", 1.5),
        ("y", b"\x01"),
        ("a", ("x",)),
        ("m", {"k": 1}),
        ("n", None),
    ]
    assert key_values_to_pairs(items) == expected


_SCALAR_VALUES = st.one_of(
    st.builds(AnyValue),
    st.builds(
        lambda s: AnyValue(string_value=s),
        st.sampled_from(["", "x", "{", "[1,", '{"to": "x"}', "[1, 2]", " [1]", "[1e999]"])
        | st.text(max_size=6),
    ),
    st.builds(lambda i: AnyValue(int_value=i), st.integers(-(1 << 63), (1 << 63) - 1)),
    st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
    st.builds(lambda d: AnyValue(double_value=d), st.floats()),
    st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=3)),
)
_VALUES = st.recursive(
    _SCALAR_VALUES,
    lambda inner: st.one_of(
        st.builds(
            lambda vs: AnyValue(array_value=ArrayValue(values=vs)), st.lists(inner, max_size=3)
        ),
        st.builds(
            lambda kvs: AnyValue(
                kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in kvs])
            ),
            st.lists(st.tuples(st.sampled_from(["k", "j"]), inner), max_size=3),
        ),
    ),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    [
        semconv.PREFIX + "cursor_move",
        semconv.PREFIX + "witness",
        semconv.PREFIX + "iteration",
        semconv.PREFIX + "maps",
        semconv.COMPOSITION_ID,
        semconv.PASS_ITERATION,
        "other.key",
    ]
)


def _decoded(decode: Any) -> FootprintEvent | str:
    try:
        event: FootprintEvent = decode()
    except EventDecodeError as error:
        return str(error)
    return event


@given(
    event_type=st.sampled_from([semconv.T_CONTEXT_EVALUATED, semconv.T_MAP_ENGAGED]),
    items=st.lists(st.builds(lambda k, v: KeyValue(key=k, value=v), _KEYS, _VALUES), max_size=6),
)
def test_an_otlp_event_decodes_straight_off_its_key_values_as_from_its_pairs(
    event_type: str, items: list[KeyValue]
) -> None:
    straight = _decoded(lambda: decode_attributes(event_type, items, True, POINTER, 7))
    paired = _decoded(
        lambda: decode_attributes(event_type, key_values_to_pairs(items), False, POINTER, 7)
    )
    if isinstance(straight, FootprintEvent) and isinstance(paired, FootprintEvent):
        # Payloads compared as plain dicts (NaN compares unequal to itself: by repr).
        assert repr(dict(straight.payload)) == repr(dict(paired.payload))
        assert (straight.type, straight.pointer, straight.time_unix_nano) == (
            paired.type,
            paired.pointer,
            paired.time_unix_nano,
        )
        assert straight.composition_id == paired.composition_id
    else:
        assert straight == paired


def test_events_of_one_time_keep_span_order_then_log_records_then_index() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("fastpaths")
    run = tracer.start_span(
        "invoke_agent a",
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT},
        start_time=1,
    )
    chat = tracer.start_span(
        "chat m",
        context=set_span_in_context(run),
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT},
        start_time=2,
    )
    later = semconv.event_name_of(semconv.T_TURN_END)
    same = semconv.event_name_of(semconv.T_TURN_START)
    chat.add_event(same, {semconv.PREFIX + "n": "chat-0"}, timestamp=10)
    chat.add_event(later, {semconv.PREFIX + "n": "chat-late"}, timestamp=20)
    chat.add_event(same, {semconv.PREFIX + "n": "chat-1"}, timestamp=10)
    run.add_event(same, {semconv.PREFIX + "n": "run-0"}, timestamp=10)
    chat.end(end_time=3)
    run.end(end_time=4)
    views = [SdkSpanView(s) for s in exporter.get_finished_spans()]
    chat_id = next(v.span_id for v in views if v.name == "chat m")
    logs = {chat_id: [SpanEventView(same, 10, [(semconv.PREFIX + "n", "log-0")], "log-record")]}
    (leg,) = group_runs(views, logs)
    order = [e.payload["n"] for e in decode_run(leg).events]
    assert order == ["run-0", "chat-0", "chat-1", "log-0", "chat-late"]


def test_a_leg_read_from_its_decoded_events_is_the_leg_read_afresh() -> None:
    (leg,) = group_runs(_spans("stuck-verify"))
    decoded = decode_run(leg)
    for first in (1, 7):
        assert read_run(leg, first_iteration=first, decoded=decoded) == read_run(
            leg, first_iteration=first
        )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_facts_index_of_events_by_type_is_the_events_in_order(name: str) -> None:
    for leg in group_runs(_spans(name)):
        facts = read_run(leg)
        assert sorted(facts.by_type) == sorted({e.type for e in facts.events})
        for event_type, events in facts.by_type.items():
            assert list(events) == [e for e in facts.events if e.type == event_type]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_without_a_run_store_the_verdict_is_the_one_with_a_store(name: str) -> None:
    (leg,) = group_runs(_spans(name))
    store = MemoryRunStore()
    assert decide_run(leg) == decide_run(leg, store)
    # A leg that neither pauses nor resumes leaves no leg state: nothing would ever read it.
    assert len(store) == 0


def test_quick_init_builds_through_a_twin_and_gives_back_the_class() -> None:
    pointer = EventPointer("t" * 32, "s" * 16, "footprint.context.evaluated", 2, "log-record")
    assert type(pointer) is EventPointer
    assert pickle.loads(pickle.dumps(pointer)) == copy.copy(pointer) == copy.deepcopy(pointer)

    class Sub(EventPointer):  # not the class the twin stands in for: filled slot by slot
        __slots__ = ()

    sub = Sub("t" * 32, "s" * 16, "footprint.context.evaluated", 2)
    assert type(sub) is Sub and sub.via == "span-event" and sub.event_index == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.event_index = 3  # type: ignore[misc]
