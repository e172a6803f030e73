"""The integrity checks' results as frozen data: findings, witnesses, dispositions, rows.

The inputs are :mod:`otel_footprint.runs.integrity_inputs` (read from spans below this layer);
:class:`ParkState` is the one input the engine adds (the kernel's park decisions per pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

from otel_footprint import semconv
from otel_footprint.account.integrity.texts import WHYS
from otel_footprint.codec import quick_init
from otel_footprint.runs.outputs import Ref

Kind: TypeAlias = Literal[
    "invariant-violation",
    "unsupported-argument",
    "dangling-reference",
    "unsupported-claim",
    "empty-lookup",
    "column-type-mismatch",
    "missing-column",
    "prior-turn-evidence",
]
Seam: TypeAlias = Literal["write", "compose", "wire", "choice", "claim"]
Disposition: TypeAlias = Literal["pass", "fail", "not-applicable", "unreachable"]
RowState: TypeAlias = Disposition

# Every (check, seam) row, in the order they are written: the names live in semconv (the schema
# layer); this is the same tuple, typed for the checks.
ROWS: tuple[tuple[Kind, Seam], ...] = cast("tuple[tuple[Kind, Seam], ...]", semconv.INTEGRITY_ROWS)
"""Every row, always present: an unarmed check is a ``not-applicable`` row, never a silence."""

ADVISORY_KINDS: frozenset[str] = frozenset({"empty-lookup", "prior-turn-evidence"})
"""Kinds that are always advisory (doubt, not contradiction): counted apart, never a failure.
``unsupported-claim`` files both: its advisories carry ``advisory=True`` like any other."""


@quick_init
@dataclass(frozen=True, slots=True)
class Subject:
    """What a finding is about: ``tool:x``, ``map:m``, ``answer:final``."""

    kind: str
    id: str

    def render(self) -> str:
        return f"{self.kind}:{self.id}"


@quick_init
@dataclass(frozen=True, slots=True)
class Witness:
    """One statement that proves a finding, and where it was read."""

    subject: Subject
    predicate: str
    value: str
    provenance: str
    ref: Ref | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class Finding:
    """One integrity finding (the upstream's ``ContextError`` shape, in our words)."""

    kind: Kind
    seam: Seam
    subjects: tuple[Subject, ...]
    message: str
    witnesses: tuple[Witness, ...] = ()
    predicate: str | None = None
    iteration: int | None = None
    advisory: bool = False

    @property
    def identity(self) -> str:
        """``kind @seam [sorted subjects] predicate`` — no iteration: a defect found again on a
        later pass is the same finding (the first filing wins). Verify mode builds the same string
        for a reported finding (``verify._identity``; a test holds the two together)."""
        subjects = " + ".join(sorted(f"{s.kind} {s.id}" for s in self.subjects))
        return f"{self.kind} @{self.seam} [{subjects}] {self.predicate or ''}"

    @property
    def evidence(self) -> tuple[Ref, ...]:
        seen: dict[str, Ref] = {}
        for witness in self.witnesses:
            if witness.ref is not None:
                seen.setdefault(witness.ref.render(), witness.ref)
        return tuple(seen.values())


@quick_init
@dataclass(frozen=True, slots=True)
class Excusal:
    """A value grounded only by an app-vouched external source (not a finding)."""

    tool: str
    call_id: str | None
    path: str
    value: str
    source: str
    iteration: int
    ref: Ref | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class Encounter:
    """One disposition a check noted on one subject (a pass, a call, a tool span)."""

    disposition: Disposition
    iteration: int | None = None
    why: str | None = None
    """Why not pass/fail (what was missing, or why the subject is out of scope): a reason id of
    ``texts.WHYS``, said with ``values`` (:attr:`reason`)."""
    values: tuple[object, ...] = ()

    @property
    def reason(self) -> str | None:
        """The reason's sentence (the values go in literally; ``{at}`` is this encounter's pass)."""
        return None if self.why is None else WHYS[self.why].format(*self.values, at=self.iteration)


@quick_init
@dataclass(frozen=True, slots=True)
class Row:
    """One check at one seam over a run: counts and the state they add up to."""

    check: Kind
    seam: Seam
    checked: int = 0
    """Pass + fail encounters."""
    findings: int = 0
    """Fail encounters (not findings)."""
    not_applicable: int = 0
    unreachable: int = 0
    why: tuple[str, ...] = ()
    """The distinct reasons of the unreachable (else the not-applicable) encounters, first seen
    first."""
    armed: bool = False
    synthetic: int = 0
    """Dev posture: canaries this check caught (kept out of every other count)."""

    @property
    def state(self) -> RowState:
        """fail > unreachable > pass > not-applicable: missing evidence is never a pass."""
        if self.findings:
            return "fail"
        if self.unreachable:
            return "unreachable"
        if self.checked:
            return "pass"
        return "not-applicable"

    @property
    def label(self) -> str:
        """``gen_ai.evaluation.score.label``."""
        return {"fail": "fail", "pass": "pass", "unreachable": "unknown"}.get(
            self.state, "not_applicable"
        )


@quick_init
@dataclass(frozen=True, slots=True)
class Disagreement:
    """Verify mode: a finding only the agent filed, or only this processor derived."""

    identity: str
    side: Literal["reported-only", "derived-only"]
    iteration: int | None = None
    ref: Ref | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class ParkState:
    """The kernel's standing at one pass: the tools each parked map holds out."""

    iteration: int
    held_out: Mapping[str, tuple[str, ...]]
    """map id -> the tools it owns that the kernel parks (withholds) at this pass."""
    decided: bool = True
    """False when the kernel replay did not reach this pass."""


@dataclass(frozen=True, slots=True)
class IntegrityResult:
    """What the integrity checks say about one run leg."""

    rows: tuple[Row, ...]
    findings: tuple[Finding, ...]
    excusals: tuple[Excusal, ...] = ()
    verified: bool = False
    """The agent reported findings or disposition rows of its own and they were compared."""
    disagreements: tuple[Disagreement, ...] = ()
    encounters: Mapping[tuple[str, str], tuple[Encounter, ...]] = field(default_factory=dict)
    pass_spans: Mapping[int, str] = field(default_factory=dict)
    """Pass iteration -> the pass span (where its findings are written)."""
    posture: str = "observe"
    """``observe`` (the default) or ``dev`` (canaries and the liveness alarm)."""
    alarms: tuple[str, ...] = ()
    """Dev posture: a canary a check missed, or an armed check that judged nothing."""

    def row(self, check: str, seam: str | None = None) -> Row:
        return next(r for r in self.rows if r.check == check and (seam is None or r.seam == seam))

    @property
    def contradictions(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.advisory)

    @property
    def advisories(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.advisory)

    @property
    def armed(self) -> bool:
        return any(r.armed for r in self.rows)

    @property
    def state(self) -> RowState:
        """Over the armed rows: fail (a contradiction) > unreachable > pass > not-applicable.

        Advisory rows never make the run ``fail``: a row whose findings are all advisories counts
        as ``pass`` here.
        """
        states = [
            ("pass" if r.check in ADVISORY_KINDS and r.state == "fail" else r.state)
            for r in self.rows
        ]
        order: tuple[RowState, ...] = ("fail", "unreachable", "pass")
        return next((state for state in order if state in states), "not-applicable")
