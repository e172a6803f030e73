"""The agent the integration tests run on every stack, and how they compare verdicts.

One small tool-calling agent on the real ``openai`` client against :mod:`fake_openai`: a guard call
before the loop, two passes (the first asks for ``lookup``, the second answers), a summary call
after. ``plain_agent`` is the same agent recorded with the plain recorder only (its own spans): the
reference every stack's verdicts must equal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint import semconv
from otel_footprint.commands.explain import Loaded, explain_requests, verdict_to_json
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk import FootprintSpanProcessor

MAPS = [
    footprint.MountedMap("billing-map", ("billing",), ("lookup",)),
    footprint.MountedMap("shipping-map", ("shipping",), ("track",)),
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "look a charge up",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}},
        },
    }
]
SCRIPT = {
    "guard-m": [{"content": "safe"}],
    "agent-m": [
        {"tool_calls": [{"id": "call_lookup_7", "name": "lookup", "arguments": {"id": 7}}]},
        {"content": "charge 7 was refunded"},
    ],
    "summary-m": [{"content": "refund confirmed"}],
}
PROMPT = "why was I charged twice?"
RESULT = "charge 7: refunded on 2026-11-30"


def lookup(charge: int) -> str:
    return RESULT if charge == 7 else "no such charge"


def stage_pass(target: Any, iteration: int) -> None:
    """What goes into pass ``iteration`` (on a run's next pass or on a ``ModelCall``)."""
    if iteration == 1:
        target.evaluated(["billing"], cursor_to="billing", moved_by="entry", witness="charged")
    else:
        target.evaluated(["billing"], cursor_to="billing", cursor_from="billing")
    target.injected("system-prompt", "base", content="You help people with their bills.")
    target.injected("system-prompt", "skill", source_id="billing", content="BILLING SKILL " * 8)
    target.composed("system-prompt")


def messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": PROMPT}, *history]


def instrumented_agent(
    client: Any, tracer: Any, *, stream: bool = False, wrapped: bool = False
) -> str:
    """The agent with an instrumentation making the model-call spans: passes stated on the run,
    or (``wrapped``) in ``run.model_call(...)`` around the call (the README habit). A model call
    the server fails (a scripted 500) is retried once, as a pass of its own."""
    import openai

    with footprint.run(tracer, agent="support", maps=MAPS, user_prompt=PROMPT) as run:
        client.chat.completions.create(model="guard-m", messages=messages([]))
        history: list[dict[str, Any]] = []
        answer = ""
        for iteration in (1, 2):
            for attempt in (1, 2):
                try:
                    if wrapped:
                        with run.model_call("agent-m") as call:
                            stage_pass(call, iteration)
                            reply = _create(client, "agent-m", messages(history), stream)
                    else:
                        stage_pass(run, iteration)
                        reply = _create(client, "agent-m", messages(history), stream)
                    break
                except openai.InternalServerError:
                    if attempt == 2:
                        raise
            if reply["tool_calls"]:
                history.append(
                    {"role": "assistant", "content": None, "tool_calls": reply["tool_calls"]}
                )
                for call in reply["tool_calls"]:
                    arguments = json.loads(call["function"]["arguments"])
                    result = lookup(arguments["id"])
                    history.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            else:
                answer = reply["content"]
        client.chat.completions.create(model="summary-m", messages=messages(history))
        run.answer(answer)
        return answer


def plain_agent(tracer: Any) -> None:
    """The same agent recorded with the plain recorder (no instrumentation): the reference."""
    with footprint.run(tracer, agent="support", maps=MAPS, user_prompt=PROMPT) as run:
        with run.model_call("agent-m") as p:
            stage_pass(p, 1)
        with run.tool_call("lookup", args={"id": 7}, call_id="call_lookup_7") as call:
            call.result(lookup(7))
        with run.model_call("agent-m") as p:
            stage_pass(p, 2)
        run.answer("charge 7 was refunded")


def _create(client: Any, model: str, history: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    if not stream:
        message = (
            client.chat.completions.create(model=model, messages=history, tools=TOOLS)
            .choices[0]
            .message
        )
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls or ()
        ]
        return {"content": message.content, "tool_calls": calls}
    content, calls = "", {}
    for chunk in client.chat.completions.create(
        model=model, messages=history, tools=TOOLS, stream=True
    ):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for part in choice.delta.tool_calls or ():
                entry = calls.setdefault(
                    part.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] = part.id or entry["id"]
                if part.function is not None:
                    entry["function"]["name"] += part.function.name or ""
                    entry["function"]["arguments"] += part.function.arguments or ""
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)]}


# ── running a stack and reading what came out ────────────────────────────────────────────────


@dataclass
class Captured:
    raw: InMemorySpanExporter
    """Every span as the stack made it (before our processor annotated anything)."""
    annotated: InMemorySpanExporter
    """What the in-process processor exported."""
    processor: FootprintSpanProcessor

    def flush(self) -> None:
        assert self.processor.force_flush(10_000)


@contextmanager
def capture(provider: TracerProvider, *, attach: bool = True) -> Iterator[Captured]:
    """A provider with the raw exporter, the span-start hook and our processor (as ``setup()``)."""
    raw, annotated = InMemorySpanExporter(), InMemorySpanExporter()
    if attach:
        footprint.install_attach(provider)
    provider.add_span_processor(SimpleSpanProcessor(raw))
    processor = FootprintSpanProcessor(annotated, grace_seconds=0.05)
    provider.add_span_processor(processor)
    captured = Captured(raw, annotated, processor)
    try:
        yield captured
    finally:
        captured.flush()


def explain_spans(spans: Sequence[ReadableSpan]) -> list[RunVerdict]:
    """``explain`` over the spans as OTLP (the hop's protobuf-native path)."""
    return explain_requests(Loaded(traces=[encode_spans(list(spans))], logs=[]))


def verdict_facts(verdict: RunVerdict) -> dict[str, Any]:
    """What must agree between stacks: engagement per pass, check states, signals, reasons."""
    body = verdict_to_json(verdict)
    return {
        "mode": body["mode"],
        "complete": body["complete"],
        "passes": [
            (p["iteration"], p["engagedMaps"], p["parkedMaps"], p["servedWhileParked"], p["rode"])
            for p in body["passes"]
        ],
        "checks": {k: (v["status"], v.get("outcome")) for k, v in body["checks"].items()},
        "signals": body["signals"],
        "reasons": sorted(r["code"] for r in body["reasons"]),
    }


def reference_facts() -> dict[str, Any]:
    """The plain recorder's verdict for the agent (no instrumentation, its own spans)."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plain_agent(provider.get_tracer("plain"))
    provider.shutdown()
    (verdict,) = explain_spans(exporter.get_finished_spans())
    return verdict_facts(verdict)


def footprint_keys(span: ReadableSpan) -> list[str]:
    """Our output attributes on a span (``footprint.*`` keys we write)."""
    return [k for k in (span.attributes or {}) if k.startswith(semconv.PREFIX)]


Instrumentor = Callable[[TracerProvider], Callable[[], None]]
"""Instruments the openai client for a provider; returns the undo."""


# ── one stack per interpreter (instrumentations patch the client globally; undoing one in a
# process that ran another leaves wrappers behind, so each stack runs in a fresh interpreter) ──

INSTRUMENTORS = {
    "openai-v2": "opentelemetry.instrumentation.openai_v2",
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
}


def _state_pass(next_pass: Any, call: Any) -> None:
    """The frameworks' adapters call this before each counted model call."""
    stage_pass(next_pass, next_pass.iteration)


def agents_sdk_agent(url: str, tracer: Any, *, streamed: bool = False) -> str:
    """The agent on the OpenAI Agents SDK (chat completions model), a guard and a summary call on
    the same client around ``Runner.run`` (``streamed``: ``Runner.run_streamed``, its events
    read to the end)."""
    import asyncio

    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool

    from otel_footprint.integrations.openai_agents import footprint_hooks

    @function_tool
    def lookup_tool(id: int) -> str:
        """look a charge up"""
        return lookup(id)

    lookup_tool.name = "lookup"
    client = openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
    agent = Agent(
        name="support",
        instructions="You help people with their bills.",
        tools=[lookup_tool],
        model=OpenAIChatCompletionsModel(model="agent-m", openai_client=client),
    )

    async def main() -> str:
        with footprint.run(tracer, agent="support", maps=MAPS, user_prompt=PROMPT) as run:
            await client.chat.completions.create(model="guard-m", messages=messages([]))
            hooks = footprint_hooks(_state_pass)
            if streamed:
                result = Runner.run_streamed(agent, PROMPT, hooks=hooks)
                async for _ in result.stream_events():
                    pass
            else:
                result = await Runner.run(agent, PROMPT, hooks=hooks)
            await client.chat.completions.create(model="summary-m", messages=messages([]))
            run.answer(str(result.final_output))
            return str(result.final_output)

    return asyncio.run(main())


def langgraph_agent(url: str, tracer: Any) -> str:
    """The agent as a LangGraph graph (model node, ToolNode), a guard and a summary call on the
    same chat model outside the adapter."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from otel_footprint.integrations.langchain import footprint_callbacks

    @tool("lookup")
    def lookup_tool(id: int) -> str:
        """look a charge up"""
        return lookup(id)

    def model(name: str) -> Any:
        return ChatOpenAI(model=name, base_url=url, api_key="test", max_retries=0)

    llm = model("agent-m").bind_tools([lookup_tool])
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [llm.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode([lookup_tool]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile()
    with footprint.run(tracer, agent="support", maps=MAPS, user_prompt=PROMPT) as run:
        model("guard-m").invoke([("user", PROMPT)])
        out = app.invoke(
            {"messages": [("user", PROMPT)]},
            config={"callbacks": [footprint_callbacks(_state_pass)]},
        )
        model("summary-m").invoke([("user", PROMPT)])
        answer = str(out["messages"][-1].content)
        run.answer(answer)
        return answer


def langgraph_prebuilt_agent(url: str, tracer: Any, *, runs: int = 3) -> None:
    """The agent as LangGraph's prebuilt ``create_react_agent`` (its own model node and tool
    node), ``runs`` times in one process, each run with a guard and a summary call around it."""
    import warnings

    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    from otel_footprint.integrations.langchain import footprint_callbacks

    @tool("lookup")
    def lookup_tool(id: int) -> str:
        """look a charge up"""
        return lookup(id)

    def model(name: str) -> Any:
        return ChatOpenAI(model=name, base_url=url, api_key="test", max_retries=0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated for langchain.agents.create_agent, not gone
        app = create_react_agent(model("agent-m"), [lookup_tool])
    for _ in range(runs):
        with footprint.run(tracer, agent="support", maps=MAPS, user_prompt=PROMPT) as run:
            model("guard-m").invoke([("user", PROMPT)])
            out = app.invoke(
                {"messages": [("user", PROMPT)]},
                config={"callbacks": [footprint_callbacks(_state_pass)]},
            )
            model("summary-m").invoke([("user", PROMPT)])
            run.answer(str(out["messages"][-1].content))


def force_handler_order(order: str) -> None:
    """Make LangChain call the OpenInference tracer first (``tracer-first``) or last
    (``handler-first``) among a model call's handlers, at its start and at its end: the order
    LangChain leaves to a set's iteration. ``inverted``: last at the start, first at the end (an
    order LangChain does not give, forced to see what the handler says then)."""
    from langchain_core.callbacks import manager
    from openinference.instrumentation.langchain._tracer import OpenInferenceTracer

    original = manager.handle_event

    def ordered(handlers: list[Any], event: str, *args: Any, **kwargs: Any) -> Any:
        starting = event in ("on_chat_model_start", "on_llm_start")
        tracer_first = order == "tracer-first" or (order == "inverted" and not starting)

        def key(handler: Any) -> bool:  # False sorts first
            return isinstance(handler, OpenInferenceTracer) != tracer_first

        return original(sorted(handlers, key=key), event, *args, **kwargs)

    manager.handle_event = ordered


def _child(name: str, url: str, stream: bool, out: str) -> None:
    import importlib
    from pathlib import Path

    import openai

    name, _, style = name.partition(":")
    provider = TracerProvider()
    if name == "openai-agents":
        from openinference.instrumentation.openai import OpenAIInstrumentor
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        # The client instrumentation too: each model call then has a framework span and a
        # client span, and the guard / summary calls have theirs.
        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif name in ("langgraph", "langgraph-prebuilt"):
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
        if style:
            force_handler_order(style)
    else:
        importlib.import_module(INSTRUMENTORS[name]).OpenAIInstrumentor().instrument(
            tracer_provider=provider
        )
    with capture(provider) as captured:
        tracer = provider.get_tracer("agent")
        if name == "openai-agents":
            agents_sdk_agent(url, tracer, streamed=style == "streamed")
        elif name == "langgraph":
            langgraph_agent(url, tracer)
        elif name == "langgraph-prebuilt":
            langgraph_prebuilt_agent(url, tracer)
        else:
            client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)
            instrumented_agent(client, tracer, stream=stream, wrapped=style == "wrapped")
    raw = encode_spans(list(captured.raw.get_finished_spans())).SerializeToString()
    annotated = encode_spans(list(captured.annotated.get_finished_spans())).SerializeToString()
    Path(out).write_bytes(len(raw).to_bytes(8, "big") + raw + annotated)


def run_stack(
    name: str, url: str, *, stream: bool = False, env: dict[str, str] | None = None
) -> tuple[Any, Any]:
    """Run the agent on one instrumentation in a fresh interpreter; (raw, annotated) OTLP
    ``ExportTraceServiceRequest`` messages. ``name:wrapped`` states each pass in
    ``run.model_call(...)`` around the client call instead of on the run;
    ``langgraph*:tracer-first`` / ``:handler-first`` / ``:inverted`` force the LangChain
    handlers' order;
    ``openai-agents:streamed`` runs the agent with ``Runner.run_streamed``."""
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "spans.bin")
        result = subprocess.run(
            [sys.executable, __file__, name, url, "1" if stream else "0", out],
            env={**os.environ, **(env or {})},
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
    import sys

    _child(sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4])
