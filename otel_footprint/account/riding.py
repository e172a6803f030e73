"""Shadow mode's finding as a signal: what kept riding after the kernel would have parked it.

The engagement replay (``engine/``) measures, per mounted map, the injections that were still given
to the model on passes where the kernel would have parked the map, and their characters. This module
turns that measurement into the account's words: a ``rode-while-parked`` signal, a line in the
"Anything wrong" row and the summary (which then names the riding skills and their characters), so
the run's headline is the cost parking would have saved, not "nothing turned up".

A pure function over frozen data, like the rest of the account.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from otel_footprint.account.model import (
    AccountResult,
    Line,
    Pointer,
    Signal,
    SignalId,
    Summary,
    Tone,
)
from otel_footprint.account.templates import count_phrase
from otel_footprint.account.writer import Writer
from otel_footprint.codec import quick_init

SIGNAL_ID: SignalId = "rode-while-parked"
LINE_TEMPLATE = "wrong.rodeWhileParked"
SUMMARY_TEMPLATE = "summary.rodeWhileParked"
SOURCE = "replay"
"""The voucher of these lines: otel_footprint's own replay of the kernel over the record."""
SHOWN_POINTERS = 3
"""Evidence pointers kept per map: the first passes it rode while parked."""

SHOWN_SIGNAL_LINES = 3
"""The check signals' lines the riding lines follow in "Anything wrong" (most-severe first)."""

_SEVERITY: dict[Tone, int] = {"bad": 0, "warn": 1, "unknown": 2, "ok": 3, "plain": 4}


@quick_init
@dataclass(frozen=True, slots=True)
class RodeWhileParked:
    """One map's riding while parked, over a run leg."""

    map_id: str
    ids: tuple[str, ...]
    """The map's injection ids that rode while it would have been parked, first-rode order."""
    passes: int
    """Passes on which at least one of them rode while parked."""
    chars: int
    """Their characters over those passes (what parking would have saved)."""
    first_iteration: int
    last_iteration: int
    chars_by_id: tuple[tuple[str, int], ...] = ()
    pointers: tuple[Pointer, ...] = ()
    """The pass spans' ``footprint.engagement.served_while_parked`` (the first few)."""


def thousands(n: int) -> str:
    """``7,776``: counts a person reads."""
    return f"{n:,}"


def riding_sentence(rode: RodeWhileParked) -> str:
    """``zone-audit kept riding on 27 calls (4–30) after skill-map would have been parked:
    7,776 characters parking would have saved.``"""
    names = ", ".join(rode.ids)
    span = (
        f"call {rode.first_iteration}"
        if rode.first_iteration == rode.last_iteration
        else f"calls {rode.first_iteration}–{rode.last_iteration}"
    )
    return (
        f"{names} kept riding on {count_phrase(rode.passes, 'call', 'calls')} ({span}) after "
        f"{rode.map_id} would have been parked: {thousands(rode.chars)} characters parking "
        "would have saved."
    )


def with_riding(account: AccountResult, rode: Sequence[RodeWhileParked]) -> AccountResult:
    """The account with one ``rode-while-parked`` signal per map that rode while parked.

    Signals stay in severity order (a ``bad`` check-1 finding before this ``warn``); the summary
    names the top two signals, like the account's own rule, keeping its resumed-leg note.
    """
    if not rode:
        return account
    signals = [
        Signal(SIGNAL_ID, None, "warn", riding_sentence(r), r.pointers) for r in rode if r.chars
    ] or [Signal(SIGNAL_ID, None, "warn", riding_sentence(r), r.pointers) for r in rode]
    lines = [
        Line(
            row="anything-wrong",
            template_id=LINE_TEMPLATE,
            text=s.sentence,
            status="recorded",
            source=SOURCE,
            pointers=s.pointers,
        )
        for s in signals
    ]
    wrong_at = next(
        (i for i, line in enumerate(account.lines) if line.row == "anything-wrong"),
        len(account.lines),
    )
    # After the check signals' own lines (they come first in the row), before the rest.
    own = min(len(account.signals), SHOWN_SIGNAL_LINES, _row_length(account.lines, wrong_at))
    insert_at = wrong_at + own
    merged = sorted([*account.signals, *signals], key=lambda s: _SEVERITY.get(s.tone, 5))
    # ``dataclasses.replace`` of lines, signals and summary, built positionally (cheaper).
    return AccountResult(
        (*account.lines[:insert_at], *lines, *account.lines[insert_at:]),
        account.checks,
        tuple(merged),
        _summary(account.summary, account.signals, merged),
        account.routing,
        account.unread,
    )


def _row_length(lines: Sequence[Line], start: int) -> int:
    n = 0
    for line in lines[start:]:
        if line.row != "anything-wrong":
            break
        n += 1
    return n


def _summary(old: Summary, before: Sequence[Signal], merged: Sequence[Signal]) -> Summary:
    top = merged[:2]
    text = " ".join(s.sentence for s in top)
    if old.template_id == "summary.unfinished":
        # The record does not show the run finishing: say so first, then what rode.
        text = f"{old.sentence} {text}"
    else:
        # The resumed-leg notes the account appended stay after the new sentences.
        writer = Writer()
        text = " ".join([text, *(writer.text(note) for note in old.appended)])
    template = old.template_id if before else SUMMARY_TEMPLATE
    return Summary(template, text, top[0].tone, old.appended)
