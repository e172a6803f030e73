"""``empty-lookup`` @write (advisory): a lookup keyed on a value the run itself produced came back
empty.

The consumer's result is judged as the tool returned it: the shape the agent stated
(``footprint.tool.result_shape``, or ``footprint.tools.absent`` for a declared absence), else the
recorded ``gen_ai.tool.call.result`` read as JSON (a list is a rowset). Producers are the results
of the tool's declared grounds that ran before it, as served: the tool-role message of a later
frame when one was captured, else the producer's recorded result. A lookup that paused to ask a
person while declaring an absence (``pause.request`` with ``absence``) answered with that absence.
Anything the rule needs and the record lacks — the result, the arguments, a producer's result when
no other producer served the value — makes the call ``unreachable``, never a pass.
"""

from __future__ import annotations

import json

from otel_footprint.account.integrity.common import checked_leaves, clip
from otel_footprint.account.integrity.model import Finding, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import Execution, IntegrityInputs


def read_shape(execution: Execution) -> tuple[str | None, int | None]:
    """(shape, rows) of a tool's result: ``rowset`` / ``absence`` / ``bespoke``, or (None, None)
    when nothing of the result is in the record."""
    if execution.shape is not None:
        return execution.shape, execution.rows
    if execution.result_text is None:
        return None, None
    try:
        value = json.loads(execution.result_text)
    except json.JSONDecodeError:
        return "bespoke", None
    if isinstance(value, list):
        return "rowset", len(value)
    return "bespoke", None


def served_texts(inputs: IntegrityInputs) -> dict[str, str]:
    """Tool results as the model was shown them: call id -> text of the tool-role message."""
    found: dict[str, str] = {}
    for pass_ in inputs.passes:
        view = pass_.frame()
        for message in view.messages or () if view is not None else ():
            if message.role == "tool" and message.tool_call_id and message.texts:
                found.setdefault(message.tool_call_id, "\n".join(message.texts))
    return found


def check_lookups(inputs: IntegrityInputs) -> Tally:
    grounding = {n: d.arguments_from for n, d in inputs.declarations.items() if d.arguments_from}
    if not inputs.settings.notice_empty_lookups:
        return unarmed("lookups-off")
    if not grounding:
        return unarmed("no-grounds")
    tally = Tally()
    served = served_texts(inputs)
    armed = [e for e in inputs.executions if e.name in grounding]
    if not armed:
        if inputs.calls_unknown:
            tally.note("unreachable", None, "calls-unknown")
        else:
            tally.note("not-applicable", None, "none-called")
        return tally
    for execution in armed:
        it = execution.iteration
        if execution.failed:
            tally.note("not-applicable", it, "unanswered", execution.call_id)
            continue
        shape, rows = read_shape(execution)
        if shape is None:
            tally.note("unreachable", it, "result-unrecorded", execution.call_id)
            continue
        if shape == "bespoke":
            tally.note("not-applicable", it, "bespoke")
            continue
        if shape == "rowset" and rows:
            tally.note("pass", it)
            continue
        if execution.arguments is None:
            tally.note("unreachable", it, "arguments-unrecorded", execution.call_id)
            continue
        producers = []
        unseen: list[Execution] = []  # producers that ran, whose result is not in the record
        for earlier in inputs.executions:
            if earlier.order >= execution.order or earlier.name not in grounding[execution.name]:
                continue
            text = served.get(earlier.call_id or "") or earlier.result_text
            if text and not earlier.failed:
                producers.append((earlier, text.lower()))
            elif text is None and not earlier.failed:
                unseen.append(earlier)
        if not producers:
            tally.note("unreachable", it, "no-producer", ", ".join(grounding[execution.name]))
            continue
        empty = say("lookup.absence" if shape == "absence" else "lookup.rowset")
        filed: list[Finding] = []
        for path, value in checked_leaves(execution.arguments):
            needle = value.lower()
            source = next((p for p, text in producers if needle in text), None)
            if source is None:
                continue
            filed.append(
                Finding(
                    "empty-lookup",
                    "write",
                    (Subject("tool", execution.name), Subject("tool", source.name)),
                    say(
                        "lookup.empty",
                        tool=execution.name,
                        path=path,
                        value=clip(value),
                        producer=source.name,
                        empty=empty,
                        callId=execution.call_id or "?",
                    ),
                    (
                        Witness(
                            Subject("tool", execution.name),
                            path,
                            value,
                            f"tool call {execution.call_id}: argument '{path}'",
                            execution.ref,
                        ),
                        Witness(
                            Subject("tool", source.name),
                            path,
                            "served this value earlier in the run",
                            f"tool call {source.call_id}",
                            source.ref,
                        ),
                        Witness(
                            Subject("tool", execution.name),
                            "result",
                            f"found nothing: {empty}",
                            f"tool call {execution.call_id}: its result",
                            execution.ref,
                        ),
                    ),
                    predicate=path,
                    iteration=it,
                    advisory=True,
                )
            )
        if not filed and unseen:
            # The value may have come from a producer result the record does not hold.
            tally.note("unreachable", it, "producer-unrecorded", unseen[0].name, unseen[0].call_id)
            continue
        tally.judged(filed, it)
    return tally
