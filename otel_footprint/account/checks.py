"""Checks 2 (``existence``) and 3 (``empty-results``) over every tool call of the leg.

A call is a tool span (:class:`~otel_footprint.account.input.ToolCall`) joined with the coverage
events (``tools.absent`` / ``tools.coverage_declared``) naming its call id or sitting on its span;
a call known only from coverage events (its span is in another leg) still counts for check 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeAlias

from otel_footprint import semconv
from otel_footprint.account.input import AccountInput, ToolCall
from otel_footprint.account.model import CheckId, CheckResult, CheckState, Line, Pointer, Signal
from otel_footprint.account.pointers import at_event, bounded
from otel_footprint.account.templates import ID_CHARS, cut
from otel_footprint.account.view import LegView, as_list, as_obj, as_str
from otel_footprint.account.writer import Var, Writer
from otel_footprint.codec import FootprintEvent, quick_init

Outcome: TypeAlias = Literal["ran", "failed", "refused", "paused", "unknown"]
"""refused > failed > ran for a tool span; ``paused``: this leg's ``pause.request`` names the call
(its span lands in the leg that resumes it); ``unknown``: only coverage events name it."""
Emptiness: TypeAlias = Literal[
    "declared-absent", "undeclared-empty", "non-empty", "unknown", "unknown-shape", "not-recorded"
]
CoverageList: TypeAlias = Literal["checked", "notChecked", "cannotCover"]

COVERAGE_EVENTS = frozenset({semconv.T_TOOLS_ABSENT, semconv.T_TOOLS_COVERAGE})
MAX_SIGNALS_PER_CHECK = 12
"""Signals kept per check in the result (the "Anything wrong" row shows 3; the rest are counted)."""


@quick_init
@dataclass(frozen=True, slots=True)
class CoverageItem:
    """One declared coverage item ``{what, short?, kind?}`` and where it was read."""

    what: str
    short: str | None
    kind: str | None
    list_name: CoverageList
    event: FootprintEvent
    index: int

    @property
    def pointer(self) -> Pointer:
        """The item inside its event's JSON list attribute."""
        return at_event(self.event, self.list_name, self.index)


class Call(NamedTuple):
    """One tool call as the checks judge it (internal to the account: built for every tool call
    of a leg, so a named tuple, immutable and about half the cost of a frozen dataclass)."""

    name: str | None
    span: ToolCall | None
    coverage: tuple[FootprintEvent, ...]
    items: tuple[CoverageItem, ...]
    outcome: Outcome
    refusal: FootprintEvent | None
    emptiness: Emptiness | None
    """Judged calls only (outcome ``ran`` with a span)."""
    rows: int | None = None
    counted_by: str | None = None
    """``library`` (a top-level list) or ``app`` (its declared ``rowsAt`` key)."""
    result_pointer: Pointer | None = None
    paused_by: FootprintEvent | None = None
    """The ``pause.request`` naming a paused call."""

    @property
    def tool(self) -> str:
        """The tool as a sentence subject (``an unnamed tool`` when the record has none)."""
        name = self.name
        return "an unnamed tool" if not name else name if len(name) <= ID_CHARS else cut(name)

    @property
    def voucher(self) -> str:
        """What the tool itself says is vouched for by the tool."""
        return f"tool:{self.name}" if self.name else "app"

    def listed(self, kind: CoverageList) -> tuple[CoverageItem, ...]:
        """The items of one coverage list."""
        if not self.items:
            return ()
        return tuple(i for i in self.items if i.list_name == kind)


class Finding(NamedTuple):
    """A signal and its sentence as an "Anything wrong" line."""

    signal: Signal
    line: Line


class CheckOutcome(NamedTuple):
    """One check: its result, its findings (bounded) and why it could not run (lines)."""

    check: CheckResult
    findings: tuple[Finding, ...]
    finding_count: int
    unreachable: tuple[Line, ...]
    """Every reason the check could not run, as "Anything wrong" items (shown ≤ 3)."""


# ── reading the calls ────────────────────────────────────────────────────────────────────────


def calls_of(inp: AccountInput, view: LegView) -> tuple[tuple[Call, ...], int]:
    """Every call of the leg (tool spans first, then calls only coverage events name) and the
    number of unreadable coverage items skipped."""
    coverage: dict[str, list[FootprintEvent]] = {}
    by_span: dict[tuple[str, str], ToolCall] | None = None
    absent, declared = view.of(semconv.T_TOOLS_ABSENT), view.of(semconv.T_TOOLS_COVERAGE)
    # In leg order, both types interleaved: every event is walked only when both are present.
    for event in view.events if absent and declared else absent or declared:
        if event.type in COVERAGE_EVENTS:
            if by_span is None:  # only a coverage event without a call id needs it
                by_span = {(c.trace_id, c.span_id): c for c in inp.tool_calls}
            coverage.setdefault(_call_key(event, by_span), []).append(event)
    refusals = _tool_refusals(view)
    # A stuck agent repeats the same call and reads the same result: each distinct result text
    # is parsed once per account (the value is only read).
    results: dict[str, object] = {}
    unread = 0
    calls: list[Call] = []
    seen: set[str] = set()
    for span in inp.tool_calls:
        key = span.call_id if span.call_id is not None else _span_key(span)
        seen.add(key)
        found = coverage.get(key) if coverage else None
        if found:
            events = tuple(found)
            items, bad = _items(events)
            unread += bad
        else:
            events, items = (), ()
        calls.append(_judge(inp, span, events, items, refusals, results))
    for call_id, name, request in _paused_calls(view):
        if call_id in seen:
            continue
        seen.add(call_id)
        events = tuple(coverage.get(call_id, ()))
        items, bad = _items(events)
        unread += bad
        name = name or _named(events)
        calls.append(Call(name, None, events, items, "paused", None, None, paused_by=request))
    for key, events_list in coverage.items():
        if key in seen:
            continue
        events = tuple(events_list)
        items, bad = _items(events)
        unread += bad
        calls.append(Call(_named(events), None, events, items, "unknown", None, None))
    return tuple(calls), unread


def _named(events: tuple[FootprintEvent, ...]) -> str | None:
    return next((n for e in events if (n := as_str(e.payload.get("toolName")))), None)


def _paused_calls(view: LegView) -> list[tuple[str, str | None, FootprintEvent]]:
    """``(toolCallId, toolName, event)`` of the calls this leg paused on (``pause.request``)."""
    found: list[tuple[str, str | None, FootprintEvent]] = []
    for event in view.of(semconv.T_PAUSE_REQUEST):
        question = as_obj(event.payload.get("questionPayload"))
        call_id = as_str(question.get("toolCallId")) if question is not None else None
        if question is not None and call_id is not None:
            found.append((call_id, as_str(question.get("toolName")), event))
    return found


def _span_key(span: ToolCall) -> str:
    return span.call_id if span.call_id is not None else f"span:{span.trace_id}/{span.span_id}"


def _call_key(event: FootprintEvent, by_span: dict[tuple[str, str], ToolCall]) -> str:
    call_id = as_str(event.payload.get("toolCallId"))
    if call_id is not None:
        return call_id
    span = by_span.get((event.pointer.trace_id, event.pointer.span_id))
    if span is not None:
        return _span_key(span)
    # Neither an id nor a tool span: a call of its own, named by where the event sits.
    return f"event:{event.pointer.render()}"


def _items(events: tuple[FootprintEvent, ...]) -> tuple[tuple[CoverageItem, ...], int]:
    items: list[CoverageItem] = []
    bad = 0
    lists: tuple[CoverageList, ...] = ("checked", "notChecked", "cannotCover")
    for event in events:
        for list_name in lists:
            raw = event.payload.get(list_name)
            if raw is None:
                continue
            entries = as_list(raw)
            if entries is None:
                bad += 1
                continue
            for index, entry in enumerate(entries):
                obj = as_obj(entry)
                what = as_str(obj.get("what")) if obj is not None else None
                if obj is None or what is None:
                    bad += 1
                    continue
                items.append(
                    CoverageItem(
                        what,
                        as_str(obj.get("short")),
                        as_str(obj.get("kind")),
                        list_name,
                        event,
                        index,
                    )
                )
    return tuple(items), bad


def _tool_refusals(view: LegView) -> dict[tuple[str, str], list[FootprintEvent]]:
    """Refusing ``permission.check`` events by the span they sit on."""
    found: dict[tuple[str, str], list[FootprintEvent]] = {}
    for event in view.of(semconv.T_PERMISSION_CHECK):
        if event.payload.get("result") in semconv.PERMISSION_REFUSING_RESULTS:
            key = (event.pointer.trace_id, event.pointer.span_id)
            found.setdefault(key, []).append(event)
    return found


_NOT_JSON: object = object()
"""A result text that is not a JSON list or object (or not JSON at all)."""


def _parsed(text: str, results: dict[str, object]) -> object:
    """The JSON value of a result text that looks like a list or an object, else ``_NOT_JSON``
    (memoized in ``results``)."""
    try:
        value = json.loads(text) if text.lstrip()[:1] in ("{", "[") else _NOT_JSON
    except json.JSONDecodeError:
        value = _NOT_JSON
    results[text] = value
    return value


def _judge(
    inp: AccountInput,
    span: ToolCall,
    events: tuple[FootprintEvent, ...],
    items: tuple[CoverageItem, ...],
    refusals: dict[tuple[str, str], list[FootprintEvent]],
    results: dict[str, object],
) -> Call:
    name = span.name or _named(events)
    # Refused: a deny/halt check on the call's own span whose target is the tool itself (a
    # skill_read refusal on a read_skill span refuses the skill, not the call).
    if refusals:
        refusal = next(
            (
                e
                for e in refusals.get((span.trace_id, span.span_id), ())
                if name is not None and e.payload.get("target") == name
            ),
            None,
        )
        if refusal is not None:
            return Call(name, span, events, items, "refused", refusal, None)
    if span.error:
        return Call(name, span, events, items, "failed", None, None)
    # An attribute of the span itself (the tool's result): a pointer without an event.
    where = span.result_at or Pointer(
        span.trace_id, span.span_id, None, None, semconv.GEN_AI_TOOL_CALL_RESULT, None
    )
    emptiness: Emptiness
    rows: int | None = None
    counted_by: str | None = None
    if span.status == "absent" or (
        events and any(e.type == semconv.T_TOOLS_ABSENT for e in events)
    ):
        emptiness = "declared-absent"
    elif span.result is None:
        emptiness = "not-recorded"
    else:
        value = results.get(span.result, results)  # a repeated result: read in place
        if value is results:
            value = _parsed(span.result, results)
        if value is _NOT_JSON:
            emptiness = "unknown"
        elif isinstance(value, list):  # json.loads gives lists, never tuples
            emptiness = "non-empty" if value else "undeclared-empty"
            rows, counted_by = len(value), "library"
        else:
            obj = as_obj(value)
            rows_at = inp.declarations.rows_at_of(name)
            held = as_list(obj.get(rows_at)) if obj is not None and rows_at is not None else None
            if held is None or rows_at is None:
                emptiness = "unknown-shape"
            else:
                pointer = Pointer(
                    span.trace_id,
                    span.span_id,
                    attribute=semconv.GEN_AI_TOOL_CALL_RESULT,
                    json_path=_path(rows_at),
                )
                return Call(
                    name,
                    span,
                    events,
                    items,
                    "ran",
                    None,
                    "non-empty" if held else "undeclared-empty",
                    len(held),
                    "app",
                    pointer,
                )
    return Call(name, span, events, items, "ran", None, emptiness, rows, counted_by, where)


def _path(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


# ── check 2: existence ───────────────────────────────────────────────────────────────────────


def check_existence(calls: tuple[Call, ...], writer: Writer) -> CheckOutcome:
    """Per call with not-checked or cannot-cover items: unnamed or kind-less items make the check
    unreachable (and it stays so); otherwise reachable, each ``kind=existence`` item a signal."""
    state: CheckState = "not-applicable"
    findings: list[Finding] = []
    count = 0
    why: list[Line] = []
    pointers: list[Pointer] = []
    for call in calls:
        if not call.items:
            continue  # most calls declare nothing
        items = [i for i in call.items if i.list_name != "checked"]
        if not items:
            continue
        pointers += [at_event(e) for e in call.coverage]
        if call.name is None:
            state = "unreachable"
            why.append(_item(writer, "unreachable.unnamed", {}, "unreadable", call.coverage))
            continue
        if all(i.kind is None for i in items):
            state = "unreachable"
            values = {"tool": Var(call.tool)}
            why.append(
                _item(writer, "unreachable.existence", values, "not-declared", call.coverage)
            )
            continue
        if state != "unreachable":
            state = "reachable"
        for item in items:
            if item.kind != "existence":
                continue
            count += 1
            if len(findings) >= MAX_SIGNALS_PER_CHECK:
                continue
            never = item.list_name == "cannotCover"
            stem = "signal.existenceCannotCheck" if never else "signal.existenceNotChecked"
            values = {"tool": Var(call.tool)}
            if item.short is not None:
                values["short"] = writer.quote(item.short, call.voucher, item.pointer)
            else:
                stem += ".full"
                values["what"] = writer.quote(item.what, call.voucher, item.pointer)
            line = writer.say("anything-wrong", stem, values, basis=[call.voucher])
            signal = Signal("existence-not-checked", "existence", "warn", line.text, line.pointers)
            findings.append(Finding(signal, line))
    check = _result(
        "existence",
        state,
        findings,
        why,
        pointers,
        writer,
        "check.existence.passed",
        "check.existence.notApplicable",
    )
    return CheckOutcome(check, tuple(findings), count, tuple(why))


# ── check 3: empty results ───────────────────────────────────────────────────────────────────


def check_empty_results(
    calls: tuple[Call, ...], writer: Writer, unrecorded: tuple[int, ...] = ()
) -> CheckOutcome:
    """Judged calls (ran, with a span): reachable when there is one; an undeclared shape or a
    result not in the record makes it unreachable; each undeclared empty result is a signal.
    ``unrecorded``: passes whose calls are recorded nowhere make it unreachable too (the calls
    that are recorded are still judged, and their empty results still signalled)."""
    state: CheckState = "not-applicable"
    findings: list[Finding] = []
    count = 0
    why: list[Line] = []
    pointers: list[Pointer] = []
    if unrecorded:
        state = "unreachable"
        passes = ", ".join(map(str, unrecorded))
        label = f"pass {passes}" if len(unrecorded) == 1 else f"passes {passes}"
        why.append(
            writer.say(
                "anything-wrong",
                "unreachable.calls",
                {"passes": Var(label)},
                status="not-recorded",
                missing="no-event",
                item=True,
            )
        )
    for call in calls:
        if call.outcome != "ran" or call.emptiness is None:
            continue
        if call.result_pointer is not None:
            pointers.append(call.result_pointer)
        if call.emptiness in ("unknown-shape", "not-recorded"):
            state = "unreachable"
            template = (
                "unreachable.shape" if call.emptiness == "unknown-shape" else "unreachable.result"
            )
            missing = "not-declared" if call.emptiness == "unknown-shape" else "no-event"
            line = writer.say(
                "anything-wrong",
                template,
                {"tool": Var(call.tool)},
                status="not-recorded",
                missing=missing,
                pointers=[call.result_pointer] if call.result_pointer else [],
                item=True,
            )
            why.append(line)
            continue
        if state != "unreachable":
            state = "reachable"
        if call.emptiness != "undeclared-empty":
            continue
        count += 1
        if len(findings) >= MAX_SIGNALS_PER_CHECK:
            continue
        line = writer.say(
            "anything-wrong",
            "signal.undeclaredEmptyUsed",
            {"tool": Var(call.tool)},
            pointers=[call.result_pointer] if call.result_pointer else [],
            basis=[call.counted_by or "library"],
        )
        signal = Signal("undeclared-empty-used", "empty-results", "bad", line.text, line.pointers)
        findings.append(Finding(signal, line))
    check = _result(
        "empty-results",
        state,
        findings,
        why,
        pointers,
        writer,
        "check.empty.passed",
        "check.empty.notApplicable",
    )
    return CheckOutcome(check, tuple(findings), count, tuple(why))


def _item(
    writer: Writer,
    template_id: str,
    values: dict[str, Var],
    missing: str,
    coverage: tuple[FootprintEvent, ...],
) -> Line:
    return writer.say(
        "anything-wrong",
        template_id,
        values,
        status="not-recorded",
        missing=missing,
        pointers=[at_event(e) for e in coverage],
        item=True,
    )


def _result(
    check_id: CheckId,
    state: CheckState,
    findings: list[Finding],
    why: list[Line],
    pointers: list[Pointer],
    writer: Writer,
    passed: str,
    not_applicable: str,
) -> CheckResult:
    if state == "unreachable":
        return CheckResult(check_id, state, None, why[0].text, bounded(pointers))
    # Positional (id, state, outcome, sentence, pointers, label): keywords cost twice as much.
    if state == "not-applicable":
        return CheckResult(check_id, state, None, writer.text(not_applicable))
    if findings:
        return CheckResult(check_id, state, None, findings[0].line.text, bounded(pointers), "fail")
    return CheckResult(check_id, state, None, writer.text(passed), bounded(pointers), "pass")
