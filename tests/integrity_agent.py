"""The tool-calling agent of the integrity tests on real instrumentation, run in a fresh interpreter.

A plain tool loop on the real ``openai`` client against :mod:`fake_openai`, traced by one
instrumentation: the official GenAI one (``genai``: ``opentelemetry-instrumentation-openai-v2``),
OpenInference (``openinference``) or OpenLLMetry (``openllmetry``). Instrumentations patch the
``openai`` module globally and do not all undo it cleanly, so each run gets its own interpreter:
``python tests/integrity_agent.py FLAVOR SCENARIO CONTENT(0|1) URL OUT [OTLP_ENDPOINT]`` writes the
spans to ``OUT`` as one OTLP ``ExportTraceServiceRequest`` — annotated by the in-process processor
(``otel_footprint.sdk.setup``), or, with ``OTLP_ENDPOINT``, exported raw to that endpoint (an
``otel-footprint serve`` hop) instead.

The agent states only what no convention carries (the map, its own kernel's decisions, the tool
declaration) and, for the GenAI instrumentation (which does not record ``gen_ai.tool.definitions``
in the version pinned here), the tools it composed for each call. It applies the engagement kernel
itself (verify mode) but offers every tool whatever the kernel parks: a parked map's tool still
offered contradicts its own park.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint import record as footprint
from otel_footprint.kernel import (
    DEFAULT_RENEWAL_GRACE,
    EngagementPass,
    MapEngagementRecord,
    ToolResult,
    advance_engagement,
    engagement_plan,
)

MODEL = "agent-m"
MAP = footprint.MountedMap("skill-map", ("zone-audit", "run-finder"), ("get_zone_info",))
PLAN = engagement_plan([MAP], DEFAULT_RENEWAL_GRACE)
HOSTS = [{"host": "host-alpha-01", "zone": "north"}, {"host": "host-beta-02", "zone": "south"}]


def _fn(name: str, properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": dict(properties or {})},
        },
    }


TOOLS = [
    _fn("screen_open", {"screen": {"type": "string"}}),
    _fn("get_zone_info", {"zone": {"type": "string"}}),
    _fn("list_hosts"),
    _fn(
        "get_host",
        {
            "machine": {"type": "string"},
            "region": {"type": "string", "enum": ["us-east", "eu-west"]},
        },
    ),
]
IMPLEMENTATIONS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "screen_open": lambda args: "screen opened",
    "get_zone_info": lambda args: '{"zone":"north","paths":2}',
    "list_hosts": lambda args: json.dumps(HOSTS),
    "get_host": lambda args: json.dumps(
        [h for h in HOSTS if h["host"] == args.get("machine")], separators=(",", ":")
    ),
}

SCENARIOS: Mapping[str, list[dict[str, Any]]] = {
    # The model keeps working elsewhere: the map engaged on pass 1 parks on pass 4, and the
    # agent (whose own kernel parks it) keeps offering get_zone_info.
    "parked": [
        *(
            {"tool_calls": [{"name": "screen_open", "arguments": {"screen": f"s{i}"}}]}
            for i in range(5)
        ),
        {"content": "Nothing more to open."},
    ],
    # host-zeta-99 appears in nothing the model was shown.
    "invented": [
        {"tool_calls": [{"name": "list_hosts", "arguments": {}}]},
        {"tool_calls": [{"name": "get_host", "arguments": {"machine": "host-zeta-99"}}]},
        {"content": "host-zeta-99 is fine."},
    ],
    # us-east is a member of get_host's declared region enum: served by the schema itself.
    "enum": [
        {"tool_calls": [{"name": "list_hosts", "arguments": {}}]},
        {"tool_calls": [{"name": "get_host", "arguments": {"region": "us-east"}}]},
        {"content": "Nothing in us-east."},
    ],
    # host-alpha-01 came back from list_hosts.
    "grounded": [
        {"tool_calls": [{"name": "list_hosts", "arguments": {}}]},
        {"tool_calls": [{"name": "get_host", "arguments": {"machine": "host-alpha-01"}}]},
        {"content": "host-alpha-01 is in zone north."},
    ],
}


def agent(client: Any, tracer: Any, *, state_tools: bool, run_id: str) -> None:
    """A plain tool loop on the real client; the recorder states the pass and the declarations."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You audit zone redundancy. Use the tools."},
        {"role": "user", "content": "find the most recent zone redundancy run"},
    ]
    engagement: tuple[MapEngagementRecord, ...] = ()
    called: list[str] = []  # the tools the last pass's reply asked for
    with footprint.run(tracer, agent="auditor", run_id=run_id, maps=[MAP], enforced=True) as run:
        run.declare_tool("get_host", arguments_from=["list_hosts"])
        for index in range(12):
            with run.model_call(MODEL) as call:
                moved_by, witness = ("entry", "zone") if index == 0 else ("stay", None)
                advance = advance_engagement(
                    PLAN,
                    engagement,
                    EngagementPass(
                        iteration=call.iteration,
                        current_node="zone-audit",
                        move_by=moved_by,
                        witness=witness,
                        tool_results=tuple(ToolResult(n) for n in called),
                        served_last_pass=("zone-audit",) if index else (),
                    ),
                )
                engagement = advance.next
                for change in advance.changes:
                    call.engagement(change)
                call.evaluated(
                    ["zone-audit"], cursor_to="zone-audit", moved_by=moved_by, witness=witness
                )
                if state_tools:  # what the framework composed, in the GenAI attribute
                    run.frame(
                        call,
                        tools=[{"type": "function", **t["function"]} for t in TOOLS],
                    )
                reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            if not message.tool_calls:
                run.answer(message.content or "")
                return
            messages.append(message.model_dump(exclude_none=True))
            called = [tool_call.function.name for tool_call in message.tool_calls]
            for tool_call in message.tool_calls:
                name = tool_call.function.name
                args = json.loads(tool_call.function.arguments or "{}")
                with run.tool_call(name, args=args, call_id=tool_call.id) as executed:
                    result = IMPLEMENTATIONS[name](args)
                    executed.result(result)
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": result})


CONTENT_ENV = {
    "genai": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
    "openllmetry": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openinference": {},
}
NO_CONTENT_ENV = {
    "genai": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT",
    },
    "openllmetry": {"TRACELOOP_TRACE_CONTENT": "false"},
    "openinference": {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
}


@contextmanager
def instrumented(flavor: str, provider: Any) -> Iterator[None]:
    """The real instrumentation on the real client (its content switch comes from the env)."""
    instrumentor: Any
    if flavor == "genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        instrumentor = OpenAIInstrumentor()
    elif flavor == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TLInstrumentor

        instrumentor = TLInstrumentor()
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        instrumentor = OIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def _child(flavor: str, scenario: str, url: str, out: str, endpoint: str | None) -> None:
    import openai
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_footprint.record import install_attach
    from otel_footprint.sdk import setup as footprint_setup

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    if endpoint is None:
        processor = footprint_setup(provider, exporter, grace_seconds=0.05)
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        install_attach(provider)
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=10))
        )
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    with instrumented(flavor, provider):
        client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)
        agent(
            client,
            provider.get_tracer("auditor"),
            # The GenAI instrumentation records no tool list: the agent states what it composed,
            # unless the run leaves it out (FOOTPRINT_TEST_STATE_TOOLS=0).
            state_tools=flavor == "genai" and os.environ.get("FOOTPRINT_TEST_STATE_TOOLS") != "0",
            run_id=f"{flavor}-{scenario}",
        )
    if endpoint is None:
        assert processor.force_flush(20_000)
    provider.shutdown()
    Path(out).write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())


def run_agent(
    flavor: str,
    scenario: str,
    url: str,
    *,
    content: bool = True,
    endpoint: str | None = None,
    folder: Path,
    state_tools: bool = True,
) -> ExportTraceServiceRequest:
    """One run in a fresh interpreter; its spans (annotated in-process unless ``endpoint``).
    ``state_tools=False``: the agent does not state the tools it composed (under the GenAI
    instrumentation no tool list is then recorded at all)."""
    out = folder / f"{flavor}-{scenario}-{int(content)}-{int(state_tools)}.bin"
    env = {**os.environ, **(CONTENT_ENV if content else NO_CONTENT_ENV)[flavor]}
    env["FOOTPRINT_TEST_STATE_TOOLS"] = "1" if state_tools else "0"
    argv = [sys.executable, __file__, flavor, scenario, url, str(out)]
    if endpoint is not None:
        argv.append(endpoint)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    request = ExportTraceServiceRequest()
    request.ParseFromString(out.read_bytes())
    return request


if __name__ == "__main__":
    _child(*sys.argv[1:5], sys.argv[5] if len(sys.argv) > 5 else None)
