"""``prior-turn-evidence`` @claim (advisory): every value the answer grounds was last served in an
earlier user turn, and the turn being answered contributed none of them.

Its input is the evidence gate's own reading (``footprint.evidence.grounding``): which tokens are
"values" and which user messages the library wrote itself are the gate's to decide, and no
convention carries either. The reading is judged as the upstream judges it: a truncated index
is out of scope; no user turn, or nothing grounded, is ``unreachable``; one value from this turn is
enough to pass; otherwise one advisory. Nothing here says the answer is stale — only where its
values came from.
"""

from __future__ import annotations

from otel_footprint.account.integrity.model import Finding, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import IntegrityInputs


def check_recency(inputs: IntegrityInputs) -> Tally:
    if not inputs.settings.notice_prior_turn_evidence:
        return unarmed("recency-off")
    tally = Tally()
    reading = inputs.grounding
    if reading is None:
        tally.note("unreachable", None, "no-reading")
        return tally
    if reading.index_truncated:
        tally.note("not-applicable", None, "index-ceiling")
        return tally
    if reading.current_turn == 0:
        tally.note("unreachable", None, "no-user-turn")
        return tally
    total = reading.from_this_turn + reading.from_prior_turns
    if total == 0:
        tally.note("unreachable", None, "nothing-groundable")
        return tally
    if reading.from_this_turn > 0:
        tally.note("pass")
        return tally
    latest = reading.latest_prior_turn if reading.latest_prior_turn is not None else 0
    fetched = (
        say("recency.nothingFetched")
        if reading.tool_results_this_turn == 0
        else say("recency.unused", results=reading.tool_results_this_turn)
    )
    answer = Subject("answer", "final")
    tally.findings.append(
        Finding(
            "prior-turn-evidence",
            "claim",
            (answer,),
            say(
                "recency.stale",
                total=total,
                latest=latest,
                gap=max(reading.current_turn - latest, 0),
                current=reading.current_turn,
                fetched=fetched,
            ),
            (
                Witness(
                    answer,
                    "grounding",
                    f"{total} grounded value(s), none served in this turn",
                    "the evidence gate's reading",
                    reading.ref,
                ),
                Witness(
                    Subject("turn", str(latest)),
                    "grounding",
                    "served the newest result the answer drew on",
                    "the evidence gate's reading",
                    reading.ref,
                ),
                Witness(
                    answer,
                    "tool-results-this-turn",
                    str(reading.tool_results_this_turn),
                    "the evidence gate's reading",
                    reading.ref,
                ),
            ),
            predicate="grounding",
            advisory=True,
        )
    )
    tally.note("fail")
    return tally
