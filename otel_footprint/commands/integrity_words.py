"""The integrity checks in words a person reads: what each check looks for, its outcome, and why it
could not be judged, said per model call ("calls 4–30") as the rest of ``explain`` says it.

The span attributes and ``explain --format json`` keep the checks' own sentences and reasons
(``account/integrity/texts.py`` and each encounter's ``why``, which name the pass). The text and
HTML views word the same results from the rows and their encounters: a reason given on many calls
is folded into one, and a reason that names the model call is reworded by its id (the table below;
any other reason keeps the checks' words).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from otel_footprint.account.integrity import (
    ADVISORY_KINDS,
    Encounter,
    Finding,
    IntegrityResult,
    Row,
)

CHECK_WORDS: Final[dict[tuple[str, str], str]] = {
    ("invariant-violation", "wire"): "tools sent that differ from the tools composed",
    ("invariant-violation", "compose"): "a parked map's tools still offered to the model",
    (
        "dangling-reference",
        "compose",
    ): "a tool offered after the results it rests on left the window",
    ("unsupported-argument", "choice"): "an argument value nothing had shown the model",
    ("unsupported-claim", "claim"): "an answer that contradicts a fact the run settled",
    ("empty-lookup", "write"): "a lookup of the run's own id that came back empty",
    ("column-type-mismatch", "write"): "a declared column holding another type",
    ("missing-column", "write"): "a declared column missing from the rows returned",
    ("prior-turn-evidence", "claim"): "an answer resting only on earlier turns' results",
}
"""What each integrity check looks for, by (check, seam): one entry per ``semconv.INTEGRITY_ROWS``."""

OUTCOME_WORDS: Final[dict[str, str]] = {
    "pass": "none found",
    "fail": "FOUND",
    "advisory": "worth a look",
    "unreachable": "could not be judged",
    "not-applicable": "does not apply",
}
"""A row's outcome in words (``advisory``: a row whose findings are all advisories)."""

REASON_WORDS: Final[dict[str, str]] = {
    "tools-unrecorded": "the tools offered on {calls} are not in the record",
    "tools-unreadable": "the tools offered on {calls} are recorded but cannot be read ({0}: cut or not JSON)",
    "frame-unrecorded": "the messages shown on {calls} are not in the record",
    "frame-unreadable": "the messages shown on {calls} are recorded but cannot be read ({0}: cut or not JSON)",
    "choice-unrecorded": "the tools the model chose on {calls} are not in the record",
    "arguments-unreadable": "the arguments of a tool call on {calls} cannot be read",
    "kernel-unreplayed": "the engagement kernel could not be replayed up to {calls}",
    "client-unlisted": "the client span of {calls} recorded no tool list",
    "no-second-view": "nothing records the tools actually sent on {calls}",
    "composed-unrecorded": "the framework's tool list for {calls} is not in the record",
    "nothing-held": "no parked map held tools back on {calls}",
    "enums-unrecorded": "the schema of '{0}' offered at {calls} is not in the record, so a value nothing served cannot be told from a member of an enum it declares",
    "unnamed-result": "a tool result shown at {calls} names no tool (no tool name, no call id an earlier call carries)",
}  # fmt: skip
"""The checks' reasons (``texts.WHYS``, by id) that name the model call, in the page's words: "call",
not "pass", and one line over a range of calls (``{calls}``); any other reason keeps its words."""


def calls_text(iterations: Iterable[int]) -> str:
    """``call 4``, ``calls 4–30``, ``calls 2, 4 and 6–9``: call numbers folded into ranges."""
    numbers = sorted(set(iterations))
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    parts = [f"{a}" if a == b else f"{a}–{b}" for a, b in spans]
    if len(numbers) == 1:
        return f"call {parts[0]}"
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"calls {listed}"


def reason_words(noted: Encounter, iterations: Sequence[int]) -> str:
    """An encounter's reason, over the calls it was given for, in the page's words."""
    words = REASON_WORDS.get(noted.why or "")
    if words is None:
        return noted.reason or ""
    return words.format(*noted.values, calls=calls_text(iterations) if iterations else "this call")


def row_outcome(row: Row) -> str:
    """``pass`` / ``fail`` / ``advisory`` / ``unreachable`` / ``not-applicable``."""
    if row.state == "fail" and row.check in ADVISORY_KINDS:
        return "advisory"
    return row.state


def row_reasons(row: Row, result: IntegrityResult) -> list[str]:
    """Why a row could not be judged (or does not apply), one line per reason, calls folded."""
    state = row.state
    if state not in ("unreachable", "not-applicable"):
        return []
    grouped: dict[tuple[str, tuple[object, ...]], tuple[Encounter, list[int]]] = {}
    for encounter in result.encounters.get((row.check, row.seam), ()):
        why = encounter.why
        if encounter.disposition != state or why is None:
            continue  # the same reason at many calls is one line (its pass is one of the calls)
        calls = grouped.setdefault((why, encounter.values), (encounter, []))[1]
        if encounter.iteration is not None:
            calls.append(encounter.iteration)
    return [reason_words(first, calls) for first, calls in grouped.values()]


def row_words(row: Row, result: IntegrityResult, outcome: bool = True) -> str:
    """One row as a line: ``a parked map's tools still offered to the model: could not be judged
    (the tools offered on calls 4–30 are not in the record)``; without ``outcome``, the name and
    the parenthesis only (for a sentence that already says the outcome)."""
    name = CHECK_WORDS.get((row.check, row.seam), f"{row.check} @{row.seam}")
    state = row_outcome(row)
    text = f"{name}: {OUTCOME_WORDS[state]}" if outcome else name
    reasons = row_reasons(row, result)
    if reasons:
        text += f" ({'; '.join(reasons)})"
    elif state in ("fail", "advisory"):
        calls = [f.iteration for f in _findings(row, result) if f.iteration is not None]
        if calls:
            text += f" ({calls_text(calls)})"
    return text


def _findings(row: Row, result: IntegrityResult) -> list[Finding]:
    return [f for f in result.findings if f.kind == row.check and f.seam == row.seam]


def summary_words(result: IntegrityResult) -> str:
    """The integrity result of a run in one sentence, naming the checks in words."""
    armed = [r for r in result.rows if r.armed]
    found = [r for r in armed if row_outcome(r) == "fail"]
    if found:
        n = len(result.contradictions)
        names = "; ".join(row_words(r, result, outcome=False) for r in found)
        return f"{n} contradiction{'' if n == 1 else 's'} found: {names}."
    unreached = [r for r in armed if r.state == "unreachable"]
    if unreached:
        n = len(unreached)
        names = "; ".join(row_words(r, result, outcome=False) for r in unreached)
        which = "one check" if n == 1 else f"{n} checks"
        return f"Nothing contradicted, but {which} could not be judged: {names}."
    if result.advisories:
        n = len(result.advisories)
        return f"Nothing contradicted; {n} note{'' if n == 1 else 's'} worth a look."
    if any(r.state == "pass" for r in armed):
        return "Every check that applies was judged, and nothing contradicted."
    return "No check applies to this run."
