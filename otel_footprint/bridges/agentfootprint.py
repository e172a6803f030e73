"""agentfootprint NDJSON recordings -> OTLP traces in our input schema, one export request per leg;
deterministic (ids hash run ids and line positions, times come from ``meta.wallClockMs``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from otel_footprint import __version__, semconv
from otel_footprint.annotate.otlp import to_any_value
from otel_footprint.bridges.plan_inference import DerivedPlan, derive_plan
from otel_footprint.bridges.recording import (
    Leg,
    RecordingError,
    UpstreamEvent,
    composition_iterations,
    iteration_of,
    parse_recording,
    split_legs,
)
from otel_footprint.codec import AttributeValue, encode_payload

__all__ = [
    "ImportOptions",
    "RecordingError",
    "recording_to_requests",
]

SCOPE_NAME = "otel_footprint.bridges.agentfootprint"
DEFAULT_SERVICE_NAME = "agentfootprint"

# Events that become span structure rather than span events.
_AS_SPANS = frozenset(
    {
        semconv.T_LLM_START,
        semconv.T_LLM_END,
        semconv.T_TOOL_START,
        semconv.T_TOOL_END,
        semconv.T_ITERATION_START,
        semconv.T_ITERATION_END,
    }
)
_DROPPED = _AS_SPANS | {semconv.T_STREAM_TOKEN}
# Events of the run as a whole (the run span), whatever iteration they fall in.
_RUN_LEVEL = frozenset(
    {
        semconv.T_RUN_CONFIGURED,
        semconv.T_GRAPH_DECLARED,
        semconv.T_TURN_START,
        semconv.T_TURN_END,
        semconv.T_TURN_ROUTED,
        semconv.T_PAUSE_REQUEST,
        semconv.T_PAUSE_RESUME,
        semconv.T_INTEGRITY_DISPOSITION,
    }
)
# Events about the tool call in flight when they occur (the read_skill gate, permission checks).
_DURING_CALL = frozenset(
    {
        semconv.T_SKILL_REJECTED,
        semconv.T_SKILL_PICKED,
        semconv.T_PERMISSION_CHECK,
        semconv.T_PERMISSION_HALT,
        semconv.T_MIDDLEWARE_DECISION,
        semconv.T_CHECKIN_REQUEST,
        semconv.T_CHECKIN_DECISION,
    }
)
_STATUS_MESSAGE_LIMIT = 256


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """Knobs of the import; the defaults read everything from the recording."""

    renewal_grace: int | None = None
    """The plan's renewal grace; None infers it (a ``map.parked`` ``idleCalls``) or uses 3."""
    non_parkable: bool | None = None
    """The skill map's ``nonParkable``; None infers it in verify mode (see plan_inference)."""
    service_name: str = DEFAULT_SERVICE_NAME
    resource_attributes: tuple[tuple[str, str], ...] = ()
    """Extra resource attributes (e.g. ``openinference.project.name``); they may not override
    ``service.name``, which has its own option."""
    id_salt: str = ""
    """Mixed into every trace and span id: the same recording imported twice with different salts
    gives distinct traces (a backend keeps the first copy of a span id). Empty keeps the ids of
    every earlier import of the recording."""

    def __post_init__(self) -> None:
        grace = self.renewal_grace
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int) or grace < 1
        ):
            raise ValueError(f"renewal_grace must be an integer >= 1, got {grace!r}")


# ── ids and values ───────────────────────────────────────────────────────────────────────────


def _digest(size: int, *parts: str) -> bytes:
    raw = hashlib.sha256("\x1f".join(("otel-footprint", *parts)).encode()).digest()[:size]
    # An all-zero id is invalid in OTLP; the chance is nil, the fix is free.
    return raw if any(raw) else raw[:-1] + b"\x01"


def _key_values(attributes: Mapping[str, AttributeValue]) -> list[KeyValue]:
    return [KeyValue(key=key, value=to_any_value(value)) for key, value in attributes.items()]


def _text(value: Any) -> str:
    """A tool result or argument as text: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _offered_tools(tools: Any) -> str | None:
    """``stream.llm_start`` ``tools`` (what the model was offered on that call, as the loop sent
    it) in the GenAI conventions' ``gen_ai.tool.definitions`` shape. The upstream lists names and
    descriptions only, so no ``parameters`` are written: a schema that was not recorded stays
    unknown (the argument check then cannot tell an enum member from an invented value). None when
    the event carries no readable list (then nothing is stated, never an empty list)."""
    if not isinstance(tools, list):
        return None
    listed: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            return None  # a list we cannot read whole is not a list of what was offered
        entry: dict[str, Any] = {"type": "function", "name": tool["name"]}
        if isinstance(tool.get("description"), str):
            entry["description"] = tool["description"]
        listed.append(entry)
    return json.dumps(listed, ensure_ascii=False, separators=(",", ":"))


# ── drafts: spans being assembled before they become protobuf ────────────────────────────────


@dataclass(slots=True)
class _Draft:
    key: tuple[Any, ...]
    name: str
    opened_at_line: int
    kind: Span.SpanKind.ValueType
    start: int
    end: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, AttributeValue]]] = field(default_factory=list)
    error: str | None = None

    def add_event(self, event: UpstreamEvent, attributes: dict[str, AttributeValue]) -> None:
        self.events.append((semconv.event_name_of(event.type), event.time_unix_nano, attributes))
        self.end = max(self.end, event.time_unix_nano)


@dataclass(slots=True)
class _ToolCall:
    index: int
    start: UpstreamEvent
    leg: int
    iteration: int | None
    end: UpstreamEvent | None = None


def _event_attributes(event: UpstreamEvent, composition: str | None) -> dict[str, AttributeValue]:
    attributes = encode_payload(event.payload, composition_id=composition)
    if event.type == semconv.T_CONTEXT_INJECTED:
        # What riding costs: the characters this row put into the slot.
        content = event.payload.get("rawContent")
        if not isinstance(content, str):
            content = event.payload.get("contentSummary")
        if isinstance(content, str):
            attributes[semconv.F_CHARS] = len(content)
    return attributes


# ── the import ───────────────────────────────────────────────────────────────────────────────


class _Importer:
    """One recording's conversion; holds the scan state so the public function stays pure."""

    def __init__(self, events: Sequence[UpstreamEvent], options: ImportOptions) -> None:
        self.events = events
        self.options = options
        self.legs = split_legs(events)
        self.leg_of: dict[int, Leg] = {e.line: leg for leg in self.legs for e in leg.events}
        self._salt = (options.id_salt,) if options.id_salt else ()
        self.trace_ids = {
            leg.index: _digest(16, "trace", leg.upstream_run_id, str(leg.index), *self._salt)
            for leg in self.legs
        }
        self.stage_iterations = composition_iterations(events)
        # Iterations that have a model call (a pass span), per leg.
        self.pass_iterations: dict[int, set[int]] = {
            leg.index: {
                number
                for e in leg.events
                if e.type in (semconv.T_ITERATION_START, semconv.T_LLM_START)
                and (number := iteration_of(e)) is not None
            }
            for leg in self.legs
        }
        self.plan: DerivedPlan | None = derive_plan(
            events, self.legs, options.renewal_grace, options.non_parkable
        )
        self.drafts: dict[tuple[Any, ...], _Draft] = {}
        self.calls: list[_ToolCall] = []
        self.placements: list[tuple[UpstreamEvent, tuple[Any, ...], str | None]] = []

    # -- span drafts ----------------------------------------------------------------------

    def _span_id(self, leg: Leg, line: int, role: str) -> bytes:
        return _digest(8, "span", leg.upstream_run_id, role, str(line), *self._salt)

    def _run_draft(self, leg: Leg) -> _Draft:
        first = leg.events[0]
        last = leg.events[-1]
        configured = next((e for e in leg.events if e.type == semconv.T_RUN_CONFIGURED), None)
        agent = (configured.str_field("agentId") if configured else None) or "agent"
        attributes: dict[str, AttributeValue] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: agent,
            semconv.GEN_AI_AGENT_ID: agent,
            semconv.RUN_ID: leg.run_id,
        }
        llm = configured.payload.get("llm") if configured else None
        if isinstance(llm, Mapping):
            if isinstance(llm.get("provider"), str):
                attributes[semconv.GEN_AI_PROVIDER_NAME] = llm["provider"]
            if isinstance(llm.get("model"), str):
                attributes[semconv.GEN_AI_REQUEST_MODEL] = llm["model"]
        session = next(
            (e.meta["sessionId"] for e in leg.events if isinstance(e.meta.get("sessionId"), str)),
            None,
        )
        if session:
            attributes[semconv.GEN_AI_CONVERSATION_ID] = session
        return _Draft(
            key=("run", leg.index),
            name=f"{semconv.OP_INVOKE_AGENT} {agent}",
            opened_at_line=first.line,
            kind=Span.SpanKind.SPAN_KIND_INTERNAL,
            start=first.time_unix_nano,
            end=last.time_unix_nano,
            attributes=attributes,
        )

    def _pass_draft(self, leg: Leg, iteration: int, opener: UpstreamEvent) -> _Draft:
        return _Draft(
            key=("pass", leg.index, iteration),
            name=semconv.OP_CHAT,
            opened_at_line=opener.line,
            kind=Span.SpanKind.SPAN_KIND_CLIENT,
            start=opener.time_unix_nano,
            end=opener.time_unix_nano,
            attributes={
                semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
                semconv.PASS_ITERATION: iteration,
            },
        )

    def _model_call(self, draft: _Draft, event: UpstreamEvent) -> None:
        """Fold ``stream.llm_start`` / ``llm_end`` into the pass span's attributes and extent."""
        if event.type == semconv.T_LLM_START:
            model = event.str_field("model")
            provider = event.str_field("provider")
            if model:
                draft.name = f"{semconv.OP_CHAT} {model}"
                draft.attributes[semconv.GEN_AI_REQUEST_MODEL] = model
            if provider:
                draft.attributes[semconv.GEN_AI_PROVIDER_NAME] = provider
            offered = _offered_tools(event.payload.get("tools"))
            if offered is not None:
                draft.attributes[semconv.GEN_AI_TOOL_DEFINITIONS] = offered
        elif event.type == semconv.T_LLM_END:
            usage = event.payload.get("usage")
            if isinstance(usage, Mapping):
                for field_name, key in (
                    ("input", semconv.GEN_AI_USAGE_INPUT_TOKENS),
                    ("output", semconv.GEN_AI_USAGE_OUTPUT_TOKENS),
                ):
                    value = usage.get(field_name)
                    if isinstance(value, int) and not isinstance(value, bool):
                        draft.attributes[key] = value
        draft.end = max(draft.end, event.time_unix_nano)

    # -- the scan -------------------------------------------------------------------------

    def scan(self) -> None:
        """Walk the recording once: open spans, join tool calls, and decide where events go."""
        open_calls: dict[str, _ToolCall] = {}
        last_call_by_id: dict[str, _ToolCall] = {}
        in_flight: _ToolCall | None = None
        current_iteration: dict[int, int] = {}
        for leg in self.legs:
            self.drafts[("run", leg.index)] = self._run_draft(leg)
        for event in self.events:
            leg = self.leg_of[event.line]
            kind = event.type
            named = iteration_of(event)
            if kind in (semconv.T_ITERATION_START, semconv.T_LLM_START, semconv.T_LLM_END):
                if named is not None:
                    current_iteration[leg.index] = named
                    key = ("pass", leg.index, named)
                    draft = self.drafts.get(key)
                    if draft is None:
                        draft = self.drafts[key] = self._pass_draft(leg, named, event)
                    self._model_call(draft, event)
                continue
            if kind == semconv.T_TOOL_START:
                call = _ToolCall(
                    index=len(self.calls),
                    start=event,
                    leg=leg.index,
                    iteration=current_iteration.get(leg.index),
                )
                self.calls.append(call)
                call_id = event.str_field("toolCallId")
                if call_id is not None:
                    open_calls[call_id] = call
                    last_call_by_id[call_id] = call
                in_flight = call
                continue
            if kind == semconv.T_TOOL_END:
                call_id = event.str_field("toolCallId")
                joined = open_calls.pop(call_id, None) if call_id is not None else in_flight
                if joined is not None:
                    joined.end = event
                    # A paused call's span lives in the leg where its result lands.
                    joined.leg = leg.index
                in_flight = None
                continue
            if kind not in _DROPPED:
                self.placements.append(
                    self._place(
                        event, leg, in_flight, last_call_by_id, current_iteration.get(leg.index)
                    )
                )
            if named is not None:
                current_iteration[leg.index] = named

    def _place(
        self,
        event: UpstreamEvent,
        leg: Leg,
        in_flight: _ToolCall | None,
        calls_by_id: Mapping[str, _ToolCall],
        latest_iteration: int | None,
    ) -> tuple[UpstreamEvent, tuple[Any, ...], str | None]:
        kind = event.type
        composition: str | None = None
        if kind in (semconv.T_CONTEXT_INJECTED, semconv.T_SLOT_COMPOSED):
            composition = event.stage_id
        if kind in _RUN_LEVEL:
            return event, ("run", leg.index), composition
        call_id = event.str_field("toolCallId")
        if call_id is not None and call_id in calls_by_id:
            return event, ("tool", calls_by_id[call_id].index), composition
        if kind in _DURING_CALL and in_flight is not None:
            return event, ("tool", in_flight.index), composition
        iteration = iteration_of(event)
        if iteration is None and kind == semconv.T_CONTEXT_INJECTED and composition is not None:
            iteration = self.stage_iterations.get((event.run_id, composition))
        if iteration is None:
            # No iteration of its own: the latest one named before it in its leg.
            iteration = latest_iteration
        if iteration is not None and iteration in self.pass_iterations[leg.index]:
            return event, ("pass", leg.index, iteration), composition
        return event, ("run", leg.index), composition

    # -- assembly -------------------------------------------------------------------------

    def _tool_draft(self, call: _ToolCall) -> _Draft:
        leg = self.legs[call.leg]
        run = self.drafts[("run", leg.index)]
        name = call.start.str_field("toolName") or "unknown"
        attributes: dict[str, AttributeValue] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: name,
        }
        call_id = call.start.str_field("toolCallId")
        if call_id is not None:
            attributes[semconv.GEN_AI_TOOL_CALL_ID] = call_id
        if "args" in call.start.payload:
            attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = _text(call.start.payload["args"])
        if call.iteration is not None:
            attributes[semconv.PASS_ITERATION] = call.iteration
        error: str | None = None
        end = run.end
        if call.end is not None:
            end = call.end.time_unix_nano
            result = call.end.payload.get("result")
            if result is not None:
                attributes[semconv.GEN_AI_TOOL_CALL_RESULT] = _text(result)
            if call.end.payload.get("error") is True:
                error = _text(result)[:_STATUS_MESSAGE_LIMIT] if result is not None else "error"
        # A call started in an earlier leg (paused for a person) starts with the leg it lands in.
        start = max(call.start.time_unix_nano, run.start)
        return _Draft(
            key=("tool", call.index),
            name=f"{semconv.OP_EXECUTE_TOOL} {name}",
            opened_at_line=call.start.line,
            kind=Span.SpanKind.SPAN_KIND_INTERNAL,
            start=start,
            end=max(start, end),
            attributes=attributes,
            error=error,
        )

    def assemble(self) -> list[ExportTraceServiceRequest]:
        for call in self.calls:
            self.drafts[("tool", call.index)] = self._tool_draft(call)
        mounted_done: set[int] = set()
        for event, key, composition in self.placements:
            draft = self.drafts[key]
            draft.add_event(event, _event_attributes(event, composition))
            if (
                key[0] == "run"
                and event.type == semconv.T_GRAPH_DECLARED
                and self.plan is not None
                and key[1] not in mounted_done
            ):
                mounted_done.add(key[1])
                draft.events.append(
                    (
                        semconv.EV_MAPS_MOUNTED,
                        event.time_unix_nano,
                        encode_payload(self.plan.payload()),
                    )
                )
        return [self._request(leg) for leg in self.legs]

    def _request(self, leg: Leg) -> ExportTraceServiceRequest:
        run = self.drafts[("run", leg.index)]
        children = [
            draft
            for key, draft in self.drafts.items()
            if (key[0] == "pass" and key[1] == leg.index)
            or (key[0] == "tool" and self.calls[key[1]].leg == leg.index)
        ]
        children.sort(key=lambda d: (d.start, d.opened_at_line))
        for child in children:
            run.end = max(run.end, child.end)
            run.start = min(run.start, child.start)
        trace_id = self.trace_ids[leg.index]
        run_span_id = self._span_id(leg, run.opened_at_line, "run")
        spans = [self._span(run, trace_id, run_span_id, b"")]
        for child in children:
            span_id = self._span_id(leg, child.opened_at_line, "/".join(map(str, child.key)))
            spans.append(self._span(child, trace_id, span_id, run_span_id))
        request = ExportTraceServiceRequest()
        resource_spans: ResourceSpans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            _key_values(
                {
                    **dict(self.options.resource_attributes),
                    "service.name": self.options.service_name,
                }
            )
        )
        scope_spans: ScopeSpans = resource_spans.scope_spans.add()
        scope_spans.scope.CopyFrom(InstrumentationScope(name=SCOPE_NAME, version=__version__))
        scope_spans.spans.extend(spans)
        return request

    @staticmethod
    def _span(draft: _Draft, trace_id: bytes, span_id: bytes, parent: bytes) -> Span:
        span = Span(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            name=draft.name,
            kind=draft.kind,
            start_time_unix_nano=draft.start,
            end_time_unix_nano=max(draft.end, draft.start),
        )
        span.attributes.extend(_key_values(draft.attributes))
        for name, time, attributes in draft.events:
            added = span.events.add()
            added.name = name
            added.time_unix_nano = time
            added.attributes.extend(_key_values(attributes))
        if draft.error is not None:
            span.status.CopyFrom(
                Status(code=Status.StatusCode.STATUS_CODE_ERROR, message=draft.error)
            )
        return span


def recording_to_requests(
    lines: Iterable[str], options: ImportOptions | None = None
) -> list[ExportTraceServiceRequest]:
    """An agentfootprint NDJSON recording as OTLP export requests, one per run leg (one trace each).

    Raises :class:`RecordingError` (with the 1-based line) on a line that is not a JSON envelope;
    unknown event types are carried as ``footprint.<type>`` events.
    """
    events = parse_recording(lines)
    if not events:
        return []
    importer = _Importer(events, options or ImportOptions())
    importer.scan()
    return importer.assemble()
