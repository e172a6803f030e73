"""The words ``explain`` prints, shared by its text and HTML views: changes, rows, numbers, repeats.

One place for how a kernel change, a row title, a riding total or a long float reads, so the two
views (and the glossary in ``docs/glossary.md``) say the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar, cast

from otel_footprint.account.integrity import combined_tone
from otel_footprint.commands.integrity_words import CHECK_WORDS, summary_words
from otel_footprint.engine.verdict import PassVerdict, RunVerdict
from otel_footprint.kernel.ladder import is_tentative
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.kernel.types import (
    EngagedChange,
    EngagementChange,
    MapEngagementRecord,
    ParkedChange,
    Strength,
)

T = TypeVar("T")

ROW_TITLES = {
    "asked": "You asked",
    "understood": "It understood",
    "checked": "It checked",
    "not-checked": "It did not check",
    "found": "It found",
    "how-sure": "How sure",
    "anything-wrong": "Anything wrong",
}

CHECK_TITLES = {
    "decided-delivered": "Check 1 · the decided skill reached the model",
    "existence": "Check 2 · it checked that the thing exists",
    "empty-results": "Check 3 · empty results said what they searched",
}

TONE_WORDS = {
    "bad": "something went wrong",
    "warn": "worth a look",
    "ok": "nothing wrong found",
    "unknown": "partly checked",
    "plain": "",
}

_LONG_FLOAT = re.compile(r"(?<![\w.])(\d+\.\d{3,})(?![\w.])")


def round_numbers(text: str) -> str:
    """``0.7071067811865475`` → ``0.71``: numbers a person reads (ids and versions untouched)."""
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group(1)):.2f}", text)


def grade(by: str) -> str:
    """An evidence grade in words: ``lexical (a guess)``, ``explicit``."""
    return f"{by} (a guess)" if is_tentative(cast(Strength, by)) else by


def describe_change(change: EngagementChange) -> str:
    """A change in words: ``skill-map engaged by lexical witness "zone"``."""
    if isinstance(change, ParkedChange):
        text = f"{change.map_id} PARKED (rested on {change.by}, {change.idle_calls} idle calls)"
    else:
        text = f"{change.map_id} {_how(change)} by {change.by}"
        if change.at is not None:
            text += f" at {change.at}"
        if change.founded_by is not None:
            text += f" (founded {change.founded_by})"
    if change.witness is not None:
        text += f' witness "{change.witness}"'
    return text


def _how(change: EngagedChange) -> str:
    if change.reengaged:
        return "re-engaged"
    if change.upgraded:
        return "upgraded"
    return "changed tenant" if change.tenant_changed else "engaged"


def standing_text(records: Sequence[MapEngagementRecord]) -> str:
    """``skill-map: PARKED lexical idle 3``: each map's standing after the pass."""
    if not records:
        return "-"
    return ", ".join(
        f"{r.map_id}: {'PARKED' if r.standing == 'parked' else 'engaged'} {r.by} idle {r.idle}"
        for r in records
    )


def rode_ids(verdict: PassVerdict) -> tuple[str, ...]:
    """What rode the pass: the recorded injections of map members (and the park card); without
    injection rows, what ``context.evaluated`` declared active."""
    return verdict.rode if verdict.rode is not None else verdict.served


def rode_text(verdict: PassVerdict) -> str:
    names = ["park card" if i == PARK_CARD_ID else i for i in rode_ids(verdict)]
    return ", ".join(names) if names else "-"


def riding_totals(verdict: RunVerdict) -> list[str]:
    """One line per map that rode while parked: ids, calls, range and characters."""
    out = []
    for rode in verdict.rode_while_parked:
        calls = "call" if rode.passes == 1 else "calls"
        span = (
            f"{rode.first_iteration}"
            if rode.first_iteration == rode.last_iteration
            else f"{rode.first_iteration}–{rode.last_iteration}"
        )
        out.append(
            f"{', '.join(rode.ids)} ({rode.map_id}) rode {rode.passes} {calls} while parked "
            f"({span}): {rode.chars:,} characters"
        )
    return out


def collapse(items: Iterable[T], key: Callable[[T], Hashable]) -> list[tuple[T, int]]:
    """Consecutive items with the same key folded into (first, count)."""
    out: list[tuple[T, int]] = []
    last: Hashable = object()
    for item in items:
        k = key(item)
        if out and k == last:
            first, n = out[-1]
            out[-1] = (first, n + 1)
        else:
            out.append((item, 1))
        last = k
    return out


def engagement_story(verdict: RunVerdict) -> str:
    """The kernel's story of a run in one line: ``call 1: skill-map engaged on a lexical guess
    (“zone”) · call 4: parked after 3 idle calls · the park card stood in on 27 calls``."""
    shadow = verdict.mode == "shadow"
    parts: list[str] = []
    routing = verdict.account.routing if verdict.account is not None else None
    if routing is not None and routing.verdict is not None and routing.verdict.to:
        given = ", ".join(routing.delivered) or "nothing recorded"
        parts.append(f"routing decided {routing.verdict.to}, the model was given {given}")
    for p in verdict.passes:
        for change in p.changes:
            if isinstance(change, ParkedChange):
                verb = "would have parked" if shadow else "parked"
                parts.append(
                    f"call {p.iteration}: {change.map_id} {verb} after {change.idle_calls} "
                    "idle calls"
                )
                continue
            how = _how(change)
            evidence = (
                f"on a {change.by} guess" if is_tentative(change.by) else f"by {change.by} evidence"
            )
            witness = f" (“{change.witness}”)" if change.witness else ""
            parts.append(f"call {p.iteration}: {change.map_id} {how} {evidence}{witness}")
    cards = sum(1 for p in verdict.passes if PARK_CARD_ID in rode_ids(p))
    if cards:
        parts.append(f"the park card stood in on {cards} call{'s' if cards != 1 else ''}")
    for rode in verdict.rode_while_parked:
        parts.append(
            f"{', '.join(rode.ids)} still rode {rode.passes} call{'s' if rode.passes != 1 else ''}"
            f" ({rode.chars:,} characters)"
        )
    mismatches = sum(1 for p in verdict.passes if p.mismatch)
    if mismatches:
        parts.append(f"the agent's own kernel disagreed on {mismatches} calls")
    return " · ".join(parts)


def verdict_tone(verdict: RunVerdict) -> str:
    """A run's tone: the account summary's, with the integrity result folded in."""
    if verdict.account is None:
        return "unknown"
    return combined_tone(verdict.account.summary.tone, verdict.integrity)


def verdict_sentence(verdict: RunVerdict) -> str:
    """What a run's record shows, in one sentence (two when the integrity checks contradict it)."""
    if verdict.account is None:
        if verdict.reasons:
            return f"Not decided: {verdict.reasons[0].message}"
        return "The account was not computed for this run."
    text = round_numbers(verdict.account.summary.sentence)
    if verdict.integrity is not None and verdict.integrity.contradictions:
        text += f" Integrity: {round_numbers(summary_words(verdict.integrity))}"
    return text


def verdict_word(verdicts: Sequence[RunVerdict], tone: str) -> str:
    """The badge: the tone in words; ``costly`` when the warning is what rode while parked."""
    if tone == "warn" and any(
        v.account is not None
        and v.account.signals
        and v.account.signals[0].signal_id == "rode-while-parked"
        for v in verdicts
    ):
        return "costly"
    return TONE_WORDS.get(tone, tone) or tone


def check_outcome(state: str, label: str) -> str:
    """A check's result in words: ``passed``, ``failed``, ``could not run``, ``does not apply``."""
    if state == "reachable":
        return {"pass": "passed", "fail": "FAILED"}.get(label, label)
    return "could not run" if state == "unreachable" else "does not apply"


# ── which calls a failed check points at ───────────────────────────────────────────────────────


def failures(verdict: RunVerdict) -> dict[str, tuple[tuple[int, ...], str]]:
    """What failed in a run -> (the calls it points at, its sentence): each failed check (by the
    calls its pointers and its signal's name) and each integrity check that found a
    contradiction (by the calls it was found on). A failure that points at no call (a claim about
    the answer) is shown on the last call, the one that answered."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    by_span = {p.span_id: p.iteration for p in verdict.passes if p.span_id}
    last = (verdict.passes[-1].iteration,) if verdict.passes else ()
    account = verdict.account
    if account is not None:
        for number, check in enumerate(account.checks, start=1):
            if check.state != "reachable" or check.label != "fail":
                continue
            pointers = list(check.pointers)
            for signal in account.signals:
                if signal.check_id == check.check_id:
                    pointers += signal.pointers
            calls = sorted({by_span[p.span_id] for p in pointers if p.span_id in by_span})
            sentence = round_numbers(check.sentence or verdict_sentence(verdict))
            out[f"check {number} failed"] = (tuple(calls) or last, sentence)
    if verdict.integrity is not None:
        for finding in verdict.integrity.contradictions:
            name = CHECK_WORDS.get((finding.kind, finding.seam), finding.kind)
            known, sentence = out.get(f"found: {name}", ((), finding.message))
            at = (finding.iteration,) if finding.iteration is not None else last
            out[f"found: {name}"] = (tuple(sorted({*known, *at})), sentence)
    return out


def failing_calls(verdict: RunVerdict) -> dict[int, str]:
    """Call number -> what failed on it (``check 1 failed``), from :func:`failures`."""
    failed: dict[int, list[str]] = {}
    for what, (calls, _) in failures(verdict).items():
        for call in calls:
            failed.setdefault(call, []).append(what)
    return {call: "; ".join(whats) for call, whats in sorted(failed.items())}
