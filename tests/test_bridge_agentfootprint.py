"""The agentfootprint NDJSON importer over every real recording: structure, placement, determinism."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _shared import recordings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from otel_footprint import semconv
from otel_footprint.bridges.agentfootprint import (
    ImportOptions,
    RecordingError,
    recording_to_requests,
)
from otel_footprint.bridges.otlpjson import read_otlp_json_lines, requests_to_jsonl
from otel_footprint.bridges.plan_inference import derive_plan
from otel_footprint.bridges.recording import parse_recording, split_legs
from otel_footprint.codec import any_value_to_python
from otel_footprint.kernel import PARK_CARD_ID

RECORDINGS = recordings()

pytestmark = pytest.mark.skipif(not RECORDINGS, reason="no agentfootprint recordings found")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _expect(path: Path) -> dict[str, Any]:
    sidecar = path.with_suffix(".expect.json")
    return json.loads(sidecar.read_text()) if sidecar.exists() else {}


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def _attrs(item: Any) -> dict[str, Any]:
    return {kv.key: any_value_to_python(kv.value) for kv in item.attributes}


def _role(span: Span) -> str:
    return str(_attrs(span).get(semconv.GEN_AI_OPERATION_NAME))


def _upstream(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(path) if line.strip()]


@pytest.fixture(scope="module", params=RECORDINGS, ids=[p.stem for p in RECORDINGS])
def imported(request: pytest.FixtureRequest) -> tuple[Path, list[ExportTraceServiceRequest]]:
    path: Path = request.param
    return path, recording_to_requests(_lines(path))


def test_output_parses_back_byte_for_byte_through_otlp_json(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    _, requests = imported
    lines = list(requests_to_jsonl(requests))
    assert len(lines) == len(requests) >= 1
    back = list(read_otlp_json_lines(lines))
    assert [r.SerializeToString() for r in back] == [r.SerializeToString() for r in requests]
    # The Collector's file format: hex ids, integer enums.
    first = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(first["traceId"]) == 32 and int(first["traceId"], 16)
    assert len(first["spanId"]) == 16 and isinstance(first["kind"], int)


def test_same_recording_same_bytes(imported: tuple[Path, list[ExportTraceServiceRequest]]) -> None:
    path, requests = imported
    again = recording_to_requests(_lines(path))
    assert [r.SerializeToString() for r in again] == [r.SerializeToString() for r in requests]
    assert "".join(requests_to_jsonl(again)) == "".join(requests_to_jsonl(requests))


def test_one_run_span_per_leg_with_its_own_trace(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, requests = imported
    upstream = _upstream(path)
    run_ids = list(dict.fromkeys(e["meta"]["runId"] for e in upstream))
    legs = [r for r in run_ids if r != "consumer-scope"]
    assert len(requests) == len(legs)
    trace_ids = set()
    for request, leg_run_id in zip(requests, legs, strict=True):
        spans = list(_spans(request))
        runs = [s for s in spans if _role(s) == semconv.OP_INVOKE_AGENT]
        assert len(runs) == 1
        run = runs[0]
        assert {s.trace_id for s in spans} == {run.trace_id}
        assert run.parent_span_id == b""
        assert all(s.parent_span_id == run.span_id for s in spans if s is not run)
        trace_ids.add(run.trace_id)
        resumed = any(ev.name == semconv.EV_PAUSE_RESUME for ev in run.events)
        # A resumed leg keeps the first leg's run id; every other leg names its own.
        expected = legs[0] if resumed else leg_run_id
        assert _attrs(run)[semconv.RUN_ID] == expected
        assert run.name == f"invoke_agent {_attrs(run)[semconv.GEN_AI_AGENT_NAME]}"
        assert run.start_time_unix_nano <= min(s.start_time_unix_nano for s in spans)
        assert run.end_time_unix_nano >= max(s.end_time_unix_nano for s in spans)
    assert len(trace_ids) == len(requests)


def test_one_pass_span_per_iteration_of_each_leg(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, requests = imported
    upstream = _upstream(path)
    legs = [r for r in dict.fromkeys(e["meta"]["runId"] for e in upstream) if r != "consumer-scope"]
    for request, leg in zip(requests, legs, strict=True):
        expected = [
            e["payload"]["iterIndex"]
            for e in upstream
            if e["meta"]["runId"] == leg and e["type"] == "agentfootprint.agent.iteration_start"
        ]
        passes = [s for s in _spans(request) if _role(s) == semconv.OP_CHAT]
        assert [_attrs(p)[semconv.PASS_ITERATION] for p in passes] == expected
        for span in passes:
            assert span.name == f"chat {_attrs(span)[semconv.GEN_AI_REQUEST_MODEL]}"
            assert span.kind == Span.SpanKind.SPAN_KIND_CLIENT


def test_tool_spans_joined_by_call_id(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, requests = imported
    upstream = _upstream(path)
    starts: list[dict[str, Any]] = []
    ends: dict[int, dict[str, Any]] = {}
    open_calls: dict[str, int] = {}  # call ids may repeat across turns: join open calls only
    for event in upstream:
        if event["type"] == "agentfootprint.stream.tool_start":
            open_calls[event["payload"]["toolCallId"]] = len(starts)
            starts.append(event["payload"])
        elif event["type"] == "agentfootprint.stream.tool_end":
            ends[open_calls.pop(event["payload"]["toolCallId"])] = event["payload"]
    tools = [s for r in requests for s in _spans(r) if _role(s) == semconv.OP_EXECUTE_TOOL]
    assert len(tools) == len(starts)
    for index, (span, start) in enumerate(zip(tools, starts, strict=True)):
        attrs = _attrs(span)
        assert span.name == f"execute_tool {start['toolName']}"
        assert attrs[semconv.GEN_AI_TOOL_NAME] == start["toolName"]
        assert attrs[semconv.GEN_AI_TOOL_CALL_ID] == start["toolCallId"]
        assert json.loads(attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == start["args"]
        end = ends[index]
        assert attrs[semconv.GEN_AI_TOOL_CALL_RESULT] == end["result"]
        failed = end.get("error") is True
        assert (span.status.code == Status.StatusCode.STATUS_CODE_ERROR) == failed
        assert isinstance(attrs[semconv.PASS_ITERATION], int)


def test_tool_span_carries_the_iteration_of_the_pass_that_asked(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, _ = imported
    upstream = _upstream(path)
    iteration = None
    expected: list[int] = []
    for event in upstream:
        if event["type"] == "agentfootprint.stream.llm_start":
            iteration = event["payload"]["iteration"]
        elif event["type"] == "agentfootprint.stream.tool_start":
            assert iteration is not None
            expected.append(iteration)
    _, requests = imported
    tools = [s for r in requests for s in _spans(r) if _role(s) == semconv.OP_EXECUTE_TOOL]
    assert [_attrs(t)[semconv.PASS_ITERATION] for t in tools] == expected


def test_events_sit_on_the_right_spans(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, requests = imported
    run_level = {
        semconv.EV_RUN_CONFIGURED,
        semconv.EV_GRAPH_DECLARED,
        semconv.EV_MAPS_MOUNTED,
        semconv.EV_TURN_START,
        semconv.EV_TURN_END,
        semconv.EV_TURN_ROUTED,
        semconv.EV_PAUSE_REQUEST,
        semconv.EV_PAUSE_RESUME,
        semconv.EV_INTEGRITY_DISPOSITION,
    }
    dropped = {
        "footprint.stream.token",
        "footprint.stream.llm_start",
        "footprint.stream.llm_end",
        "footprint.stream.tool_start",
        "footprint.stream.tool_end",
        "footprint.agent.iteration_start",
        "footprint.agent.iteration_end",
    }
    seen: Counter[str] = Counter()
    for request in requests:
        for span in _spans(request):
            role = _role(span)
            iteration = _attrs(span).get(semconv.PASS_ITERATION)
            compositions = {
                _attrs(ev).get(semconv.COMPOSITION_ID)
                for ev in span.events
                if ev.name == semconv.EV_SLOT_COMPOSED
            }
            for event in span.events:
                seen[event.name] += 1
                attrs = _attrs(event)
                assert event.name not in dropped
                assert event.name.startswith("footprint.")
                if event.name in run_level:
                    assert role == semconv.OP_INVOKE_AGENT, event.name
                if event.name.startswith(("footprint.map.", "footprint.context.")):
                    assert role == semconv.OP_CHAT, event.name
                    if semconv.F_ITERATION in attrs:
                        assert attrs[semconv.F_ITERATION] == iteration
                if event.name == semconv.EV_CONTEXT_INJECTED:
                    # Each row belongs to a slot composition closed on the same pass span.
                    assert attrs[semconv.COMPOSITION_ID] in compositions
                    assert isinstance(attrs[semconv.F_CHARS], int)
                if event.name == semconv.EV_TOOLS_REPEATED_CALL:
                    assert role == semconv.OP_EXECUTE_TOOL
                    assert (
                        attrs[semconv.F_TOOL_CALL_ID] == _attrs(span)[semconv.GEN_AI_TOOL_CALL_ID]
                    )
                if event.name in (semconv.EV_PERMISSION_CHECK, semconv.EV_SKILL_REJECTED):
                    assert role in (semconv.OP_EXECUTE_TOOL, semconv.OP_CHAT)
    upstream = Counter(e["type"].replace("agentfootprint.", "footprint.") for e in _upstream(path))
    for name, count in upstream.items():
        if name not in dropped:
            assert seen[name] == count, name
    graphs = upstream["footprint.skill.graph_declared"]
    assert seen[semconv.EV_MAPS_MOUNTED] == graphs


def test_context_injected_counts_its_characters(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, requests = imported
    rows = [e["payload"] for e in _upstream(path) if e["type"] == "agentfootprint.context.injected"]
    chars = [
        _attrs(ev)[semconv.F_CHARS]
        for r in requests
        for s in _spans(r)
        for ev in s.events
        if ev.name == semconv.EV_CONTEXT_INJECTED
    ]
    assert chars == [len(row.get("rawContent", row.get("contentSummary", ""))) for row in rows]


def test_maps_mounted_is_the_plan_of_the_graph(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    path, requests = imported
    upstream = _upstream(path)
    graph = next(e for e in upstream if e["type"] == "agentfootprint.skill.graph_declared")
    members = [node["id"] for node in graph["payload"]["nodes"]]
    has_kernel = any(e["type"].startswith("agentfootprint.map.") for e in upstream) or any(
        e["payload"].get("sourceId") == PARK_CARD_ID for e in upstream
    )
    for request in requests:
        run = next(s for s in _spans(request) if _role(s) == semconv.OP_INVOKE_AGENT)
        names = [ev.name for ev in run.events]
        mounted = next(ev for ev in run.events if ev.name == semconv.EV_MAPS_MOUNTED)
        # Right after the graph it is derived from, before the turn starts.
        assert names.index(semconv.EV_MAPS_MOUNTED) == names.index(semconv.EV_GRAPH_DECLARED) + 1
        attrs = _attrs(mounted)
        maps = json.loads(attrs[semconv.F_MAPS])
        assert [m["id"] for m in maps] == [semconv.SKILL_MAP_ID]
        assert maps[0]["memberIds"] == members
        assert maps[0]["toolNames"], "every recorded graph attaches a tool to some member"
        parked = [e for e in upstream if e["type"] == "agentfootprint.map.parked"]
        # The grace is stated by a park (its idleCalls), else the default.
        assert attrs[semconv.F_RENEWAL_GRACE] == (
            parked[0]["payload"]["idleCalls"] if parked else 3
        )
        assert attrs[semconv.F_ENFORCED] is has_kernel
    if path.stem == "no-kernel":
        assert not has_kernel


def test_engine_reproduces_the_upstream_kernel_decisions(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    """The imported spans, decided by the runs engine, give the upstream's own map events."""
    engine = pytest.importorskip("otel_footprint.engine.decide")
    from otel_footprint.kernel.jsoncodec import change_to_json
    from otel_footprint.runs.group import group_runs
    from otel_footprint.runs.spans import OtlpSpanView
    from otel_footprint.runs.store import MemoryRunStore

    path, requests = imported
    expected = [
        {"kind": e["type"].removeprefix("map."), "iteration": e["iteration"], "by": e["by"]}
        for e in _expect(path).get("mapEvents", [])
    ]
    store = MemoryRunStore()
    derived = []
    views = [OtlpSpanView(s) for r in requests for s in _spans(r)]
    for leg in group_runs(views):
        verdict = engine.decide_run(leg, store)
        assert not [r for r in verdict.reasons if r.code == "internal-error"]
        for pass_verdict in verdict.passes:
            assert not pass_verdict.mismatch
            for change in pass_verdict.changes:
                as_json = change_to_json(change)
                derived.append({k: as_json[k] for k in ("kind", "iteration", "by")})
    if path.stem == "no-kernel":
        # Shadow mode: the kernel the agent lacked would have parked the guess on call four.
        assert {"kind": "parked", "iteration": 4, "by": "lexical"} in derived
    else:
        assert derived == expected


# ── plan inference and bad input ─────────────────────────────────────────────────────────────


def _recording(name: str) -> Path:
    path = next((p for p in RECORDINGS if p.stem == name), None)
    if path is None:
        pytest.skip(f"recording {name} not available")
    return path


def test_grace_comes_from_a_park_and_the_option_wins() -> None:
    lines = _lines(_recording("park-trap"))
    events = parse_recording(lines)
    derived = derive_plan(events, split_legs(events))
    assert derived is not None
    assert derived.plan.renewal_grace == 3
    # A park after 5 idle calls says the grace was 5, whatever the default.
    edited = [line.replace('"idleCalls":3', '"idleCalls":5') for line in lines]
    events5 = parse_recording(edited)
    derived5 = derive_plan(events5, split_legs(events5))
    assert derived5 is not None and derived5.plan.renewal_grace == 5
    requests = recording_to_requests(lines, ImportOptions(renewal_grace=7))
    run = next(s for s in _spans(requests[0]) if _role(s) == semconv.OP_INVOKE_AGENT)
    mounted = next(ev for ev in run.events if ev.name == semconv.EV_MAPS_MOUNTED)
    assert _attrs(mounted)[semconv.F_RENEWAL_GRACE] == 7


def test_a_map_that_idled_past_the_grace_without_parking_is_non_parkable() -> None:
    """no-kernel plus the agent's own founding event: an enforced kernel that never parked a
    lexical guess after five idle calls must have mounted the map nonParkable."""
    lines = _lines(_recording("no-kernel"))
    first = json.loads(lines[0])
    engaged = {
        "type": "agentfootprint.map.engaged",
        "payload": {"mapId": "skill-map", "iteration": 1, "by": "lexical", "witness": "zone"},
        "meta": {**first["meta"], "runtimeStageId": "sf-injection-engine/evaluate#3"},
    }
    at = next(i for i, line in enumerate(lines) if "context.evaluated" in line)
    edited = [*lines[:at], json.dumps(engaged), *lines[at:]]
    events = parse_recording(edited)
    derived = derive_plan(events, split_legs(events))
    assert derived is not None
    assert derived.enforced and derived.plan.maps[0].non_parkable is True
    forced = derive_plan(events, split_legs(events), non_parkable=False)
    assert forced is not None and forced.plan.maps[0].non_parkable is False
    mounted = derived.payload()["maps"][0]
    assert mounted["nonParkable"] is True


def test_bad_lines_name_their_line_and_unknown_types_are_carried() -> None:
    with pytest.raises(RecordingError, match=r"^line 2: not JSON"):
        recording_to_requests(['{"type":"agentfootprint.a.b","payload":{},"meta":{}}', "{oops"])
    with pytest.raises(RecordingError, match=r"^line 1: .*payload"):
        recording_to_requests(['{"type":"agentfootprint.a.b","payload":[],"meta":{}}'])
    lines = _lines(_recording("park-trap"))
    meta = json.loads(lines[0])["meta"]
    odd = {"type": "agentfootprint.custom.thing", "payload": {"fooBar": 1}, "meta": meta}
    requests = recording_to_requests([*lines[:3], json.dumps(odd), *lines[3:]])
    run = next(s for s in _spans(requests[0]) if _role(s) == semconv.OP_INVOKE_AGENT)
    carried = [ev for ev in run.events if ev.name == "footprint.custom.thing"]
    assert len(carried) == 1 and _attrs(carried[0]) == {"footprint.foo_bar": 1}
    assert recording_to_requests(["", "  "]) == []


def test_pass_span_carries_the_tools_offered_on_that_call(
    imported: tuple[Path, list[ExportTraceServiceRequest]],
) -> None:
    """``stream.llm_start`` ``tools`` (what the loop offered the model) becomes the pass span's
    ``gen_ai.tool.definitions`` — names only, no ``parameters`` (the upstream does not record
    schemas, and a schema that was not recorded must stay unknown)."""
    path, requests = imported
    offered = {
        (e["meta"]["runId"], e["payload"]["iteration"]): [t["name"] for t in e["payload"]["tools"]]
        for e in _upstream(path)
        if e["type"] == "agentfootprint.stream.llm_start"
    }
    passes = [s for r in requests for s in _spans(r) if _role(s) == semconv.OP_CHAT]
    assert passes
    for span in passes:
        listed = json.loads(_attrs(span)[semconv.GEN_AI_TOOL_DEFINITIONS])
        assert all("parameters" not in t and t["type"] == "function" for t in listed)
        names = [t["name"] for t in listed]
        assert names in offered.values()
    by_iteration = {
        _attrs(s)[semconv.PASS_ITERATION]: [
            t["name"] for t in json.loads(_attrs(s)[semconv.GEN_AI_TOOL_DEFINITIONS])
        ]
        for s in passes
    }
    if path.stem == "park-trap":
        assert by_iteration[3] == ["screen_open", "read_skill", "get_zone_info"]
        assert by_iteration[4] == ["screen_open", "read_skill"]
