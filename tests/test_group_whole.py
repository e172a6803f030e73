"""Grouping told that every chain reaches one span (``group_runs_steps(..., whole=)``, what the hop's
release knows of a unit): the same runs as grouping that walks every chain, on any span tree —
nested run spans of the same or another run id, agent spans, events with no run above them,
parent cycles and chains broken by a missing parent."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from otel_footprint.runs.group import chains_reach, group_runs_steps
from otel_footprint.runs.slices import finish
from otel_footprint.runs.spans import OtlpSpanView

TRACE = b"\x07" * 16
MISSING = b"\xee" * 8
"""A parent that is not among the spans (a broken chain)."""

_KINDS = {
    "run-a": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT, semconv.RUN_ID: "a"},
    "run-b": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT, semconv.RUN_ID: "b"},
    "agent": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT},
    "chat": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT},
    "pass": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT, semconv.PASS_ITERATION: 1},
    "tool": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL},
    "other": {},
}
_EVENT = semconv.PREFIX + "turn.started"


def _id(index: int) -> bytes:
    return (index + 1).to_bytes(8, "big")


def _span(index: int, kind: str, parent: bytes, events: bool) -> Span:
    span = Span(
        trace_id=TRACE,
        span_id=_id(index),
        parent_span_id=parent,
        name=f"{kind} {index}",
        start_time_unix_nano=1_000 + index,
        end_time_unix_nano=2_000,
    )
    for key, value in _KINDS[kind].items():
        any_value = (
            AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        )
        span.attributes.append(KeyValue(key=key, value=any_value))
    if events:
        span.events.add(name=_EVENT, time_unix_nano=1_500)
    return span


@st.composite
def _trees(draw: st.DrawFn) -> list[Span]:
    count = draw(st.integers(1, 9))
    spans: list[Span] = []
    for index in range(count):
        kind = draw(st.sampled_from(sorted(_KINDS)))
        # Mostly a tree under the first span (whole chains), else a root, a parent that never
        # arrived, or any span (a cycle is possible).
        link = draw(st.sampled_from(["tree", "tree", "tree", "root", "missing", "any"]))
        if link == "tree" and index:
            parent = _id(draw(st.integers(0, index - 1)))
        elif link == "any":
            parent = _id(draw(st.integers(0, count - 1)))
        else:
            parent = MISSING if link == "missing" else b""
        spans.append(_span(index, kind, parent, draw(st.booleans())))
    return spans


@settings(max_examples=400, deadline=None)
@given(spans=_trees(), observed=st.booleans())
# The run span under a span of its own run (a parent cycle): no run once settled.
@example(spans=[_span(0, "run-a", _id(1), False), _span(1, "tool", _id(0), False)], observed=False)
def test_whole_gives_the_runs_that_walking_every_chain_gives(
    spans: list[Span], observed: bool
) -> None:
    parents = {s.span_id: s.parent_span_id for s in spans}
    for candidate in spans:
        if not chains_reach(candidate.span_id, parents):
            continue
        walked = finish(group_runs_steps([OtlpSpanView(s) for s in spans], observed=observed))
        told = finish(
            group_runs_steps(
                [OtlpSpanView(s) for s in spans], observed=observed, whole=candidate.span_id.hex()
            )
        )
        assert _shape(told) == _shape(walked)


def _shape(runs: list) -> list[tuple[object, ...]]:  # type: ignore[type-arg]
    def ids(views: tuple[OtlpSpanView, ...]) -> tuple[str, ...]:
        return tuple(v.span_id for v in views)

    return [
        (
            run.run_span_id,
            ids(run.passes),
            ids(run.tools),
            ids(run.others),
            ids(run.unmarked_calls),
            run.reason,
            run.observed,
            dict(run.log_events),
        )
        for run in runs
    ]


def test_chains_reach_reads_broken_chains_and_cycles_as_not_reaching() -> None:
    one, two, three = _id(0), _id(1), _id(2)
    assert chains_reach(one, {one: b"", two: one, three: two})
    assert not chains_reach(one, {one: b"", two: one, three: MISSING})  # never arrived
    assert not chains_reach(one, {one: b"", two: three, three: two})  # a cycle beside the run
    assert chains_reach(one, {one: two, two: one})  # the run span's own parent leads back to it
