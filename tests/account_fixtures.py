"""Upstream NDJSON recordings as account input, with synthetic OpenTelemetry pointers.

For tests and experiments before (and beside) the importer: each envelope's payload goes through
the real attribute codec (``encode_payload`` -> ``decode_event``), so the account reads exactly
what it would read from spans. Ids are derived from the recording, so pointers are stable.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_footprint import semconv
from otel_footprint.account.input import (
    AccountInput,
    CarriedVerdict,
    Declarations,
    ToolCall,
    leg_input,
)
from otel_footprint.bridges.recording import UpstreamEvent, parse_recording, split_legs
from otel_footprint.codec import EventPointer, FootprintEvent, decode_event, encode_payload

_COMPOSED_TYPES = frozenset({semconv.T_CONTEXT_INJECTED, semconv.T_SLOT_COMPOSED})
_TOOL_SPAN_TYPES = frozenset(
    {
        semconv.T_TOOLS_ABSENT,
        semconv.T_TOOLS_COVERAGE,
        semconv.T_PERMISSION_CHECK,
        semconv.T_SKILL_REJECTED,
        semconv.T_SKILL_PICKED,
    }
)


def synthetic_id(*parts: object, hex_chars: int = 32) -> str:
    """A stable lowercase-hex id from ``parts`` (32 for a trace, 16 for a span)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()
    return digest[:hex_chars]


@dataclass(frozen=True, slots=True)
class RecordedLeg:
    """One leg (one upstream run id) of a recording, as the engine would see its trace."""

    run_id: str
    trace_id: str
    events: tuple[FootprintEvent, ...]
    tool_calls: tuple[ToolCall, ...]
    answering_iteration: int | None

    def account_input(
        self,
        *,
        carried: CarriedVerdict | None = None,
        declarations: Declarations | None = None,
        events: Iterable[FootprintEvent] | None = None,
    ) -> AccountInput:
        """The leg as :class:`AccountInput` (``events`` replaces the leg's events, for edits)."""
        return leg_input(
            self.events if events is None else events,
            self.tool_calls,
            answering_iteration=self.answering_iteration,
            carried=carried,
            declarations=declarations,
        )


def recording_legs(path: Path) -> tuple[RecordedLeg, ...]:
    """The legs of a recording file, in order (read and split as the importer does)."""
    with path.open(encoding="utf-8") as handle:
        events = parse_recording(handle)
    return legs_of(events, label=path.name)


def legs_of(events: Sequence[UpstreamEvent], label: str = "recording") -> tuple[RecordedLeg, ...]:
    """Split events into legs and give each event the span it would sit on: pass events on
    the pass span of their iteration, coverage/permission events on the open tool span, the
    rest on the run span."""
    legs = split_legs(events)
    leg_of = {event.line: leg.upstream_run_id for leg in legs for event in leg.events}
    starts: dict[str, tuple[str | None, str | None, int | None]] = {}
    end_leg: dict[str, str] = {}
    iteration: int | None = None
    for event in events:
        payload = event.payload
        if event.type == semconv.T_LLM_START and isinstance(payload.get("iteration"), int):
            iteration = payload["iteration"]
        elif event.type == semconv.T_TOOL_START:
            args = payload.get("args")
            starts[str(payload.get("toolCallId"))] = (
                payload.get("toolName"),
                json.dumps(args, separators=(",", ":")) if args is not None else None,
                iteration,
            )
        elif event.type == semconv.T_TOOL_END:
            end_leg[str(payload.get("toolCallId"))] = leg_of[event.line]
    return tuple(_leg(leg.upstream_run_id, label, leg.events, starts, end_leg) for leg in legs)


def _leg(
    run_id: str,
    label: str,
    upstream: Sequence[UpstreamEvent],
    starts: Mapping[str, tuple[str | None, str | None, int | None]],
    end_leg: Mapping[str, str],
) -> RecordedLeg:
    trace_id = synthetic_id(label, run_id)
    run_span = synthetic_id(trace_id, "run", hex_chars=16)
    stage_iteration: dict[str, int] = {}
    for upstream_event in upstream:
        composed = upstream_event.payload.get("iteration")
        if upstream_event.type == semconv.T_SLOT_COMPOSED and isinstance(composed, int):
            stage_iteration[str(upstream_event.meta.get("runtimeStageId"))] = composed
    counters: dict[str, int] = {}
    events: list[FootprintEvent] = []
    calls: list[ToolCall] = []
    open_call: str | None = None
    last_llm: int | None = None
    answering: int | None = None
    for upstream_event in upstream:
        kind = upstream_event.type
        payload = upstream_event.payload
        meta = upstream_event.meta
        if kind == semconv.T_LLM_START and isinstance(payload.get("iteration"), int):
            last_llm = payload["iteration"]
        elif kind == semconv.T_TURN_END:
            answering = last_llm
        elif kind == semconv.T_TOOL_START:
            call_id = str(payload.get("toolCallId"))
            open_call = call_id if end_leg.get(call_id) == run_id else None
        elif kind == semconv.T_TOOL_END:
            call_id = str(payload.get("toolCallId"))
            calls.append(_tool_call(trace_id, call_id, payload, starts.get(call_id)))
            open_call = None
        name = semconv.event_name_of(kind)
        if name not in semconv.INPUT_EVENTS:
            continue  # the importer turns stream.* into spans; only footprint events ride
        span = _span_of(kind, payload, meta, trace_id, run_span, stage_iteration, open_call)
        index = counters.get(span, 0)
        counters[span] = index + 1
        composition = str(meta.get("runtimeStageId")) if kind in _COMPOSED_TYPES else None
        attributes = encode_payload(payload, composition_id=composition)
        event = decode_event(
            name,
            attributes.items(),
            EventPointer(trace_id, span, name, index),
            int(meta.get("wallClockMs", 0)) * 1_000_000,
        )
        if event is not None:
            events.append(event)
    return RecordedLeg(
        run_id,
        trace_id,
        tuple(events),
        tuple(calls),
        answering if answering is not None else last_llm,
    )


def _span_of(
    kind: str,
    payload: Mapping[str, Any],
    meta: Mapping[str, Any],
    trace_id: str,
    run_span: str,
    stage_iteration: Mapping[str, int],
    open_call: str | None,
) -> str:
    if kind == semconv.T_CONTEXT_INJECTED:
        iteration = stage_iteration.get(str(meta.get("runtimeStageId")))
    elif kind.startswith(("context.", "map.")):
        raw = payload.get("iteration")
        iteration = raw if isinstance(raw, int) else None
    else:
        iteration = None
    if iteration is not None:
        return synthetic_id(trace_id, "pass", iteration, hex_chars=16)
    if kind in _TOOL_SPAN_TYPES and open_call is not None:
        return synthetic_id(trace_id, "tool", open_call, hex_chars=16)
    return run_span


def _tool_call(
    trace_id: str,
    call_id: str,
    end: Mapping[str, Any],
    start: tuple[str | None, str | None, int | None] | None,
) -> ToolCall:
    name, arguments, iteration = start if start is not None else (None, None, None)
    read = end.get("modelResult", end.get("result"))
    result = read if isinstance(read, str) or read is None else json.dumps(read)
    status = end.get("status")
    return ToolCall(
        name=name if isinstance(name, str) else None,
        call_id=call_id,
        arguments=arguments,
        result=result,
        error=end.get("error") is True,
        status=status if isinstance(status, str) else None,
        trace_id=trace_id,
        span_id=synthetic_id(trace_id, "tool", call_id, hex_chars=16),
        iteration=iteration,
    )


class LegBuilder:
    """Builds a synthetic leg event by event, through the real attribute codec (tests only).

    Pass events go on the pass span of their iteration, tool events on their tool span, the rest
    on the run span; each event's index counts the events already on its span.
    """

    def __init__(self, label: str = "leg") -> None:
        self.trace_id = synthetic_id(label)
        self.run_span = synthetic_id(self.trace_id, "run", hex_chars=16)
        self.events: list[FootprintEvent] = []
        self.tool_calls: list[ToolCall] = []
        self._counters: dict[str, int] = {}
        self.last_iteration: int | None = None

    def pass_span(self, iteration: int) -> str:
        """The span id of one pass."""
        return synthetic_id(self.trace_id, "pass", iteration, hex_chars=16)

    def tool_span(self, call_id: str) -> str:
        """The span id of one tool call."""
        return synthetic_id(self.trace_id, "tool", call_id, hex_chars=16)

    def event(
        self,
        event_type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        span: str | None = None,
        composition_id: str | None = None,
    ) -> FootprintEvent:
        """Append one event (``event_type`` without prefix) and return it as decoded."""
        name = semconv.event_name_of(event_type)
        where = span or self.run_span
        index = self._counters.get(where, 0)
        self._counters[where] = index + 1
        attributes = encode_payload(payload or {}, composition_id=composition_id)
        event = decode_event(
            name, attributes.items(), EventPointer(self.trace_id, where, name, index)
        )
        if event is None:  # pragma: no cover - event_name_of always yields a footprint name
            raise ValueError(f"not a footprint event type: {event_type}")
        self.events.append(event)
        return event

    def system_prompt(
        self,
        iteration: int,
        skills: Sequence[str] = (),
        *,
        count: int | None = None,
        composition_id: str | None = None,
    ) -> None:
        """One pass's system-prompt composition: a base row, one row per skill, and the
        ``slot_composed`` whose breakdown says ``count`` skills (default: as many as given)."""
        self.last_iteration = max(self.last_iteration or 0, iteration)
        span = self.pass_span(iteration)
        composition = composition_id or f"sf-system-prompt/compose#{iteration}"
        self.event(
            semconv.T_CONTEXT_INJECTED,
            {"slot": "system-prompt", "source": "base", "contentHash": "b", "chars": 23},
            span=span,
            composition_id=composition,
        )
        for skill in skills:
            self.event(
                semconv.T_CONTEXT_INJECTED,
                {"slot": "system-prompt", "source": "skill", "sourceId": skill, "chars": 73},
                span=span,
                composition_id=composition,
            )
        breakdown: dict[str, Any] = {"base": {"chars": 23, "count": 1}}
        n = len(skills) if count is None else count
        if n:
            breakdown["skill"] = {"chars": 73 * n, "count": n}
        self.event(
            semconv.T_SLOT_COMPOSED,
            {"slot": "system-prompt", "iteration": iteration, "sourceBreakdown": breakdown},
            span=span,
            composition_id=composition,
        )

    def tool(
        self,
        name: str | None,
        result: str | None,
        *,
        call_id: str | None = None,
        error: bool = False,
        status: str | None = None,
        iteration: int | None = None,
        events: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> ToolCall:
        """One tool span (and the events on it)."""
        call_id = call_id or f"call-{len(self.tool_calls) + 1}"
        span = self.tool_span(call_id)
        for event_type, payload in events:
            self.event(event_type, payload, span=span)
        call = ToolCall(
            name=name,
            call_id=call_id,
            arguments="{}",
            result=result,
            error=error,
            status=status,
            trace_id=self.trace_id,
            span_id=span,
            iteration=iteration if iteration is not None else self.last_iteration,
        )
        self.tool_calls.append(call)
        return call

    def build(
        self,
        *,
        answering_iteration: int | None = None,
        carried: CarriedVerdict | None = None,
        declarations: Declarations | None = None,
    ) -> AccountInput:
        """The leg as account input (``answering_iteration`` defaults to the last pass)."""
        return leg_input(
            self.events,
            self.tool_calls,
            answering_iteration=(
                answering_iteration if answering_iteration is not None else self.last_iteration
            ),
            carried=carried,
            declarations=declarations,
        )
