"""The rows around the checks, kept minimal but honest: You asked, It checked, It did not check,
It found, How sure (reference §4.8). What they leave out is said in ``account/README.md``."""

from __future__ import annotations

from otel_footprint import semconv
from otel_footprint.account.checks import Call, CoverageItem, CoverageList
from otel_footprint.account.input import AccountInput
from otel_footprint.account.model import Line, Pointer, RowId
from otel_footprint.account.pointers import at_event, at_state
from otel_footprint.account.templates import chip, count_phrase
from otel_footprint.account.view import LegView, as_str
from otel_footprint.account.writer import Var, Writer

CALLS_PER_ROW = 5
_NOT_DECLARED = (chip("chip.notDeclared"),)
"""The chip of a call that declared nothing (most calls, on two rows)."""
_NOT_CHECKED: tuple[tuple[CoverageList, str], ...] = (
    ("notChecked", "notChecked.declared"),
    ("cannotCover", "notChecked.cannotCover"),
)


def asked_lines(inp: AccountInput, view: LegView, writer: Writer) -> list[Line]:
    """The person's question: this leg's ``turn_start``; on a resumed leg the message the held
    state keeps, else the question of the earlier leg this processor saw; else not recorded."""
    start = view.first(semconv.T_TURN_START)
    prompt = as_str(start.payload.get("userPrompt")) if start is not None else None
    if start is not None and prompt is not None:
        question = writer.quote(prompt, "person", at_event(start, "userPrompt"))
        return [writer.say("asked", "asked.question", {"question": question})]
    observed = inp.observed
    if start is None and observed is not None and observed.question is not None:
        question = writer.quote(observed.question, "person", observed.question_pointer)
        return [writer.say("asked", "asked.question", {"question": question})]
    if inp.resumed and start is None:
        held = inp.held
        message = as_str(held.state.get("userMessage")) if held and held.state else None
        if held is not None and message is not None:
            where = at_state(held.event, "userMessage")
            values = {"message": writer.quote(message, "person", where)}
            return [writer.say("asked", "asked.resumed", values)]
        carried = inp.carried
        if carried is not None and carried.question is not None:
            values = {"message": writer.quote(carried.question, "person", carried.question_pointer)}
            return [writer.say("asked", "asked.carried", values)]
    return [writer.say("asked", "asked.none", status="not-recorded", missing="no-event")]


def _span_pointer(call: Call) -> list[Pointer]:
    span = call.span
    return [Pointer(span.trace_id, span.span_id)] if span is not None else []


def _pause_pointer(call: Call) -> list[Pointer]:
    request = call.paused_by
    return [at_event(request, "questionPayload", "toolCallId")] if request is not None else []


def _more(writer: Writer, row: RowId, template_id: str, calls: int, items: int) -> list[Line]:
    lines: list[Line] = []
    if calls > 0:
        more = Var(count_phrase(calls, "more tool call", "more tool calls"))
        lines.append(writer.say(row, template_id, {"more": more}))
    if items > 0:
        more = Var(count_phrase(items, "more item", "more items"))
        lines.append(writer.say(row, template_id, {"more": more}))
    return lines


def _bullets(
    writer: Writer, row: RowId, template_id: str, call: Call, items: tuple[CoverageItem, ...]
) -> tuple[list[Line], int]:
    """Item bullets within the shared item budget; returns the lines and how many did not fit."""
    lines: list[Line] = []
    for item in items:
        if not writer.take_item(len(item.what)):
            return lines, len(items) - len(lines)
        chips = []
        if row == "not-checked" and item.kind in ("existence", "scope"):
            chips.append(chip(f"chip.kind.{item.kind}"))
        what = writer.quote(item.what, call.voucher, item.pointer)
        lines.append(writer.say(row, template_id, {"what": what}, chips=chips, item=True))
    return lines, 0


def checked_lines(calls: tuple[Call, ...], writer: Writer) -> list[Line]:
    """What each listed call says it checked (or why it says nothing)."""
    if not calls:
        return [writer.say("checked", "checked.noCalls", status="not-applicable")]
    lines: list[Line] = []
    dropped = 0
    for call in calls[:CALLS_PER_ROW]:
        tool = {"tool": Var(call.tool)}
        if call.name is None:
            lines.append(writer.say("checked", "checked.unnamed", pointers=_span_pointer(call)))
        elif call.outcome == "refused" and call.refusal is not None:
            where = [at_event(call.refusal, "target")]
            lines.append(writer.say("checked", "checked.refused", tool, pointers=where))
        elif call.outcome == "failed":
            lines.append(
                writer.say("checked", "checked.failed", tool, pointers=_span_pointer(call))
            )
        elif call.outcome == "paused":
            lines.append(
                writer.say("checked", "checked.paused", tool, pointers=_pause_pointer(call))
            )
        elif call.listed("checked"):
            where = [at_event(e) for e in call.coverage]
            lines.append(
                writer.say(
                    "checked",
                    "checked.declared",
                    tool,
                    pointers=where,
                    chips=[chip("chip.declared")],
                    basis=[call.voucher],
                )
            )
            bullets, left = _bullets(
                writer, "checked", "checked.item", call, call.listed("checked")
            )
            lines += bullets
            dropped += left
        else:
            lines.append(
                writer.say(
                    "checked",
                    "checked.undeclared",
                    tool,
                    status="not-recorded",
                    missing="not-declared",
                    pointers=_span_pointer(call),
                    chips=_NOT_DECLARED,
                )
            )
    return lines + _more(
        writer, "checked", "checked.more", max(0, len(calls) - CALLS_PER_ROW), dropped
    )


def not_checked_lines(calls: tuple[Call, ...], writer: Writer) -> list[Line]:
    """What each listed call that ran says it did not (or can never) check."""
    if not calls:
        return [writer.say("not-checked", "notChecked.noCalls", status="not-applicable")]
    lines: list[Line] = []
    dropped = 0
    for call in calls[:CALLS_PER_ROW]:
        if call.outcome in ("refused", "failed", "paused"):
            continue  # it did not run (or has not yet): "It checked" says so
        tool = {"tool": Var(call.tool)}
        where = [at_event(e) for e in call.coverage]
        if not call.coverage:
            lines.append(
                writer.say(
                    "not-checked",
                    "notChecked.undeclared",
                    tool,
                    status="not-recorded",
                    missing="not-declared",
                    pointers=_span_pointer(call),
                    chips=_NOT_DECLARED,
                )
            )
            continue
        said = False
        for kind, template in _NOT_CHECKED:
            items = call.listed(kind)
            if not items:
                continue
            said = True
            lines.append(
                writer.say("not-checked", template, tool, pointers=where, basis=[call.voucher])
            )
            bullets, left = _bullets(writer, "not-checked", "notChecked.item", call, items)
            lines += bullets
            dropped += left
        if not said:
            lines.append(
                writer.say(
                    "not-checked", "notChecked.none", tool, pointers=where, basis=[call.voucher]
                )
            )
    if not lines:
        lines.append(writer.say("not-checked", "notChecked.notRun", status="not-applicable"))
    return lines + _more(
        writer, "not-checked", "notChecked.more", max(0, len(calls) - CALLS_PER_ROW), dropped
    )


def found_lines(calls: tuple[Call, ...], writer: Writer) -> list[Line]:
    """What each listed call returned, read from what the model read."""
    if not calls:
        return [writer.say("found", "found.noCalls", status="not-applicable")]
    lines: list[Line] = []
    for call in calls[:CALLS_PER_ROW]:
        tool = {"tool": Var(call.tool)}
        result = [call.result_pointer] if call.result_pointer is not None else []
        if call.outcome == "refused" and call.refusal is not None:
            where = [at_event(call.refusal, "target")]
            lines.append(writer.say("found", "found.refused", tool, pointers=where))
        elif call.outcome == "failed":
            lines.append(writer.say("found", "found.failed", tool, pointers=_span_pointer(call)))
        elif call.outcome == "paused":
            lines.append(writer.say("found", "found.paused", tool, pointers=_pause_pointer(call)))
        elif call.emptiness == "declared-absent":
            where = [
                at_event(e) for e in call.coverage if e.type == semconv.T_TOOLS_ABSENT
            ] or result
            lines.append(
                writer.say("found", "found.absent", tool, pointers=where, basis=[call.voucher])
            )
        elif call.emptiness == "undeclared-empty":
            lines.append(
                writer.say(
                    "found",
                    "found.undeclaredEmpty",
                    tool,
                    pointers=result,
                    chips=[chip("chip.undeclaredEmpty")],
                    basis=[call.counted_by or "library"],
                )
            )
        elif call.emptiness == "non-empty" and call.rows is not None:
            rows = Var(count_phrase(call.rows, "row", "rows"), call.counted_by)
            lines.append(writer.say("found", "found.rows", {**tool, "rows": rows}, pointers=result))
        elif call.emptiness == "unknown" and call.span is not None and call.span.result is not None:
            text = writer.quote(call.span.result, call.voucher, call.result_pointer)
            lines.append(writer.say("found", "found.result", {**tool, "result": text}))
        elif call.emptiness == "unknown-shape":
            lines.append(
                writer.say(
                    "found", "found.shapeUnknown", tool, pointers=result, basis=[call.voucher]
                )
            )
        elif call.emptiness == "not-recorded":
            lines.append(
                writer.say(
                    "found",
                    "found.notRecorded",
                    tool,
                    status="not-recorded",
                    missing="no-event",
                    pointers=_span_pointer(call),
                )
            )
    return lines + _more(writer, "found", "found.more", max(0, len(calls) - CALLS_PER_ROW), 0)


def _not_recorded(template_id: str, missing: str) -> Line:
    return Writer().say(
        "how-sure", template_id, status="not-recorded", missing=missing, chips=_NOT_RECORDED
    )


_NOT_RECORDED = (chip("chip.notRecorded"),)
# Lines that never vary: written once (lines are immutable).
_STANDING_NONE = _not_recorded("howSure.standing.none", "not-built")
_EVIDENCE_NOT_READ = _not_recorded("howSure.evidence.notRecorded", "not-built")
_EVIDENCE_NO_EVENT = _not_recorded("howSure.evidence.notRecorded", "no-event")


def how_sure_lines(view: LegView, writer: Writer) -> list[Line]:
    """The standing is not rated here; the evidence gate is off, or its verdict not read."""
    configured = view.first(semconv.T_RUN_CONFIGURED)
    if configured is None:
        return [_STANDING_NONE, _EVIDENCE_NO_EVENT]
    if configured.payload.get("evidenceGate") not in (None, False):
        return [_STANDING_NONE, _EVIDENCE_NOT_READ]
    where = [at_event(configured)]
    off = writer.say("how-sure", "howSure.evidence.off", status="not-applicable", pointers=where)
    return [_STANDING_NONE, off]
