"""``unsupported-claim`` @claim: a typed answer field contradicts the fact the run settled.

The contract (``footprint.claims.declared``) says which answer field claims which ``field`` of
which ``entity``; the ledger is every fact the tools' declared semantics settled
(``footprint.tools.semantics_declared``, the full envelope, not what the model was served), in
order; the answer is the final content the caller received (``agent.turn_end`` ``finalContent``),
read as a JSON object. Per claim: a field the answer leaves out is ``not-applicable``; a fact never
settled is ``unreachable`` (an uncollected fact never accuses); a claim of ``null`` / ``"unknown"``
where the run settled a value is an advisory (doubt, not contradiction); a numeric string equal to a
settled number passes; otherwise the claim must equal the latest settled value. Prose answers are
never judged.
"""

from __future__ import annotations

import json
from typing import Any

from otel_footprint.account.integrity.common import clip, compact_json
from otel_footprint.account.integrity.model import Finding, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import ClaimDeclaration, IntegrityInputs, SettledFact

_MISSING = object()


def _at(obj: Any, path: str) -> Any:
    """The value at a dot path of a JSON object (``_MISSING`` when any step is absent)."""
    current = obj
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _declines(value: Any) -> bool:
    return value is None or value == "unknown"


def _number_string_matches(claimed: Any, settled: Any) -> bool:
    """The one leniency: a non-blank numeric string equal to a settled number."""
    if not isinstance(claimed, str) or not claimed.strip() or isinstance(settled, bool):
        return False
    if not isinstance(settled, int | float):
        return False
    try:
        return float(claimed) == float(settled)
    except ValueError:
        return False


def _provenance(fact: SettledFact) -> str:
    text = f"{fact.tool} (call {fact.call_id or '?'}, pass {fact.iteration or '?'})"
    return text + (f", measured {fact.measured_at}" if fact.measured_at else "")


def _judge(
    claim: ClaimDeclaration, claimed: Any, rows: list[SettledFact], inputs: IntegrityInputs
) -> tuple[str, Finding | None]:
    settled = rows[-1]
    subject = Subject("entity", claim.entity)
    settled_witness = Witness(
        subject, claim.field, compact_json(settled.value), _provenance(settled), settled.ref
    )
    answer_ref = inputs.answer.ref if inputs.answer is not None else None
    claimed_witness = Witness(
        subject,
        claim.field,
        compact_json(claimed),
        f"answer field '{claim.answer_field}'",
        answer_ref,
    )
    values = {
        "answerField": claim.answer_field,
        "claimed": clip(compact_json(claimed)),
        "field": claim.field,
        "entity": claim.entity,
        "settled": clip(compact_json(settled.value)),
        "provenance": _provenance(settled),
    }
    if _declines(claimed):
        if _declines(settled.value):
            return "pass", None
        advisory = Finding(
            "unsupported-claim",
            "claim",
            (subject,),
            say("claim.declined", **values),
            (settled_witness,),
            predicate=claim.field,
            iteration=settled.iteration,
            advisory=True,
        )
        return "pass", advisory
    if _number_string_matches(claimed, settled.value):
        return "pass", None
    if _canonical(claimed) == _canonical(settled.value):
        return "pass", None
    history = tuple(
        Witness(subject, claim.field, compact_json(r.value), f"earlier: {_provenance(r)}", r.ref)
        for r in rows[:-1]
    )
    return "fail", Finding(
        "unsupported-claim",
        "claim",
        (subject,),
        say("claim.contradicts", **values),
        (settled_witness, claimed_witness, *history),
        predicate=claim.field,
        iteration=settled.iteration,
    )


def check_claims(inputs: IntegrityInputs) -> Tally:
    if not inputs.claims:
        return unarmed("no-contract")
    tally = Tally()
    answer: Any = _MISSING
    why: str | None = None
    if inputs.answer is None:
        why = "no-answer"
    else:
        try:
            answer = json.loads(inputs.answer.content)
        except json.JSONDecodeError:
            answer = _MISSING
        if not isinstance(answer, dict):
            why = "prose-answer"
    for claim in inputs.claims:
        if why is not None:
            tally.note("unreachable", None, why)
            continue
        claimed = _at(answer, claim.answer_field)
        if claimed is _MISSING:
            tally.note("not-applicable", None, "left-out", claim.answer_field)
            continue
        rows = [f for f in inputs.facts if f.entity == claim.entity and f.field == claim.field]
        if inputs.facts_unreadable:
            # A declaration that cannot be read may hold the latest settle of this very fact.
            tally.note("unreachable", None, "facts-unreadable", inputs.facts_unreadable[0])
            continue
        if not rows:
            tally.note("unreachable", None, "unsettled", claim.field, claim.entity)
            continue
        disposition, finding = _judge(claim, claimed, rows, inputs)
        if finding is not None:
            tally.findings.append(finding)
        tally.note("fail" if disposition == "fail" else "pass", rows[-1].iteration)
    return tally
