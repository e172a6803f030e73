"""Reading a run's footprint events and building one kernel ``EngagementPass`` per model call.

Each Pass field comes from the events exactly as the reference's §2.2 says; anything missing or
contradictory becomes a :class:`Reason` and stops the build at that pass (never a guess, never a
crash). The upstream's re-ask quirk is kept: a pass whose previous pass dispatched no tools sees
the most recent dispatched batch again, because the upstream clears the batch, the pending pick and
the accepted picks only at the top of an iteration that dispatches tools.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from otel_footprint import semconv
from otel_footprint.codec import (
    EventDecodeError,
    EventPointer,
    EventVia,
    FootprintEvent,
    count,
    decode_attributes,
    integral,
    loads_json,
    quick_init,
)
from otel_footprint.kernel.jsoncodec import JsonShapeError, change_from_json, plan_from_json
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.kernel.plan import DEFAULT_RENEWAL_GRACE
from otel_footprint.kernel.types import (
    EngagementChange,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    ToolResult,
)
from otel_footprint.runs.group import RunSpans, pass_iteration_of
from otel_footprint.runs.model import Reason
from otel_footprint.runs.outputs import (
    OutputToolCall,
    Ref,
    asked_for_tools,
    instrumented,
    loads,
    output_tool_calls,
    skill_of,
    string,
    tool_arguments_of,
    tool_result_of,
    tool_results,
)
from otel_footprint.runs.recognize import tool_call_id_of, tool_name_of
from otel_footprint.runs.slices import STEP_SPANS, Steps, finish
from otel_footprint.runs.spans import (
    OtlpSpanView,
    RawEvent,
    SdkSpanView,
    SpanView,
    listed_events,
    raw_events,
)

UNRECORDED_TOOL_CALLS = "tool-calls-unrecorded"
"""Reason code: a pass's tool calls are recorded nowhere (the engine then makes no account)."""
# Placeholder problem of a pass with no evaluation; read_run replaces it with one shared reason.
_MISSING = Reason("missing-evaluated", "")
# Sources of context rows that are conversation, not a map's contribution.
CONVERSATION_SOURCES = frozenset({"user", "assistant", "tool-result"})
# Event types read_run keys by iteration together, and the ones that may refuse a pick.
_STEP_TYPES = frozenset({semconv.T_CONTEXT_EVALUATED, *semconv.MAP_CHANGE_KINDS})
_REFUSAL_TYPES = frozenset({semconv.T_SKILL_REJECTED, semconv.T_PERMISSION_CHECK})


@quick_init
@dataclass(frozen=True, slots=True)
class InjectedRow:
    """One ``context.injected`` row: what one piece put into one slot, attributed to a pass."""

    iteration: int | None
    slot: str | None
    source: str | None
    source_id: str | None
    chars: int
    """``footprint.chars``; when absent or unreadable (not a count), the length of
    ``contentSummary`` (a lower bound)."""
    event: FootprintEvent


@quick_init
@dataclass(frozen=True, slots=True)
class Pick:
    """A ``read_skill`` pick the gate accepted; ``hop`` None when the event did not say."""

    skill_id: str
    hop: bool | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool span as the kernel and the account read it."""

    trace_id: str
    span_id: str
    name: str
    call_id: str | None
    iteration: int | None
    """The pass whose model output asked for this call (None: could not be told)."""
    start_time_unix_nano: int
    failed: bool
    arguments: Any | None
    """Decoded JSON arguments (None when absent or unreadable)."""
    arguments_text: str | None
    """``gen_ai.tool.call.arguments`` as recorded."""
    result: str | None
    picks: tuple[Pick, ...]
    """Accepted ``read_skill`` picks made by this call, in order."""
    picks_stated: bool
    """The picks come from ``footprint.skill.picked`` events (not read from the arguments)."""
    events: tuple[FootprintEvent, ...]
    unreadable: Reason | None = None
    """Why the call's picks cannot be told (e.g. read_skill arguments that are not JSON)."""
    status: str | None = None
    """The tool's own declared status, when the agent recorded one (not in the schema yet)."""
    result_ref: Ref | None = None
    """Where ``result`` was read when not on the call's own span: a later model call's input
    message (a call read from a pass's output has no tool span)."""


@quick_init
@dataclass(frozen=True, slots=True)
class PassFacts:
    """What the events say about one pass (one model call)."""

    iteration: int
    span_id: str | None
    evaluated: FootprintEvent | None
    current_node: str | None = None
    move_by: str | None = None
    witness: str | None = None
    active_ids: tuple[str, ...] = ()
    injected: tuple[InjectedRow, ...] = ()
    card_rode: bool = False
    reported: tuple[EngagementChange, ...] = ()
    problem: Reason | None = None
    """Set when this pass cannot be built; the kernel replay stops before it."""

    @property
    def served(self) -> tuple[str, ...]:
        """What rode this pass, as the next pass's ``servedLastPass``: active ids + the park card."""
        if self.card_rode and PARK_CARD_ID not in self.active_ids:
            return (*self.active_ids, PARK_CARD_ID)
        return self.active_ids

    def chars_of(self, ids: Sequence[str]) -> int:
        """Characters this pass's rows put into the prompt on behalf of ``ids``."""
        wanted = set(ids)
        return sum(
            row.chars
            for row in self.injected
            if row.source_id in wanted and row.source not in CONVERSATION_SOURCES
        )


@dataclass(frozen=True, slots=True)
class Carry:
    """What an earlier leg of the same run hands to a resumed leg (kept in the run store)."""

    last_iteration: int
    engagement: tuple[MapEngagementRecord, ...] | None = None
    served: tuple[str, ...] = ()
    batch_iteration: int | None = None
    batch: tuple[str, ...] = ()
    """Tool names of the most recent dispatched batch, in call order."""
    batch_picks: tuple[Pick, ...] = ()
    batch_cursor: str | None = None
    """Where the cursor stood while that batch was dispatched (for the hop test)."""


@dataclass(frozen=True, slots=True)
class RunFacts:
    """A run leg read from its spans: ordered events, the plan, passes and tool calls."""

    run: RunSpans
    events: tuple[FootprintEvent, ...]
    plan: EngagementPlan | None
    enforced: bool | None
    has_map_events: bool
    resumed: bool
    paused: bool
    passes: tuple[PassFacts, ...]
    tool_calls: tuple[ToolCall, ...]
    edges: frozenset[tuple[str, str]] | None
    """Declared (from, to) edges of the skill graph; None when no graph was declared."""
    by_type: Mapping[str, Sequence[FootprintEvent]]
    """``events`` by type, each in order (indexed once, for every reader of the facts)."""
    reasons: tuple[Reason, ...] = ()
    plan_event: FootprintEvent | None = None
    undecodable_types: frozenset[str] = frozenset()
    """Types of the events left out because an attribute could not be decoded."""
    unrecorded_passes: tuple[int, ...] = ()
    """Passes whose tool calls are recorded nowhere (the ``tool-calls-unrecorded`` reason)."""


@dataclass(slots=True)
class _Reader:
    """Accumulates reasons while reading; one per run."""

    reasons: list[Reason] = field(default_factory=list)
    undecodable: dict[tuple[str, str | None], Reason] = field(default_factory=dict)
    """(span id, event type) of events whose attributes could not be decoded -> the reason."""

    def add(self, code: str, message: str, span_id: str | None = None) -> Reason:
        reason = Reason(code, message, span_id)
        self.reasons.append(reason)
        return reason

    def first(self, problem: Reason | None, code: str, message: str, span_id: str | None) -> Reason:
        """A pass's first problem stops its build: ``problem`` when it has one (and nothing more
        is said), else this new reason."""
        return problem or self.add(code, message, span_id)


def _status_failed(view: SpanView) -> bool:
    # SpanView has no status (kept minimal); read it from the two concrete views we know.
    if isinstance(view, OtlpSpanView):
        return int(view.pb.status.code) == 2  # STATUS_CODE_ERROR
    if isinstance(view, SdkSpanView):
        status = view.span.status
        return status is not None and status.status_code.name == "ERROR"
    failed = getattr(view, "failed", None)
    return bool(failed)


def _str_tuple(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _decode_steps(run: RunSpans, rd: _Reader) -> Steps[tuple[FootprintEvent, ...]]:
    """:func:`decode_run`'s events in steps: one yield per :data:`STEP_SPANS` spans."""
    decoded: list[FootprintEvent] = []
    append = decoded.append
    event_type_of = semconv.event_type_of
    for seen, view in enumerate(run.spans(), 1):
        trace_id, span_id = view.trace_id, view.span_id
        sources: tuple[tuple[EventVia, Iterable[RawEvent]], ...] = (
            ("span-event", raw_events(view, event_type_of)),
        )
        logs = run.log_events.get(span_id)
        if logs:
            sources += (("log-record", listed_events(logs, event_type_of)),)
        for via, items in sources:
            for index, name, event_type, time_unix_nano, attributes, otlp in items:
                pointer = EventPointer(trace_id, span_id, name, index, via)
                try:
                    event = decode_attributes(event_type, attributes, otlp, pointer, time_unix_nano)
                except EventDecodeError as error:
                    reason = rd.add("bad-attribute", str(error), span_id)
                    rd.undecodable.setdefault((span_id, event_type), reason)
                    continue
                append(event)
        if not seen % STEP_SPANS:
            yield None
    # Appended in span order, span events before log records, then by index: a stable sort on
    # the time alone keeps that order among events of the same time.
    decoded.sort(key=_time_of)
    return tuple(decoded)


_time_of = attrgetter("time_unix_nano")
"""The sort key of events (read in C: one per event of every run)."""


def _plan_of(
    mounted: Sequence[FootprintEvent], rd: _Reader
) -> tuple[EngagementPlan | None, bool | None, FootprintEvent | None]:
    """The plan of the run's last ``maps.mounted`` event (``mounted``: all of them, in order)."""
    if not mounted:
        return None, None, None
    event = mounted[-1]
    if len(mounted) > 1 and any(dict(m.payload) != dict(event.payload) for m in mounted[:-1]):
        rd.add(
            "conflicting-plan",
            f"{len(mounted)} {semconv.EV_MAPS_MOUNTED} events disagree; the last one is used",
            event.pointer.span_id,
        )
    payload = event.payload
    enforced_raw = payload.get("enforced")
    enforced = enforced_raw if isinstance(enforced_raw, bool) else None
    if enforced_raw is not None and enforced is None:
        rd.add(
            "bad-attribute",
            f"{semconv.EV_MAPS_MOUNTED}: {semconv.F_ENFORCED} must be a bool, got {enforced_raw!r}",
            event.pointer.span_id,
        )
    maps = payload.get("maps")
    if isinstance(maps, str):
        # decode_event leaves a JSON-looking string that is not JSON as text; say so precisely.
        rd.add(
            "bad-attribute",
            f"{semconv.EV_MAPS_MOUNTED}: attribute {semconv.F_MAPS} is not a JSON list of maps",
            event.pointer.span_id,
        )
        return None, enforced, event
    grace = payload.get("renewalGrace", DEFAULT_RENEWAL_GRACE)
    try:
        plan = plan_from_json({"maps": maps, "renewalGrace": grace}, path=semconv.EV_MAPS_MOUNTED)
    except JsonShapeError as error:
        rd.add("bad-attribute", str(error), event.pointer.span_id)
        return None, enforced, event
    return plan, enforced, event


def _edges_of(declared: Sequence[FootprintEvent]) -> frozenset[tuple[str, str]] | None:
    """The edges of the run's last ``skill.graph_declared`` event (``declared``: all of them)."""
    if not declared:
        return None
    return edges_of_graph(declared[-1].payload)


def edges_of_graph(graph: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """The (from, to) edges of a declared skill graph (``{nodes, edges}``); malformed edges are
    left out. The processor reads it off ``skill.graph_declared``, the live policy off ``run()``."""
    edges: set[tuple[str, str]] = set()
    raw = graph.get("edges")
    if isinstance(raw, list):
        for edge in raw:
            if isinstance(edge, dict):
                src, dst = edge.get("from"), edge.get("to")
                if isinstance(src, str) and isinstance(dst, str):
                    edges.add((src, dst))
    return frozenset(edges)


def _witness_text(value: Any) -> str | None:
    if isinstance(value, dict):
        return string(value.get("text"))
    return string(value)


def _reported_change(event: FootprintEvent, fallback_iteration: int) -> EngagementChange:
    """The agent's own decision on a ``map.*`` event: its payload is the kernel's change JSON
    without ``kind`` (the event type says it), so the kernel's codec reads it; raises
    :class:`JsonShapeError` naming the event when it is not that shape."""
    body: dict[str, object] = {"iteration": fallback_iteration, **event.payload}
    body["kind"] = semconv.MAP_CHANGE_KINDS[event.type]
    return change_from_json(body, path=semconv.event_name_of(event.type))


@dataclass(frozen=True, slots=True)
class DecodedRun:
    """A run leg's events decoded once, with the reasons decoding gave (the engine reads the
    events before the leg: whether it resumes decides the numbering :func:`read_run` uses)."""

    events: tuple[FootprintEvent, ...]
    reasons: tuple[Reason, ...] = ()
    undecodable: Mapping[tuple[str, str | None], Reason] = field(default_factory=dict)


def decode_run(run: RunSpans) -> DecodedRun:
    """Every footprint event of the leg, decoded and ordered by time, then span order, then index.
    An attribute that cannot be decoded becomes a ``bad-attribute`` reason and the event is left
    out (the span still flows on)."""
    return finish(decode_run_steps(run))


def decode_run_steps(run: RunSpans) -> Steps[DecodedRun]:
    """:func:`decode_run` in steps (one per :data:`STEP_SPANS` spans): see ``runs/slices.py``."""
    rd = _Reader()
    events = yield from _decode_steps(run, rd)
    return DecodedRun(events, tuple(rd.reasons), dict(rd.undecodable))


def read_run(
    run: RunSpans, *, first_iteration: int = 1, decoded: DecodedRun | None = None
) -> RunFacts:
    """Read a run leg's events into facts. ``first_iteration`` numbers pass spans that carry no
    iteration at all (a resumed leg continues its run's numbering); ``decoded`` is the leg's
    :func:`decode_run`, when the caller already has it."""
    return finish(read_run_steps(run, first_iteration=first_iteration, decoded=decoded))


def read_run_steps(
    run: RunSpans, *, first_iteration: int = 1, decoded: DecodedRun | None = None
) -> Steps[RunFacts]:
    """:func:`read_run` in steps (between its stages, and one per :data:`STEP_SPANS` tool spans):
    see ``runs/slices.py``."""
    rd = _Reader()
    if run.reason is not None:
        rd.reasons.append(run.reason)
    if decoded is None:
        decoded = yield from decode_run_steps(run)
    rd.reasons.extend(decoded.reasons)
    rd.undecodable.update(decoded.undecodable)
    events = decoded.events
    index = _EventIndex.of(events)
    plan, enforced, plan_event = _plan_of(index.of_type(semconv.T_MAPS_MOUNTED), rd)
    span_iteration = _pass_span_iterations(run, index, first_iteration)
    yield None
    # The order of the steps below is the order of the reasons they add: keep it.
    placed = _recorder_problems(index, rd)
    steps = _steps_by_iteration(index.steps, span_iteration, rd)
    injected = _injected_by_iteration(index, span_iteration)
    yield None
    passes = _passes_of(span_iteration, steps, injected, placed, plan is not None, rd)
    yield None
    pass_starts = _PassStarts(run.passes, span_iteration)
    spanned: list[ToolCall] = []
    for read, view in enumerate(run.tools, 1):
        spanned.append(
            _tool_call(view, index.on_span(view.span_id), pass_starts, first_iteration, rd)
        )
        if not read % STEP_SPANS:
            yield None
    tool_calls = tuple(spanned)
    yield None
    from_output, unrecorded, unrecorded_at = _output_tool_calls(run, tool_calls, span_iteration, rd)
    tool_calls = (*tool_calls, *from_output)
    yield None
    if unrecorded is not None:
        # A later pass needs the batch these passes dispatched (the kernel's tool results):
        # it cannot be built.
        first = min(unrecorded_at)
        passes = [
            replace(p, problem=unrecorded) if p.problem is None and p.iteration > first else p
            for p in passes
        ]
    tool_calls = _without_refused_picks(tool_calls, index.refusing, run.tools, span_iteration)
    return RunFacts(
        run=run,
        events=events,
        plan=plan,
        enforced=enforced,
        has_map_events=any(t in index.by_type for t in semconv.MAP_CHANGE_KINDS),
        resumed=semconv.T_PAUSE_RESUME in index.by_type,
        paused=semconv.T_PAUSE_REQUEST in index.by_type,
        passes=tuple(passes),
        tool_calls=tool_calls,
        edges=_edges_of(index.of_type(semconv.T_GRAPH_DECLARED)),
        by_type=index.by_type,
        reasons=tuple(rd.reasons),
        plan_event=plan_event,
        undecodable_types=frozenset(t for _, t in rd.undecodable if t is not None),
        unrecorded_passes=unrecorded_at,
    )


@dataclass(frozen=True, slots=True)
class _EventIndex:
    """A leg's events indexed in one pass: every rule of :func:`read_run` reads only the lists it
    needs, each in run order."""

    by_type: Mapping[str, Sequence[FootprintEvent]]
    by_span: Mapping[str, Sequence[FootprintEvent]]
    steps: Sequence[FootprintEvent]
    """Evaluations and the agent's own map changes."""
    refusing: Sequence[FootprintEvent]
    """Rejections and permission checks (refused picks)."""

    @classmethod
    def of(cls, events: Iterable[FootprintEvent]) -> _EventIndex:
        by_type: dict[str, list[FootprintEvent]] = {}
        by_span: dict[str, list[FootprintEvent]] = {}
        steps: list[FootprintEvent] = []
        refusing: list[FootprintEvent] = []
        for event in events:
            kind = event.type
            by_type.setdefault(kind, []).append(event)
            by_span.setdefault(event.pointer.span_id, []).append(event)
            if kind in _STEP_TYPES:
                steps.append(event)
            elif kind in _REFUSAL_TYPES:
                refusing.append(event)
        return cls(by_type, by_span, steps, refusing)

    def of_type(self, event_type: str) -> Sequence[FootprintEvent]:
        return self.by_type.get(event_type, ())

    def on_span(self, span_id: str) -> Sequence[FootprintEvent]:
        return self.by_span.get(span_id, ())


def _pass_span_iterations(
    run: RunSpans, index: _EventIndex, first_iteration: int
) -> dict[str, int]:
    """Each pass span's iteration: stated on the span, else by its own evaluation, else counted
    from ``first_iteration`` by the span's place among the leg's pass spans."""
    span_iteration: dict[str, int] = {}
    for ordinal, view in enumerate(run.passes):
        iteration = pass_iteration_of(view)
        if iteration is None:
            own = [e for e in index.on_span(view.span_id) if e.type == semconv.T_CONTEXT_EVALUATED]
            iteration = integral(own[0].payload.get("iteration")) if own else None
        if iteration is None:
            iteration = first_iteration + ordinal
        span_iteration[view.span_id] = iteration
    return span_iteration


def _recorder_problems(index: _EventIndex, rd: _Reader) -> dict[int, Reason]:
    """What the recorder could not place (``record.problem``): a reason each, and the first one
    of each iteration stops the replay at that pass."""
    placed: dict[int, Reason] = {}
    for event in index.of_type(semconv.T_RECORD_PROBLEM):
        code = string(event.payload.get("code")) or "record-problem"
        reason = rd.add(code, string(event.payload.get("message")) or code, event.pointer.span_id)
        at = integral(event.payload.get("iteration"))
        if at is not None:
            placed.setdefault(at, reason)
    return placed


@dataclass(frozen=True, slots=True)
class _Steps:
    """The leg's evaluations and reported map changes keyed by iteration, and the first
    conflicting-iteration reason of each pass span's iteration."""

    evaluated: Mapping[int, Sequence[FootprintEvent]]
    reported: Mapping[int, Sequence[FootprintEvent]]
    conflicts: Mapping[int, Reason]


def _steps_by_iteration(
    steps: Sequence[FootprintEvent], span_iteration: Mapping[str, int], rd: _Reader
) -> _Steps:
    """Each step at its payload ``iteration``, else its pass span's; a step whose iteration
    contradicts its pass span's is a conflict at the span's iteration."""
    evaluated: dict[int, list[FootprintEvent]] = {}
    reported: dict[int, list[FootprintEvent]] = {}
    conflicts: dict[int, Reason] = {}
    for event in steps:
        it = integral(event.payload.get("iteration"))
        if it is None:
            it = span_iteration.get(event.pointer.span_id)
        if it is None:
            rd.add(
                "bad-attribute",
                f"{semconv.event_name_of(event.type)} has no integer {semconv.F_ITERATION} and is "
                "not on a model-call span",
                event.pointer.span_id,
            )
            continue
        on_span = span_iteration.get(event.pointer.span_id)
        if on_span is not None and on_span != it:
            conflicts.setdefault(
                on_span,
                rd.add(
                    "conflicting-iteration",
                    f"model-call span {event.pointer.span_id} is iteration {on_span} but its "
                    f"{semconv.event_name_of(event.type)} says iteration {it}; passes from here on "
                    "are not decided",
                    event.pointer.span_id,
                ),
            )
            continue
        target = evaluated if event.type == semconv.T_CONTEXT_EVALUATED else reported
        target.setdefault(it, []).append(event)
    return _Steps(evaluated, reported, conflicts)


def _injected_by_iteration(
    index: _EventIndex, span_iteration: Mapping[str, int]
) -> dict[int, list[InjectedRow]]:
    """The ``context.injected`` rows by the pass they rode: the pass span they are on, else the
    iteration of the ``slot.composed`` event of their composition; a row of neither rides none."""
    composed_iteration: dict[str, int] = {}
    for event in index.of_type(semconv.T_SLOT_COMPOSED):
        if event.composition_id is not None:
            it = integral(event.payload.get("iteration"))
            if it is not None:
                composed_iteration[event.composition_id] = it
    injected: dict[int, list[InjectedRow]] = {}
    for event in index.of_type(semconv.T_CONTEXT_INJECTED):
        it = span_iteration.get(event.pointer.span_id)
        if it is None and event.composition_id is not None:
            it = composed_iteration.get(event.composition_id)
        if it is None:
            continue  # a row of no known pass rides no pass
        injected.setdefault(it, []).append(_injected_row(event, it))
    return injected


def _injected_row(event: FootprintEvent, iteration: int) -> InjectedRow:
    payload = event.payload
    chars = count(payload.get("chars"))
    if chars is None:
        summary = payload.get("contentSummary")
        chars = len(summary) if isinstance(summary, str) else 0
    slot, source, source_id = payload.get("slot"), payload.get("source"), payload.get("sourceId")
    # Positional, strings checked inline: one row per context.injected event.
    return InjectedRow(
        iteration,
        slot if isinstance(slot, str) else None,
        source if isinstance(source, str) else None,
        source_id if isinstance(source_id, str) else None,
        chars,
        event,
    )


def _passes_of(
    span_iteration: Mapping[str, int],
    steps: _Steps,
    injected: Mapping[int, Sequence[InjectedRow]],
    placed: Mapping[int, Reason],
    needs_evaluation: bool,
    rd: _Reader,
) -> list[PassFacts]:
    """One PassFacts per iteration seen on a pass span, in an evaluation or in a recorder problem;
    one shared reason for the passes with no evaluation, and one for each iteration whose reported
    changes belong to no pass."""
    spans_by_iteration: dict[int, list[str]] = {}
    for span_id, iteration in span_iteration.items():
        spans_by_iteration.setdefault(iteration, []).append(span_id)
    passes = [
        _pass_facts(
            iteration,
            spans_by_iteration.get(iteration, []),
            steps.evaluated.get(iteration, []),
            steps.reported.get(iteration, []),
            injected.get(iteration, []),
            needs_evaluation,
            rd,
            placed.get(iteration) or steps.conflicts.get(iteration),
        )
        for iteration in sorted(set(spans_by_iteration) | set(steps.evaluated) | set(placed))
    ]
    missing = [p for p in passes if p.problem is _MISSING]
    if missing:
        listed = ", ".join(str(p.iteration) for p in missing)
        reason = rd.add(
            "missing-evaluated",
            f"no {semconv.EV_CONTEXT_EVALUATED} event for iteration(s) {listed}: the cursor move "
            "and what rode cannot be told, so passes from there on are not decided",
            missing[0].span_id,
        )
        passes = [replace(p, problem=reason) if p.problem is _MISSING else p for p in passes]
    for iteration in sorted(set(steps.reported) - {p.iteration for p in passes}):
        rd.add(
            "no-model-call-span",
            f"the agent reported engagement changes for iteration {iteration}, which has neither a "
            f"model-call span nor a {semconv.EV_CONTEXT_EVALUATED} event",
            steps.reported[iteration][0].pointer.span_id,
        )
    return passes


def _without_refused_picks(
    tool_calls: tuple[ToolCall, ...],
    refusing: Sequence[FootprintEvent],
    tool_views: Sequence[SpanView],
    span_iteration: Mapping[str, int],
) -> tuple[ToolCall, ...]:
    """``tool_calls`` without the picks read from arguments that a rejection or permission check
    on a pass or run span of the same iteration refused."""
    refusals = _refusals_by_iteration(
        refusing, frozenset(v.span_id for v in tool_views), span_iteration
    )
    if not refusals:
        return tool_calls
    return tuple(
        replace(
            call,
            picks=tuple(
                p
                for p in call.picks
                if not _refused(p.skill_id, refusals.get(call.iteration, ()), on_call=False)
            ),
        )
        if call.picks and not call.picks_stated and call.iteration in refusals
        else call
        for call in tool_calls
    )


def _pass_facts(
    iteration: int,
    span_ids: Sequence[str],
    evaluations: Sequence[FootprintEvent],
    reported_events: Sequence[FootprintEvent],
    rows: Sequence[InjectedRow],
    needs_evaluation: bool,
    rd: _Reader,
    conflict: Reason | None = None,
) -> PassFacts:
    """The facts of one pass; its ``problem`` is the first thing found that stops its build."""
    span_id = span_ids[0] if span_ids else None
    problem = (
        conflict if conflict is not None else _duplicate_claim(iteration, span_ids, evaluations, rd)
    )
    if span_id is None and conflict is None:
        rd.add(
            "no-model-call-span",
            f"iteration {iteration} has a {semconv.EV_CONTEXT_EVALUATED} event but no model-call "
            "span (chat); its decision is made but cannot be written on a pass span",
            evaluations[0].pointer.span_id if evaluations else None,
        )
    reported, problem = _reported_changes(reported_events, iteration, problem, rd)
    evaluation = evaluations[0] if evaluations else None
    if evaluation is None:
        problem = _unevaluated_problem(span_ids, needs_evaluation, problem, rd)
        move: tuple[str | None, str | None, str | None] = (None, None, None)
        active_ids: tuple[str, ...] = ()
    else:
        move, problem = _cursor_move(evaluation, iteration, problem, rd)
        active_ids, problem = _active_ids(evaluation, iteration, problem, rd)
    current_node, move_by, witness = move
    return PassFacts(
        iteration,
        span_id,
        evaluation,
        current_node,
        move_by,
        witness,
        active_ids,
        tuple(rows),  # injected
        any(row.source_id == PARK_CARD_ID for row in rows),  # card_rode
        reported,
        problem,
    )


def _duplicate_claim(
    iteration: int,
    span_ids: Sequence[str],
    evaluations: Sequence[FootprintEvent],
    rd: _Reader,
) -> Reason | None:
    """A reason when more than one model-call span, or else more than one evaluation, claims
    ``iteration``."""
    if len(span_ids) > 1:
        return rd.add(
            "duplicate-iteration",
            f"{len(span_ids)} model-call spans claim iteration {iteration} "
            f"({', '.join(span_ids)}); passes from here on are not decided",
            span_ids[1],
        )
    if len(evaluations) > 1:
        return rd.add(
            "duplicate-iteration",
            f"{len(evaluations)} {semconv.EV_CONTEXT_EVALUATED} events claim iteration "
            f"{iteration}; passes from here on are not decided",
            evaluations[1].pointer.span_id,
        )
    return None


def _reported_changes(
    events: Sequence[FootprintEvent], iteration: int, problem: Reason | None, rd: _Reader
) -> tuple[tuple[EngagementChange, ...], Reason | None]:
    """The agent's readable reported changes of the pass, and its problem: ``problem``, else the
    first unreadable change's reason."""
    reported: list[EngagementChange] = []
    for event in events:
        try:
            reported.append(_reported_change(event, iteration))
        except JsonShapeError as error:
            problem = rd.first(problem, "bad-attribute", str(error), event.pointer.span_id)
    return tuple(reported), problem


def _unevaluated_problem(
    span_ids: Sequence[str], needs_evaluation: bool, problem: Reason | None, rd: _Reader
) -> Reason | None:
    """The problem of a pass with no evaluation: ``problem``, else the reason its evaluation could
    not be decoded, else (when the run has a plan) the placeholder read_run replaces."""
    if problem is not None:
        return problem
    unreadable = next(
        (
            rd.undecodable[(sid, semconv.T_CONTEXT_EVALUATED)]
            for sid in span_ids
            if (sid, semconv.T_CONTEXT_EVALUATED) in rd.undecodable
        ),
        None,
    )
    if unreadable is not None:
        return unreadable
    return _MISSING if needs_evaluation else None


def _cursor_move(
    evaluation: FootprintEvent, iteration: int, problem: Reason | None, rd: _Reader
) -> tuple[tuple[str | None, str | None, str | None], Reason | None]:
    """The evaluation's cursor move as (to, by, witness), and the pass's problem."""
    move = evaluation.payload.get("cursorMove")
    if isinstance(move, dict):
        to, by = string(move.get("to")), string(move.get("by"))
        return (to, by, _witness_text(move.get("witness"))), problem
    if move is not None:
        problem = rd.first(
            problem,
            "bad-attribute",
            f"{semconv.EV_CONTEXT_EVALUATED} (iteration {iteration}): {semconv.F_CURSOR_MOVE} is not "
            "a JSON object",
            evaluation.pointer.span_id,
        )
    return (None, None, None), problem


def _active_ids(
    evaluation: FootprintEvent, iteration: int, problem: Reason | None, rd: _Reader
) -> tuple[tuple[str, ...], Reason | None]:
    """The evaluation's active ids (none when unreadable), and the pass's problem."""
    active_ids = _str_tuple(evaluation.payload.get("activeIds", ()))
    if active_ids is not None:
        return active_ids, problem
    problem = rd.first(
        problem,
        "bad-attribute",
        f"{semconv.EV_CONTEXT_EVALUATED} (iteration {iteration}): {semconv.F_ACTIVE_IDS} is not a "
        "list of strings",
        evaluation.pointer.span_id,
    )
    return (), problem


class _PassStarts:
    """The leg's pass spans as sorted (start, iteration) keys, built once per leg on first use: a
    tool span without an iteration finds its pass by binary search, not a scan of every pass."""

    __slots__ = ("_keys", "_passes", "_span_iteration", "_starts")

    def __init__(self, passes: Sequence[SpanView], span_iteration: Mapping[str, int]) -> None:
        self._passes = passes
        self._span_iteration = span_iteration
        self._keys: list[tuple[int, int]] | None = None
        self._starts: list[int] = []

    def latest_before(self, start: int) -> int | None:
        """The iteration of the latest (by start, then iteration) pass started before ``start``;
        one started at the same instant only when none started earlier. A model call must return
        before its tool runs, so a pass starting with the tool is the next one: clocks of
        millisecond resolution (JavaScript's) give a fast tool and the next call one start."""
        if self._keys is None:
            self._keys = sorted(
                (v.start_time_unix_nano, self._span_iteration[v.span_id]) for v in self._passes
            )
            self._starts = [key[0] for key in self._keys]
        index = bisect_left(self._starts, start) or bisect_right(self._starts, start)
        return self._keys[index - 1][1] if index else None


def _tool_iteration(view: SpanView, pass_starts: _PassStarts, first_iteration: int) -> int | None:
    stated = pass_iteration_of(view)
    if stated is not None:
        return stated
    # Design rule: the latest pass span that started before the tool span.
    best = pass_starts.latest_before(view.start_time_unix_nano)
    if best is not None:
        return best
    if first_iteration > 1:
        # A resumed leg opens with the paused call's result: it belongs to the paused pass.
        return first_iteration - 1
    return None


def _tool_call(
    view: SpanView,
    events: Sequence[FootprintEvent],
    pass_starts: _PassStarts,
    first_iteration: int,
    rd: _Reader,
) -> ToolCall:
    name = tool_name_of(view.attribute)
    if name is None:
        prefix = semconv.OP_EXECUTE_TOOL + " "
        name = view.name[len(prefix) :] if view.name.startswith(prefix) else view.name
    iteration = _tool_iteration(view, pass_starts, first_iteration)
    if iteration is None:
        rd.add(
            "unattributed-tool",
            f"tool span {view.span_id} ({name}) has no {semconv.PASS_ITERATION} and no model-call "
            "span started before it: the pass that asked for it cannot be told",
            view.span_id,
        )
    failed = _status_failed(view)
    raw_args = tool_arguments_of(view)
    arguments: Any | None = None
    unreadable: Reason | None = None
    if isinstance(raw_args, str) and raw_args.strip():
        try:
            arguments = loads_json(raw_args)
        except json.JSONDecodeError as error:
            if name == semconv.READ_SKILL_TOOL:
                unreadable = rd.add(
                    "bad-attribute",
                    f"tool span {view.span_id} (read_skill): {semconv.GEN_AI_TOOL_CALL_ARGUMENTS} "
                    f"is not JSON ({error.msg} at {error.pos}), so its pick cannot be told",
                    view.span_id,
                )
    result = tool_result_of(view)
    picks = picks_of(name, arguments, failed, events, unreadable is not None)
    skill = skill_of(view)
    if not picks and skill is not None and not failed:
        picks = (Pick(skill),)  # a skill-loading tool span (gen_ai.skill.name)
    return ToolCall(  # positional: one per tool span
        view.trace_id,
        view.span_id,
        name,
        tool_call_id_of(view.attribute),  # call_id
        iteration,
        view.start_time_unix_nano,
        failed,
        arguments,
        raw_args if isinstance(raw_args, str) else None,  # arguments_text
        result if isinstance(result, str) else None,  # result
        picks,
        any(e.type == semconv.T_SKILL_PICKED for e in events),  # picks_stated
        tuple(events),
        unreadable,
    )


def _output_tool_calls(
    run: RunSpans,
    spanned: Sequence[ToolCall],
    span_iteration: Mapping[str, int],
    rd: _Reader,
) -> tuple[list[ToolCall], Reason | None, tuple[int, ...]]:
    """Tool calls of passes that have no tool span, read from what the pass span recorded of the
    model's output (client instrumentations make no tool spans); results from the later passes'
    input messages. A pass whose output asked for tools, or says nothing, while the call was made
    by an instrumentation, gets a ``tool-calls-unrecorded`` reason: never "no tool was called"."""
    with_spans = {call.iteration for call in spanned}
    found: list[ToolCall] = []
    unrecorded: list[int] = []
    for view in run.passes:
        iteration = span_iteration[view.span_id]
        if iteration in with_spans or _status_failed(view):
            continue  # a model call that failed answered nothing: it asked for no tool
        calls = output_tool_calls(view)
        if calls is None:
            asked = asked_for_tools(view)
            if asked or (asked is None and instrumented(view)):
                unrecorded.append(iteration)
            continue
        found.extend(
            _output_tool_call(view, iteration, index, call) for index, call in enumerate(calls)
        )
    reason: Reason | None = None
    if unrecorded:
        reason = rd.add(
            UNRECORDED_TOOL_CALLS,
            f"the model call(s) of pass(es) {', '.join(map(str, unrecorded))} record no tool calls "
            "(no tool span, no tool calls in the recorded output); switch on the "
            "instrumentation's message content capture or record tool spans. Which tools were "
            "called cannot be told: what reads every call cannot be judged, and the engagement "
            "kernel (when a plan is mounted) cannot replay the passes after them",
        )
    if found:
        found = _with_results_and_picks(found, run.passes)
    return found, reason, tuple(unrecorded)


def _output_tool_call(view: SpanView, iteration: int, index: int, call: OutputToolCall) -> ToolCall:
    """The ``index``-th tool call of a pass span's recorded output, as a ToolCall (no result or
    picks yet); a call without an id is named after its span and place."""
    return ToolCall(
        trace_id=view.trace_id,
        span_id=view.span_id,
        name=call.name,
        call_id=call.call_id or f"{view.span_id}#{index}",
        iteration=iteration,
        start_time_unix_nano=view.end_time_unix_nano,
        failed=False,
        arguments=loads(call.arguments_text)[0],
        arguments_text=call.arguments_text,
        result=None,
        picks=(),
        picks_stated=False,
        events=(),
    )


def _with_results_and_picks(found: list[ToolCall], passes: Sequence[SpanView]) -> list[ToolCall]:
    """Calls read from the output, with their results from the passes' input messages and the
    picks of the read_skill ones."""
    results: dict[str, tuple[str, Ref]] = {}
    for view in passes:
        for call_id, text, where in tool_results(view):
            results.setdefault(call_id, (text, where))
    found = [
        replace(call, result=results[call.call_id][0], result_ref=results[call.call_id][1])
        if call.call_id in results
        else call
        for call in found
    ]
    return [
        replace(call, picks=picks_of(call.name, call.arguments, False, (), False))
        if call.name == semconv.READ_SKILL_TOOL
        else call
        for call in found
    ]


def _refused(skill_id: str, events: Sequence[FootprintEvent], *, on_call: bool = True) -> bool:
    """Whether ``events`` refuse a pick of ``skill_id``. On the call's own span a rejection without
    an id and a ``tool_call`` refusal of read_skill count too; elsewhere the event must name it."""
    for event in events:
        payload = event.payload
        requested = payload.get("requestedId")
        if event.type == semconv.T_SKILL_REJECTED and (
            requested == skill_id or (on_call and requested is None)
        ):
            return True
        if (
            event.type == semconv.T_PERMISSION_CHECK
            and payload.get("result") in semconv.PERMISSION_REFUSING_RESULTS
        ):
            capability, target = payload.get("capability"), payload.get("target")
            if capability == semconv.CAPABILITY_SKILL_READ and target in (
                semconv.SKILL_TARGET_PREFIX + skill_id,
                skill_id,
            ):
                return True
            if (
                on_call
                and capability == semconv.CAPABILITY_TOOL_CALL
                and target == semconv.READ_SKILL_TOOL
            ):
                return True
    return False


def _refusals_by_iteration(
    refusing: Sequence[FootprintEvent],
    tool_span_ids: frozenset[str],
    span_iteration: Mapping[str, int],
) -> dict[int, list[FootprintEvent]]:
    """Of ``refusing`` (the run's rejections and permission checks), those carried on a pass or
    run span instead of the call's own span, by iteration (their payload ``iteration``, else the
    pass span they are on)."""
    found: dict[int, list[FootprintEvent]] = {}
    for event in refusing:
        if event.pointer.span_id in tool_span_ids:
            continue
        iteration = integral(event.payload.get("iteration"))
        if iteration is None:
            iteration = span_iteration.get(event.pointer.span_id)
        if iteration is not None:
            found.setdefault(iteration, []).append(event)
    return found


def picks_of(
    name: str,
    arguments: Any | None,
    failed: bool,
    events: Sequence[FootprintEvent],
    unreadable: bool,
) -> tuple[Pick, ...]:
    """The accepted picks of one tool call: its ``skill.picked`` events, else a ``read_skill``
    call's ``id`` argument unless the call failed or a refusal among ``events`` names it."""
    stated = [e for e in events if e.type == semconv.T_SKILL_PICKED]
    if stated:
        picks: list[Pick] = []
        for event in stated:
            skill_id = string(event.payload.get("skillId"))
            if skill_id is not None:
                hop = event.payload.get("hop")
                picks.append(Pick(skill_id, hop if isinstance(hop, bool) else None))
        return tuple(picks)
    if name != semconv.READ_SKILL_TOOL or failed or unreadable or not isinstance(arguments, dict):
        return ()
    skill_id = string(arguments.get("id"))
    if skill_id is None or _refused(skill_id, events):
        return ()
    return (Pick(skill_id),)


# ── building the kernel's passes ─────────────────────────────────────────────────────────────


@quick_init
@dataclass(frozen=True, slots=True)
class Batch:
    """One dispatched tool batch: the pass that asked for it, names in call order, accepted picks."""

    iteration: int
    tool_names: tuple[str, ...]
    picks: tuple[Pick, ...]
    cursor: str | None
    unreadable: Reason | None = None


def batches_of(facts: RunFacts, carry: Carry | None) -> Batches:
    """Every dispatched batch of the leg by iteration, the carried (pre-pause) batch included."""
    cursor_of = {p.iteration: p.current_node for p in facts.passes}
    calls: dict[int, list[ToolCall]] = {}
    for call in facts.tool_calls:
        if call.iteration is not None:
            calls.setdefault(call.iteration, []).append(call)
    result: dict[int, Batch] = {}
    if carry is not None and carry.batch_iteration is not None:
        result[carry.batch_iteration] = Batch(
            carry.batch_iteration, carry.batch, carry.batch_picks, carry.batch_cursor
        )
    for iteration, group in calls.items():
        if len(group) > 1:
            group.sort(key=_call_order)
        earlier = result.get(iteration)
        names = tuple([c.name for c in group])
        picks = tuple([p for c in group for p in c.picks])
        if earlier:
            # A resume appends the answered call to the batch the paused leg started.
            names, picks = earlier.tool_names + names, earlier.picks + picks
        cursor = (
            earlier.cursor if earlier and iteration not in cursor_of else cursor_of.get(iteration)
        )
        unreadable = next((c.unreadable for c in group if c.unreadable), None)
        result[iteration] = Batch(iteration, names, picks, cursor, unreadable)
    return Batches(result)


def _call_order(call: ToolCall) -> tuple[int, str]:
    return call.start_time_unix_nano, call.span_id


class Batches(dict[int, Batch]):
    """The batches of a leg by iteration, plus the sorted iterations that dispatched tools, so
    :func:`latest_batch` is a binary search instead of a scan of every batch on every pass (which
    made a 3,000-pass run quadratic). Built whole by :func:`batches_of`; not changed after."""

    __slots__ = ("_asked",)

    def __init__(self, items: Mapping[int, Batch]) -> None:
        super().__init__(items)
        self._asked = sorted(it for it, batch in self.items() if batch.tool_names)

    def latest(self, before: int) -> Batch | None:
        index = bisect_left(self._asked, before)
        return self[self._asked[index - 1]] if index else None


def latest_batch(batches: Mapping[int, Batch], before: int) -> Batch | None:
    """The most recent dispatched batch asked for before pass ``before`` (the re-ask quirk)."""
    if isinstance(batches, Batches):
        return batches.latest(before)
    candidates = [it for it, batch in batches.items() if it < before and batch.tool_names]
    return batches[max(candidates)] if candidates else None


def _pending_pick(batch: Batch, edges: frozenset[tuple[str, str]] | None) -> str | None:
    pending: str | None = None
    for pick in batch.picks:
        hop = pick.hop
        if hop is None:
            hop = (
                edges is not None
                and batch.cursor is not None
                and (batch.cursor, pick.skill_id) in edges
            )
        if hop:
            pending = pick.skill_id
    return pending


def build_pass(
    facts: RunFacts, index: int, batches: Mapping[int, Batch], carry: Carry | None
) -> tuple[EngagementPass | None, Reason | None]:
    """The kernel Pass for ``facts.passes[index]`` (spec §2.2), or a reason it cannot be built."""
    pass_facts = facts.passes[index]
    if pass_facts.problem is not None:
        return None, pass_facts.problem
    iteration = pass_facts.iteration
    batch = latest_batch(batches, iteration)
    if batch is not None and batch.unreadable is not None:
        return None, batch.unreadable
    if index > 0:
        served = facts.passes[index - 1].served
    elif carry is not None:
        served = carry.served
    else:
        served = ()
    return kernel_pass_of(pass_facts, batch, served, facts.edges), None


def kernel_pass_of(
    pass_facts: PassFacts,
    batch: Batch | None,
    served: tuple[str, ...],
    edges: frozenset[tuple[str, str]] | None,
) -> EngagementPass:
    """The kernel Pass of one pass's facts, the latest dispatched batch before it (the re-ask
    quirk: :func:`latest_batch`) and what rode the pass before (``PassFacts.served``). The one
    translation of recorded facts into kernel input: the processor's replay (:func:`build_pass`)
    and the recorder's live policy (``record/policy.py``) both call it."""
    picks: dict[str, None] = dict.fromkeys([p.skill_id for p in batch.picks]) if batch else {}
    return EngagementPass(  # positional: one per pass
        pass_facts.iteration,
        pass_facts.current_node,
        pass_facts.move_by,
        pass_facts.witness,
        tuple([ToolResult(n) for n in batch.tool_names]) if batch else (),  # tool_results
        _pending_pick(batch, edges) if batch else None,  # pending_skill_pick
        tuple(picks),  # accepted_skill_picks
        served,  # served_last_pass
    )


def expected_first_iteration(carry: Carry | None) -> int:
    """The iteration a leg's first pass must have: 1, or one past the earlier leg's last pass."""
    return 1 if carry is None else carry.last_iteration + 1


def gap_reason(facts: RunFacts, index: int, carry: Carry | None) -> Reason | None:
    """A reason when ``facts.passes[index]`` does not follow the pass before it (spans missing)."""
    iteration = facts.passes[index].iteration
    expected = (
        expected_first_iteration(carry) if index == 0 else facts.passes[index - 1].iteration + 1
    )
    if iteration == expected:
        return None
    if index == 0 and carry is None and facts.resumed:
        return Reason(
            "no-prior-leg",
            f"this resumed leg starts at iteration {iteration}, and the earlier leg of run "
            f"{facts.run.run_id} is not in the run store: its engagement cannot be continued",
        )
    return Reason(
        "missing-spans",
        f"iteration {iteration} follows iteration {expected - 1}: the passes in between are "
        "missing, so passes from here on are not decided",
        facts.passes[index].span_id,
    )
