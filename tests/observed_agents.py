"""Zero-code agents for the observed-run tests: plain ``openai`` tool loops with no footprint code.

Each scenario is its own trace, named by its top span: ``clean`` (a customer's orders, then an
order's status, both values copied from what the model was shown), ``invented`` (the second call
uses an order id nothing served), ``empty`` (the status lookup comes back ``[]``), ``two-agents``
(two agent spans in one trace, each with its own loop, and a guard model call outside both), and
``bare`` (one model call with no span around it: the call is its own trace); and, apart, an
OpenAI Agents SDK agent whose tool call uses an invented order id. The child process
instruments the client with one instrumentation, adds only the in-process processor (as
``otel_footprint.sdk.setup()`` does) and writes the raw and the annotated spans as OTLP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

CUSTOMER = "CUST-4411"
ORDER = "ORD-1234"
INVENTED = "ORD-9999"
PROMPT = f"Where is my order? My customer number is {CUSTOMER}."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "find_orders",
            "description": "the orders of a customer",
            "parameters": {"type": "object", "properties": {"customer": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "the status of an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    },
]


def _loop(order_id: str, final: str) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"id": "c1", "name": "find_orders", "arguments": {"customer": CUSTOMER}}]},
        {"tool_calls": [{"id": "c2", "name": "order_status", "arguments": {"order_id": order_id}}]},
        {"content": final},
    ]


SCRIPT: dict[str, list[dict[str, Any]]] = {
    "clean-m": _loop(ORDER, "Order ORD-1234 has shipped."),
    "invented-m": _loop(INVENTED, "Order ORD-9999 has shipped."),
    "empty-m": _loop(ORDER, "I could not find a status for your order."),
    "first-m": _loop(ORDER, "Order ORD-1234 has shipped."),
    "second-m": _loop(ORDER, "Order ORD-1234 has shipped."),
    "agents-m": [
        {"tool_calls": [{"id": "c9", "name": "order_status", "arguments": {"order_id": INVENTED}}]},
        {"content": "Order ORD-9999 has shipped."},
    ],
    "guard-m": [{"content": "safe"}],
    "bare-m": [{"content": "Hello."}],
}
"""Replies per model: each scenario's loop talks to its own model."""

INSTRUMENTORS = {
    "openai-v2": "opentelemetry.instrumentation.openai_v2",
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
}
CONTENT_ENV = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}


def _tool(name: str, arguments: dict[str, Any], empty: bool) -> str:
    if name == "find_orders":
        return json.dumps([{"order_id": ORDER}]) if arguments.get("customer") == CUSTOMER else "[]"
    if empty or arguments.get("order_id") != ORDER:
        return "[]"
    return json.dumps([{"order_id": ORDER, "status": "shipped"}])


def tool_loop(client: Any, model: str, *, empty: bool = False) -> str:
    """A plain tool loop on the ``openai`` client: nothing of ours in it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    for _ in range(5):
        message = (
            client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )
        if not message.tool_calls:
            return str(message.content)
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        )
        for call in message.tool_calls:
            result = _tool(call.function.name, json.loads(call.function.arguments), empty)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""


def agents(client: Any, tracer: Any) -> None:
    """Every scenario, each in its own trace."""
    for name in ("clean", "invented", "empty"):
        with tracer.start_as_current_span(name):
            tool_loop(client, f"{name}-m", empty=name == "empty")
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with tracer.start_as_current_span("two-agents"):
        client.chat.completions.create(
            model="guard-m", messages=[{"role": "user", "content": PROMPT}]
        )
        with tracer.start_as_current_span("invoke_agent first", attributes=agent):
            tool_loop(client, "first-m")
        with tracer.start_as_current_span("invoke_agent second", attributes=agent):
            tool_loop(client, "second-m")
    client.chat.completions.create(model="bare-m", messages=[{"role": "user", "content": "hi"}])


def agents_sdk(url: str) -> None:
    """An OpenAI Agents SDK agent (chat completions model) whose tool call uses an order id
    nothing served: no footprint code (the SDK's own spans through OpenInference)."""
    import asyncio

    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool

    @function_tool
    def order_status(order_id: str) -> str:
        """the status of an order"""
        return _tool("order_status", {"order_id": order_id}, False)

    client = openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
    agent = Agent(
        name="support",
        instructions="You answer questions about orders.",
        tools=[order_status],
        model=OpenAIChatCompletionsModel(model="agents-m", openai_client=client),
    )
    asyncio.run(Runner.run(agent, PROMPT))


def _child(stack: str, url: str, out: str) -> None:
    import importlib

    import openai
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_footprint.sdk import setup

    provider = TracerProvider()
    sdk = stack == "openai-agents"
    if sdk:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        stack = "openinference"  # the client's spans too: each call has two
    importlib.import_module(INSTRUMENTORS[stack]).OpenAIInstrumentor().instrument(
        tracer_provider=provider
    )
    raw, annotated = InMemorySpanExporter(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    # The one line of ours: setup() (here with an in-memory exporter to read what it wrote).
    processor = setup(provider, annotated, grace_seconds=0.05)
    if sdk:
        agents_sdk(url)
    else:
        client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)
        agents(client, provider.get_tracer("app"))
    assert processor.force_flush(10_000)
    first = encode_spans(list(raw.get_finished_spans())).SerializeToString()
    second = encode_spans(list(annotated.get_finished_spans())).SerializeToString()
    Path(out).write_bytes(len(first).to_bytes(8, "big") + first + second)


def run_observed(
    stack: str, url: str
) -> tuple[ExportTraceServiceRequest, ExportTraceServiceRequest]:
    """The scenarios on one instrumentation in a fresh interpreter (instrumentations patch the
    client globally): (raw, annotated in-process) OTLP requests."""
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "spans.bin")
        result = subprocess.run(
            [sys.executable, __file__, stack, url, out],
            env={**os.environ, **CONTENT_ENV},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        data = Path(out).read_bytes()
    size = int.from_bytes(data[:8], "big")
    raw, annotated = ExportTraceServiceRequest(), ExportTraceServiceRequest()
    raw.ParseFromString(data[8 : 8 + size])
    annotated.ParseFromString(data[8 + size :])
    return raw, annotated


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3])
