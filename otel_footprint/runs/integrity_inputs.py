"""The integrity checks' inputs, read from a run's spans: what each model call was offered and shown,
what it chose, what the tools returned, and the few facts only ``footprint.*`` events carry.

Each model-call span is read by :func:`otel_footprint.runs.outputs.call_view` (GenAI, OpenInference,
OpenLLMetry); here a client span is paired with its pass span as the wire view. The ``footprint.*``
integrity events (semconv, "Integrity checks") add tool declarations, external grounds, the
settings, a wire manifest, window compactions, raw result shapes and the agent's own findings.

Every fact is either read or marked missing (``None``), never defaulted: a frame or a tool list
that was not captured is not "nothing offered" (the checks turn it into ``unreachable``). The model
here is frozen data; the checks in ``otel_footprint.account.integrity`` are pure functions over it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_footprint import semconv
from otel_footprint.codec import FootprintEvent, field_attribute, integral, quick_init
from otel_footprint.runs.group import RunSpans, pass_iteration_of
from otel_footprint.runs.outputs import (
    CallView,
    FrameMessage,
    OfferedTool,
    Ref,
    call_view,
    loads,
    string,
)
from otel_footprint.runs.passes import UNRECORDED_TOOL_CALLS, RunFacts
from otel_footprint.runs.spans import SpanView


@quick_init
@dataclass(frozen=True, slots=True)
class ExternalGround:
    """A value the app vouches for (``footprint.integrity.external_ground``)."""

    value: str
    source: str
    iteration: int | None
    ref: Ref


@quick_init
@dataclass(frozen=True, slots=True)
class PassInputs:
    """What one pass (one model call) offered and showed, from up to two views of it."""

    iteration: int
    framework: CallView
    """The pass span (the framework's / agent's own view, or the only one)."""
    client: CallView | None = None
    """A client instrumentation's span of the same call (nested under the pass span)."""
    wire_manifest: tuple[str, ...] | None = None
    wire_ref: Ref | None = None
    dropped: tuple[str, ...] | None = None
    """``footprint.window.compacted`` tool names, when the agent reported compactions."""
    dropped_ref: Ref | None = None

    def _first(self, read: Callable[[CallView], object]) -> CallView | None:
        """The client's view when it recorded what ``read`` reads, else the framework's."""
        views = (self.client, self.framework)
        return next((v for v in views if v is not None and read(v) is not None), None)

    def tools(self) -> tuple[tuple[OfferedTool, ...] | None, Ref | None]:
        """The offered list: the client's when it recorded one, else the framework's."""
        client = self.client  # (spelled out: asked at every pass of every run)
        view = client if client is not None and client.tools is not None else self.framework
        return (view.tools, view.tools_ref) if view.tools is not None else (None, None)

    def frame(self) -> CallView | None:
        """The view whose input messages were captured (the client's first)."""
        return self._first(lambda v: v.messages)

    def output(self) -> tuple[FrameMessage, ...] | None:
        """The model's output messages (the client's first)."""
        view = self._first(lambda v: v.output)
        return view.output if view is not None else None

    def unreadable(self) -> tuple[str, ...]:
        """Attributes of this pass present but not readable (cut, or not JSON)."""
        client = self.client  # (asked at every pass a check finds an input missing at)
        return self.framework.unreadable + (client.unreadable if client is not None else ())


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """``footprint.tool.declared``: where a tool's arguments come from, what columns it returns."""

    name: str
    arguments_from: tuple[str, ...]
    result_columns: Mapping[str, Any] | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class Settings:
    """``footprint.integrity.config`` (absent: every dial at its default)."""

    posture: str = "observe"
    notice_empty_lookups: bool = False
    check_column_types: str = "off"
    notice_prior_turn_evidence: bool = False
    ref: Ref | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class Execution:
    """One tool span: the call as executed and what it returned."""

    name: str
    call_id: str | None
    iteration: int | None
    order: int
    """Position among the run's tool spans by start time (the write seam's "before")."""
    arguments: Any | None
    failed: bool
    result_text: str | None
    """``gen_ai.tool.call.result`` (OpenInference ``output.value``); None when not recorded."""
    shape: str | None
    """Raw shape the agent stated (``footprint.tool.result_shape`` / ``tools.absent``)."""
    rows: int | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class ReportedFinding:
    """``footprint.integrity.context_error``: a finding the agent's own checks filed."""

    kind: str
    seam: str
    subjects: tuple[str, ...]
    predicate: str | None
    iteration: int | None
    advisory: bool
    ref: Ref


@quick_init
@dataclass(frozen=True, slots=True)
class ReportedRow:
    """One row of the agent's own ``integrity.disposition``: how its check met its subjects."""

    check: str
    seam: str
    checked: int
    findings: int
    not_applicable: int
    unreachable: int
    synthetic: int = 0

    @property
    def armed(self) -> bool:
        """The agent's check met a subject it could be armed for (anything beyond the one
        not-applicable note an unarmed check files)."""
        return bool(self.checked or self.findings or self.unreachable)


@dataclass(frozen=True, slots=True)
class ReportedDisposition:
    """``integrity.disposition``: the agent's accounting of its own checks at the run boundary."""

    posture: str | None
    work_existed: bool | None
    rows: tuple[ReportedRow, ...]
    ref: Ref

    def row(self, check: str, seam: str) -> ReportedRow | None:
        return next((r for r in self.rows if (r.check, r.seam) == (check, seam)), None)


@dataclass(frozen=True, slots=True)
class ClaimDeclaration:
    """``footprint.claims.declared``: the answer's ``answer_field`` claims ``field(entity)``."""

    answer_field: str
    entity: str
    field: str
    ref: Ref


@dataclass(frozen=True, slots=True)
class SettledFact:
    """One ``(entity, field, value)`` a tool's declared semantics settled, in ledger order."""

    entity: str
    field: str
    value: Any
    tool: str
    call_id: str | None
    iteration: int | None
    measured_at: str | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class Grounding:
    """``footprint.evidence.grounding``: the evidence gate's reading of the final answer."""

    from_this_turn: int
    from_prior_turns: int
    latest_prior_turn: int | None
    current_turn: int
    tool_results_this_turn: int
    index_truncated: bool
    ref: Ref


@dataclass(frozen=True, slots=True)
class Answer:
    """The final answer the caller received (``agent.turn_end`` ``finalContent``)."""

    content: str
    ref: Ref


@dataclass(frozen=True, slots=True)
class IntegrityInputs:
    """Everything the integrity checks read about one run leg."""

    trace_id: str
    run_span_id: str | None
    passes: tuple[PassInputs, ...]
    declarations: Mapping[str, ToolDeclaration]
    settings: Settings
    executions: tuple[Execution, ...]
    grounds: tuple[ExternalGround, ...] = ()
    reported: tuple[ReportedFinding, ...] | None = None
    """None: the agent ran no integrity checks of its own (no verify)."""
    claims: tuple[ClaimDeclaration, ...] = ()
    facts: tuple[SettledFact, ...] = ()
    answer: Answer | None = None
    grounding: Grounding | None = None
    """The last reading of the run (None: not recorded)."""
    disposition: ReportedDisposition | None = None
    """The agent's own disposition rows (None: not in the record)."""
    facts_unreadable: tuple[str, ...] = ()
    """Tools whose declared facts are recorded but not readable (the ledger has a hole)."""
    calls_unknown: bool = False
    """Some pass's tool calls are not in the record (no tool span, no recorded output): "no such
    tool was called" cannot be said."""
    problems: tuple[str, ...] = field(default=())
    """Inputs present but unreadable (named), for the explanations."""
    observed: bool = False
    """An observed run (no recorder input, so no declarations): the checks that declarations arm
    are armed by what the record itself holds, where it holds enough (``argument.py``)."""

    def grounds_for(self, iteration: int) -> tuple[ExternalGround, ...]:
        return tuple(g for g in self.grounds if g.iteration in (None, iteration))


# ── footprint integrity events ───────────────────────────────────────────────────────────────


def _ref_of(event: FootprintEvent, attribute: str | None = None) -> Ref:
    pointer = event.pointer
    return Ref(
        pointer.trace_id,
        pointer.span_id,
        attribute,
        event_name=pointer.event_name,
        event_index=pointer.event_index,
    )


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if isinstance(value, str):
        decoded, ok = loads(value)
        if ok and isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
            return tuple(decoded)
        return (value,) if value else ()
    return None


def _declarations(
    events: Sequence[FootprintEvent], problems: list[str]
) -> dict[str, ToolDeclaration]:
    found: dict[str, ToolDeclaration] = {}
    for event in events:
        payload = event.payload
        name = string(payload.get("toolName"))
        if not name:
            problems.append(f"{semconv.EV_TOOL_DECLARED} without {semconv.F_TOOL_NAME}")
            continue
        grounds = _strings(payload.get("argumentsFrom")) or ()
        columns_raw = payload.get("resultColumns")
        columns, ok = loads(columns_raw)
        if columns_raw is not None and (not ok or not isinstance(columns, dict)):
            problems.append(f"{semconv.EV_TOOL_DECLARED} ({name}): resultColumns is not a JSON map")
            columns = None
        found[name] = ToolDeclaration(
            name,
            tuple(g for g in grounds if g.strip() and g != name),
            columns if isinstance(columns, dict) else None,
            _ref_of(event, semconv.F_ARGUMENTS_FROM),
        )
    return found


def _settings(events: Sequence[FootprintEvent]) -> Settings:
    if not events:
        return Settings()
    event = events[-1]
    payload = event.payload
    posture = string(payload.get("posture")) or "observe"
    columns = string(payload.get("checkColumnTypes")) or "off"
    return Settings(
        posture=posture,
        notice_empty_lookups=payload.get("noticeEmptyLookups") is True,
        check_column_types=columns if columns in ("off", "warn", "enforce") else "off",
        notice_prior_turn_evidence=payload.get("noticePriorTurnEvidence") is True,
        ref=_ref_of(event),
    )


def _subjects(value: Any) -> tuple[str, ...]:
    """``subjects`` as ``kind:id`` strings: our recorder's strings, or the upstream's
    ``[{kind, id}]`` objects (a JSON string when they travelled as an attribute)."""
    if isinstance(value, str):
        decoded, ok = loads(value)
        value = decoded if ok else [value]
    if not isinstance(value, list | tuple):
        return ()
    out: list[str] = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            out.append(f"{item.get('kind') or 'tool'}:{item['id']}")
    return tuple(out)


def _gate_readings(by_type: Mapping[str, Sequence[FootprintEvent]]) -> list[FootprintEvent]:
    """The evidence gate's readings of the answer, wherever the record carries them: our
    ``evidence.grounding``, else the upstream's ``evidence.looked_up``, else the ``lookedUp``
    object of its ``agent.evidence_checked`` verdict."""
    for kind in (semconv.T_EVIDENCE_GROUNDING, semconv.T_EVIDENCE_LOOKED_UP):
        if by_type.get(kind):
            return list(by_type[kind])
    found: list[FootprintEvent] = []
    for event in by_type.get(semconv.T_EVIDENCE_CHECKED, ()):
        looked, readable = loads(event.payload.get("lookedUp"))
        if readable and isinstance(looked, dict):
            found.append(FootprintEvent(event.type, looked, event.pointer, event.time_unix_nano))
    return found


def _grounding(event: FootprintEvent, problems: list[str]) -> Grounding | None:
    payload = event.payload
    counts = [
        integral(payload.get(k))
        for k in ("fromThisTurn", "fromPriorTurns", "currentTurn", "toolResultsThisTurn")
    ]
    this_turn, prior, current, results = counts
    if this_turn is None or prior is None or current is None:
        problems.append(
            f"{semconv.EV_EVIDENCE_GROUNDING} needs integer fromThisTurn, fromPriorTurns and "
            "currentTurn"
        )
        return None
    return Grounding(
        this_turn,
        prior,
        integral(payload.get("latestPriorTurn")),
        current,
        results or 0,
        payload.get("indexTruncated") is True,
        _ref_of(event),
    )


def _claims(events: Sequence[FootprintEvent], problems: list[str]) -> tuple[ClaimDeclaration, ...]:
    out: list[ClaimDeclaration] = []
    for event in events:
        payload = event.payload
        parts = [string(payload.get(k)) for k in ("answerField", "entity", "field")]
        answer_field, entity, field_name = parts
        if not answer_field or not entity or not field_name:
            problems.append(
                f"{semconv.EV_CLAIMS_DECLARED} needs answerField, entity and field (all non-blank)"
            )
            continue
        out.append(ClaimDeclaration(answer_field, entity, field_name, _ref_of(event)))
    return tuple(out)


def _facts(
    events: Sequence[FootprintEvent], calls: Mapping[str, Any], problems: list[str]
) -> tuple[SettledFact, ...]:
    """The ledger: each ``tools.semantics_declared`` flattened, in event order (never rewritten).
    ``facts`` rows give one fact per column other than ``entity``; ``series`` points one
    ``(entity, metric, value)`` measured at the point's ``t`` (else the envelope's)."""
    out: list[SettledFact] = []
    for event in events:
        payload = event.payload
        # ``semantic()`` envelopes travel as ``semantics``; a ``describedResult()`` declaration
        # (its 10.0 replacement, camelCase keys) may travel under its own name.
        raw = next(
            (payload[k] for k in _ENVELOPE_FIELDS if payload.get(k) is not None),
            None,
        )
        semantics, readable = loads(raw)
        if not readable or not isinstance(semantics, dict):
            problems.append(f"{semconv.EV_SEMANTICS_DECLARED}: semantics is not a JSON object")
            continue
        call = calls.get(event.pointer.span_id)
        tool = string(payload.get("toolName")) or (call.name if call is not None else "?")
        call_id = string(payload.get("toolCallId")) or (call.call_id if call is not None else None)
        iteration = integral(payload.get("iteration"))
        if iteration is None and call is not None:
            iteration = call.iteration
        provenance = semantics.get("provenance")
        measured = _either(provenance, "measured_at", "measuredAt")
        ref = _ref_of(event, semconv.F_SEMANTICS)
        for row in semantics.get("facts") or ():
            if isinstance(row, dict) and isinstance(row.get("entity"), str):
                for key, value in row.items():
                    if key != "entity":
                        out.append(
                            SettledFact(
                                row["entity"], key, value, tool, call_id, iteration, measured, ref
                            )
                        )
        for point in semantics.get("series") or ():
            if isinstance(point, dict) and isinstance(point.get("entity"), str):
                metric = string(point.get("metric"))
                if metric:
                    at = string(point.get("t")) or _either(point, "measured_at", "measuredAt")
                    at = at or measured
                    out.append(
                        SettledFact(
                            point["entity"],
                            metric,
                            point.get("value"),
                            tool,
                            call_id,
                            iteration,
                            at,
                            ref,
                        )
                    )
    return tuple(out)


_ENVELOPE_FIELDS = ("semantics", "describedResult", "described")


def _unreadable_facts(
    events: Sequence[FootprintEvent], calls: Mapping[str, Any]
) -> tuple[str, ...]:
    """Tools whose fact declaration is in the record but cannot be read (cut, or not JSON)."""
    out: list[str] = []
    for event in events:
        payload = event.payload
        raw = next((payload[k] for k in _ENVELOPE_FIELDS if payload.get(k) is not None), None)
        decoded, readable = loads(raw)
        if not readable or not isinstance(decoded, dict):
            call = calls.get(event.pointer.span_id)
            out.append(string(payload.get("toolName")) or (call.name if call else "a tool"))
    return tuple(out)


def _either(holder: Any, snake: str, camel: str) -> str | None:
    """A string field read under its snake_case key (``semantic()``) or its camelCase one
    (``describedResult()``)."""
    if not isinstance(holder, dict):
        return None
    return string(holder.get(snake)) or string(holder.get(camel))


def _reported(events: Sequence[FootprintEvent]) -> tuple[ReportedFinding, ...]:
    out: list[ReportedFinding] = []
    for event in events:
        payload = event.payload
        kind, seam = string(payload.get("kind")), string(payload.get("seam"))
        if not kind or not seam or payload.get("synthetic") is True:
            continue  # a canary (the upstream's dev posture) is never a finding
        out.append(
            ReportedFinding(
                kind,
                seam,
                _subjects(payload.get("subjects")),
                string(payload.get("predicate")) or None,
                integral(payload.get("iteration")) or integral(payload.get("epoch")),
                payload.get("advisory") is True,
                _ref_of(event),
            )
        )
    return tuple(out)


def _paused_with_absence(events: Sequence[FootprintEvent]) -> frozenset[str]:
    """Call ids of lookups that paused to ask a person while declaring an absence (the upstream's
    ``requestInput({..., absence})``, 9.114): that declaration is the lookup's answer."""
    found: set[str] = set()
    for event in events:
        asked = event.payload.get("questionPayload")
        asked, _ = loads(asked) if isinstance(asked, str) else (asked, True)
        for holder in (asked, event.payload):
            if not isinstance(holder, dict) or holder.get("absence") in (None, False):
                continue
            call_id = string(holder.get("toolCallId")) or (
                string(asked.get("toolCallId")) if isinstance(asked, dict) else None
            )
            if call_id:
                found.add(call_id)
    return frozenset(found)


# The compose seam's own filing is stamped ``write`` upstream; it is the compose row here.
_SEAM_ALIASES = {("invariant-violation", "write"): "compose"}


def _disposition(event: FootprintEvent, problems: list[str]) -> ReportedDisposition | None:
    """The agent's disposition rows; None (named in ``problems``) when they cannot be read."""
    payload = event.payload
    rows_raw, readable = loads(payload.get("rows"))
    if not readable or not isinstance(rows_raw, list):
        problems.append(f"{semconv.EV_INTEGRITY_DISPOSITION}: rows is not a JSON list")
        return None
    rows: list[ReportedRow] = []
    for item in rows_raw:
        if not isinstance(item, dict):
            continue
        check, seam = string(item.get("check")), string(item.get("seam"))
        counts = [
            integral(item.get(k)) for k in ("checked", "findings", "notApplicable", "unreachable")
        ]
        if not check or not seam or any(c is None for c in counts):
            problems.append(f"{semconv.EV_INTEGRITY_DISPOSITION}: a row without its counts")
            continue
        checked, findings, not_applicable, unreachable = (c or 0 for c in counts)
        seam = _SEAM_ALIASES.get((check, seam), seam)
        synthetic = integral(item.get("synthetic")) or 0
        rows.append(
            ReportedRow(check, seam, checked, findings, not_applicable, unreachable, synthetic)
        )
    work = payload.get("workExisted")
    return ReportedDisposition(
        string(payload.get("posture")),
        work if isinstance(work, bool) else None,
        tuple(rows),
        _ref_of(event, field_attribute("rows")),
    )


# ── the run ──────────────────────────────────────────────────────────────────────────────────


def _iterations(run: RunSpans, facts: RunFacts) -> tuple[dict[str, int], dict[str, str]]:
    """(pass span id -> iteration, client span id -> the pass span it is a second view of).

    A client span is a model-call span that is no pass of its own: one nested under a pass span
    (directly, or — through containers not in the run — by lying within exactly one pass span's
    time), or, in older recordings where every model call is a pass, one whose parent is one.
    """
    known = {p.span_id: p.iteration for p in facts.passes if p.span_id is not None}
    pass_ids = {view.span_id for view in run.passes}
    nested: dict[str, str] = {}
    for view in run.passes:
        parent = view.parent_span_id
        if parent is not None and parent in pass_ids:
            nested[view.span_id] = parent
    tops = [view for view in run.passes if view.span_id not in nested]
    for view in run.unmarked_calls:
        parent = view.parent_span_id
        if parent is not None and parent in pass_ids:
            nested[view.span_id] = parent
            continue
        around = [
            top
            for top in tops
            if top.start_time_unix_nano <= view.start_time_unix_nano
            and view.end_time_unix_nano <= top.end_time_unix_nano
        ]
        if len(around) == 1:
            nested[view.span_id] = around[0].span_id
    iterations: dict[str, int] = {}
    for ordinal, view in enumerate(tops, start=1):
        iteration = known.get(view.span_id)
        if iteration is None:
            iteration = pass_iteration_of(view)
        iterations[view.span_id] = iteration if iteration is not None else ordinal
    return iterations, nested


_SHAPE_TYPES = frozenset({semconv.T_TOOLS_ABSENT, semconv.T_TOOL_RESULT_SHAPE})


def _executions(facts: RunFacts) -> tuple[Execution, ...]:
    """The run's tool spans in start order, with the result shape the record states for each."""
    by_type = facts.by_type
    shape_events: dict[str, list[FootprintEvent]] = {}
    """Span id -> the result-shape events on it, in order."""
    absent = by_type.get(semconv.T_TOOLS_ABSENT, ())
    shaped = by_type.get(semconv.T_TOOL_RESULT_SHAPE, ())
    # Both types in one run (rare): filter the ordered events, to keep the order across them.
    both = bool(absent and shaped)
    for event in [e for e in facts.events if e.type in _SHAPE_TYPES] if both else absent or shaped:
        shape_events.setdefault(event.pointer.span_id, []).append(event)
    paused_absent = _paused_with_absence(by_type.get(semconv.T_PAUSE_REQUEST, ()))
    executions: list[Execution] = []
    for order, call in enumerate(sorted(facts.tool_calls, key=lambda c: c.start_time_unix_nano)):
        shape: str | None = None
        rows: int | None = None
        if call.call_id is not None and call.call_id in paused_absent:
            shape = "absence"  # the lookup paused to ask, declaring it found nothing
        for event in shape_events.get(call.span_id, ()):
            if event.type == semconv.T_TOOLS_ABSENT:
                shape = "absence"
            elif event.type == semconv.T_TOOL_RESULT_SHAPE:
                stated = string(event.payload.get("shape"))
                if stated in ("rowset", "absence", "bespoke"):
                    shape, rows = stated, integral(event.payload.get("rows"))
        executions.append(
            Execution(
                call.name,
                call.call_id,
                call.iteration,
                order,
                call.arguments,
                call.failed,
                call.result,
                shape,
                rows,
                Ref(call.trace_id, call.span_id, semconv.GEN_AI_TOOL_CALL_ARGUMENTS),
            )
        )
    return tuple(executions)


def read_integrity_inputs(facts: RunFacts) -> IntegrityInputs:
    """The integrity inputs of a run leg already read into :class:`RunFacts`.

    Only what an armed check can use is read: no model-call span is looked at when nothing could
    arm a check that reads them (no plan, no tool declaration, no second view of a call), and the
    frames (messages, output) only when a tool declares ``argumentsFrom``; the tool calls only when
    a declaration or an observed run can arm a check that reads them (else they tell only whether
    the run did work, which its passes say when it has any).
    """
    run = facts.run
    problems: list[str] = []
    by_type = facts.by_type
    declarations = _declarations(by_type.get(semconv.T_TOOL_DECLARED, ()), problems)
    observed = run.observed
    frames = observed or any(d.arguments_from for d in declarations.values())
    calls_needed = (
        observed
        or facts.plan is not None
        or bool(declarations)
        or bool(run.unmarked_calls)
        or semconv.T_WIRE_MANIFEST in by_type
    )
    iterations, nested = _iterations(run, facts) if calls_needed else ({}, {})
    by_id = {view.span_id: view for view in (*run.passes, *run.unmarked_calls)}

    def on_pass(event: FootprintEvent) -> int | None:
        explicit = integral(event.payload.get("iteration"))
        if explicit is not None:
            return explicit
        span = event.pointer.span_id
        return iterations.get(span, iterations.get(nested.get(span, ""), None))

    manifests: dict[int, tuple[tuple[str, ...], Ref]] = {}
    for event in by_type.get(semconv.T_WIRE_MANIFEST, ()):
        it = on_pass(event)
        names = _strings(event.payload.get("toolNames"))
        if it is not None:
            manifests[it] = (names or (), _ref_of(event, semconv.F_TOOL_NAMES))
    dropped: dict[int, tuple[tuple[str, ...], Ref]] = {}
    for event in by_type.get(semconv.T_WINDOW_COMPACTED, ()):
        it = on_pass(event)
        names = _strings(event.payload.get("droppedObservations")) or ()
        if it is not None:
            prior = dropped.get(it, ((), _ref_of(event)))[0]
            dropped[it] = ((*prior, *names), _ref_of(event, semconv.F_DROPPED_OBSERVATIONS))

    clients: dict[str, SpanView] = {}
    for child, parent in nested.items():
        clients.setdefault(parent, by_id[child])
    passes: list[PassInputs] = []
    for span_id, iteration in sorted(iterations.items(), key=lambda kv: (kv[1], kv[0])):
        framework = call_view(by_id[span_id], frames=frames)
        client_span = clients.get(span_id)
        client = call_view(client_span, frames=frames) if client_span is not None else None
        for view in (framework, client):
            if view is not None and view.unreadable:
                problems.extend(f"{view.span_id}: {key} is not readable" for key in view.unreadable)
        manifest = manifests.get(iteration)
        drop = dropped.get(iteration)
        passes.append(
            PassInputs(
                iteration,
                framework,
                client,
                manifest[0] if manifest else None,
                manifest[1] if manifest else None,
                drop[0] if drop else (() if dropped else None),
                drop[1] if drop else None,
            )
        )

    grounds: list[ExternalGround] = []
    for event in by_type.get(semconv.T_EXTERNAL_GROUND, ()):
        value, source = string(event.payload.get("value")), string(event.payload.get("source"))
        if value and value.strip() and source and source.strip():
            grounds.append(
                ExternalGround(value, source, on_pass(event), _ref_of(event, semconv.F_VALUE))
            )

    armable = bool(declarations) or observed or not passes
    executions = _executions(facts) if armable else ()
    turn_ends = [
        e
        for e in by_type.get(semconv.T_TURN_END, ())
        if isinstance(e.payload.get("finalContent"), str)
    ]
    answer = (
        Answer(
            turn_ends[-1].payload["finalContent"], _ref_of(turn_ends[-1], semconv.F_FINAL_CONTENT)
        )
        if turn_ends
        else None
    )
    semantics = by_type.get(semconv.T_SEMANTICS_DECLARED, ())
    calls_by_span = {call.span_id: call for call in facts.tool_calls} if semantics else {}
    readings = _gate_readings(by_type)
    grounding = _grounding(readings[-1], problems) if readings else None
    reported_events = by_type.get(semconv.T_CONTEXT_ERROR, ())
    dispositions = by_type.get(semconv.T_INTEGRITY_DISPOSITION, ())
    return IntegrityInputs(
        trace_id=run.trace_id,
        run_span_id=run.run_span_id,
        passes=tuple(passes),
        declarations=declarations,
        settings=_settings(by_type.get(semconv.T_INTEGRITY_CONFIG, ())),
        executions=executions,
        grounds=tuple(grounds),
        reported=_reported(reported_events) if reported_events else None,
        claims=_claims(by_type.get(semconv.T_CLAIMS_DECLARED, ()), problems),
        facts=_facts(semantics, calls_by_span, problems),
        facts_unreadable=_unreadable_facts(semantics, calls_by_span),
        answer=answer,
        grounding=grounding,
        disposition=_disposition(dispositions[-1], problems) if dispositions else None,
        calls_unknown=any(r.code == UNRECORDED_TOOL_CALLS for r in facts.reasons),
        problems=tuple(problems),
        observed=observed,
    )
