"""The Vercel AI SDK's spans (``ai`` 4 to 6, ``experimental_telemetry``) in the one recognition table:
``ai.generateText`` / ``ai.streamText`` a run (with ``footprint.run.id``, as every agent span), their
``doGenerate`` / ``doStream`` a pass though no ``gen_ai.operation.name`` is set, ``ai.toolCall`` a tool
call with its name and id; and what the readers take from them (offered tools, frame, tool calls,
tool results), in the v6 shapes (as ``ai`` 6.0.325 writes them, tests/node/ai_sdk_agent.mjs) and the
v4 ones (``args``, ``result``, ``parameters``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.outputs import (
    asked_for_tools,
    call_view,
    offered_tools,
    output_tool_calls,
    tool_arguments_of,
    tool_result_of,
    tool_results,
)
from otel_footprint.runs.passes import read_run
from otel_footprint.runs.recognize import SpanRole, role_of, tool_call_id_of, tool_name_of
from otel_footprint.runs.spans import SdkSpanView

MODEL_CALL: dict[str, Any] = {
    "ai.operationId": "ai.generateText.doGenerate",
    "operation.name": "ai.generateText.doGenerate",
    "gen_ai.system": "openai.chat",
    "gen_ai.request.model": "scripted-6",
    "gen_ai.usage.input_tokens": 38,
}
TOOL_CALL: dict[str, Any] = {
    "ai.operationId": "ai.toolCall",
    "ai.toolCall.name": "screen_open",
    "ai.toolCall.id": "c1",
    "ai.toolCall.args": '{"screen":"runs"}',
    "ai.toolCall.result": '"screen shows: runs list"',
}


@pytest.mark.parametrize(
    ("attributes", "role"),
    [
        (MODEL_CALL, SpanRole.PASS),
        ({**MODEL_CALL, "ai.operationId": "ai.streamText.doStream"}, SpanRole.PASS),
        ({**MODEL_CALL, "ai.operationId": "ai.generateObject.doGenerate"}, SpanRole.PASS),
        (TOOL_CALL, SpanRole.TOOL),
        ({"ai.operationId": "ai.generateText"}, SpanRole.OTHER),  # a container without a run id
        ({"ai.operationId": "ai.streamText", sc.RUN_ID: "r1"}, SpanRole.RUN),
        ({"ai.operationId": "ai.embed.doEmbed"}, SpanRole.OTHER),
        # GenAI decides first when a span carries both.
        ({**MODEL_CALL, sc.GEN_AI_OPERATION_NAME: "embeddings"}, SpanRole.OTHER),
    ],
)
def test_the_ai_sdk_spans_have_their_roles(attributes: dict[str, Any], role: SpanRole) -> None:
    assert role_of(attributes.get) is role


def test_an_ai_sdk_tool_span_names_its_tool_and_call() -> None:
    assert (tool_name_of(TOOL_CALL.get), tool_call_id_of(TOOL_CALL.get)) == ("screen_open", "c1")


def _view(attributes: dict[str, Any]) -> SdkSpanView:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("s", attributes=attributes).end()
    (span,) = exporter.get_finished_spans()
    return SdkSpanView(span)


def _v6_model_call() -> dict[str, Any]:
    messages = [
        {"role": "system", "content": "You audit zone redundancy."},
        {"role": "user", "content": [{"type": "text", "text": "find the run"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "toolCallId": "c1", "toolName": "list_hosts", "input": {}}
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "toolName": "list_hosts",
                    "output": {"type": "text", "value": '[{"host":"host-alpha-01"}]'},
                }
            ],
        },
    ]
    tool = {"type": "function", "name": "get_host", "inputSchema": {"type": "object"}}
    calls = [{"toolCallId": "c2", "toolName": "get_host", "input": '{"machine":"host-zeta-99"}'}]
    return {
        **MODEL_CALL,
        "ai.prompt.messages": json.dumps(messages),
        "ai.prompt.tools": [json.dumps(tool)],
        "ai.response.toolCalls": json.dumps(calls),
        "gen_ai.response.finish_reasons": ["tool-calls"],
    }


def _v4_model_call() -> dict[str, Any]:
    messages = [
        {"role": "user", "content": "find the run"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool-call", "toolCallId": "c1", "toolName": "list_hosts", "args": {}}
            ],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "toolName": "list_hosts",
                    "result": [{"host": "host-alpha-01"}],
                }
            ],
        },
    ]
    tool = {"type": "function", "name": "get_host", "parameters": {"type": "object"}}
    calls = [
        {
            "toolCallType": "function",
            "toolCallId": "c2",
            "toolName": "get_host",
            "args": '{"machine":"host-zeta-99"}',
        }
    ]
    return {
        **MODEL_CALL,
        "ai.prompt.messages": json.dumps(messages),
        "ai.prompt.tools": [json.dumps(tool)],
        "ai.response.toolCalls": json.dumps(calls),
        "ai.response.finishReason": "tool-calls",
    }


@pytest.mark.parametrize("attributes", [_v6_model_call(), _v4_model_call()], ids=["v6", "v4"])
def test_the_readers_take_the_frame_tools_and_calls_from_a_model_call(
    attributes: dict[str, Any],
) -> None:
    view = _view(attributes)
    assert offered_tools(view) == ("get_host",)
    assert [(c.name, c.call_id, c.arguments_text) for c in output_tool_calls(view) or ()] == [
        ("get_host", "c2", '{"machine":"host-zeta-99"}')
    ]
    [(call_id, result, where)] = list(tool_results(view))
    assert call_id == "c1" and "host-alpha-01" in result
    # Read where the model read it: the prompt's tool message (the last one).
    assert where.attribute == "ai.prompt.messages"
    assert where.message_index == len(json.loads(attributes["ai.prompt.messages"])) - 1
    read = call_view(view)
    assert read.convention == "ai_sdk"
    assert read.messages is not None
    assert [m.role for m in read.messages][-2:] == ["assistant", "tool"]
    assert [c.name for c in read.messages[-2].calls] == ["list_hosts"]
    assert read.messages[-1].tool_call_id == "c1"


def test_a_final_answer_is_text_and_no_tool_call() -> None:
    view = _view({**MODEL_CALL, "ai.response.text": "all fine", "ai.response.finishReason": "stop"})
    assert output_tool_calls(view) == ()
    read = call_view(view)
    assert read.output is not None and read.output[0].texts == ("all fine",)


def test_the_finish_reason_tool_calls_asks_for_tools() -> None:
    assert asked_for_tools(_view({**MODEL_CALL, "gen_ai.response.finish_reasons": ["tool-calls"]}))


def test_a_tool_span_gives_its_arguments_and_its_result_decoded_once() -> None:
    view = _view(TOOL_CALL)
    assert tool_arguments_of(view) == '{"screen":"runs"}'
    assert tool_result_of(view) == "screen shows: runs list"
    structured = _view({**TOOL_CALL, "ai.toolCall.result": '[{"host":"host-alpha-01"}]'})
    assert tool_result_of(structured) == '[{"host":"host-alpha-01"}]'


def test_prompt_messages_that_do_not_parse_are_named_unreadable() -> None:
    read = call_view(_view({**MODEL_CALL, "ai.prompt.messages": '[{"role": "us'}))
    assert read.messages is None and "ai.prompt.messages" in read.unreadable


def test_an_array_where_the_operation_belongs_is_read_as_no_ai_sdk_call() -> None:
    read = call_view(
        _view({"ai.operationId": ["ai.generateText.doGenerate"], "ai.response.text": "x"})
    )
    assert (read.convention, read.output) == ("none", None)


def test_offered_tools_that_are_no_list_of_json_objects_are_named_unreadable() -> None:
    for listed in (7, ["not json"], '{"name": "x"'):
        read = call_view(_view({**MODEL_CALL, "ai.prompt.tools": listed}))
        assert read.tools is None and "ai.prompt.tools" in read.unreadable, listed


def test_a_tool_starting_in_the_millisecond_of_the_next_call_belongs_to_the_call_before() -> None:
    """JavaScript's span start times have millisecond resolution: a fast tool (``ai.toolCall``)
    and the next ``doGenerate`` start in the same millisecond. The tool is still the earlier
    pass's (a model call returns before its tool runs): no pass reads its output calls again."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("ai")
    ms = 1_000_000

    def call(start: int, end: int, calls: list[tuple[str, str]]) -> None:
        attributes = {
            **MODEL_CALL,
            "ai.prompt.messages": json.dumps([{"role": "user", "content": "q"}]),
        }
        if calls:
            attributes["ai.response.toolCalls"] = json.dumps(
                [{"toolCallId": cid, "toolName": name, "input": "{}"} for cid, name in calls]
            )
            attributes["ai.response.finishReason"] = "tool-calls"
        else:
            attributes["ai.response.text"] = "done"
        tracer.start_span(
            "ai.generateText.doGenerate", attributes=attributes, start_time=start
        ).end(end)

    def tool(start: int, call_id: str, name: str) -> None:
        attributes = {**TOOL_CALL, "ai.toolCall.id": call_id, "ai.toolCall.name": name}
        tracer.start_span("ai.toolCall", attributes=attributes, start_time=start).end(start + 100)

    root = tracer.start_span("ai.generateText", {"ai.operationId": "ai.generateText"}, start_time=0)
    with trace.use_span(root, end_on_exit=False):
        call(1 * ms, 40 * ms, [("c1", "find_orders")])
        tool(41 * ms, "c1", "find_orders")
        call(42 * ms, 50 * ms, [("c2", "order_status")])
        tool(51 * ms, "c2", "order_status")
        call(51 * ms, 60 * ms, [])  # the same millisecond as the tool before it
    root.end(61 * ms)
    (run,) = group_runs([SdkSpanView(s) for s in exporter.get_finished_spans()], observed=True)
    calls = read_run(run).tool_calls
    assert [(c.name, c.iteration) for c in calls] == [("find_orders", 1), ("order_status", 2)]
