"""The decision path's fast paths give exactly the answers of the plain code they replace.

``latest_batch`` (binary search over the iterations that dispatched tools) and the pass of a tool
span without an iteration (binary search over the passes' start times) were scans of every batch /
every pass on every pass: quadratic in a long run; each is checked against the scan, as a law. The
hop's request bytes are written around each span instead of copying it into a request first;
``apply_note`` leaves a restated key with the same value alone; ``quick_init`` records stay frozen.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from _shared import RECORDINGS
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from otlp_oracle import build_request

from otel_footprint import semconv
from otel_footprint.account.templates import TEMPLATES, FillError, fill, placeholders
from otel_footprint.annotate.form import SpanNote
from otel_footprint.annotate.otlp import apply_note
from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.codec import EventDecodeError, EventPointer, _json_value, loads_json, quick_init
from otel_footprint.runs.passes import Batch, Batches, _PassStarts, latest_batch
from otel_footprint.service.otlp import group_spans, iter_spans, serialize_request


def _scan_latest(batches: dict[int, Batch], before: int) -> Batch | None:
    candidates = [it for it, batch in batches.items() if it < before and batch.tool_names]
    return batches[max(candidates)] if candidates else None


@given(
    st.dictionaries(st.integers(-3, 40), st.booleans(), max_size=25),
    st.integers(-5, 45),
)
def test_latest_batch_is_the_scan(asked: dict[int, bool], before: int) -> None:
    plain = {
        it: Batch(it, ("t",) if has_tools else (), (), None) for it, has_tools in asked.items()
    }
    assert latest_batch(Batches(plain), before) == _scan_latest(plain, before)
    assert latest_batch(plain, before) == _scan_latest(plain, before)


@dataclass(frozen=True)
class _View:
    span_id: str
    start_time_unix_nano: int


def _scan_pass(views: list[_View], iterations: dict[str, int], start: int) -> int | None:
    """The latest pass started before ``start``; one started with it only if none was earlier."""
    for before in (lambda t: t < start, lambda t: t <= start):
        best: tuple[int, int] | None = None
        for view in views:
            if before(view.start_time_unix_nano):
                key = (view.start_time_unix_nano, iterations[view.span_id])
                if best is None or key > best:
                    best = key
        if best is not None:
            return best[1]
    return None


@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 20)), max_size=30),
    st.lists(st.integers(-2, 32), min_size=1, max_size=10),
)
def test_pass_of_a_tool_span_is_the_scan(passes: list[tuple[int, int]], tools: list[int]) -> None:
    views = [_View(f"s{n}", start) for n, (start, _) in enumerate(passes)]
    iterations = {f"s{n}": iteration for n, (_, iteration) in enumerate(passes)}
    index = _PassStarts(views, iterations)  # type: ignore[arg-type]
    for start in tools:
        assert index.latest_before(start) == _scan_pass(views, iterations, start)


# ── the hop's request bytes, written around each span instead of copying it ─────────────────


def _request_cases() -> list[ExportTraceServiceRequest]:
    plain = ExportTraceServiceRequest()
    # An empty resource and scope, schema URLs, two scopes under one resource, a long span.
    rs = plain.resource_spans.add()
    rs.scope_spans.add().spans.add(name="a")
    rs2 = plain.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1.26.0")
    rs2.resource.attributes.add(key="service.name").value.string_value = "agent"
    ss2 = rs2.scope_spans.add(schema_url="s")
    ss2.scope.name = "scope"
    ss2.spans.add(name="b")
    ss2.spans.add(name="c", trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    rs2.scope_spans.add().spans.add(name="d" * 300)
    # The same resource and scope again in a second block: regrouped with the first.
    again = plain.resource_spans.add()
    again.scope_spans.add().spans.add(name="e")
    # A scope and a resource past 16 KiB: three-byte lengths at every level.
    big = ExportTraceServiceRequest()
    for n in range(100):
        big.resource_spans.add().scope_spans.add().spans.add(name=f"{n:03d}" + "x" * 200)
    cases = [plain, big]
    for recording in _recordings()[:2]:
        cases.extend(recording_to_requests(recording.read_text(encoding="utf-8").splitlines()))
    return cases


def test_serialized_request_is_the_built_one() -> None:
    for request in _request_cases():
        groups = group_spans(list(iter_spans(request)))
        assert serialize_request(groups) == build_request(groups).SerializeToString()


# ── apply_note: a restated key with the same value is left where it is ───────────────────────


def _span(iteration: object) -> Span:
    span = Span(name="chat m", span_id=b"\x01" * 8)
    span.attributes.add(key="gen_ai.operation.name").value.string_value = "chat"
    value = span.attributes.add(key=semconv.PASS_ITERATION).value
    if isinstance(iteration, str):
        value.string_value = iteration
    else:
        value.int_value = int(iteration)  # type: ignore[call-overload]
    return span


@pytest.mark.parametrize("existing", [3, 4, "3"])
def test_a_restated_key_is_kept_or_replaced_where_it_stands(existing: object) -> None:
    span = _span(existing)
    note = SpanNote(((semconv.PASS_ITERATION, 3), (semconv.RUN_COMPLETE, True)), (), ())
    apply_note(span, note)
    keys = [kv.key for kv in span.attributes]
    assert keys == ["gen_ai.operation.name", semconv.PASS_ITERATION, semconv.RUN_COMPLETE]
    assert span.attributes[1].value.WhichOneof("value") == "int_value"
    assert span.attributes[1].value.int_value == 3


# ── quick_init keeps a frozen record frozen ───────────────────────────────────────────────────


def test_quick_init_records_stay_frozen_records() -> None:
    pointer = EventPointer("t" * 32, "s" * 16, "footprint.context.evaluated", 2)
    assert pointer.via == "span-event"
    assert pointer == EventPointer("t" * 32, "s" * 16, "footprint.context.evaluated", 2)
    assert hash(pointer) == hash(dataclasses.replace(pointer))
    assert dataclasses.replace(pointer, event_index=5).event_index == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        pointer.event_index = 3  # type: ignore[misc]


def test_quick_init_refuses_what_it_cannot_build() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        x: int

    for cls in (WithFactory, NotFrozen):
        with pytest.raises(TypeError):
            quick_init(cls)


def _recordings() -> list[Path]:
    return sorted(RECORDINGS.glob("*.ndjson")) if RECORDINGS.is_dir() else []


# ── JSON attribute values through the C scanner: the value or the error of json.loads ────────


_json_text = st.one_of(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    ).map(json.dumps),
    st.text(alphabet='{}[]":,0123456789 aeNn-.\\', max_size=16),
).map(lambda text: text if text[:1] in ("{", "[") else "[" + text)


@given(_json_text, st.sampled_from(["", " ", "x", "\n"]))
def test_json_attribute_values_decode_as_json_loads(text: str, tail: str) -> None:
    value = text + tail
    try:
        expected: object = json.loads(value)
    except json.JSONDecodeError as error:
        with pytest.raises(EventDecodeError, match=re.escape(f"({error.msg} at {error.pos})")):
            _json_value("context.evaluated", "cursor_move", value)
        return
    got = _json_value("context.evaluated", "cursor_move", value)
    assert json.dumps(got) == json.dumps(expected)  # NaN-safe equality


@given(st.sampled_from(["", " ", "x", '"', "1"]), _json_text, st.sampled_from(["", " ", "x"]))
def test_loads_json_is_json_loads(head: str, text: str, tail: str) -> None:
    value = head + text + tail
    try:
        expected: object = json.loads(value)
    except json.JSONDecodeError as error:
        with pytest.raises(json.JSONDecodeError) as raised:
            loads_json(value)
        assert (raised.value.msg, raised.value.pos) == (error.msg, error.pos)
        return
    assert json.dumps(loads_json(value)) == json.dumps(expected)  # NaN-safe equality


# ── account templates filled from their split text: the regex fill they replace ──────────────


def _regex_fill(template_id: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise FillError(match.group(1))
        return values[match.group(1)]

    return re.sub(r"\{([A-Za-z][A-Za-z0-9]*)\}", one, TEMPLATES[template_id].text)


@given(
    st.sampled_from(sorted(TEMPLATES)),
    st.dictionaries(
        st.sampled_from(["tool", "skill", "question", "n", "id", "what", "x"]),
        st.text(alphabet="ab {}x", max_size=6),
    ),
    st.booleans(),
)
def test_fill_is_the_regex_fill(
    template_id: str, given_values: dict[str, str], all_names: bool
) -> None:
    values = dict(given_values)
    if all_names:
        values.update({name: f"<{name}>" for name in placeholders(template_id)})
    try:
        expected = _regex_fill(template_id, values)
    except FillError:
        with pytest.raises(FillError):
            fill(template_id, values)
        return
    assert fill(template_id, values) == expected
