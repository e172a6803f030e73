"""What an observed run's instrumentation recorded of the turn, for the account's rows.

An observed run (``runs/group.py``) has no recorder events: no ``agent.turn_start`` holds the
question and no ``agent.turn_end`` says the run answered. Its model-call spans do, when the
instrumentation captured message content: the person's question is the last user message the
first pass was shown, and the run answered when its last pass gave text and asked for no tool.
Nothing is read that the spans do not hold (no content captured: no question, not answered).
"""

from __future__ import annotations

from otel_footprint.account.input import ObservedTurn
from otel_footprint.account.model import Pointer
from otel_footprint.account.pointers import json_path
from otel_footprint.runs.outputs import call_view
from otel_footprint.runs.passes import RunFacts


def observed_turn(facts: RunFacts) -> ObservedTurn | None:
    """The turn as the observed run's passes recorded it (None: not an observed run)."""
    run = facts.run
    if not run.observed or not run.passes:
        return None
    question: str | None = None
    pointer: Pointer | None = None
    first = call_view(run.passes[0])
    for message in reversed(first.messages or ()):
        if message.role == "user" and message.texts:
            question = "\n".join(message.texts)
            ref = message.ref
            if ref is not None:
                pointer = Pointer(
                    ref.trace_id, ref.span_id, None, None, ref.attribute, json_path(message.index)
                )
            break
    last = call_view(run.passes[-1])
    output = last.output or ()
    answered = (
        any(m.texts for m in output)
        and not any(m.calls for m in output)
        and not any(c.iteration == facts.passes[-1].iteration for c in facts.tool_calls)
        if facts.passes
        else False
    )
    return ObservedTurn(question, pointer, answered)
