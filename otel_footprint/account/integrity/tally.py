"""What one check hands back: its findings, its encounters (dispositions) and any excusals."""

from __future__ import annotations

from dataclasses import dataclass, field

from otel_footprint.account.integrity.model import Disposition, Encounter, Excusal, Finding


@dataclass(slots=True)
class Tally:
    """Collects one check's output while it runs (then frozen into the result)."""

    findings: list[Finding] = field(default_factory=list)
    encounters: list[Encounter] = field(default_factory=list)
    excusals: list[Excusal] = field(default_factory=list)
    armed: bool = True

    def note(
        self,
        disposition: Disposition,
        iteration: int | None = None,
        why: str | None = None,
        *values: object,
    ) -> None:
        """One encounter; ``why``: the id of its reason (``texts.WHYS``), said with ``values``."""
        self.encounters.append(Encounter(disposition, iteration, why, values))

    def judged(self, filed: list[Finding], iteration: int | None) -> None:
        """One judged encounter: ``fail`` when it filed anything, else ``pass``."""
        self.findings.extend(filed)
        self.note("fail" if filed else "pass", iteration)


def unarmed(why: str) -> Tally:
    """The row of a check that is not armed: one ``not-applicable`` with the reason."""
    tally = Tally(armed=False)
    tally.note("not-applicable", None, why)
    return tally


def armed_by_the_agent(unarmed_tally: Tally, judged: int) -> Tally:
    """The row of a check this record gives nothing to arm, though the agent's own disposition says
    its check met ``judged`` subject(s): the check applies, and what it needs is missing here, so
    the row is ``unreachable`` (with the reason it could not be armed), never "does not apply"."""
    missing = next((e.reason for e in unarmed_tally.encounters if e.why), None)
    tally = Tally()
    tally.note("unreachable", None, "agent-armed", judged, missing or "its inputs are missing")
    return tally
