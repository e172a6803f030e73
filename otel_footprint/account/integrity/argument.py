"""``unsupported-argument`` @choice: the model called a tool with a value nothing served it.

Armed by declarations (``footprint.tool.declared`` ``argumentsFrom``), or, in an observed run
(no recorder input, so no declarations), by the record itself: every call of a pass whose offered
tools and frame are recorded is judged on its identifier-like values (one token, no whitespace:
ids, codes, keys); free text the model composed is not judged, and a pass whose offered tools or
frame are not recorded is ``unreachable``.

Judged against the exact frame of the call that chose it (that span's own system instructions and
input messages), never the run's history. Per string leaf of an armed call's arguments, in order:
shorter than 4 (UTF-16 units) → skipped; equal to a declared enum member → skipped; inside any
served text (instructions, user, tool and other non-assistant messages) → grounded; inside an
app-vouched external value → excused (recorded, not a finding); otherwise a finding, marked
*self-referenced* when the value appears only in the model's own earlier prose — unless the tool's
schema on that call is not in the record: an unserved value may then be a member of an enum it
declares, so the pass is ``unreachable`` (naming the schema), never a finding on a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_footprint.account.integrity.common import (
    checked_leaves,
    clip,
    enum_values,
    frame_missing,
    grounded_in,
    identifier_like,
    lowered,
    tools_missing,
)
from otel_footprint.account.integrity.model import Excusal, Finding, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import IntegrityInputs, PassInputs
from otel_footprint.runs.outputs import ChosenCall


def _calls_of(inputs: IntegrityInputs, pass_: PassInputs) -> list[ChosenCall] | None:
    """The calls this pass chose: its output's tool calls, else its ``execute_tool`` spans;
    None when neither is recorded."""
    output = pass_.output()
    if output is not None:
        return [call for message in output for call in message.calls]
    executed = [e for e in inputs.executions if e.iteration == pass_.iteration]
    if not executed:
        return None
    return [
        ChosenCall(e.call_id, e.name, e.arguments, e.arguments is not None, e.ref) for e in executed
    ]


def declared_enums(pass_: PassInputs, tool: str) -> frozenset[str] | None:
    """The lower-cased enum members ``tool``'s schema declares on this call, from any view of the
    pass that recorded it; None when they cannot be known — no offered list was recorded, or the
    tool is listed without its schema (the agentfootprint importer, OpenLLMetry without
    ``parameters``). A tool absent from every recorded list declared nothing on this call."""
    listed = False
    schemaless = False
    for view in (pass_.client, pass_.framework):
        if view is None or view.tools is None:
            continue
        listed = True
        for offered in view.tools:
            if offered.name != tool:
                continue
            if offered.parameters is None:
                schemaless = True
            else:
                return frozenset(e.lower() for e in enum_values(offered.parameters))
    return None if schemaless or not listed else frozenset()


def refetch_phrase(grounds: Sequence[str]) -> str:
    if grounds:
        return say("argument.refetch", grounds=" or ".join(grounds))
    return say("argument.refetch.none")


def check_arguments(inputs: IntegrityInputs) -> Tally:
    grounding = {n: d.arguments_from for n, d in inputs.declarations.items() if d.arguments_from}
    observed = not grounding and inputs.observed
    if not grounding and not observed:
        return unarmed("no-grounds")
    tally = Tally()
    for pass_ in inputs.passes:
        it = pass_.iteration
        calls = _calls_of(inputs, pass_)
        if calls is None:
            tally.note("unreachable", it, "choice-unrecorded")
            continue
        armed = [c for c in calls if observed or c.name in grounding]
        if not armed:
            tally.note("not-applicable", it, "no-tool-call" if observed else "no-grounded-call")
            continue
        offered, _ = pass_.tools()
        if observed and offered is None:
            # Without the offered schemas a value the schema fixes (an enum member) cannot be
            # told from one the model made up: not judged on a guess.
            tally.note("unreachable", it, *tools_missing(pass_))
            continue
        view = pass_.frame()
        if view is None or view.messages is None:
            tally.note("unreachable", it, *frame_missing(pass_))
            continue
        if any(not c.readable for c in armed):
            tally.note("unreachable", it, "arguments-unreadable")
            continue
        served = [*(view.system or ())]
        mine: list[str] = []
        for message in view.messages:
            (mine if message.role == "assistant" else served).extend(message.texts)
        served_lc, mine_lc = lowered(served), lowered(mine)
        external = inputs.grounds_for(it)
        frame_line = (
            f"frame of pass {it}: {len(served)} served text(s) (instructions, user messages, "
            f"tool results) and {sum(1 for m in view.messages if m.role == 'assistant')} "
            "assistant turn(s)"
        )
        filed: list[Finding] = []
        undecided: list[str] = []  # tools whose enum fence is unknown (their schema unrecorded)
        for call in armed:
            enums = declared_enums(pass_, call.name)
            for path, value in checked_leaves(call.arguments):
                if observed and not identifier_like(value):
                    continue  # free text the model composed: no declaration says it is copied
                needle = value.lower()
                if (enums is not None and needle in enums) or grounded_in(needle, served_lc):
                    continue
                vouched = next((g for g in external if needle in g.value.lower()), None)
                if vouched is not None:
                    tally.excusals.append(
                        Excusal(
                            call.name, call.call_id, path, value, vouched.source, it, vouched.ref
                        )
                    )
                    continue
                if enums is None:
                    # An enum member is served by the schema itself; without the schema a
                    # legitimate member and an invented value look the same.
                    undecided.append(call.name)
                    continue
                self_ref = grounded_in(needle, mine_lc)
                filed.append(
                    Finding(
                        "unsupported-argument",
                        "choice",
                        (Subject("tool", call.name),),
                        say(
                            "argument.self" if self_ref else "argument.nowhere",
                            tool=call.name,
                            path=path,
                            value=clip(value),
                            refetch=refetch_phrase(grounding.get(call.name, ())),
                        ),
                        (
                            Witness(
                                Subject("tool", call.name),
                                path,
                                value,
                                f"tool call {call.call_id or '?'}: argument '{path}' as chosen",
                                call.ref,
                            ),
                            Witness(
                                Subject("tool", call.name),
                                path,
                                "in the model's own earlier text only"
                                if self_ref
                                else "in nothing the call was shown",
                                frame_line,
                                view.messages_ref,
                            ),
                        ),
                        predicate=path,
                        iteration=it,
                    )
                )
        if undecided and not filed:
            tally.note("unreachable", it, "enums-unrecorded", undecided[0])
        else:
            tally.judged(filed, it)
    return tally
