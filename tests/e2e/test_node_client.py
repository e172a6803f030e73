"""The Node.js client (tests/node/agent.mjs, official OpenTelemetry JS SDK) emits the footprint input
schema over real OTLP: checked on a receiver started here (gRPC and HTTP) and against Phoenix."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from otel_footprint import semconv as sc
from otel_footprint.codec import EventPointer, FootprintEvent, decode_event
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView

from .otlp_sink import OtlpSink, ReceivedSpan, event_pairs
from .phoenix_api import PhoenixClient

pytestmark = pytest.mark.e2e

PASSES = 30
MEMBERS = ["zone-audit", "run-finder"]


def run_agent(agent: Path, *args: str) -> dict[str, Any]:
    """Run agent.mjs to completion (bounded) and return its JSON summary line."""
    done = subprocess.run(
        ["node", str(agent), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"agent.mjs exited {done.returncode}: {done.stderr[-2000:]}"
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def decoded(span: ReceivedSpan, name: str) -> list[FootprintEvent]:
    """The span's events called ``name``, decoded with the project's own payload codec."""
    out: list[FootprintEvent] = []
    for index, event in enumerate(span.span.events):
        if event.name != name:
            continue
        pointer = EventPointer(span.trace_id, span.span_id, event.name, index)
        footprint_event = decode_event(event.name, event_pairs(event), pointer)
        assert footprint_event is not None
        out.append(footprint_event)
    return out


def by_operation(spans: Sequence[ReceivedSpan], operation: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == operation]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_stuck_turn_arrives_over_otlp(node_agent: Path, protocol: str) -> None:
    with OtlpSink() as sink:
        endpoint = sink.grpc_endpoint if protocol == "grpc" else sink.http_endpoint
        summary = run_agent(
            node_agent,
            f"--endpoint={endpoint}",
            f"--protocol={protocol}",
            f"--passes={PASSES}",
            "--run-id=node-stuck-30",
        )
        spans = sink.wait_for_spans(summary["spans"], timeout=10)

    assert summary["spans"] == summary["exported"] == 1 + PASSES + (PASSES - 1)
    assert len(spans) == summary["spans"]
    assert {s.transport for s in spans} == {"grpc" if protocol == "grpc" else "http"}
    assert {s.trace_id for s in spans} == {summary["traceId"]}

    [run] = by_operation(spans, sc.OP_INVOKE_AGENT)
    chats = sorted(by_operation(spans, sc.OP_CHAT), key=lambda s: s.span.start_time_unix_nano)
    tools = by_operation(spans, sc.OP_EXECUTE_TOOL)
    assert run.span_id == summary["runSpanId"] and run.parent_span_id is None
    assert run.attributes[sc.RUN_ID] == "node-stuck-30"
    assert run.resource["service.name"] == "otel-footprint-node-agent"
    assert [c.attributes[sc.PASS_ITERATION] for c in chats] == list(range(1, PASSES + 1))
    assert all(s.parent_span_id == run.span_id for s in chats + tools)
    assert [t.attributes[sc.GEN_AI_TOOL_NAME] for t in tools] == ["screen_open"] * (PASSES - 1)
    assert len({t.attributes[sc.GEN_AI_TOOL_CALL_ID] for t in tools}) == PASSES - 1
    assert sorted(t.attributes[sc.PASS_ITERATION] for t in tools) == list(range(1, PASSES))
    # Start times are strictly ordered: chat N, tool N, chat N+1, ... (a time-ordered reader agrees).
    timeline = sorted(chats + tools, key=lambda s: s.span.start_time_unix_nano)
    assert [s.attributes[sc.GEN_AI_OPERATION_NAME] for s in timeline] == [
        sc.OP_CHAT,
        sc.OP_EXECUTE_TOOL,
    ] * (PASSES - 1) + [sc.OP_CHAT]
    assert len({s.span.start_time_unix_nano for s in timeline}) == len(timeline)

    # Run span: the plan, decoded by the Python codec into the reference's camelCase shape.
    [mounted] = decoded(run, sc.EV_MAPS_MOUNTED)
    assert mounted.payload["maps"] == [
        {"id": "skill-map", "memberIds": MEMBERS, "toolNames": ["get_zone_info"]}
    ]
    assert mounted.payload["renewalGrace"] == 3 and mounted.payload["enforced"] is False
    [graph] = decoded(run, sc.EV_GRAPH_DECLARED)
    assert [n["id"] for n in graph.payload["nodes"]] == MEMBERS
    assert len(decoded(run, sc.EV_TURN_START)) == len(decoded(run, sc.EV_TURN_END)) == 1

    # Pass spans: cursor entry on pass 1 (lexical witness "zone"), then stay; zone-audit rides all.
    for iteration, chat in enumerate(chats, start=1):
        [evaluated] = decoded(chat, sc.EV_CONTEXT_EVALUATED)
        assert evaluated.payload["iteration"] == iteration
        assert evaluated.payload["activeIds"] == ["zone-audit"]
        move = evaluated.payload["cursorMove"]
        assert move["to"] == "zone-audit"
        if iteration == 1:
            assert (move["by"], move["witness"]["text"]) == ("entry", "zone")
        else:
            assert (move["by"], move.get("witness")) == ("stay", None)
        injected = decoded(chat, sc.EV_CONTEXT_INJECTED)
        composed = decoded(chat, sc.EV_SLOT_COMPOSED)
        assert [e.payload["slot"] for e in composed] == ["system-prompt", "tools"]
        skill_rows = [e for e in injected if e.payload.get("sourceId") == "zone-audit"]
        assert [e.payload["slot"] for e in skill_rows] == ["system-prompt", "tools"]
        assert all(isinstance(e.payload["chars"], int) for e in injected)
        # Each row names its slot composition, shared with that slot's slot_composed event.
        for slot_event in composed:
            rows = [e for e in injected if e.composition_id == slot_event.composition_id]
            assert {e.payload["slot"] for e in rows} == {slot_event.payload["slot"]}
            breakdown = slot_event.payload["sourceBreakdown"]
            assert sum(v["count"] for v in breakdown.values()) == len(rows)

    # The product's own reconstruction reads it as the reference's stuck turn: shadow mode, the map
    # parks on call four, and zone-audit keeps riding on every parked pass.
    [leg] = group_runs([OtlpSpanView(s.span) for s in spans])
    verdict = decide_run(leg, None, EngineOptions(account=False))
    assert (verdict.mode, verdict.reasons) == (sc.MODE_SHADOW, ())
    assert [v.iteration for v in verdict.passes] == list(range(1, PASSES + 1))
    changes = [(v.iteration, type(c).__name__) for v in verdict.passes for c in v.changes]
    assert changes == [(1, "EngagedChange"), (4, "ParkedChange")]
    assert [v.served_while_parked for v in verdict.passes] == [()] * 3 + [("zone-audit",)] * (
        PASSES - 3
    )


def test_node_agent_fails_loudly_when_nothing_listens(node_agent: Path) -> None:
    # A port the sink bound and then closed: nothing listens there any more.
    with OtlpSink() as sink:
        dead = sink.grpc_endpoint
    done = subprocess.run(
        ["node", str(node_agent), f"--endpoint={dead}", "--passes=2", "--timeout-ms=2000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "exported 0/4 span(s)" in done.stderr


def test_node_agent_against_phoenix(
    phoenix: PhoenixClient, node_agent: Path, project_name: str
) -> None:
    grpc_endpoint = phoenix.grpc_endpoint
    protocol, endpoint = (
        ("grpc", f"http://{grpc_endpoint}")
        if grpc_endpoint
        else ("http/protobuf", phoenix.base_url)
    )
    summary = run_agent(
        node_agent,
        f"--endpoint={endpoint}",
        f"--protocol={protocol}",
        f"--passes={PASSES}",
        "--run-id=node-phoenix",
        f"--project={project_name}",
    )
    phoenix.wait_for_spans(project_name, count=summary["spans"])

    chats = phoenix.spans(project_name, attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT})
    assert len(chats) == PASSES
    [run] = phoenix.spans(project_name, attributes={sc.RUN_ID: "node-phoenix"})
    assert run.span_id == summary["runSpanId"]
    [mounted] = run.events_named(sc.EV_MAPS_MOUNTED)
    assert json.loads(mounted.attributes[sc.F_MAPS])[0]["memberIds"] == MEMBERS
    [pass4] = phoenix.spans(
        project_name, attributes={sc.PASS_ITERATION: 4, sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}
    )
    [evaluated] = pass4.events_named(sc.EV_CONTEXT_EVALUATED)
    assert evaluated.attributes[sc.F_ACTIVE_IDS] == ["zone-audit"]
    assert json.loads(evaluated.attributes[sc.F_CURSOR_MOVE])["by"] == "stay"
