"""What instrumentations record of a model call's output, read span by span (runs/outputs.py), and
the pass / run / tool rules on spans shaped like each library's (no network, no packages needed).

Attribute shapes are the ones the pinned packages write (docs/schema.md, "Recognition by
library"); older OpenLLMetry's indexed completion attributes are written by hand here, as no
pinned version writes them any more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from integration_agents import explain_spans, verdict_facts
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint import semconv
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.outputs import (
    asked_for_tools,
    call_view,
    offered_tools,
    output_tool_calls,
    skill_of,
    tool_result_of,
    tool_results,
)
from otel_footprint.runs.passes import read_run
from otel_footprint.runs.spans import SdkSpanView

MAPS = [footprint.MountedMap("billing-map", ("billing",), ("lookup",))]


def _view(attributes: Mapping[str, Any]) -> SdkSpanView:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("s", attributes=dict(attributes)).end()
    (span,) = exporter.get_finished_spans()
    return SdkSpanView(span)


def test_genai_output_messages_give_the_tool_calls_in_order() -> None:
    messages = [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "let me look"},
                {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"id": 7}},
                {"type": "tool_call", "id": "c2", "name": "track", "arguments": "{}"},
            ],
            "finish_reason": "tool_call",
        }
    ]
    view = _view({semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps(messages)})
    calls = output_tool_calls(view)
    assert calls is not None
    assert [(c.name, c.call_id, c.arguments_text) for c in calls] == [
        ("lookup", "c1", '{"id":7}'),
        ("track", "c2", "{}"),
    ]


def test_openinference_and_older_openllmetry_indexed_tool_calls() -> None:
    prefix = "llm.output_messages.0.message.tool_calls."
    oi = _view(
        {
            "llm.output_messages.0.message.role": "assistant",
            prefix + "1.tool_call.function.name": "track",
            prefix + "0.tool_call.id": "a",
            prefix + "0.tool_call.function.name": "lookup",
            prefix + "0.tool_call.function.arguments": '{"id":7}',
        }
    )
    assert [(c.name, c.call_id) for c in output_tool_calls(oi) or ()] == [
        ("lookup", "a"),
        ("track", None),
    ]
    legacy = _view(
        {
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.name": "lookup",
            "gen_ai.completion.0.tool_calls.0.id": "x",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"id": 7}',
        }
    )
    assert [(c.name, c.call_id, c.arguments_text) for c in output_tool_calls(legacy) or ()] == [
        ("lookup", "x", '{"id": 7}')
    ]


def test_the_pass_reading_and_the_integrity_view_read_one_span_alike() -> None:
    """One reader: the calls and results the passes take are the call view's (gaps in the indexes
    read past, the legacy ``llm.completions.*`` names included)."""
    view = _view(
        {
            "llm.input_messages.1.message.role": "tool",
            "llm.input_messages.1.message.tool_call_id": "a",
            "llm.input_messages.1.message.content": "refunded",
            "llm.completions.2.tool_calls.0.name": "lookup",
            "llm.completions.2.tool_calls.0.id": "b",
            "llm.completions.2.tool_calls.0.arguments": '{"id": 7}',
        }
    )
    whole = call_view(view)
    assert [(m.index, m.role, m.tool_call_id, m.texts) for m in whole.messages or ()] == [
        (1, "tool", "a", ("refunded",))
    ]
    assert [r[:2] for r in tool_results(view)] == [("a", "refunded")]
    chosen = [(c.name, c.call_id, c.arguments) for m in whole.output or () for c in m.calls]
    assert chosen == [("lookup", "b", {"id": 7})]
    assert [(c.name, c.call_id, c.arguments_text) for c in output_tool_calls(view) or ()] == [
        ("lookup", "b", '{"id": 7}')
    ]


def test_the_call_view_reads_contents_and_flat_messages_and_names_what_it_cannot_read() -> None:
    oi = _view(
        {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.tools.0.tool.json_schema": '{"type": "function", "function": {"na',  # cut
            "llm.tools.1.tool.json_schema": json.dumps({"function": {"name": "lookup"}}),
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": "find host-1",
            semconv.GEN_AI_SYSTEM_INSTRUCTIONS: "[{cut",
        }
    )
    view = call_view(oi)
    assert [t.name for t in view.tools or ()] == ["lookup"]
    assert [(m.role, m.texts) for m in view.messages or ()] == [("user", ("find host-1",))]
    assert view.unreadable == ("llm.tools.0.tool.json_schema", semconv.GEN_AI_SYSTEM_INSTRUCTIONS)
    flat = _view(
        {
            semconv.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": "hi"}]),
            semconv.GEN_AI_TOOL_DEFINITIONS: json.dumps({"not": "a list"}),
        }
    )
    view = call_view(flat)
    assert [(m.role, m.texts) for m in view.messages or ()] == [("user", ("hi",))]
    assert view.tools is None and view.unreadable == (semconv.GEN_AI_TOOL_DEFINITIONS,)
    assert view.convention == "gen_ai" and view.system == ()


def test_no_output_recorded_is_not_no_tool_calls() -> None:
    bare = _view({semconv.GEN_AI_OPERATION_NAME: "chat"})
    assert output_tool_calls(bare) is None and asked_for_tools(bare) is None
    asked = _view({semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_calls",)})
    assert asked_for_tools(asked) is True
    stopped = _view({"llm.finish_reason": "stop"})
    assert asked_for_tools(stopped) is False


def _responses(*items: dict[str, Any]) -> str:
    """``output.value`` as the Agents SDK's streamed ``generation`` span writes it."""
    return json.dumps([{"id": "__fake_id__", "object": "response", "output": list(items)}])


def test_openinference_responses_in_output_value_give_the_tool_calls() -> None:
    asked = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"id":7}'}
    said = {"type": "message", "content": [{"type": "output_text", "text": "refunded"}]}
    llm = {semconv.OPENINFERENCE_SPAN_KIND: "LLM"}
    calls = output_tool_calls(_view({**llm, semconv.OI_OUTPUT_VALUE: _responses(asked)}))
    assert calls is not None and [(c.name, c.call_id, c.arguments_text) for c in calls] == [
        ("lookup", "c1", '{"id":7}')
    ]
    assert output_tool_calls(_view({**llm, semconv.OI_OUTPUT_VALUE: _responses(said)})) == ()
    # A hosted tool's call cannot be read as a tool call: the output counts as not recorded.
    hosted = {"type": "web_search_call", "id": "ws1", "status": "completed"}
    assert output_tool_calls(_view({**llm, semconv.OI_OUTPUT_VALUE: _responses(hosted)})) is None
    # Only an LLM span's output.value, and only responses: a chat completion body is not read.
    assert output_tool_calls(_view({semconv.OI_OUTPUT_VALUE: _responses(said)})) is None
    body = json.dumps({"object": "chat.completion", "choices": []})
    assert output_tool_calls(_view({**llm, semconv.OI_OUTPUT_VALUE: body})) is None


def test_tool_results_offered_tools_and_skills() -> None:
    inputs = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "ok"}]}
    ]
    assert [r[:2] for r in tool_results(_view({"gen_ai.input.messages": json.dumps(inputs)}))] == [
        ("c1", "ok")
    ]
    oi_inputs = _view(
        {
            "llm.input_messages.1.message.role": "tool",
            "llm.input_messages.1.message.tool_call_id": "a",
            "llm.input_messages.1.message.content": "refunded",
        }
    )
    assert [r[:2] for r in tool_results(oi_inputs)] == [("a", "refunded")]
    definitions = [{"type": "function", "name": "lookup"}, {"type": "function", "name": "track"}]
    assert offered_tools(_view({semconv.GEN_AI_TOOL_DEFINITIONS: json.dumps(definitions)})) == (
        "lookup",
        "track",
    )
    schema = {"type": "function", "function": {"name": "lookup"}}
    assert offered_tools(_view({"llm.tools.0.tool.json_schema": json.dumps(schema)})) == ("lookup",)
    assert offered_tools(_view({})) is None
    assert skill_of(_view({semconv.GEN_AI_SKILL_NAME: "billing"})) == "billing"
    message = {"type": "tool", "data": {"content": "refunded", "tool_call_id": "c"}}
    assert tool_result_of(_view({"output.value": json.dumps(message)})) == "refunded"


def _record(build: Any) -> list[Any]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    footprint.install_attach(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(provider.get_tracer("t"))
    return list(exporter.get_finished_spans())


def test_a_skill_loading_tool_span_is_a_pick_and_offered_tools_reach_the_pass() -> None:
    definitions = json.dumps([{"type": "function", "name": "load_skill"}])

    def build(tracer: Any) -> None:
        with footprint.run(tracer, agent="a", maps=MAPS) as run:
            run.evaluated(["billing"], cursor_to="billing", moved_by="entry")
            with tracer.start_as_current_span(
                "chat m",
                attributes={
                    semconv.GEN_AI_OPERATION_NAME: "chat",
                    semconv.GEN_AI_TOOL_DEFINITIONS: definitions,
                },
            ):
                pass
            with tracer.start_as_current_span(
                "execute_tool load_skill",
                attributes={
                    semconv.GEN_AI_OPERATION_NAME: "execute_tool",
                    semconv.GEN_AI_TOOL_NAME: "load_skill",
                    semconv.GEN_AI_SKILL_NAME: "refunds",
                },
            ):
                pass

    (leg,) = group_runs(SdkSpanView(s) for s in _record(build))
    facts = read_run(leg)
    (chat,) = leg.passes
    assert offered_tools(chat) == ("load_skill",)
    assert [tool.name for tool in call_view(chat, frames=False).tools or ()] == ["load_skill"]
    (call,) = facts.tool_calls
    assert [p.skill_id for p in call.picks] == ["refunds"] and call.iteration == 1


def test_nested_framework_agent_spans_do_not_split_or_make_runs() -> None:
    def build(tracer: Any) -> None:
        def oi(name: str, kind: str) -> Any:
            return tracer.start_as_current_span(
                name, attributes={semconv.OPENINFERENCE_SPAN_KIND: kind}
            )

        with (
            footprint.run(tracer, agent="a", run_id="r", maps=MAPS) as run,
            oi("Agent workflow", "AGENT"),
            oi("support", "AGENT"),
        ):
            run.evaluated(["billing"], cursor_to="billing", moved_by="entry")
            with oi("generation", "LLM"), oi("ChatCompletion", "LLM"):
                pass
        # A framework run with no recorder input at all (its own trace): an observed run of its
        # own, never a part of the recorded one.
        with (
            tracer.start_as_current_span(
                "invoke_agent other", attributes={semconv.GEN_AI_OPERATION_NAME: "invoke_agent"}
            ),
            tracer.start_as_current_span(
                "chat m", attributes={semconv.GEN_AI_OPERATION_NAME: "chat"}
            ),
        ):
            pass

    spans = _record(build)
    verdict, observed = sorted(explain_spans(spans), key=lambda v: v.mode == "observed")
    assert observed.mode == "observed" and len(observed.passes) == 1
    assert observed.run_span_id == next(
        format(s.context.span_id, "016x") for s in spans if s.name == "invoke_agent other"
    )
    assert verdict.run_id == "r"
    facts = verdict_facts(verdict)
    assert [p[0] for p in facts["passes"]] == [1] and facts["complete"]
    (pass_,) = verdict.passes
    generation = next(s for s in spans if s.name == "generation")
    assert pass_.span_id == format(generation.context.span_id, "016x")


def test_an_agent_emitting_on_its_own_agent_span_is_still_a_run() -> None:
    """Events straight on an ``invoke_agent`` span without a run id (``record.emit``)."""

    def build(tracer: Any) -> None:
        with tracer.start_as_current_span(
            "invoke_agent legacy", attributes={semconv.GEN_AI_OPERATION_NAME: "invoke_agent"}
        ):
            footprint.emit(
                "maps.mounted",
                {"maps": [{"id": "billing-map", "memberIds": ["billing"], "toolNames": []}]},
            )
            with tracer.start_as_current_span(
                "chat m", attributes={semconv.GEN_AI_OPERATION_NAME: "chat"}
            ):
                footprint.emit(
                    "context.evaluated",
                    {
                        "iteration": 1,
                        "activeIds": ["billing"],
                        "cursorMove": {"to": "billing", "by": "entry"},
                    },
                )

    (verdict,) = explain_spans(_record(build))
    assert [p.iteration for p in verdict.passes] == [1]
