"""The integrity inputs read from each convention's attributes (GenAI JSON, OpenInference and
OpenLLMetry indexed names), a client span nested under the framework's pass span as the wire view,
and the pairing rules (spec integrity-reference §5.3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from otel_footprint import semconv
from otel_footprint.account.integrity import check_integrity
from otel_footprint.codec import encode_payload
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.integrity_inputs import IntegrityInputs, read_integrity_inputs
from otel_footprint.runs.passes import read_run
from otel_footprint.runs.spans import SdkSpanView


def _spans(build: Any) -> tuple[ReadableSpan, ...]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("inputs")
    with tracer.start_as_current_span(
        "invoke_agent a",
        attributes={semconv.GEN_AI_OPERATION_NAME: "invoke_agent", semconv.RUN_ID: "r1"},
    ) as run:
        run.add_event(
            "footprint.tool.declared",
            attributes=encode_payload({"toolName": "get_host", "argumentsFrom": ["list_hosts"]}),
        )
        build(tracer, run)
    return exporter.get_finished_spans()


def _inputs(spans: tuple[ReadableSpan, ...]) -> IntegrityInputs:
    (run,) = group_runs(SdkSpanView(s) for s in spans)
    return read_integrity_inputs(read_run(run))


def test_openinference_indexed_frame_and_tools() -> None:
    def build(tracer: Any, run: Any) -> None:
        attrs = {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.tools.0.tool.json_schema": json.dumps(
                {
                    "type": "function",
                    "function": {"name": "get_host", "parameters": {"enum": ["strict"]}},
                }
            ),
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "hosts live in the CMDB",
            "llm.input_messages.1.message.role": "assistant",
            "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
            "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "list_hosts",
            "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": "{}",
            "llm.input_messages.2.message.role": "tool",
            "llm.input_messages.2.message.tool_call_id": "c1",
            "llm.input_messages.2.message.content": '[{"host":"host-alpha-01"}]',
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c2",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_host",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"machine":"host-alpha-01","mode":"strict"}',
        }
        with tracer.start_as_current_span("ChatCompletion", attributes=attrs):
            pass

    inputs = _inputs(_spans(build))
    (pass_,) = inputs.passes
    view = pass_.frame()
    assert view is not None and view.convention == "openinference"
    assert [m.role for m in view.messages or ()] == ["system", "assistant", "tool"]
    assert (view.messages or ())[2].tool_call_id == "c1"
    tools, ref = pass_.tools()
    assert [t.name for t in tools or ()] == ["get_host"]
    assert ref is not None and ref.attribute == "llm.tools"
    (message,) = pass_.output() or ()
    assert message.calls[0].arguments == {"machine": "host-alpha-01", "mode": "strict"}
    result = check_integrity(inputs)
    assert result.row("unsupported-argument").state == "pass"
    assert result.findings == ()


@pytest.mark.parametrize("schema", [True, False], ids=["schema", "no-schema"])
def test_openllmetry_legacy_indexed_names(schema: bool) -> None:
    """An unserved value is a finding when the tool's schema is recorded; listed without its
    ``parameters``, the value may be an enum member the schema declares: unreachable, named."""

    def build(tracer: Any, run: Any) -> None:
        attrs = {
            semconv.LLM_REQUEST_TYPE: "chat",
            "llm.request.functions.0.name": "get_host",
            **(
                {"llm.request.functions.0.parameters": '{"type":"object","properties":{}}'}
                if schema
                else {}
            ),
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "check host-alpha-01",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": "c9",
            "gen_ai.completion.0.tool_calls.0.name": "get_host",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"machine":"host-omega-7"}',
        }
        with tracer.start_as_current_span("openai.chat", attributes=attrs):
            pass

    inputs = _inputs(_spans(build))
    (pass_,) = inputs.passes
    assert pass_.frame() is not None
    result = check_integrity(inputs)
    if not schema:
        row = result.row("unsupported-argument")
        assert (row.state, result.findings) == ("unreachable", ())
        assert row.why == (
            "the schema of 'get_host' offered at pass 1 is not in the record, so a value nothing "
            "served cannot be told from a member of an enum it declares",
        )
        return
    (finding,) = result.findings
    assert finding.kind == "unsupported-argument"
    assert finding.witnesses[1].ref is not None
    assert finding.witnesses[1].ref.render().endswith("@gen_ai.prompt")


def test_a_client_span_under_the_pass_span_is_the_wire_view() -> None:
    composed = [{"type": "function", "name": n, "parameters": {}} for n in ("t1", "t2")]

    def build(tracer: Any, run: Any) -> None:
        with (
            tracer.start_as_current_span(
                "chat framework",
                attributes={
                    semconv.GEN_AI_OPERATION_NAME: "chat",
                    semconv.PASS_ITERATION: 1,
                    semconv.GEN_AI_TOOL_DEFINITIONS: json.dumps(composed),
                },
            ) as framework,
            tracer.start_as_current_span(
                "ChatCompletion",
                context=set_span_in_context(framework),
                attributes={
                    semconv.OPENINFERENCE_SPAN_KIND: "LLM",
                    "llm.tools.0.tool.json_schema": json.dumps(
                        {"type": "function", "function": {"name": "t1"}}
                    ),
                    "llm.tools.1.tool.json_schema": json.dumps(
                        {"type": "function", "function": {"name": "ghost"}}
                    ),
                },
            ),
        ):
            pass

    inputs = _inputs(_spans(build))
    (pass_,) = inputs.passes  # the nested client span is a view of pass 1, not a pass of its own
    assert pass_.client is not None
    result = check_integrity(inputs)
    assert result.row("invariant-violation", "wire").state == "fail"
    assert sorted(f.message.split(" ")[2] for f in result.findings) == ["reached", "the"]
    added = next(f for f in result.findings if "reached the provider" in f.message)
    assert [s.render() for s in added.subjects] == ["tool:ghost"]
    dropped = next(f for f in result.findings if "never reached" in f.message)
    assert [s.render() for s in dropped.subjects] == ["tool:t2"]


def test_an_openinference_request_without_tools_offered_none() -> None:
    def build(tracer: Any, run: Any) -> None:
        request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        with tracer.start_as_current_span(
            "ChatCompletion",
            attributes={
                semconv.OPENINFERENCE_SPAN_KIND: "LLM",
                "input.value": json.dumps(request),
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "hi",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "ChatCompletion", attributes={semconv.OPENINFERENCE_SPAN_KIND: "LLM"}
        ):
            pass  # hidden inputs: nothing recorded

    first, second = _inputs(_spans(build)).passes
    tools, ref = first.tools()
    assert tools == () and ref is not None and ref.attribute == "input.value"
    assert second.tools() == (None, None)


def test_a_client_view_without_a_framework_list_leaves_the_wire_unarmed() -> None:
    def build(tracer: Any, run: Any) -> None:
        with (
            tracer.start_as_current_span(
                "generation",
                attributes={semconv.OPENINFERENCE_SPAN_KIND: "LLM", semconv.PASS_ITERATION: 1},
            ) as framework,
            tracer.start_as_current_span(
                "ChatCompletion",
                context=set_span_in_context(framework),
                attributes={
                    semconv.OPENINFERENCE_SPAN_KIND: "LLM",
                    "llm.tools.0.tool.json_schema": json.dumps(
                        {"type": "function", "function": {"name": "t1"}}
                    ),
                },
            ),
        ):
            pass

    inputs = _inputs(_spans(build))
    (pass_,) = inputs.passes
    assert pass_.client is not None and pass_.framework.tools is None
    row = check_integrity(inputs).row("invariant-violation", "wire")
    assert (row.armed, row.state) == (False, "not-applicable")
    assert pass_.tools()[0] is not None  # the other checks still read the client's list


def test_offered_lists_longer_than_the_cache_bound_are_still_read() -> None:
    from otel_footprint.runs import outputs as reader

    big = [
        {"type": "function", "name": "t1", "description": "x" * (reader._TOOLS_CACHE_CHARS + 10)}
    ]

    def build(tracer: Any, run: Any) -> None:
        for _ in range(2):
            with tracer.start_as_current_span(
                "chat",
                attributes={
                    semconv.GEN_AI_OPERATION_NAME: "chat",
                    semconv.GEN_AI_TOOL_DEFINITIONS: json.dumps(big),
                },
            ):
                pass

    before = reader._tools_of_text.cache_info().currsize
    passes = _inputs(_spans(build)).passes
    assert [[t.name for t in p.tools()[0] or ()] for p in passes] == [["t1"], ["t1"]]
    assert reader._tools_of_text.cache_info().currsize == before  # not kept: over the bound
