"""How integrity results read: row explanations, the run sentence, signal ids and the tone they
lend the run's summary. Shared by the span annotations and ``explain`` (one rule, both outputs).

Advisories are never failures: they add no signal of their own and lend at most a ``warn`` tone.
"""

from __future__ import annotations

from otel_footprint.account.integrity.model import ADVISORY_KINDS, IntegrityResult, Row
from otel_footprint.account.integrity.texts import say
from otel_footprint.account.model import Tone

_TONE_RANK: dict[str, int] = {"plain": 0, "ok": 1, "unknown": 2, "warn": 3, "bad": 4}


def row_explanation(row: Row, result: IntegrityResult) -> str:
    """The ``gen_ai.evaluation.explanation`` of one row."""
    state = row.state
    if state == "fail":
        mine = [f for f in result.findings if f.kind == row.check and f.seam == row.seam]
        if not mine:
            return say("row.pass", checked=row.checked)
        if row.check in ADVISORY_KINDS:
            return say("row.advisory", message=mine[0].message)
        if len(mine) > 1:
            return say("row.fail.more", message=mine[0].message, more=len(mine) - 1)
        return say("row.fail", message=mine[0].message)
    if state == "pass":
        # A passing row may still carry advisories (a declined claim, a shadow park's cost).
        noted = [
            f for f in result.findings if f.kind == row.check and f.seam == row.seam and f.advisory
        ]
        if noted:
            return say("row.advisory", message=noted[0].message)
        return say("row.pass", checked=row.checked)
    why = "; ".join(row.why[:3]) or "no subject met"
    return say("row.unreachable" if state == "unreachable" else "row.notApplicable", why=why)


def row_label(row: Row) -> str:
    """``pass`` / ``fail`` / ``unknown`` / ``not_applicable``; an advisory row is never ``fail``."""
    if row.check in ADVISORY_KINDS and row.state == "fail":
        return "pass"
    return row.label


def pass_states(result: IntegrityResult) -> dict[int, str]:
    """Each judged pass's own state over the armed checks' encounters at it: ``fail`` (a
    contradiction there) > ``unreachable`` > ``pass`` > ``not-applicable``; advisories count as
    ``pass``."""
    rank = {"not-applicable": 0, "pass": 1, "unreachable": 2, "fail": 3}
    states: dict[int, str] = {}
    for (check, _), encounters in result.encounters.items():
        for encounter in encounters:
            if encounter.iteration is None:
                continue
            state = encounter.disposition
            if state == "fail" and check in ADVISORY_KINDS:
                state = "pass"
            prior = states.get(encounter.iteration, "not-applicable")
            states[encounter.iteration] = state if rank[state] > rank[prior] else prior
    return states


def signal_ids(result: IntegrityResult) -> tuple[str, ...]:
    """``integrity.<kind>`` for every kind with a contradiction (advisories raise none)."""
    return tuple(dict.fromkeys(f"integrity.{f.kind}" for f in result.contradictions))


def unreachable_rows(result: IntegrityResult) -> tuple[str, ...]:
    return tuple(f"{r.check}@{r.seam}" for r in result.rows if r.armed and r.state == "unreachable")


def summary_sentence(result: IntegrityResult) -> str:
    contradictions = result.contradictions
    if contradictions:
        kinds = ", ".join(dict.fromkeys(f.kind for f in contradictions))
        return say("summary.fail", n=len(contradictions), kinds=kinds)
    if result.disagreements:  # verify mode: a disagreement is a finding of its own
        return say("summary.disagreement", n=len(result.disagreements))
    unreached = unreachable_rows(result)
    if unreached:
        return say("summary.unreachable", rows=", ".join(unreached))
    if result.advisories:
        return say("summary.advisory", n=len(result.advisories))
    if any(r.armed and r.state == "pass" for r in result.rows):
        return say("summary.pass")
    return say("summary.notApplicable")


def summary_body(result: IntegrityResult) -> str:
    """The summary sentence without its ``Integrity:`` lead, for a place that already says so
    (a heading or a label of its own)."""
    body = summary_sentence(result).removeprefix("Integrity: ")
    return body[:1].upper() + body[1:]


def combined_tone(account_tone: Tone, result: IntegrityResult | None) -> Tone:
    """The run summary's tone with the integrity result folded in: a contradiction (or, in verify
    mode, a disagreement) makes it ``bad``; advisories make it at most ``warn``. Rows that could
    not be judged leave it alone (they are listed in ``footprint.integrity.unreachable`` and the
    integrity sentence), so a run without captured content keeps the account's own tone."""
    if result is None:
        return account_tone
    if result.contradictions or result.disagreements:
        return "bad"
    if result.advisories and _TONE_RANK[account_tone] < _TONE_RANK["warn"]:
        return "warn"
    return account_tone
