"""Every sentence the integrity checks write, in this project's own words.

The upstream's finding messages (spec integrity-reference §2) were read for their meaning only;
none of them is reproduced here. ``{name}`` placeholders are filled once (never recursively); a
counted noun is written ``{n} tool(s)`` (or ``{n} advisory note(s)``) and reads ``1 tool`` /
``4 tools`` once filled.

The reasons a check met a subject it could not judge (or that was out of its scope) are
:data:`WHYS`: an encounter notes a reason's id and values (``model.Encounter``), and its sentence is
said from them when an output needs it; their words for a person (``commands/integrity_words.py``)
are keyed by the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

TEXTS: Final[Mapping[str, str]] = {
    "compose.parked": (
        "'{map}' is parked at this call, yet {n} tool(s) it owns were still on the list offered to "
        "the model ({tools}). The park says the subsystem is off and the offered list says it is "
        "on, in the same call. Nothing was withheld or changed here; this records the "
        "contradiction."
    ),
    "compose.shadow": (
        "The engagement kernel would have parked '{map}' at this call and withheld {n} tool(s) it "
        "owns ({tools}), which the model was still offered. The agent runs no kernel of its own, "
        "so this is what parking would have removed, not a broken promise."
    ),
    "wire.added": (
        "{n} tool(s) reached the provider that the framework's list for this call did not hold "
        "({tools}). The request the client sent and the list it was built from disagree, so the "
        "model saw tools the composition never gave it. Which side is right cannot be told from "
        "here, and the call had already been made."
    ),
    "wire.dropped": (
        "{n} tool(s) the framework composed for this call never reached the provider ({tools}). "
        "The model could not see them, so a plan resting on them could not be carried out. Which "
        "side is right cannot be told from here, and the call had already been made."
    ),
    "dangling": (
        "'{tool}' was offered to the model after the results its arguments rely on ({grounds}) "
        "had dropped out of the context and were not fetched again. A call made now would rest on "
        "values the model remembers but can no longer see; calling {grounds} again would restore "
        "them. The tool was not withheld."
    ),
    "argument.nowhere": (
        "'{tool}' was called with {path} = \"{value}\", a value found nowhere in what this call "
        "was given: neither the instructions, the user's messages nor any tool result hold it. "
        "Nothing in the run says what it refers to. {refetch} The call was not blocked."
    ),
    "argument.self": (
        "'{tool}' was called with {path} = \"{value}\"; the sole source of that value in this "
        "call's context is text the model itself wrote earlier. Prose the model wrote is not "
        "evidence: a value lifted from it may be a piece of something else. {refetch} The call "
        "was not blocked."
    ),
    "argument.refetch": "To ground it, call {grounds} again and use a value from its result.",
    "argument.refetch.none": "To ground it, read the value again from the tool that provides it.",
    "lookup.empty": (
        "'{tool}' looked up {path} = \"{value}\", a value this run had itself received from "
        "'{producer}' (declared as the source of its arguments), and got back {empty}. Since the run "
        "held that identifier, either nothing matches it or the lookup could not have matched "
        "anything, and the trace cannot tell which. An empty result may well be "
        "right: treat this as a place to look, not a verdict. Call id {callId}. Nothing was "
        "blocked, changed or retried."
    ),
    "lookup.absence": "an explicit statement that nothing matched",
    "lookup.rowset": "zero rows",
    "columns.missing": (
        "'{tool}' declares a column '{column}' ({type}) that none of the {rows} it returned "
        "contains. Anything keyed on that column reads rows that cannot answer, and a row without "
        "it looks the same as a row whose value is empty. This judges types only, never whether a "
        "value is right. Call id {callId}."
    ),
    "columns.mismatch": (
        "'{tool}' declares column '{column}' as {type}, but {bad} of {rows} hold something else; "
        "the first is {sample} ({got}). {hint}This judges types only, never whether a value is "
        "right. Call id {callId}."
    ),
    "columns.hint": (
        "If the column may legitimately be empty, declare it nullable and empty rows stop "
        "counting. "
    ),
    "claim.contradicts": (
        "The answer's '{answerField}' says {claimed}, but the latest fact this run settled is "
        "{field}({entity}) = {settled}, from {provenance}. The record backs the fact, not the "
        "answer; the answer was not changed, and this only makes the disagreement traceable."
    ),
    "claim.declined": (
        "The answer's '{answerField}' says {claimed}, though the run had settled {field}({entity}) "
        "= {settled}, from {provenance}. Holding back a fact the run verified is doubt rather than "
        "contradiction, so this is an advisory, counted apart."
    ),
    "recency.stale": (
        "Every one of the {total} value(s) the answer states that the run can ground was last "
        "served in turn {latest} or before, {gap} turn(s) or more ahead of turn {current}, the one "
        "being answered, which supplied none of them. {fetched}An answer that rightly reuses an "
        "earlier result looks exactly like one that went stale; this says where the values came "
        "from, not whether they still hold, and counts only turns still in the window. A place to "
        "look, not a verdict; the answer was not touched."
    ),
    "recency.nothingFetched": (
        "This turn called no tool and read no result: the answer came from the conversation alone. "
    ),
    "recency.unused": (
        "This turn read {results} tool result(s), and the answer uses no value from any of them. "
    ),
    # Row explanations (gen_ai.evaluation.explanation)
    "row.pass": "Judged {checked} time(s); nothing contradicted.",
    "row.fail": "{message}",
    "row.fail.more": "{message} ({more} more finding(s) of this check in the run.)",
    "row.advisory": "{message} (An advisory: counted apart, never a failure.)",
    "row.unreachable": "Could not be judged: {why}.",
    "row.notApplicable": "Does not apply: {why}.",
    # Run summary (footprint.integrity.summary)
    "summary.fail": "Integrity: {n} contradiction(s) found ({kinds}).",
    "summary.advisory": "Integrity: nothing contradicted; {n} advisory note(s) worth a look.",
    "summary.unreachable": "Integrity: nothing contradicted, but {rows} could not be judged.",
    "summary.pass": "Integrity: every armed check was judged and nothing contradicted.",
    "summary.notApplicable": "Integrity: no check applies to this run.",
    # Added for issue 25
    "summary.disagreement": (
        "Integrity: nothing contradicted here, but the agent's own checks and the ones re-derived "
        "from its trace disagree on {n} point(s)."
    ),
    "columns.refused": (
        "This run enforces the declared columns, so these rows never reached the model: it was "
        "shown a refusal in their place."
    ),
}


# A number, at most one word, then a noun with "(s)": the noun's number follows the count.
_COUNTED = re.compile(r"\b(\d[\d,]*) ((?:[a-z-]+ )?)([a-z]+)\(s\)")


def _counted(template: str, values: Mapping[str, object]) -> str:
    """``{n} tool(s)`` with ``n`` filled: ``1 tool``, ``4 tools`` (the template's own words only)."""

    def number(match: re.Match[str]) -> str:
        n = match.group(1)
        noun = match.group(3) if n == "1" else match.group(3) + "s"
        return f"{n} {match.group(2)}{noun}"

    def fill(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        return str(value) if isinstance(value, int) else match.group(0)

    # Only counts that come from an int placeholder are decided here, before the other values
    # (which may hold any text) go in.
    return _COUNTED.sub(number, re.sub(r"\{(\w+)\}(?= (?:[a-z-]+ )?[a-z]+\(s\))", fill, template))


def say(text_id: str, **values: object) -> str:
    """The sentence ``text_id`` with its placeholders filled (one pass: values stay literal)."""
    template = _counted(TEXTS[text_id], values)
    out: list[str] = []
    rest = template
    while "{" in rest:
        head, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        out.append(head)
        out.append(str(values[name]))
    out.append(rest)
    return "".join(out)


WHYS: Final[Mapping[str, str]] = {
    # ``{at}``: the pass the encounter is at; ``{0}``, ``{1}``: the reason's values, in order.
    "nothing-met": "it met no subject: the model calls or tool calls it judges are not in the record, though the run did work",
    "agent-armed": "the agent's own disposition shows this check met {0} subject(s), and this record cannot judge them: {1}",
    "tools-unrecorded": "the tools offered at pass {at} is not in the record",
    "tools-unreadable": "the tools offered at pass {at} is recorded but not readable ({0}: cut or not JSON)",
    "frame-unrecorded": "the messages shown at pass {at} is not in the record",
    "frame-unreadable": "the messages shown at pass {at} is recorded but not readable ({0}: cut or not JSON)",
    "calls-unknown": "which tools were called is not in the record (a model call has no tool span and no recorded output)",
    "result-unrecorded": "the result of call {0} is not recorded",
    "no-grounds": "no tool declares where its arguments come from (footprint.tool.declared argumentsFrom)",
    # invariant-violation
    "no-maps": "no maps are mounted in this run, so nothing can be parked",
    "kernel-unreplayed": "the engagement kernel could not be replayed to pass {at}",
    "nothing-held": "no parked map holds tools back at this pass",
    "one-view": "no model call has two tool lists to compare: the framework's (on the pass span) and the one sent (a client span under it, or footprint.wire.manifest)",
    "client-unlisted": "the client span of pass {at} recorded no tool list",
    "no-second-view": "pass {at} has no second view of the tools sent",
    "composed-unrecorded": "the framework's tool list of pass {at} is not recorded",
    # unsupported-argument
    "choice-unrecorded": "which tools pass {at} chose is not in the record",
    "no-tool-call": "no tool call",
    "no-grounded-call": "no call to a tool with declared grounds",
    "arguments-unreadable": "the arguments of a call at pass {at} are not readable",
    "enums-unrecorded": "the schema of '{0}' offered at pass {at} is not in the record, so a value nothing served cannot be told from a member of an enum it declares",
    # dangling-reference
    "none-offered": "no tool with declared grounds is offered",
    "window-unknown": "an earlier pass's messages are not in the record, so what left the window cannot be told",
    "nothing-dropped": "no tool result has left the window so far",
    "unnamed-result": "a tool result shown at pass {at} names no tool (no tool name, no call id an earlier call carries)",
    # empty-lookup
    "lookups-off": "the run did not switch on empty-lookup notices (footprint.integrity.config)",
    "none-called": "no tool with declared grounds was called",
    "unanswered": "call {0} did not answer",
    "bespoke": "the result is neither rows nor a declared absence",
    "arguments-unrecorded": "the arguments of call {0} are not recorded",
    "no-producer": "no earlier result of {0} is in the record",
    "producer-unrecorded": "the result of {0} (call {1}) is not recorded",
    # unsupported-claim
    "no-contract": "no answer field is declared as a claim (footprint.claims.declared)",
    "no-answer": "the final answer is not in the record (no agent.turn_end finalContent)",
    "prose-answer": "the final answer is not a typed object (prose answers are never judged)",
    "left-out": "the answer leaves '{0}' out",
    "facts-unreadable": "the facts {0} declared are recorded but not readable, so the latest settled value cannot be known",
    "unsettled": "no tool settled {0}({1}) in this run",
    # column-type-mismatch, missing-column
    "columns-off": "the run did not switch on the column checks (footprint.integrity.config)",
    "no-columns": "no tool declares result columns (footprint.tool.declared resultColumns)",
    "no-column-call": "no tool that declares columns was called",
    "refused-rows": "the result of call {0} was refused under enforce; the rows the tool returned are not in the record",
    "not-rows": "the result is not a list of rows",
    # prior-turn-evidence
    "recency-off": "the run did not switch on prior-turn evidence notices (footprint.integrity.config noticePriorTurnEvidence)",
    "no-reading": "the evidence gate's reading of the answer is not in the record",
    "index-ceiling": "the evidence index hit its ceiling",
    "no-user-turn": "the record holds no user turn to measure from",
    "nothing-groundable": "the answer states no value the run can ground",
}  # fmt: skip
"""Why a check could not judge a subject, or why the subject is out of its scope, by reason id."""
