"""Verify mode: the agent ran the integrity checks itself and reported its findings
(``footprint.integrity.context_error``); the ones re-derived here are compared by identity.

Only rows this processor could judge are compared (a row left ``unreachable`` or unarmed here says
nothing either way). The compose seam's own filing is identified at ``write`` upstream;
both spellings are the same seam here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from otel_footprint.account.integrity.model import Disagreement, Finding, Row, Subject
from otel_footprint.runs.integrity_inputs import ReportedFinding

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
