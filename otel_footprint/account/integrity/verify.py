"""Verify mode: the agent ran the integrity checks itself and reported what they said — its findings
(``footprint.integrity.context_error``, compared by identity) and its disposition rows
(``integrity.disposition``, compared by verdict). Each difference is a disagreement of its own.

Only rows this processor could judge are compared (a row left ``unreachable`` or unarmed here says
nothing either way), and a row only where the agent judged something too. The compose seam's own
filing is identified at ``write`` upstream; both spellings are the same seam here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from otel_footprint.account.integrity.model import Disagreement, Finding, Row, Subject
from otel_footprint.runs.integrity_inputs import ReportedDisposition, ReportedFinding

_SEAM_ALIASES = {("invariant-violation", "write"): "compose"}


def _identity(kind: str, seam: str, subjects: Iterable[Subject], predicate: str | None) -> str:
    """The identity :attr:`Finding.identity` gives, for a reported finding's plain strings."""
    seam = _SEAM_ALIASES.get((kind, seam), seam)
    listed = " + ".join(sorted(f"{s.kind} {s.id}" for s in subjects))
    return f"{kind} @{seam} [{listed}] {predicate or ''}"


def _subject(text: str) -> Subject:
    kind, _, ident = text.partition(":")
    return Subject(kind, ident) if ident else Subject("tool", kind)


def disagreements(
    reported: Sequence[ReportedFinding], derived: Sequence[Finding], rows: Sequence[Row]
) -> tuple[Disagreement, ...]:
    judged = {(r.check, r.seam) for r in rows if r.armed and r.state in ("pass", "fail")}

    def comparable(kind: str, seam: str) -> bool:
        return (kind, _SEAM_ALIASES.get((kind, seam), seam)) in judged

    theirs: dict[str, ReportedFinding] = {}
    for finding in reported:
        if comparable(finding.kind, finding.seam):
            identity = _identity(
                finding.kind, finding.seam, map(_subject, finding.subjects), finding.predicate
            )
            theirs.setdefault(identity, finding)
    ours: dict[str, Finding] = {}
    for found in derived:
        if comparable(found.kind, found.seam):
            ours.setdefault(
                _identity(found.kind, found.seam, found.subjects, found.predicate), found
            )
    out = [
        Disagreement(identity, "reported-only", f.iteration, f.ref)
        for identity, f in theirs.items()
        if identity not in ours
    ]
    out += [
        Disagreement(identity, "derived-only", f.iteration, f.evidence[0] if f.evidence else None)
        for identity, f in ours.items()
        if identity not in theirs
    ]
    return tuple(out)


def row_disagreements(
    disposition: ReportedDisposition, rows: Sequence[Row]
) -> tuple[Disagreement, ...]:
    """Rows both sides judged, whose verdicts differ: the agent's check failed and this one passed
    (``reported-only``), or the other way round (``derived-only``). Counts are not compared: they
    follow each side's own encounters, and only the verdict is the claim."""
    out: list[Disagreement] = []
    for row in rows:
        theirs = disposition.row(row.check, row.seam)
        if theirs is None or not row.armed or row.state not in ("pass", "fail"):
            continue
        if not (theirs.checked or theirs.findings):
            continue  # the agent judged nothing here: nothing to compare with
        their_fail, our_fail = theirs.findings > 0, row.findings > 0
        if their_fail == our_fail:
            continue
        identity = (
            f"{row.check} @{row.seam} row: the agent judged {theirs.checked} and "
            f"{theirs.findings} failed; re-derived, {row.checked} judged and {row.findings} failed"
        )
        side: Literal["reported-only", "derived-only"] = (
            "reported-only" if their_fail else "derived-only"
        )
        out.append(Disagreement(identity, side, None, disposition.ref))
    return tuple(out)
