"""Evidence chips in words: which span of a run an evidence pointer names (``call 2``, ``the run``,
``a tool call``) and what on it (``the skill put in the prompt``), for the HTML view's chips and its
evidence table. Every word here has its entry in ``docs/glossary.md`` (a test reads these tables).
"""

from __future__ import annotations

from otel_footprint import semconv
from otel_footprint.account.model import Pointer
from otel_footprint.engine.verdict import RunVerdict

EVIDENCE_FIELDS: dict[tuple[str, str], str] = {
    (semconv.T_TURN_ROUTED, "to"): "the skill routing chose",
    (semconv.T_TURN_ROUTED, "by"): "who routed",
    (semconv.T_TURN_ROUTED, "from"): "the skill routed from",
    (semconv.T_TURN_ROUTED, "scores"): "the routing scores",
    (semconv.T_TURN_ROUTED, "witness"): "the words routing matched",
    (semconv.T_TURN_ROUTED, "decider"): "the model that routed",
    (semconv.T_SLOT_COMPOSED, "slot"): "the skill put in the prompt",
    (semconv.T_CONTEXT_INJECTED, "source_id"): "the skill injected",
    (semconv.T_TURN_START, "user_prompt"): "the question",
    (semconv.T_PERMISSION_CHECK, "target"): "what was refused",
    (semconv.T_PERMISSION_CHECK, "policy_rule_id"): "the rule that refused",
    (semconv.T_PAUSE_REQUEST, "question_payload"): "the question put to the user",
}
"""(event type, payload field) -> what a pointer at that field holds, in words."""

EVIDENCE_EVENTS: dict[str, str] = {
    semconv.T_MAPS_MOUNTED: "the maps mounted",
    semconv.T_RUN_CONFIGURED: "the run's set-up",
    semconv.T_GRAPH_DECLARED: "the skill graph",
    semconv.T_TURN_START: "the turn's start",
    semconv.T_TURN_END: "the answer",
    semconv.T_CONTEXT_EVALUATED: "what the call had active",
    semconv.T_CONTEXT_INJECTED: "what was injected",
    semconv.T_SLOT_COMPOSED: "the prompt as composed",
    semconv.T_TURN_ROUTED: "the routing",
    semconv.T_ROUTE_DECIDED: "the route decided",
    semconv.T_SKILL_REJECTED: "a skill turned down",
    semconv.T_SKILL_PICKED: "the skill the model picked",
    semconv.T_PERMISSION_CHECK: "a permission check",
    semconv.T_PERMISSION_HALT: "a halt",
    semconv.T_MAP_ENGAGED: "the map engaging",
    semconv.T_MAP_PARKED: "the map parking",
    semconv.T_PAUSE_REQUEST: "the pause",
    semconv.T_PAUSE_RESUME: "the resume",
    semconv.T_TOOLS_ABSENT: "a declared absence",
    semconv.T_TOOLS_COVERAGE: "the declared coverage",
}
"""Event type -> what a pointer at that event (or a field it has no words for) holds."""

EVIDENCE_ATTRIBUTES: dict[str, str] = {
    semconv.GEN_AI_TOOL_CALL_RESULT: "the tool's result",
    semconv.ENG_SERVED_WHILE_PARKED: "the skills sent while parked",
    semconv.F_STATE: "the state kept at the pause",
}
"""A span attribute (no event) -> what it holds, in words."""

EVIDENCE_SPAN = "the tool call"
"""A pointer at a span itself (no event, no attribute): the tool call span a line is about."""


def evidence_words(pointer: Pointer) -> str:
    """What an evidence pointer points at, in words: ``the skill routing chose``."""
    if pointer.event_name is not None:
        event = pointer.event_name.removeprefix(semconv.PREFIX)
        if pointer.attribute is not None:
            field = pointer.attribute.removeprefix(semconv.PREFIX)
            words = EVIDENCE_FIELDS.get((event, field))
            if words is not None:
                return words
            if pointer.attribute == semconv.F_STATE:
                return EVIDENCE_ATTRIBUTES[semconv.F_STATE]
        return EVIDENCE_EVENTS.get(event, event)
    if pointer.attribute is not None:
        return EVIDENCE_ATTRIBUTES.get(pointer.attribute, pointer.attribute)
    return EVIDENCE_SPAN


_TOOL_EVENTS = frozenset({semconv.T_TOOLS_ABSENT, semconv.T_TOOLS_COVERAGE})

PLACES = ("call N", "the run", "the run's earlier leg", "a tool call", "a span")
"""Every way a chip names its span (``call N`` with the call's number)."""


def evidence_place(pointer: Pointer, verdict: RunVerdict) -> str:
    """Which span of the run a pointer names: ``call 2``, ``the run``, ``the run's earlier leg``
    (a resumed leg's evidence from before the pause), ``a tool call`` or ``a span``."""
    if pointer.trace_id != verdict.trace_id:
        return "the run's earlier leg"
    for p in verdict.passes:
        if p.span_id == pointer.span_id:
            return f"call {p.iteration}"
    if pointer.span_id == verdict.run_span_id:
        return "the run"
    event = (pointer.event_name or "").removeprefix(semconv.PREFIX)
    bare = pointer.event_name is None and pointer.attribute is None
    if bare or pointer.attribute == semconv.GEN_AI_TOOL_CALL_RESULT or event in _TOOL_EVENTS:
        return "a tool call"
    return "a span"
