"""Functional: traces built with the real OpenTelemetry SDK (GenAI, OpenInference and OpenLLMetry
shapes) become passes and tool calls, the kernel replays over them, and bad input becomes a named
reason on the run — never a crash, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Status, StatusCode, set_span_in_context

from otel_footprint import semconv
from otel_footprint.codec import encode_payload
from otel_footprint.engine import decide as engine
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.kernel.jsoncodec import change_to_json, record_to_json
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.runs.group import RunSpans, group_runs
from otel_footprint.runs.passes import batches_of, build_pass, read_run
from otel_footprint.runs.spans import SdkSpanView
from otel_footprint.runs.store import LegState, MemoryRunStore

Flavor = Literal["genai", "openinference", "openllmetry"]

TRAP_PLAN = {
    "maps": [
        {
            "id": "skill-map",
            "memberIds": ["zone-audit", "run-finder"],
            "toolNames": ["get_zone_info"],
        }
    ],
    "renewalGrace": 3,
}
TRAP_EDGES = [
    {"from": None, "to": "zone-audit", "kind": "entry"},
    {"from": "zone-audit", "to": "run-finder", "kind": "model"},
]
ENTRY = {"to": "zone-audit", "by": "entry", "witness": {"text": "zone", "keyword": "zone"}}
STAY = {"from": "zone-audit", "to": "zone-audit", "by": "stay"}
NO_ACCOUNT = EngineOptions(account=False)


@dataclass
class Tool:
    name: str
    args: Any = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failed: bool = False
    iteration: int | Literal["auto"] | None = "auto"
    raw_args: str | None = None


@dataclass
class Pass:
    cursor: Mapping[str, Any] | None = None
    active: Sequence[str] = ()
    tools: Sequence[Tool] = ()
    reported: Sequence[dict[str, Any]] = ()
    card: bool = False
    iteration: int | Literal["auto"] | None = "auto"
    evaluated: bool = True
    evaluated_extra: Mapping[str, Any] = field(default_factory=dict)
    rows: Sequence[dict[str, Any]] = ()


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000_000_000

    def tick(self) -> int:
        self.now += 1_000
        return self.now


class Tracer:
    """A real SDK pipeline that keeps every finished span in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("test_runs_engine")
        self.clock = Clock()

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()


def _event(span: Span, clock: Clock, name: str, payload: Mapping[str, Any]) -> None:
    span.add_event(name, attributes=encode_payload(payload), timestamp=clock.tick())


def _run_attrs(flavor: Flavor, run_id: str, session: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {semconv.RUN_ID: run_id}
    if flavor == "genai":
        attrs[semconv.GEN_AI_OPERATION_NAME] = "invoke_agent"
        attrs[semconv.GEN_AI_AGENT_NAME] = "agent"
    elif flavor == "openinference":
        attrs[semconv.OPENINFERENCE_SPAN_KIND] = "AGENT"
    else:
        attrs[semconv.TRACELOOP_SPAN_KIND] = "agent"
    if session is not None:
        attrs[semconv.GEN_AI_CONVERSATION_ID] = session
    return attrs


def _pass_attrs(flavor: Flavor, iteration: int | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if flavor == "genai":
        attrs[semconv.GEN_AI_OPERATION_NAME] = "chat"
    elif flavor == "openinference":
        attrs[semconv.OPENINFERENCE_SPAN_KIND] = "LLM"
    else:
        attrs[semconv.LLM_REQUEST_TYPE] = "chat"
    if iteration is not None:
        attrs[semconv.PASS_ITERATION] = iteration
    return attrs


def _tool_attrs(flavor: Flavor, tool: Tool, call_id: str, iteration: int | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if flavor == "genai":
        attrs[semconv.GEN_AI_OPERATION_NAME] = "execute_tool"
        attrs[semconv.GEN_AI_TOOL_NAME] = tool.name
        attrs[semconv.GEN_AI_TOOL_CALL_ID] = call_id
    elif flavor == "openinference":
        attrs[semconv.OPENINFERENCE_SPAN_KIND] = "TOOL"
        attrs[semconv.OI_TOOL_NAME] = tool.name
        attrs[semconv.OI_TOOL_CALL_ID] = call_id
    else:
        attrs[semconv.TRACELOOP_SPAN_KIND] = "tool"
        attrs[semconv.TRACELOOP_ENTITY_NAME] = tool.name
    if tool.raw_args is not None:
        attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = tool.raw_args
    elif tool.args is not None:
        attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = json.dumps(tool.args)
    if iteration is not None:
        attrs[semconv.PASS_ITERATION] = iteration
    return attrs


def build_run(
    t: Tracer,
    passes: Sequence[Pass],
    *,
    plan: Mapping[str, Any] | None = TRAP_PLAN,
    enforced: bool | None = None,
    run_id: str = "run-1",
    session: str | None = None,
    flavor: Flavor = "genai",
    first_iteration: int = 1,
    resumed: bool = False,
    paused: bool = False,
    run_events: Sequence[tuple[str, Mapping[str, Any]]] = (),
    maps_attribute: str | None = None,
) -> None:
    """Emit one run leg through the SDK: run span, a chat span per pass, an execute_tool span per
    call (each a child of the run span), footprint events as span events."""
    clock = t.clock
    run = t.tracer.start_span(
        "invoke_agent agent",
        attributes=_run_attrs(flavor, run_id, session),
        start_time=clock.tick(),
    )
    ctx = set_span_in_context(run)
    if resumed:
        _event(run, clock, semconv.EV_PAUSE_RESUME, {"resumeInput": {"input": "approved"}})
    _event(run, clock, semconv.EV_GRAPH_DECLARED, {"nodes": [], "edges": TRAP_EDGES})
    if plan is not None:
        payload = dict(plan)
        if enforced is not None:
            payload["enforced"] = enforced
        attrs = encode_payload(payload)
        if maps_attribute is not None:
            attrs[semconv.F_MAPS] = maps_attribute
        run.add_event(semconv.EV_MAPS_MOUNTED, attributes=attrs, timestamp=clock.tick())
    for name, extra in run_events:
        _event(run, clock, name, extra)
    calls = 0
    for index, spec in enumerate(passes):
        iteration = first_iteration + index
        stated = iteration if spec.iteration == "auto" else spec.iteration
        chat = t.tracer.start_span(
            "chat mock",
            context=ctx,
            attributes=_pass_attrs(flavor, stated if flavor == "genai" else None),
            start_time=clock.tick(),
        )
        for change in spec.reported:
            name = semconv.EV_MAP_PARKED if change["kind"] == "parked" else semconv.EV_MAP_ENGAGED
            _event(chat, clock, name, {k: v for k, v in change.items() if k != "kind"})
        if spec.evaluated:
            evaluated: dict[str, Any] = {
                "iteration": stated if stated is not None else iteration,
                "activeIds": list(spec.active),
            }
            if spec.cursor is not None:
                evaluated["cursorMove"] = dict(spec.cursor)
            evaluated.update(spec.evaluated_extra)
            _event(chat, clock, semconv.EV_CONTEXT_EVALUATED, evaluated)
        for skill in spec.active:
            _event(
                chat,
                clock,
                semconv.EV_CONTEXT_INJECTED,
                {
                    "slot": "system-prompt",
                    "source": "skill",
                    "sourceId": skill,
                    "contentSummary": f"{skill} procedure",
                    "chars": 500,
                },
            )
        if spec.card:
            _event(
                chat,
                clock,
                semconv.EV_CONTEXT_INJECTED,
                {"slot": "system-prompt", "source": "steering", "sourceId": PARK_CARD_ID},
            )
        for row in spec.rows:
            _event(chat, clock, semconv.EV_CONTEXT_INJECTED, row)
        chat.end(end_time=clock.tick())
        for tool in spec.tools:
            calls += 1
            tool_iteration = iteration if tool.iteration == "auto" else tool.iteration
            if flavor != "genai" and tool.iteration == "auto":
                tool_iteration = None  # let the reader attribute it by start time
            span = t.tracer.start_span(
                f"execute_tool {tool.name}",
                context=ctx,
                attributes=_tool_attrs(flavor, tool, f"c{calls}", tool_iteration),
                start_time=clock.tick(),
            )
            for name, payload in tool.events:
                _event(span, clock, name, payload)
            if tool.failed:
                span.set_status(Status(StatusCode.ERROR, "boom"))
            span.end(end_time=clock.tick())
    if paused:
        _event(run, clock, semconv.EV_PAUSE_REQUEST, {"reason": "ask"})
    run.end(end_time=clock.tick())


def runs_of(t: Tracer) -> list[RunSpans]:
    return group_runs(SdkSpanView(s) for s in t.spans())


def decide_all(t: Tracer, store: MemoryRunStore | None = None) -> list[RunVerdict]:
    shared = store if store is not None else MemoryRunStore()
    return [decide_run(run, shared, NO_ACCOUNT) for run in runs_of(t)]


def only(t: Tracer) -> RunVerdict:
    (verdict,) = decide_all(t)
    return verdict


def changes(verdict: RunVerdict) -> list[dict[str, Any]]:
    return [change_to_json(c) for p in verdict.passes for c in p.changes]


def codes(verdict: RunVerdict) -> list[str]:
    return [r.code for r in verdict.reasons]


def trap_passes(n: int, reported: bool = True, tool: str = "screen_open") -> list[Pass]:
    """Example 21: entry on zone-audit, then the model works elsewhere; parks on pass 4."""
    out = []
    for i in range(1, n + 1):
        parked = i >= 4
        rep: list[dict[str, Any]] = []
        if reported and i == 1:
            rep = [dict(ENGAGED_AT_1)]
        if reported and i == 4:
            rep = [dict(PARKED_AT_4)]
        out.append(
            Pass(
                cursor=ENTRY if i == 1 else STAY,
                active=[] if (parked and reported) else ["zone-audit"],
                tools=[Tool(tool)] if i < n else [],
                reported=rep,
                card=parked and reported,
            )
        )
    return out


PARKED_AT_4 = {
    "kind": "parked",
    "mapId": "skill-map",
    "iteration": 4,
    "by": "lexical",
    "idleCalls": 3,
    "witness": "zone",
}
ENGAGED_AT_1 = {
    "kind": "engaged",
    "mapId": "skill-map",
    "iteration": 1,
    "by": "lexical",
    "witness": "zone",
}


# ── recognition: three instrumentation styles ────────────────────────────────────────────────


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_passes_and_tool_calls_are_recognized_in_every_style(flavor: Flavor) -> None:
    t = Tracer()
    build_run(t, trap_passes(6, reported=False), flavor=flavor)
    (run,) = runs_of(t)
    assert run.run_span is not None
    assert len(run.passes) == 6
    assert len(run.tools) == 5
    facts = read_run(run)
    assert [p.iteration for p in facts.passes] == [1, 2, 3, 4, 5, 6]
    assert [c.name for c in facts.tool_calls] == ["screen_open"] * 5
    assert [c.iteration for c in facts.tool_calls] == [1, 2, 3, 4, 5]
    verdict = decide_run(run, None, NO_ACCOUNT)
    assert verdict.mode == "shadow"
    assert changes(verdict) == [ENGAGED_AT_1, PARKED_AT_4]
    assert [p.served_while_parked for p in verdict.passes] == [(), (), (), *[("zone-audit",)] * 3]
    assert [p.served_chars_while_parked for p in verdict.passes] == [0, 0, 0, 500, 500, 500]


def test_verify_mode_agrees_with_an_agent_that_parked() -> None:
    t = Tracer()
    build_run(t, trap_passes(6))
    verdict = only(t)
    assert verdict.mode == "verify"
    assert verdict.complete
    assert changes(verdict) == [ENGAGED_AT_1, PARKED_AT_4]
    assert not any(p.mismatch for p in verdict.passes)
    assert verdict.passes[3].parked_maps == ("skill-map",)
    assert verdict.passes[3].served == (PARK_CARD_ID,)
    assert verdict.passes[3].parked_tool_names == ("get_zone_info",)
    assert verdict.parked_maps == ("skill-map",)


def test_verify_mode_flags_an_agent_that_did_not_park() -> None:
    t = Tracer()
    passes = trap_passes(6)
    passes[3].reported = []  # the agent's own kernel said nothing at pass 4
    build_run(t, passes)
    verdict = only(t)
    assert [p.mismatch for p in verdict.passes] == [False, False, False, True, False, False]
    assert verdict.passes[3].reported == ()
    assert [change_to_json(c) for c in verdict.passes[3].changes] == [PARKED_AT_4]


def test_enforced_flag_decides_the_mode() -> None:
    t = Tracer()
    build_run(t, trap_passes(3, reported=False), enforced=True)
    assert only(t).mode == "verify"
    t = Tracer()
    build_run(t, trap_passes(3), enforced=False)
    verdict = only(t)
    assert verdict.mode == "shadow"
    assert all(p.reported == () and not p.mismatch for p in verdict.passes)


def test_own_tool_upgrades_instead_of_idling() -> None:
    t = Tracer()
    build_run(t, trap_passes(5, reported=False, tool="get_zone_info"))
    verdict = only(t)
    assert changes(verdict) == [
        ENGAGED_AT_1,
        {
            "kind": "engaged",
            "mapId": "skill-map",
            "iteration": 2,
            "by": "structural",
            "upgraded": True,
            "foundedBy": "lexical",
            "witness": "zone",
        },
    ]


# ── picks ────────────────────────────────────────────────────────────────────────────────────


def _recovery(pick: Tool, cursor5: Mapping[str, Any] = STAY) -> Tracer:
    t = Tracer()
    passes = trap_passes(5, reported=False)
    passes[3].tools = [pick]
    passes[4].cursor = cursor5
    build_run(t, passes)
    return t


def test_an_accepted_read_skill_pick_reengages_a_parked_map() -> None:
    verdict = only(_recovery(Tool("read_skill", {"id": "zone-audit"})))
    assert changes(verdict)[-1] == {
        "kind": "engaged",
        "mapId": "skill-map",
        "iteration": 5,
        "by": "explicit",
        "reengaged": True,
    }


def test_a_hop_pick_is_the_pending_pick() -> None:
    t = _recovery(
        Tool("read_skill", {"id": "run-finder"}),
        {"from": "zone-audit", "to": "run-finder", "by": "model-pick"},
    )
    (run,) = runs_of(t)
    facts = read_run(run)
    pass5, problem = build_pass(facts, 4, batches_of(facts, None), None)
    assert problem is None and pass5 is not None
    assert pass5.pending_skill_pick == "run-finder"
    assert pass5.accepted_skill_picks == ("run-finder",)
    verdict = decide_run(run, None, NO_ACCOUNT)
    assert verdict.engagement[0].at == "run-finder"
    assert verdict.engagement[0].at_by == "explicit"


def test_a_self_pick_is_accepted_but_not_a_hop() -> None:
    (run,) = runs_of(_recovery(Tool("read_skill", {"id": "zone-audit"})))
    facts = read_run(run)
    pass5, _ = build_pass(facts, 4, batches_of(facts, None), None)
    assert pass5 is not None
    assert pass5.pending_skill_pick is None
    assert pass5.accepted_skill_picks == ("zone-audit",)


@pytest.mark.parametrize(
    "refusal",
    [
        (
            semconv.EV_PERMISSION_CHECK,
            {"capability": "skill_read", "target": "skill:zone-audit", "result": "deny"},
        ),
        (
            semconv.EV_PERMISSION_CHECK,
            {"capability": "skill_read", "target": "skill:zone-audit", "result": "halt"},
        ),
        (
            semconv.EV_PERMISSION_CHECK,
            {"capability": "tool_call", "target": "read_skill", "result": "deny"},
        ),
        (semconv.EV_SKILL_REJECTED, {"requestedId": "zone-audit", "iteration": 4}),
    ],
    ids=["skill-read-deny", "skill-read-halt", "tool-call-deny", "rejected"],
)
def test_a_refused_pick_does_not_reengage(refusal: tuple[str, dict[str, Any]]) -> None:
    verdict = only(_recovery(Tool("read_skill", {"id": "zone-audit"}, events=[refusal])))
    assert changes(verdict) == [ENGAGED_AT_1, PARKED_AT_4]


def test_an_allowing_permission_check_keeps_the_pick() -> None:
    allow = (
        semconv.EV_PERMISSION_CHECK,
        {"capability": "skill_read", "target": "skill:zone-audit", "result": "allow"},
    )
    verdict = only(_recovery(Tool("read_skill", {"id": "zone-audit"}, events=[allow])))
    assert changes(verdict)[-1]["reengaged"] is True


def test_a_stated_pick_event_wins_over_arguments() -> None:
    picked = (semconv.EV_SKILL_PICKED, {"skillId": "run-finder", "hop": True})
    t = _recovery(Tool("read_skill", {"id": "zone-audit"}, events=[picked]))
    (run,) = runs_of(t)
    facts = read_run(run)
    pass5, _ = build_pass(facts, 4, batches_of(facts, None), None)
    assert pass5 is not None
    assert pass5.accepted_skill_picks == ("run-finder",)
    assert pass5.pending_skill_pick == "run-finder"


# ── the re-ask quirk ─────────────────────────────────────────────────────────────────────────


def test_a_re_ask_pass_sees_the_last_dispatched_batch_again() -> None:
    # Pass 2 dispatches nothing (an output-retry re-ask); upstream does not clear the batch, so
    # pass 3 is judged against pass 1's screen_open again and the map keeps idling.
    t = Tracer()
    passes = trap_passes(5, reported=False)
    passes[1].tools = []
    build_run(t, passes)
    (run,) = runs_of(t)
    facts = read_run(run)
    batches = batches_of(facts, None)
    built = [build_pass(facts, i, batches, None)[0] for i in range(5)]
    assert [[r.tool_name for r in p.tool_results] for p in built if p] == [
        [],
        ["screen_open"],
        ["screen_open"],
        ["screen_open"],
        ["screen_open"],
    ]
    verdict = decide_run(run, None, NO_ACCOUNT)
    assert [p.records[0].idle for p in verdict.passes] == [0, 1, 2, 3, 3]
    assert changes(verdict)[-1] == PARKED_AT_4


# ── served last pass ─────────────────────────────────────────────────────────────────────────


def test_a_map_that_did_not_ride_does_not_idle() -> None:
    t = Tracer()
    passes = trap_passes(6, reported=False)
    for p in passes[1:]:
        p.active = []  # founded, but its contribution never reached the wire again
    build_run(t, passes)
    verdict = only(t)
    assert changes(verdict) == [ENGAGED_AT_1]
    assert verdict.engagement[0].idle == 1  # only pass 2 judged pass 1, which did serve it


# ── bad input: a named reason each, never a crash ────────────────────────────────────────────


def test_missing_plan_is_a_reason_and_no_engagement() -> None:
    t = Tracer()
    build_run(t, trap_passes(3), plan=None)
    verdict = only(t)
    assert codes(verdict) == ["no-plan"]
    assert verdict.mode is None
    assert verdict.passes == ()
    assert verdict.engagement == ()


def test_plan_that_is_not_json_is_a_reason() -> None:
    t = Tracer()
    build_run(t, trap_passes(3), maps_attribute="[{not json")
    verdict = only(t)
    assert codes(verdict) == ["bad-attribute", "no-plan"]
    assert "footprint.maps" in verdict.reasons[0].message
    assert verdict.passes == ()


def test_plan_with_a_bad_shape_is_a_reason() -> None:
    t = Tracer()
    bad = {"maps": [{"id": "skill-map", "memberIds": [], "toolNames": []}], "renewalGrace": 3}
    build_run(t, trap_passes(3), plan=bad)
    verdict = only(t)
    assert codes(verdict) == ["bad-attribute", "no-plan"]
    assert "no members" in verdict.reasons[0].message


def test_cursor_move_that_is_not_json_is_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(4, reported=False)
    passes[2].evaluated_extra = {"cursorMove": "{to: zone-audit"}
    build_run(t, passes)
    verdict = only(t)
    assert codes(verdict) == ["bad-attribute"]
    assert "footprint.cursor_move" in verdict.reasons[0].message
    assert [p.iteration for p in verdict.passes] == [1, 2], "decided up to the unreadable pass"
    assert verdict.complete is False


def test_read_skill_arguments_that_are_not_json_are_a_reason() -> None:
    t = _recovery(Tool("read_skill", raw_args="{id: zone-audit"))
    verdict = only(t)
    assert codes(verdict) == ["bad-attribute"]
    assert semconv.GEN_AI_TOOL_CALL_ARGUMENTS in verdict.reasons[0].message
    assert [p.iteration for p in verdict.passes] == [1, 2, 3, 4]


def test_pass_without_a_model_call_span_is_a_reason() -> None:
    # Iteration 3's evaluation arrives on the run span, and no chat span was emitted for it.
    passes = trap_passes(4, reported=False)
    del passes[2]
    t2 = Tracer()
    passes[2].iteration = 4
    build_run(
        t2,
        passes,
        run_events=[
            (
                semconv.EV_CONTEXT_EVALUATED,
                {"iteration": 3, "activeIds": ["zone-audit"], "cursorMove": STAY},
            )
        ],
    )
    verdict = only(t2)
    assert "no-model-call-span" in codes(verdict)
    assert [p.iteration for p in verdict.passes] == [1, 2, 3, 4]
    assert verdict.passes[2].span_id is None
    assert all(p.span_id for p in verdict.passes if p.iteration != 3)
    assert verdict.complete is False


def test_duplicated_iterations_are_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(5, reported=False)
    passes[2].iteration = 2  # two chat spans claim iteration 2
    build_run(t, passes)
    verdict = only(t)
    assert codes(verdict)[0] == "duplicate-iteration"
    assert [p.iteration for p in verdict.passes] == [1]
    assert verdict.complete is False


def test_pass_without_an_evaluation_is_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(4, reported=False)
    passes[1].evaluated = False
    build_run(t, passes)
    verdict = only(t)
    assert codes(verdict) == ["missing-evaluated"]
    assert [p.iteration for p in verdict.passes] == [1]


def test_missing_passes_are_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(4, reported=False)
    passes[2].iteration = 5
    passes[3].iteration = 6
    build_run(t, passes)
    verdict = only(t)
    assert codes(verdict) == ["missing-spans"]
    assert [p.iteration for p in verdict.passes] == [1, 2]
    assert verdict.complete is False


def test_map_event_that_is_not_a_change_is_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(3)
    passes[0].reported = [{"kind": "engaged", "mapId": "skill-map", "iteration": 1, "by": "sure"}]
    build_run(t, passes)
    verdict = only(t)
    assert codes(verdict) == ["bad-attribute"]
    assert verdict.passes == ()


def test_tool_span_with_no_pass_is_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(3, reported=False)
    passes[0].tools = [Tool("screen_open", iteration=None)]
    build_run(t, passes, flavor="genai")
    # the tool span has no iteration but started after pass 1's span: attributed to pass 1
    assert codes(only(t)) == []
    t2 = Tracer()
    run = t2.tracer.start_span("invoke_agent a", attributes=_run_attrs("genai", "r", None))
    ctx = set_span_in_context(run)
    _event(run, t2.clock, semconv.EV_MAPS_MOUNTED, TRAP_PLAN)
    tool = t2.tracer.start_span(
        "execute_tool x", context=ctx, attributes=_tool_attrs("genai", Tool("x"), "c1", None)
    )
    tool.end()
    run.end()
    assert "unattributed-tool" in codes(only(t2))


# ── grouping ─────────────────────────────────────────────────────────────────────────────────


def test_spans_join_their_nearest_run_span() -> None:
    t = Tracer()
    outer = t.tracer.start_span("invoke_agent outer", attributes=_run_attrs("genai", "outer", None))
    octx = set_span_in_context(outer)
    step = t.tracer.start_span("step", context=octx)  # a plain container span
    sctx = set_span_in_context(step)
    inner = t.tracer.start_span(
        "invoke_agent inner", context=sctx, attributes=_run_attrs("genai", "inner", None)
    )
    ictx = set_span_in_context(inner)
    chat_inner = t.tracer.start_span("chat", context=ictx, attributes=_pass_attrs("genai", 1))
    chat_outer = t.tracer.start_span("chat", context=sctx, attributes=_pass_attrs("genai", 1))
    http = t.tracer.start_span("GET /x", context=sctx)  # no role, no events: dropped
    for span in (chat_inner, chat_outer, http, inner, step, outer):
        span.end()
    legs = {leg.run_id: leg for leg in runs_of(t)}
    assert set(legs) == {"outer", "inner"}
    assert [p.span_id for p in legs["inner"].passes] == [
        format(chat_inner.get_span_context().span_id, "016x")
    ]
    assert [p.span_id for p in legs["outer"].passes] == [
        format(chat_outer.get_span_context().span_id, "016x")
    ]
    assert legs["outer"].others == ()


def test_a_broken_parent_chain_joins_the_only_run_span() -> None:
    t = Tracer()
    build_run(t, trap_passes(2, reported=False))
    spans = list(t.spans())
    # Drop nothing but re-parent one chat span onto a span id that never arrived.
    from opentelemetry.trace import SpanContext, TraceFlags

    chat = next(s for s in spans if s.name.startswith("chat"))
    orphan = ReadableSpan(
        name=chat.name,
        context=chat.context,
        parent=SpanContext(chat.context.trace_id, 0xDEAD, False, TraceFlags(1)),
        attributes=chat.attributes,
        events=chat.events,
        start_time=chat.start_time,
        end_time=chat.end_time,
    )
    spans[spans.index(chat)] = orphan
    (leg,) = group_runs(SdkSpanView(s) for s in spans)
    assert len(leg.passes) == 2


def test_events_without_a_run_span_form_an_unannotated_leg() -> None:
    t = Tracer()
    chat = t.tracer.start_span("chat", attributes=_pass_attrs("genai", 1))
    _event(chat, t.clock, semconv.EV_CONTEXT_EVALUATED, {"iteration": 1, "activeIds": []})
    chat.end()
    plain = t.tracer.start_span("chat", attributes=_pass_attrs("genai", 1))  # no events: ignored
    plain.end()
    legs = runs_of(t)
    assert len(legs) == 1
    (leg,) = legs
    assert leg.run_span is None
    assert leg.reason is not None and leg.reason.code == "no-run-span"
    verdict = decide_run(leg)
    assert codes(verdict) == ["no-run-span"]
    assert verdict.mode is None and verdict.complete is False


def test_log_record_events_are_joined_to_their_span() -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    from otel_footprint.runs.spans import log_record_event

    t2 = Tracer()
    # Emit the whole trap run, but strip every context.evaluated span event and send them as logs.
    build_run(t2, trap_passes(6, reported=False))
    spans = list(t2.spans())
    logs: dict[str, list[Any]] = {}
    stripped = []
    for span in spans:
        keep = [e for e in span.events if e.name != semconv.EV_CONTEXT_EVALUATED]
        for event in span.events:
            if event.name != semconv.EV_CONTEXT_EVALUATED:
                continue
            record = LogRecord(event_name=event.name, time_unix_nano=event.timestamp)
            for key, value in (event.attributes or {}).items():
                any_value = AnyValue()
                if isinstance(value, int):
                    any_value.int_value = value
                elif isinstance(value, str):
                    any_value.string_value = value
                elif isinstance(value, tuple):
                    any_value.array_value.values.extend(
                        AnyValue(string_value=str(v)) for v in value
                    )
                record.attributes.append(KeyValue(key=key, value=any_value))
            view = log_record_event(record)
            assert view is not None
            logs.setdefault(format(span.context.span_id, "016x"), []).append(view)
        stripped.append(
            ReadableSpan(
                name=span.name,
                context=span.context,
                parent=span.parent,
                attributes=span.attributes,
                events=keep,
                start_time=span.start_time,
                end_time=span.end_time,
            )
        )
    (leg,) = group_runs((SdkSpanView(s) for s in stripped), logs)
    verdict = decide_run(leg, None, NO_ACCOUNT)
    assert codes(verdict) == []
    assert changes(verdict) == [ENGAGED_AT_1, PARKED_AT_4]


# ── legs and turns through the store ─────────────────────────────────────────────────────────


def test_a_resumed_leg_continues_through_the_store() -> None:
    t = Tracer()
    whole = trap_passes(5, reported=False)
    build_run(t, whole[:2], paused=True)
    leg2 = whole[2:]
    build_run(t, leg2, first_iteration=3, resumed=True)
    store = MemoryRunStore()
    first, second = decide_all(t, store)
    assert first.run_id == second.run_id
    assert second.resumed and second.complete
    assert [p.iteration for p in second.passes] == [3, 4, 5]
    assert changes(second) == [PARKED_AT_4]
    state = LegState.from_bytes(store.get("run-1") or b"")
    assert state.last_iteration == 5
    assert state.engagement is not None and state.engagement[0].standing == "parked"
    # Without the earlier leg the resumed leg cannot be decided.
    alone = decide_run(runs_of(t)[1], MemoryRunStore(), NO_ACCOUNT)
    assert codes(alone) == ["no-prior-leg"]


def test_a_paused_calls_result_joins_the_batch_of_the_paused_pass() -> None:
    # Leg 1: pass 1 asks for get_zone_info, which waits for a person. Leg 2: its span lands
    # (still iteration 1), then pass 2 sees it as renewal evidence: an upgrade.
    t = Tracer()
    build_run(t, [Pass(cursor=ENTRY, active=["zone-audit"])], paused=True)
    build_run(
        t,
        [Pass(cursor=STAY, active=["zone-audit"])],
        first_iteration=2,
        resumed=True,
    )
    # The paused call's span, emitted in leg 2 with the iteration of the pass that asked for it.
    spans = list(t.spans())
    leg2_run = [s for s in spans if s.name.startswith("invoke_agent")][1]
    tool = t.tracer.start_span(
        "execute_tool get_zone_info",
        context=set_span_in_context(_NonRecording(leg2_run)),
        attributes=_tool_attrs("genai", Tool("get_zone_info"), "t1", 1),
        start_time=leg2_run.start_time + 1 if leg2_run.start_time else None,
    )
    tool.end(end_time=(leg2_run.start_time or 0) + 2)
    store = MemoryRunStore()
    _, second = decide_all(t, store)
    assert changes(second) == [
        {
            "kind": "engaged",
            "mapId": "skill-map",
            "iteration": 2,
            "by": "structural",
            "upgraded": True,
            "foundedBy": "lexical",
            "witness": "zone",
        }
    ]


class _NonRecording:
    """Parent a new span under an already-finished span's context (a late tool span)."""

    def __new__(cls, span: ReadableSpan) -> Any:
        from opentelemetry.trace import NonRecordingSpan

        assert span.context is not None
        return NonRecordingSpan(span.context)


def _turn(t: Tracer, run_id: str, tools: str, continuity: bool) -> None:
    first = Pass(
        cursor={"from": "zone-audit", "to": "zone-audit", "by": "continuity"}
        if continuity
        else ENTRY,
        active=["zone-audit"],
        tools=[Tool(tools)],
    )
    rest = [Pass(cursor=STAY, active=["zone-audit"], tools=[Tool("screen_open")]) for _ in range(3)]
    rest.append(Pass(cursor=STAY, active=["zone-audit"]))
    routed = [
        (semconv.EV_TURN_ROUTED, {"by": "continuity", "from": "zone-audit", "to": "zone-audit"})
    ]
    build_run(
        t,
        [first, *rest] if continuity else [first, Pass(cursor=STAY, active=["zone-audit"])],
        run_id=run_id,
        session="sess-1",
        run_events=routed if continuity else [],
    )


def test_continuity_founding_a_previous_guess_is_a_finding() -> None:
    t = Tracer()
    _turn(t, "turn-1", "screen_open", continuity=False)  # an uncorroborated keyword guess
    _turn(t, "turn-2", "screen_open", continuity=True)
    first, second = decide_all(t)
    assert first.findings == ()
    assert changes(second)[0] == {
        "kind": "engaged",
        "mapId": "skill-map",
        "iteration": 1,
        "by": "structural",
    }
    (finding,) = second.findings
    assert "skill-map" in finding and "continuity" in finding.lower()
    assert "lexical" in finding and "turn-1" in finding and "zone" in finding
    assert second.engagement[0].standing == "engaged" and second.engagement[0].idle == 4


def test_continuity_after_a_corroborated_turn_is_not_a_finding() -> None:
    t = Tracer()
    _turn(t, "turn-1", "get_zone_info", continuity=False)  # its own tool: structural
    _turn(t, "turn-2", "screen_open", continuity=True)
    _, second = decide_all(t)
    assert second.findings == ()


def test_final_records_round_trip_through_json() -> None:
    t = Tracer()
    build_run(t, trap_passes(6))
    verdict = only(t)
    assert [record_to_json(r) for r in verdict.engagement] == [
        {
            "mapId": "skill-map",
            "standing": "parked",
            "by": "lexical",
            "since": 4,
            "foundedBy": "lexical",
            "foundedAt": 1,
            "foundedOn": "zone-audit",
            "at": "zone-audit",
            "atBy": "lexical",
            "atSince": 1,
            "idle": 3,
            "witness": "zone",
        }
    ]


def test_store_is_bounded() -> None:
    store = MemoryRunStore(max_entries=2)
    for key in ("a", "b", "c"):
        store.put(key, key.encode())
    assert store.get("a") is None
    assert store.get("c") == b"c"
    assert len(store) == 2
    with pytest.raises(ValueError):
        MemoryRunStore(max_entries=0)


def _iter_views(spans: Sequence[ReadableSpan]) -> Iterator[SdkSpanView]:
    return (SdkSpanView(s) for s in spans)


def test_unrelated_spans_cost_one_role_lookup() -> None:
    t = Tracer()
    for i in range(50):
        t.tracer.start_span(f"GET /{i}").end()
    build_run(t, trap_passes(2, reported=False))
    legs = group_runs(_iter_views(t.spans()))
    assert len(legs) == 1
    assert len(legs[0].spans()) == 1 + 2 + 1


def test_a_pass_span_and_its_evaluation_disagreeing_is_a_reason() -> None:
    t = Tracer()
    passes = trap_passes(4, reported=False)
    passes[2].evaluated_extra = {"iteration": 7}  # span says 3, its evaluation says 7
    build_run(t, passes)
    verdict = only(t)
    assert codes(verdict)[0] == "conflicting-iteration"
    assert [p.iteration for p in verdict.passes] == [1, 2]
    assert verdict.complete is False


def test_a_leg_decided_only_in_part_is_not_continued() -> None:
    t = Tracer()
    whole = trap_passes(5, reported=False)
    whole[1].evaluated = False  # leg 1 cannot be decided past pass 1
    build_run(t, whole[:2], paused=True)
    build_run(t, whole[2:], first_iteration=3, resumed=True)
    first, second = decide_all(t)
    assert codes(first) == ["missing-evaluated"]
    assert codes(second) == ["no-prior-leg"]
    assert second.passes == () and second.complete is False


def test_a_rejection_on_the_pass_span_refuses_that_passes_pick() -> None:
    t = Tracer()
    passes = trap_passes(5, reported=False)
    passes[3].tools = [Tool("read_skill", {"id": "zone-audit"})]
    # The gate's refusal arrives on the run span, naming the iteration and the skill.
    build_run(
        t,
        passes,
        run_events=[(semconv.EV_SKILL_REJECTED, {"requestedId": "zone-audit", "iteration": 4})],
    )
    assert changes(only(t)) == [ENGAGED_AT_1, PARKED_AT_4]
    # A rejection of another skill leaves the pick standing.
    t2 = Tracer()
    build_run(
        t2,
        passes,
        run_events=[(semconv.EV_SKILL_REJECTED, {"requestedId": "billing", "iteration": 4})],
    )
    assert changes(only(t2))[-1]["reengaged"] is True


def test_an_account_that_raises_is_a_reason_and_the_engagement_stands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(_: object) -> object:
        raise RuntimeError("template missing")

    monkeypatch.setattr(engine, "account_for", broken)
    t = Tracer()
    build_run(t, trap_passes(6))
    (run,) = runs_of(t)
    verdict = decide_run(run, MemoryRunStore())
    assert codes(verdict) == ["account-failed"]
    assert "template missing" in verdict.reasons[0].message
    assert verdict.account is None
    assert changes(verdict) == [ENGAGED_AT_1, PARKED_AT_4]


def test_the_account_is_filled() -> None:
    t = Tracer()
    build_run(t, trap_passes(6))
    (run,) = runs_of(t)
    verdict = decide_run(run, MemoryRunStore())
    assert verdict.account is not None
    assert {c.check_id for c in verdict.account.checks} == {
        "decided-delivered",
        "existence",
        "empty-results",
    }
