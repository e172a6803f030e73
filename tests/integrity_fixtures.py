"""Agents written with the recorder whose model-call spans carry the GenAI conventions' frame
(offered tools, system instructions, input and output messages), decided by the engine from their
SDK spans. Each scenario of the integrity tests is one scripted run.

The map follows the reference's trap: ``zone-audit`` (owning ``get_zone_info``) is entered by
keyword, the model then works with ``screen_open`` (not the map's), so the kernel parks the map
at pass 4. By default the agent runs no kernel (shadow mode: a park still offering the map's tools
is what parking would have withheld, an advisory); ``Script(enforced=True)`` makes it apply the
kernel itself and report its decisions (verify mode: the same offered list contradicts its park).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.kernel import (
    DEFAULT_RENEWAL_GRACE,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    ToolResult,
    advance_engagement,
    engagement_plan,
)
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import SdkSpanView

MAP = footprint.MountedMap("skill-map", ("zone-audit", "run-finder"), ("get_zone_info",))


def tool_def(name: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One ``gen_ai.tool.definitions`` entry."""
    return {
        "type": "function",
        "name": name,
        "parameters": dict(parameters or {"type": "object", "properties": {}}),
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def asked(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant message asking for one tool call."""
    part = {"type": "tool_call", "id": call_id, "name": name, "arguments": dict(arguments)}
    return {"role": "assistant", "parts": [part]}


def answered(call_id: str, result: Any) -> dict[str, Any]:
    """The tool-role message carrying a call's result."""
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": result}],
    }


@dataclass
class Call:
    """One tool call a pass chose and the agent ran."""

    name: str
    arguments: Mapping[str, Any]
    result: Any = None
    call_id: str | None = None
    failed: bool = False
    absent: bool = False
    """The tool declared an absence (``footprint.tools.absent``)."""
    shape: tuple[str, int] | None = None
    """The raw result's shape as the agent states it (``footprint.tool.result_shape``)."""
    facts: Sequence[Mapping[str, Any]] = ()
    """Facts the call settled (``footprint.tools.semantics_declared``)."""
    described_at: str | None = None
    """Declare ``facts`` as a ``describedResult()`` (camelCase keys) measured at this time."""
    cut_facts: bool = False
    """A fact declaration cut by an attribute length limit (its JSON broken)."""
    unrecorded: bool = False
    """Leave the result out of the record (content capture off for this call)."""
    paused_absence: Mapping[str, Any] | None = None
    """The call pauses to ask a person, declaring this absence (no result in this leg)."""


@dataclass
class Step:
    """One pass: what it offered and showed, and what the model chose."""

    tools: Sequence[Mapping[str, Any]] | None = None
    messages: Sequence[Mapping[str, Any]] | None = None
    system: Sequence[str] | None = None
    calls: Sequence[Call] = ()
    text: str | None = None
    output: bool = True
    """Record the output messages (the chosen calls) on the span."""
    active: Sequence[str] = ("zone-audit",)
    cursor: str | None = None
    moved_by: str | None = None
    grounds: Sequence[tuple[str, str]] = ()
    raw_grounds: Sequence[tuple[str, str]] = ()
    """External grounds written as events as they are (the recorder refuses blank ones)."""
    dropped: Sequence[str] | None = None
    manifest: Sequence[str] | None = None
    raw_messages: str | None = None
    raw_tools: str | None = None
    """``gen_ai.tool.definitions`` written as is."""
    """``gen_ai.input.messages`` written as is (e.g. cut by an attribute length limit)."""
    injected: Sequence[tuple[str, str]] = ()
    """(source id, content) rows of ``context.injected`` (their summaries are capped)."""


@dataclass
class Script:
    steps: Sequence[Step]
    maps: Sequence[footprint.MountedMap] = (MAP,)
    declared: Mapping[str, Sequence[str]] = field(default_factory=dict)
    columns: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    notice_empty_lookups: bool = False
    check_column_types: str = "off"
    reported: Sequence[Mapping[str, Any]] = ()
    notice_prior_turn_evidence: bool = False
    grounding: Mapping[str, Any] | None = None
    """``Run.evidence_grounding`` keyword arguments (the gate's reading of the answer)."""
    claims: Sequence[tuple[str, str, str]] = ()
    """(answer field, entity, field) declared as claims."""
    answer: str = "done"
    disposition: Sequence[Mapping[str, Any]] | None = None
    """The agent's own ``integrity.disposition`` rows (upstream camelCase keys)."""
    posture: str = "observe"
    gate_events: Sequence[tuple[str, Mapping[str, Any]]] = ()
    """Other events on the run span (type, camelCase payload), e.g. the gate's own verdict."""
    enforced: bool = False
    """The agent applies the engagement kernel itself and reports its decisions (verify mode); it
    still offers every step's tools, parked or not."""


def run_script(script: Script) -> tuple[ReadableSpan, ...]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("integrity-agent")
    counter = 0
    plan = engagement_plan(script.maps, DEFAULT_RENEWAL_GRACE) if script.maps else None
    engagement: tuple[MapEngagementRecord, ...] = ()
    with footprint.run(
        tracer,
        agent="auditor",
        maps=script.maps,
        enforced=script.enforced or None,
        user_prompt="zone audit",
    ) as run:
        for name in sorted(set(script.declared) | set(script.columns)):
            run.declare_tool(
                name,
                arguments_from=script.declared.get(name, ()),
                result_columns=script.columns.get(name),
            )
        for answer_field, entity, field_name in script.claims:
            run.declare_claim(answer_field, entity, field_name)
        if (
            script.notice_empty_lookups
            or script.check_column_types != "off"
            or script.notice_prior_turn_evidence
            or script.posture != "observe"
        ):
            run.integrity_settings(
                notice_empty_lookups=script.notice_empty_lookups,
                check_column_types=script.check_column_types,  # type: ignore[arg-type]
                notice_prior_turn_evidence=script.notice_prior_turn_evidence,
                posture=script.posture,  # type: ignore[arg-type]
            )
        for index, step in enumerate(script.steps, start=1):
            with run.model_call("gpt-test") as call:
                cursor = step.cursor or "zone-audit"
                moved_by = step.moved_by or ("entry" if index == 1 else "stay")
                witness = "zone" if index == 1 else None
                if script.enforced and plan is not None:
                    move = (cursor, moved_by, witness)
                    before = script.steps[index - 2] if index > 1 else None
                    engagement = _own_kernel(call, plan, engagement, move, before)
                call.evaluated(step.active, cursor_to=cursor, moved_by=moved_by, witness=witness)
                ids = []
                for chosen in step.calls:
                    counter += 1
                    chosen.call_id = chosen.call_id or f"call_{counter}"
                    ids.append(chosen.call_id)
                output = [
                    {
                        "role": "assistant",
                        "parts": [
                            *([{"type": "text", "content": step.text}] if step.text else []),
                            *(
                                {
                                    "type": "tool_call",
                                    "id": c.call_id,
                                    "name": c.name,
                                    "arguments": dict(c.arguments),
                                }
                                for c in step.calls
                            ),
                        ],
                        "finish_reason": "tool_call" if step.calls else "stop",
                    }
                ]
                run.frame(
                    call,
                    tools=step.tools,
                    system=step.system,
                    messages=step.messages,
                    output=output if step.output else None,
                )
                for value, source in step.grounds:
                    run.external_ground(value, source)
                for value, source in step.raw_grounds:
                    run.event(
                        "integrity.external_ground",
                        {"value": value, "source": source, "iteration": call.iteration},
                    )
                if step.dropped is not None:
                    run.window_compacted(step.dropped)
                if step.manifest is not None:
                    run.wire_manifest(step.manifest)
                # Written as is: the pass's span lands when the block ends (staged until then).
                if step.raw_tools is not None:
                    call._staged_attributes["gen_ai.tool.definitions"] = step.raw_tools
                if step.raw_messages is not None:
                    call._staged_attributes["gen_ai.input.messages"] = step.raw_messages
                for source_id, content in step.injected:
                    call.injected("system-prompt", "skill", source_id=source_id, content=content)
            for chosen in step.calls:
                with run.tool_call(
                    chosen.name, args=chosen.arguments, call_id=chosen.call_id
                ) as tc:
                    if chosen.absent:
                        tc.event("tools.absent", {"toolName": chosen.name, "reason": "no match"})
                    if chosen.cut_facts:
                        tc.event(
                            "tools.semantics_declared",
                            {"toolName": chosen.name, "semantics": '{"facts":[{"entity":"lun-7",'},
                        )
                    if chosen.described_at is not None:
                        run.tool_described_result(
                            tc, facts=chosen.facts, measured_at=chosen.described_at
                        )
                    elif chosen.facts:
                        run.tool_semantics(tc, facts=chosen.facts)
                    if chosen.shape is not None:
                        shape, rows = chosen.shape
                        tc.event("tool.result_shape", {"shape": shape, "rows": rows})
                    if chosen.paused_absence is not None:
                        run.pause(
                            "which array?",
                            tool_call_id=chosen.call_id,
                            tool_name=chosen.name,
                            absence=chosen.paused_absence,
                        )
                    elif not chosen.unrecorded:
                        tc.result(chosen.result, error=chosen.failed)
        for finding in script.reported:
            run.context_error(**finding)
        if script.grounding is not None:
            run.evidence_grounding(**script.grounding)
        for event_type, payload in script.gate_events:
            run.event(event_type, payload)
        run.answer(script.answer)
        if script.disposition is not None:
            run.event(
                "integrity.disposition",
                {"posture": "observe", "workExisted": True, "rows": list(script.disposition)},
            )
    return exporter.get_finished_spans()


def _own_kernel(
    call: footprint.ModelCall,
    plan: EngagementPlan,
    engagement: tuple[MapEngagementRecord, ...],
    move: tuple[str, str, str | None],
    before: Step | None,
) -> tuple[MapEngagementRecord, ...]:
    """Verify mode: the agent's kernel advances on the pass it is about to make (the same inputs
    the engine replays from the record: the move, the last pass's calls and active skills) and
    the agent reports each decision on the pass."""
    cursor, moved_by, witness = move
    advance = advance_engagement(
        plan,
        engagement,
        EngagementPass(
            iteration=call.iteration,
            current_node=cursor,
            move_by=moved_by,
            witness=witness,
            tool_results=tuple(ToolResult(c.name) for c in before.calls) if before else (),
            served_last_pass=tuple(before.active) if before else (),
        ),
    )
    for change in advance.changes:
        call.engagement(change)
    return advance.next


def decide(spans: Sequence[ReadableSpan], options: EngineOptions | None = None) -> RunVerdict:
    (grouped,) = group_runs(SdkSpanView(s) for s in spans)
    return decide_run(grouped, None, options or EngineOptions(findings=False))


def verdict_of(script: Script) -> RunVerdict:
    return decide(run_script(script))


def trap(offered_at: Mapping[int, Sequence[str]], n: int = 6, **extra: Any) -> Script:
    """The trap run: ``screen_open`` every pass but the last; ``offered_at[i]`` the tools offered
    at pass ``i`` (default: screen_open and get_zone_info)."""
    steps = []
    for i in range(1, n + 1):
        offered = offered_at.get(i, ("screen_open", "get_zone_info"))
        steps.append(
            Step(
                tools=[tool_def(t) for t in offered],
                messages=[user("zone audit please")],
                calls=[Call("screen_open", {}, "ok")] if i < n else [],
            )
        )
    return Script(steps, **extra)


def frame_json(messages: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(messages))
