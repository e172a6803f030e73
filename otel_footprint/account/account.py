"""``account_for``: the whole account of one leg — seven rows, three checks, signals, a summary.

A pure fold: the same :class:`AccountInput` always gives the same :class:`AccountResult`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, TypeAlias

from otel_footprint.account.checks import (
    Call,
    CheckOutcome,
    Finding,
    calls_of,
    check_empty_results,
    check_existence,
)
from otel_footprint.account.input import AccountInput
from otel_footprint.account.model import AccountResult, CheckResult, Line, Summary, Tone
from otel_footprint.account.rows import (
    asked_lines,
    checked_lines,
    found_lines,
    how_sure_lines,
    not_checked_lines,
)
from otel_footprint.account.templates import chip, count_phrase
from otel_footprint.account.understood import Understood, held_verdict, read_understood
from otel_footprint.account.view import leg_view
from otel_footprint.account.writer import Var, Writer

SHOWN_PER_CHECK = 3
"""Signal lines and unreachable lines shown per check in "Anything wrong"; the rest counted."""

PauseKind: TypeAlias = Literal["lost", "held", "held-events", "carried"]

_NO_ERRORS = Writer().say("anything-wrong", "wrong.noErrors")
"""A line that never varies: written once (lines are immutable)."""


def account_for(inp: AccountInput) -> AccountResult:
    """The account of one run leg (reference §4): rows, checks 1–3, signals and the summary."""
    view = leg_view(inp)
    writer = Writer()
    asked = asked_lines(inp, view, writer)
    understood = read_understood(inp, view, writer)
    calls, unreadable_items = calls_of(inp, view)
    existence = check_existence(calls, writer)
    empty = check_empty_results(calls, writer, inp.unrecorded_passes)
    rows = [
        *asked,
        *understood.lines,
        *checked_lines(calls, writer),
        *not_checked_lines(calls, writer),
        *found_lines(calls, writer),
        *how_sure_lines(view, writer),
    ]
    checks = (understood.check, existence.check, empty.check)
    findings = _findings(understood, existence, empty)
    pause = _pause_kind(inp, understood)
    wrong = _anything_wrong(
        writer, calls, checks, findings, _unreachable(understood, existence, empty), pause
    )
    summary = _summary(inp, writer, checks, findings, pause)
    return AccountResult(
        (*rows, *wrong),  # lines
        checks,
        tuple(f.signal for found, _ in findings for f in found),  # signals
        summary,
        understood.facts,  # routing
        understood.unread + unreadable_items + writer.unread,  # unread
    )


def _findings(
    understood: Understood, existence: CheckOutcome, empty: CheckOutcome
) -> list[tuple[tuple[Finding, ...], int]]:
    """Findings per check in priority order (check 1, 2, 3), each with its full count."""
    first: tuple[Finding, ...] = ()
    if understood.signal is not None and understood.signal_line is not None:
        first = (Finding(understood.signal, understood.signal_line),)
    return [
        (first, len(first)),
        (existence.findings, existence.finding_count),
        (empty.findings, empty.finding_count),
    ]


def _unreachable(
    understood: Understood, existence: CheckOutcome, empty: CheckOutcome
) -> list[tuple[Line, ...]]:
    first = (understood.unreachable,) if understood.unreachable is not None else ()
    return [first, existence.unreachable, empty.unreachable]


def _pause_kind(inp: AccountInput, understood: Understood) -> PauseKind | None:
    """How a resumed leg knows what came before its pause (None: not a resumed leg).

    ``held-events``: the routing verdict was read from the held state; ``held``: a routed agent's
    held state holds no verdict (reference H3); ``carried``: read from the run's earlier leg;
    ``lost``: nothing from before the pause, or an app that does not route (reference F).
    """
    if not inp.resumed:
        return None
    verdict = understood.verdict
    if verdict is not None and verdict.origin == "carried":
        return "carried"
    if verdict is not None and verdict.origin == "held":
        return "held-events"
    routed = understood.facts.configured != "none"
    if inp.held is not None and inp.held.complete and routed:
        return "held-events" if held_verdict(inp) is not None else "held"
    return "lost"


def _anything_wrong(
    writer: Writer,
    calls: tuple[Call, ...],
    checks: tuple[CheckResult, ...],
    findings: list[tuple[tuple[Finding, ...], int]],
    unreachable: list[tuple[Line, ...]],
    pause: PauseKind | None,
) -> list[Line]:
    """The "Anything wrong" row, in the reference's order (§4.7)."""
    lines: list[Line] = []
    more = 0
    for found, count in findings:
        lines += [f.line for f in found[:SHOWN_PER_CHECK]]
        more += count - min(SHOWN_PER_CHECK, len(found))
    errors = _tool_errors_line(writer, calls)
    if errors is not None:
        lines.append(errors)
    states = [c.state for c in checks]
    reachable, unreached = states.count("reachable"), states.count("unreachable")
    applicable = reachable + unreached
    any_signal = any(count for _, count in findings)
    if not any_signal and reachable >= 1:
        lines.append(_none_found(reachable))
    if unreached:
        lines.append(_unreachable_line(unreached, applicable))
        for why in unreachable:
            lines += why[:SHOWN_PER_CHECK]
            more += max(0, len(why) - SHOWN_PER_CHECK)
    if more:
        lines.append(writer.say("anything-wrong", "wrong.more", {"more": Var(f"{more} more")}))
    if applicable == 0:
        lines.append(writer.say("anything-wrong", "wrong.notApplicable", status="not-applicable"))
    if pause is not None:
        lines.append(_before_pause_line(writer, pause))
    return lines


def _tool_errors_line(writer: Writer, calls: tuple[Call, ...]) -> Line | None:
    """How many of the calls that ran on a span failed or were refused (or that none did);
    None when no call is on a span."""
    on_spans = failed = refused = 0
    for call in calls:
        if call.span is not None:
            on_spans += 1
            if call.outcome == "failed":
                failed += 1
            elif call.outcome == "refused":
                refused += 1
    if not on_spans:
        return None
    if not failed + refused:
        return _NO_ERRORS
    values = {
        "calls": Var(count_phrase(failed + refused, "tool call", "tool calls")),
        "failed": Var(str(failed)),
        "refused": Var(str(refused)),
        # Checkins and dispatch refusals are not in the OTel input: none recorded.
        "declined": Var("0"),
        "notRun": Var("0"),
    }
    return writer.say("anything-wrong", "wrong.errors", values)


# The two lines below depend on a few small counts only: each is written once per count.


@lru_cache(maxsize=16)
def _none_found(reachable: int) -> Line:
    """The checks that could run found nothing."""
    checks = {"checks": Var(count_phrase(reachable, "check", "checks"))}
    return Writer().say("anything-wrong", "wrong.none", checks, chips=[chip("chip.noneFound")])


@lru_cache(maxsize=16)
def _unreachable_line(unreached: int, applicable: int) -> Line:
    """How many of the applicable checks could not run."""
    if unreached == applicable:
        return Writer().say("anything-wrong", "wrong.unreachable.all")
    values = {"u": Var(str(unreached)), "a": Var(str(applicable))}
    return Writer().say("anything-wrong", "wrong.unreachable", values)


def _before_pause_line(writer: Writer, pause: PauseKind) -> Line:
    """What a resumed leg knows of the leg before its pause."""
    template = {
        "lost": "wrong.beforePause",
        "held": "wrong.beforePause.held",
        "held-events": "wrong.beforePause.held.events",
        "carried": "wrong.beforePause.carried",
    }[pause]
    status: Literal["recorded", "not-recorded"] = (
        "recorded" if pause == "carried" else "not-recorded"
    )
    return writer.say(
        "anything-wrong",
        template,
        status=status,
        missing=None if pause == "carried" else "before-pause",
        chips=[chip("chip.beforePause")] if pause == "lost" else [],
    )


def _summary(
    inp: AccountInput,
    writer: Writer,
    checks: tuple[CheckResult, ...],
    findings: list[tuple[tuple[Finding, ...], int]],
    pause: PauseKind | None,
) -> Summary:
    """The one-liner: first matching rule of §4.7; a resumed leg that knows what came before
    (held state, or a verdict carried from the earlier leg) is judged normally, with a note."""
    if not inp.answered:
        return Summary("summary.unfinished", writer.text("summary.unfinished"), "unknown")
    note = {
        "held": "summary.resumed.held",
        "held-events": "summary.resumed.held",
        "carried": "summary.resumed.carried",
    }.get(pause or "")
    signals = [f.signal for found, _ in findings for f in found]
    if signals:
        text = " ".join(s.sentence for s in signals[:2])
        appended = "summary.signals.beforePause" if pause == "lost" else note
        return _with_note(writer, Summary("summary.signals", text, signals[0].tone), appended)
    if pause == "lost":
        return Summary("summary.resumed", writer.text("summary.resumed"), "unknown")
    states = [c.state for c in checks]
    reachable, unreached = states.count("reachable"), states.count("unreachable")
    applicable = reachable + unreached
    template: str
    tone: Tone
    values: dict[str, Var] = {}
    if applicable and unreached == applicable:
        template, tone = "summary.none.nothingRun", "unknown"
    elif unreached:
        template, tone = "summary.none.partial", "unknown"
        values = {"u": Var(str(unreached)), "a": Var(str(applicable))}
    elif not applicable:
        template, tone = "summary.none.notApplicable", "unknown"
    else:
        template, tone = "summary.none", "ok"
    return _with_note(writer, Summary(template, writer.text(template, values), tone), note)


def _with_note(writer: Writer, summary: Summary, note: str | None) -> Summary:
    if note is None:
        return summary
    return Summary(
        summary.template_id,
        f"{summary.sentence} {writer.text(note)}",
        summary.tone,
        appended=(note,),
    )
