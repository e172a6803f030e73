"""The recorder through the real OpenTelemetry SDK: spans, span events and log records in our schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from otel_footprint import record as footprint
from otel_footprint import semconv
from otel_footprint.codec import EventPointer, FootprintEvent, decode_event
from otel_footprint.kernel import EngagedChange, PlanError
from otel_footprint.runs.recognize import SpanRole, role_of

MAP = footprint.MountedMap("skill-map", ("zone-audit", "run-finder"), ("get_zone_info",))
SKILL_BODY = "ZONE AUDIT PROCEDURE: call get_zone_info, classify single-path hosts. " * 2


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def logs() -> Iterator[tuple[LoggerProvider, InMemoryLogRecordExporter]]:
    provider = LoggerProvider()
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _script(tracer_provider: TracerProvider, **run_options: Any) -> None:
    """Two passes of a small agent: a lexical entry, an injected skill, a failing tool, a pick."""
    tracer = tracer_provider.get_tracer("test")
    with footprint.run(
        tracer,
        agent="support",
        run_id="run-7",
        maps=[MAP],
        renewal_grace=3,
        enforced=True,
        user_prompt="find the most recent zone redundancy run",
        conversation_id="sess-1",
        graph={"nodes": [{"id": "zone-audit"}, {"id": "run-finder"}], "edges": []},
        **run_options,
    ) as run:
        run.routed("entry", to="zone-audit", witness="zone", witness_keyword="zone")
        with run.model_call("gpt-x", provider="openai") as p:
            p.engagement(EngagedChange("skill-map", 1, "lexical", witness="zone"))
            p.evaluated(["zone-audit"], cursor_to="zone-audit", moved_by="entry", witness="zone")
            p.injected("system-prompt", "base", content="You help people.")
            p.injected("system-prompt", "skill", source_id="zone-audit", content=SKILL_BODY)
            p.composed("system-prompt")
            p.injected("tools", "registry", source_id="screen_open", chars=42, content_hash="ab")
            # the tools slot is left open: the model call closes it
            p.usage(input_tokens=10, output_tokens=2)
        with run.tool_call("screen_open", args={"screen": "runs"}) as call:
            call.result({"error": "no such screen"}, error=True)
        with run.model_call("gpt-x") as p:
            p.evaluated(["zone-audit"], cursor_to="zone-audit", cursor_from="zone-audit")
        with run.tool_call("read_skill", args={"id": "run-finder"}, call_id="c9") as call:
            call.permission("skill_read", "skill:run-finder", "allow")
            call.picked("run-finder", hop=True)
            call.result("ok")
        with pytest.raises(RuntimeError), run.tool_call("get_zone_info") as call:
            raise RuntimeError("boom")
        run.answer("run-42")


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        out.setdefault(span.name, []).append(span)
    return out


def _decoded(name: str, attributes: Any) -> FootprintEvent:
    pointer = EventPointer("0" * 32, "0" * 16, name, 0)
    event = decode_event(name, list((attributes or {}).items()), pointer)
    assert event is not None
    return event


def test_spans_follow_the_genai_conventions(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    _script(provider)
    finished = exporter.get_finished_spans()
    named = _by_name(finished)
    (run,) = named["invoke_agent support"]
    assert run.kind == SpanKind.INTERNAL and run.parent is None
    assert dict(run.attributes or {}) == {
        semconv.GEN_AI_OPERATION_NAME: "invoke_agent",
        semconv.GEN_AI_AGENT_NAME: "support",
        semconv.RUN_ID: "run-7",
        semconv.GEN_AI_CONVERSATION_ID: "sess-1",
    }
    passes = named["chat gpt-x"]
    assert [p.attributes[semconv.PASS_ITERATION] for p in passes] == [1, 2]  # type: ignore[index]
    assert passes[0].kind == SpanKind.CLIENT
    assert passes[0].attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"  # type: ignore[index]
    assert passes[0].attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 10  # type: ignore[index]
    (failing,) = named["execute_tool screen_open"]
    (pick,) = named["execute_tool read_skill"]
    (crashed,) = named["execute_tool get_zone_info"]
    for span in (*passes, failing, pick, crashed):
        assert span.parent is not None and span.parent.span_id == run.context.span_id
        assert span.context.trace_id == run.context.trace_id
    for span in finished:
        assert role_of((span.attributes or {}).get) is not SpanRole.OTHER
    assert failing.attributes[semconv.PASS_ITERATION] == 1  # type: ignore[index]
    assert json.loads(failing.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"screen": "runs"}  # type: ignore[index,arg-type]
    assert failing.attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == '{"error": "no such screen"}'  # type: ignore[index]
    assert failing.status.status_code == StatusCode.ERROR
    assert failing.attributes[semconv.GEN_AI_TOOL_CALL_ID].startswith("call-")  # type: ignore[index,union-attr]
    assert pick.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "c9"  # type: ignore[index]
    assert pick.attributes[semconv.PASS_ITERATION] == 2  # type: ignore[index]
    assert pick.status.status_code == StatusCode.UNSET
    assert crashed.status.status_code == StatusCode.ERROR  # an exception fails the call


def test_events_are_the_input_schema(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    _script(provider)
    named = _by_name(exporter.get_finished_spans())
    (run,) = named["invoke_agent support"]
    assert [e.name for e in run.events] == [
        semconv.EV_GRAPH_DECLARED,
        semconv.EV_MAPS_MOUNTED,
        semconv.EV_TURN_START,
        semconv.EV_TURN_ROUTED,
        semconv.EV_TURN_END,
    ]
    mounted = _decoded(run.events[1].name, run.events[1].attributes)
    assert dict(mounted.payload) == {
        "maps": [
            {
                "id": "skill-map",
                "memberIds": ["zone-audit", "run-finder"],
                "toolNames": ["get_zone_info"],
            }
        ],
        "renewalGrace": 3,
        "enforced": True,
    }
    routed = _decoded(run.events[3].name, run.events[3].attributes)
    assert dict(routed.payload) == {
        "by": "entry",
        "to": "zone-audit",
        "witness": {"text": "zone", "keyword": "zone"},
    }
    end = _decoded(run.events[4].name, run.events[4].attributes)
    assert dict(end.payload) == {"turnIndex": 0, "finalContent": "run-42", "iterationCount": 2}

    first = named["chat gpt-x"][0]
    names = [e.name for e in first.events]
    assert names == [
        semconv.EV_MAP_ENGAGED,
        semconv.EV_CONTEXT_EVALUATED,
        semconv.EV_CONTEXT_INJECTED,
        semconv.EV_CONTEXT_INJECTED,
        semconv.EV_SLOT_COMPOSED,
        semconv.EV_CONTEXT_INJECTED,
        semconv.EV_SLOT_COMPOSED,  # closed by the end of the model call
    ]
    decoded = [_decoded(e.name, e.attributes) for e in first.events]
    assert dict(decoded[0].payload) == {
        "mapId": "skill-map",
        "iteration": 1,
        "by": "lexical",
        "witness": "zone",
    }
    assert dict(decoded[1].payload) == {
        "iteration": 1,
        "activeIds": ["zone-audit"],
        "skippedDetails": [],
        "cursorMove": {"to": "zone-audit", "by": "entry", "witness": {"text": "zone"}},
    }
    skill_row = decoded[3]
    assert skill_row.payload["chars"] == len(SKILL_BODY)
    assert skill_row.payload["sourceId"] == "zone-audit"
    assert len(skill_row.payload["contentHash"]) == 8
    assert skill_row.payload["contentSummary"].endswith("…")
    assert len(skill_row.payload["contentSummary"]) == 80
    assert "rawContent" not in skill_row.payload  # bodies are not recorded
    system, tools = decoded[4], decoded[6]
    assert decoded[2].composition_id == decoded[3].composition_id == system.composition_id
    assert decoded[5].composition_id == tools.composition_id != system.composition_id
    assert dict(system.payload) == {
        "slot": "system-prompt",
        "iteration": 1,
        "sourceBreakdown": {
            "base": {"chars": 16, "count": 1},
            "skill": {"chars": len(SKILL_BODY), "count": 1},
        },
    }
    assert decoded[5].payload["chars"] == 42 and decoded[5].payload["contentHash"] == "ab"

    second = named["chat gpt-x"][1]
    move = _decoded(second.events[0].name, second.events[0].attributes).payload["cursorMove"]
    assert move == {"from": "zone-audit", "to": "zone-audit", "by": "stay"}

    (pick,) = named["execute_tool read_skill"]
    assert [e.name for e in pick.events] == [semconv.EV_PERMISSION_CHECK, semconv.EV_SKILL_PICKED]
    check = _decoded(pick.events[0].name, pick.events[0].attributes)
    assert dict(check.payload) == {
        "capability": "skill_read",
        "actor": "model",
        "target": "skill:run-finder",
        "result": "allow",
    }
    picked = _decoded(pick.events[1].name, pick.events[1].attributes)
    assert dict(picked.payload) == {"skillId": "run-finder", "hop": True}


def test_events_as_log_records_tied_to_their_spans(
    spans: tuple[TracerProvider, InMemorySpanExporter],
    logs: tuple[LoggerProvider, InMemoryLogRecordExporter],
) -> None:
    provider, span_exporter = spans
    logger_provider, log_exporter = logs
    _script(provider, emit_as="log", logger_provider=logger_provider)
    finished = span_exporter.get_finished_spans()
    assert all(not span.events for span in finished if span.name != "execute_tool get_zone_info")
    by_id = {span.context.span_id: span for span in finished}
    records = [r.log_record for r in log_exporter.get_finished_logs()]
    assert len(records) == 5 + 7 + 1 + 2
    per_span: dict[str, list[str]] = {}
    for record in records:
        span = by_id[record.span_id]
        assert record.trace_id == span.context.trace_id
        assert record.event_name is not None and record.event_name.startswith("footprint.")
        per_span.setdefault(span.name, []).append(record.event_name)
    assert per_span["invoke_agent support"][:3] == [
        semconv.EV_GRAPH_DECLARED,
        semconv.EV_MAPS_MOUNTED,
        semconv.EV_TURN_START,
    ]
    assert per_span["execute_tool read_skill"] == [
        semconv.EV_PERMISSION_CHECK,
        semconv.EV_SKILL_PICKED,
    ]
    injected = next(r for r in records if r.event_name == semconv.EV_CONTEXT_INJECTED)
    assert injected.attributes is not None
    assert injected.attributes[semconv.F_SLOT] == "system-prompt"
    assert isinstance(injected.attributes[semconv.COMPOSITION_ID], str)


def test_resumed_leg_continues_the_run_and_numbering(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("test")
    with footprint.run(tracer, agent="a", run_id="r1", maps=[MAP]) as leg:
        with leg.model_call("m") as p:
            p.evaluated(["zone-audit"])
        leg.pause("Approve?", tool_call_id="t1", tool_name="issue_refund")
    held = {"turnRoute": {"by": "intent", "to": "billing"}}
    with footprint.run(
        tracer,
        agent="a",
        run_id="r1",
        resumed=True,
        resume_input="approved",
        held=held,
        next_iteration=2,
    ) as leg:
        with leg.tool_call("issue_refund", call_id="t1", iteration=1) as call:
            call.result("approved")
        with leg.model_call("m") as p:
            assert p.iteration == 2
    runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent a"]
    assert [s.attributes[semconv.RUN_ID] for s in runs] == ["r1", "r1"]  # type: ignore[index]
    assert runs[0].context.trace_id != runs[1].context.trace_id
    assert runs[0].events[-1].name == semconv.EV_PAUSE_REQUEST
    resume = _decoded(runs[1].events[0].name, runs[1].events[0].attributes)
    assert resume.type == "pause.resume"
    assert dict(resume.payload) == {"resumeInput": "approved", "state": held, "pausedWith": held}
    assert semconv.EV_TURN_START not in [e.name for e in runs[1].events]
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool issue_refund")
    assert tool.attributes[semconv.PASS_ITERATION] == 1  # type: ignore[index]


def test_bad_configuration_fails_at_the_call(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("test")
    with (
        pytest.raises(PlanError, match="renewalGrace"),
        footprint.run(tracer, agent="a", maps=[MAP], renewal_grace=0),
    ):
        pass
    with (
        pytest.raises(ValueError, match="emit_as"),
        footprint.run(
            tracer,
            agent="a",
            emit_as="stdout",  # type: ignore[arg-type]
        ),
    ):
        pass
    assert exporter.get_finished_spans() == ()


def test_emit_adds_events_to_a_span_another_instrumentation_opened(
    spans: tuple[TracerProvider, InMemorySpanExporter],
    logs: tuple[LoggerProvider, InMemoryLogRecordExporter],
) -> None:
    provider, exporter = spans
    logger_provider, log_exporter = logs
    tracer = provider.get_tracer("openinference-like")
    with tracer.start_as_current_span("llm", attributes={"openinference.span.kind": "LLM"}):
        footprint.emit("context.evaluated", {"iteration": 1, "activeIds": ["billing"]})
        footprint.emit(
            "context.injected",
            {"slot": "tools", "source": "registry", "chars": 12},
            composition_id="tools#1",
            emit_as="log",
            logger_provider=logger_provider,
        )
    (span,) = exporter.get_finished_spans()
    assert role_of((span.attributes or {}).get) is SpanRole.PASS
    (event,) = span.events
    assert dict(_decoded(event.name, event.attributes).payload) == {
        "iteration": 1,
        "activeIds": ["billing"],
    }
    (record,) = [r.log_record for r in log_exporter.get_finished_logs()]
    assert record.event_name == semconv.EV_CONTEXT_INJECTED
    assert record.span_id == span.context.span_id
    assert record.attributes is not None
    assert record.attributes[semconv.COMPOSITION_ID] == "tools#1"
