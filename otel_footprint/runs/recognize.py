"""Which role a span plays in an agent run: run (agent), pass (model call), tool call, or other.

One rule, first match wins: OTel GenAI ``gen_ai.operation.name``, then the Vercel AI SDK's
``ai.operationId`` (``ai.generateText`` / ``ai.streamText`` a run, its ``doGenerate`` / ``doStream``
a pass, ``ai.toolCall`` a tool call: its model-call spans have no ``gen_ai.operation.name``), then
OpenInference ``openinference.span.kind``, then OpenLLMetry (``traceloop.span.kind``,
``llm.request.type``).

An agent span (``invoke_agent``, OpenInference ``AGENT``, OpenLLMetry ``agent``) is a run span only
when it names a run (``footprint.run.id``): frameworks make one per agent, workflow and handoff,
and those are containers (role ``AGENT``). Grouping (:mod:`otel_footprint.runs.group`) still makes
an agent span the run of footprint events that have no run above them, and, in a trace with no
recorder input at all, the run span of an *observed run* (the outermost agent span).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Final

from otel_footprint import semconv


class SpanRole(Enum):
    """The part a span plays in a run."""

    RUN = "run"
    PASS = "pass"
    TOOL = "tool"
    AGENT = "agent"
    """An agent span that names no run: a container in a recorded run, the run span of an
    observed one (a trace without recorder input)."""
    OTHER = "other"


CONTAINER_ROLES: Final = (SpanRole.OTHER, SpanRole.AGENT)
"""Roles whose span the holding core groups into its trace's run (is *runish*) only when it carries
footprint events; every other role's always is. A tuple: ``in`` compares members by identity,
with no call to the enum's hash on the hot path."""


ROLE_KEYS: frozenset[str] = frozenset(
    {
        semconv.GEN_AI_OPERATION_NAME,
        semconv.AI_SDK_OPERATION_ID,
        semconv.OPENINFERENCE_SPAN_KIND,
        semconv.TRACELOOP_SPAN_KIND,
        semconv.LLM_REQUEST_TYPE,
        semconv.RUN_ID,
    }
)
"""Every attribute :func:`role_of` reads: a span with none of them is ``OTHER`` without asking
(the hop and the processor use it as a cheap first test; a test holds the two together)."""


_SCALARS = (str, int, float)  # the value types that can name a role (a bool is an int)


def role_of(attribute: Callable[[str], Any | None]) -> SpanRole:
    """Classify a span from its attributes (``attribute(key)`` returns the value or None).

    Only scalar values name a role: a list or a map where a name belongs (a sender's bug, or a
    hostile request) is read as absent, never as an error.
    """
    # The scalar test is written at each read: each receiver asks this of every span.
    named = isinstance(attribute(semconv.RUN_ID), _SCALARS)
    operation = attribute(semconv.GEN_AI_OPERATION_NAME)
    if isinstance(operation, _SCALARS):
        if operation == semconv.OP_INVOKE_AGENT:
            return SpanRole.RUN if named else SpanRole.AGENT
        if operation in semconv.MODEL_CALL_OPERATIONS:
            return SpanRole.PASS
        if operation == semconv.OP_EXECUTE_TOOL:
            return SpanRole.TOOL
        return SpanRole.OTHER
    ai_operation = attribute(semconv.AI_SDK_OPERATION_ID)
    if isinstance(ai_operation, _SCALARS):
        if ai_operation in semconv.AI_SDK_RUN_OPERATIONS:
            return SpanRole.RUN if named else SpanRole.OTHER
        if ai_operation in semconv.AI_SDK_MODEL_CALL_OPERATIONS:
            return SpanRole.PASS
        if ai_operation == semconv.AI_SDK_OP_TOOL_CALL:
            return SpanRole.TOOL
        return SpanRole.OTHER
    oi_kind = attribute(semconv.OPENINFERENCE_SPAN_KIND)
    if isinstance(oi_kind, _SCALARS):
        # CHAIN is a container, not an agent run: folding it into invoke_agent is too coarse.
        return {
            semconv.OI_KIND_AGENT: SpanRole.RUN if named else SpanRole.AGENT,
            semconv.OI_KIND_LLM: SpanRole.PASS,
            semconv.OI_KIND_TOOL: SpanRole.TOOL,
        }.get(str(oi_kind).upper(), SpanRole.OTHER)
    tl_kind = attribute(semconv.TRACELOOP_SPAN_KIND)
    if isinstance(tl_kind, _SCALARS):
        if tl_kind == semconv.TL_KIND_AGENT:
            return SpanRole.RUN if named else SpanRole.AGENT
        if tl_kind == semconv.TL_KIND_TOOL:
            return SpanRole.TOOL
    request_type = attribute(semconv.LLM_REQUEST_TYPE)
    if isinstance(request_type, _SCALARS) and request_type in semconv.LLM_REQUEST_TYPE_MODEL_CALLS:
        return SpanRole.PASS
    if named:
        # A span that names a run but no GenAI operation is still that run's root.
        return SpanRole.RUN
    return SpanRole.OTHER


def is_run(attribute: Callable[[str], Any | None]) -> bool:
    """``role_of(attribute) is SpanRole.RUN``, settled by one lookup for a span that names no run:
    every way to be a run above needs ``footprint.run.id`` (``named``), and most spans are not
    runs (the processor asks this of every span it starts)."""
    return attribute(semconv.RUN_ID) is not None and role_of(attribute) is SpanRole.RUN


def is_agent_span(attribute: Callable[[str], Any | None]) -> bool:
    """Whether a span is an agent span of GenAI, OpenInference or OpenLLMetry (a run span only
    when it names a run; see the module docstring)."""
    return (
        attribute(semconv.GEN_AI_OPERATION_NAME) == semconv.OP_INVOKE_AGENT
        or str(attribute(semconv.OPENINFERENCE_SPAN_KIND) or "").upper() == semconv.OI_KIND_AGENT
        or attribute(semconv.TRACELOOP_SPAN_KIND) == semconv.TL_KIND_AGENT
    )


def tool_name_of(attribute: Callable[[str], Any | None]) -> str | None:
    """The tool a tool span called, from GenAI, Vercel AI SDK, OpenInference or OpenLLMetry names."""
    for key in (
        semconv.GEN_AI_TOOL_NAME,
        semconv.AI_SDK_TOOL_CALL_NAME,
        semconv.OI_TOOL_NAME,
        semconv.TRACELOOP_ENTITY_NAME,
    ):
        value = attribute(key)
        if isinstance(value, str) and value:
            return value
    return None


def tool_call_id_of(attribute: Callable[[str], Any | None]) -> str | None:
    """The tool call id of a tool span, from GenAI, Vercel AI SDK or OpenInference names."""
    for key in (semconv.GEN_AI_TOOL_CALL_ID, semconv.AI_SDK_TOOL_CALL_ID, semconv.OI_TOOL_CALL_ID):
        value = attribute(key)
        if isinstance(value, str) and value:
            return value
    return None
