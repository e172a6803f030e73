"""Integrity checks over one run: what the model was offered, and what it acted on.

Pure functions over frozen inputs (:mod:`otel_footprint.runs.integrity_inputs`, plus the kernel's
park state from the engine). :func:`check_integrity` runs every check and returns every row — an
unarmed check is a ``not-applicable`` row with its reason, evidence that is missing makes a row
``unreachable``, never ``pass``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from otel_footprint.account.integrity.argument import check_arguments
from otel_footprint.account.integrity.canary import caught, dev_alarms
from otel_footprint.account.integrity.claim import check_claims
from otel_footprint.account.integrity.columns import check_columns
from otel_footprint.account.integrity.dangling import check_dangling
from otel_footprint.account.integrity.invariant import check_compose, check_wire
from otel_footprint.account.integrity.lookup import check_lookups
from otel_footprint.account.integrity.model import (
    ADVISORY_KINDS,
    ROWS,
    Disagreement,
    Encounter,
    Excusal,
    Finding,
    IntegrityResult,
    Kind,
    ParkState,
    Row,
    Seam,
    Subject,
    Witness,
)
from otel_footprint.account.integrity.recency import check_recency
from otel_footprint.account.integrity.report import (
    combined_tone,
    row_explanation,
    signal_ids,
    summary_body,
    summary_sentence,
)
from otel_footprint.account.integrity.tally import Tally, armed_by_the_agent
from otel_footprint.account.integrity.verify import disagreements, row_disagreements
from otel_footprint.runs.integrity_inputs import IntegrityInputs


def _row(kind: Kind, seam: Seam, tally: Tally) -> Row:
    encounters = tally.encounters
    states = [e.disposition for e in encounters]
    failed, unreached = states.count("fail"), states.count("unreachable")
    # The distinct reasons of the unreachable encounters, else of the not-applicable ones.
    told = "unreachable" if unreached else "not-applicable"
    why = dict.fromkeys([r for e in encounters if e.disposition == told and (r := e.reason)])
    return Row(
        kind,
        seam,
        states.count("pass") + failed,
        failed,
        states.count("not-applicable"),
        unreached,
        tuple(why),
        tally.armed,
    )


def check_integrity(
    inputs: IntegrityInputs,
    park: Mapping[int, ParkState] | None = None,
    *,
    shadow: bool = False,
) -> IntegrityResult:
    """Every integrity row and finding of one run leg.

    ``park``: the kernel's park state per pass iteration (None: no maps mounted); ``shadow``: the
    agent runs no kernel of its own (the compose finding then says what parking would have
    withheld).
    """
    mismatch, missing = check_columns(inputs)
    tallies: dict[tuple[Kind, Seam], Tally] = {
        ("invariant-violation", "wire"): check_wire(inputs),
        ("invariant-violation", "compose"): check_compose(inputs, park, shadow=shadow),
        ("dangling-reference", "compose"): check_dangling(inputs),
        ("unsupported-argument", "choice"): check_arguments(inputs),
        ("unsupported-claim", "claim"): check_claims(inputs),
        ("empty-lookup", "write"): check_lookups(inputs),
        ("column-type-mismatch", "write"): mismatch,
        ("missing-column", "write"): missing,
        ("prior-turn-evidence", "claim"): check_recency(inputs),
    }
    work_existed = bool(inputs.passes or inputs.executions)
    silent = frozenset(
        key for key, tally in tallies.items() if tally.armed and not tally.encounters
    )
    for key in silent if work_existed else ():
        # Armed, with the subjects it judges (model calls, tool calls) missing from the record.
        tallies[key].note("unreachable", None, "nothing-met")
    if inputs.disposition is not None:  # the agent's own rows say which checks apply
        for key, tally in tallies.items():
            theirs = inputs.disposition.row(*key)
            if not tally.armed and theirs is not None and theirs.armed:
                judged = theirs.checked + theirs.unreachable
                tallies[key] = armed_by_the_agent(tally, judged)
    rows: list[Row] = []
    findings: list[Finding] = []
    seen: set[str] = set()
    excusals: list[Excusal] = []
    encounters: dict[tuple[str, str], tuple[Encounter, ...]] = {}
    for kind, seam in ROWS:
        tally = tallies[(kind, seam)]
        rows.append(_row(kind, seam, tally))
        encounters[(kind, seam)] = tuple(tally.encounters)
        excusals.extend(tally.excusals)
        for finding in tally.findings:
            if finding.identity not in seen:  # the same defect found again is the same finding
                seen.add(finding.identity)
                findings.append(finding)
    findings.sort(key=lambda f: f.iteration if f.iteration is not None else 0)
    posture = _posture(inputs)
    alarms: tuple[str, ...] = ()
    if posture == "dev":
        canaries = caught()
        rows = [replace(r, synthetic=int(canaries.get((r.check, r.seam), False))) for r in rows]
        alarms = dev_alarms(tuple(rows), silent if work_existed else frozenset())
    verified = inputs.reported is not None or inputs.disposition is not None
    differ = disagreements(inputs.reported, findings, rows) if inputs.reported is not None else ()
    if inputs.disposition is not None:
        differ += row_disagreements(inputs.disposition, rows)
    return IntegrityResult(
        rows=tuple(rows),
        findings=tuple(findings),
        excusals=tuple(excusals),
        verified=verified,
        disagreements=differ,
        encounters=encounters,
        pass_spans={p.iteration: p.framework.span_id for p in inputs.passes},
        posture=posture,
        alarms=alarms,
    )


def _posture(inputs: IntegrityInputs) -> str:
    """The run's posture: its ``integrity.config``, else the agent's own disposition's."""
    if inputs.settings.ref is None and inputs.disposition is not None:
        return inputs.disposition.posture or "observe"
    return inputs.settings.posture


__all__ = [
    "ADVISORY_KINDS",
    "ROWS",
    "Disagreement",
    "Encounter",
    "Excusal",
    "Finding",
    "IntegrityResult",
    "ParkState",
    "Row",
    "Subject",
    "Witness",
    "check_integrity",
    "combined_tone",
    "row_explanation",
    "signal_ids",
    "summary_body",
    "summary_sentence",
]
