"""Integrity over real instrumentation: a tool-calling agent on the real ``openai`` client, traced by
the official GenAI instrumentation (``opentelemetry-instrumentation-openai-v2``) or by OpenInference
(``openinference-instrumentation-openai``), against a fake OpenAI-compatible server on loopback.

Three runs — a parked map's tool stays on the offered list, the model invents an id, everything
is grounded — come out flagged, flagged, clean; in-process (``otel_footprint.sdk.setup``) and
through ``otel-footprint serve`` (a subprocess forwarding to an OTLP receiver). A run traced
without content capture is ``unreachable`` with the reason, never a pass.

The agent states only what no convention carries (the map, the tool declaration) and, for the
GenAI instrumentation (which does not record ``gen_ai.tool.definitions`` in the version pinned
here), the tools it composed for each call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="pip install -e '.[integrations]'")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")
pytest.importorskip("openinference.instrumentation.openai")

from fake_openai import FakeOpenAI  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from test_service_support import HopProcess, Sink, attrs  # noqa: E402

from otel_footprint import record as footprint  # noqa: E402
from otel_footprint import semconv  # noqa: E402
from otel_footprint.record import install_attach  # noqa: E402
from otel_footprint.sdk import setup as footprint_setup  # noqa: E402

MODEL = "agent-m"
MAP = footprint.MountedMap("skill-map", ("zone-audit", "run-finder"), ("get_zone_info",))
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
    _fn("get_host", {"machine": {"type": "string"}}),
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
    # agent (no kernel of its own) keeps offering get_zone_info.
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
    with footprint.run(tracer, agent="auditor", run_id=run_id, maps=[MAP]) as run:
        run.declare_tool("get_host", arguments_from=["list_hosts"])
        for index in range(12):
            with run.model_call(MODEL) as call:
                call.evaluated(
                    ["zone-audit"],
                    cursor_to="zone-audit",
                    moved_by="entry" if index == 0 else "stay",
                    witness="zone" if index == 0 else None,
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
            for tool_call in message.tool_calls:
                name = tool_call.function.name
                args = json.loads(tool_call.function.arguments or "{}")
                with run.tool_call(name, args=args, call_id=tool_call.id) as executed:
                    result = IMPLEMENTATIONS[name](args)
                    executed.result(result)
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": result})


@contextmanager
def instrumented(
    flavor: str, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, *, content: bool
) -> Iterator[None]:
    """The real instrumentation on the real client, for one test."""
    if flavor == "genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        monkeypatch.setenv(
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "SPAN_ONLY" if content else "NO_CONTENT",
        )
        genai = OpenAIInstrumentor()
        genai.instrument(tracer_provider=provider)
        try:
            yield
        finally:
            genai.uninstrument()
    else:
        from openinference.instrumentation import TraceConfig
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        config = TraceConfig(hide_inputs=not content, hide_outputs=not content)
        oi = OIInstrumentor()
        oi.instrument(tracer_provider=provider, config=config)
        try:
            yield
        finally:
            oi.uninstrument()


def run_agent(
    flavor: str,
    scenario: str,
    provider: TracerProvider,
    monkeypatch: pytest.MonkeyPatch,
    *,
    content: bool = True,
) -> FakeOpenAI:
    with (
        FakeOpenAI({MODEL: SCENARIOS[scenario]}) as server,
        instrumented(flavor, provider, monkeypatch, content=content),
    ):
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        tracer = provider.get_tracer("auditor")
        agent(client, tracer, state_tools=flavor == "genai", run_id=f"{flavor}-{scenario}")
    return server


def in_process(
    flavor: str, scenario: str, monkeypatch: pytest.MonkeyPatch, *, content: bool = True
) -> tuple[dict[str, Any], list[ReadableSpan]]:
    """Run the agent with the in-process processor; the annotated run span's attributes."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = footprint_setup(provider, exporter, grace_seconds=0.05)
    server = run_agent(flavor, scenario, provider, monkeypatch, content=content)
    assert processor.force_flush(20_000)
    provider.shutdown()
    assert len(server.requests) == len(SCENARIOS[scenario])
    spans = list(exporter.get_finished_spans())
    (run_span,) = [
        s
        for s in spans
        if s.attributes
        and semconv.RUN_ID in s.attributes
        and semconv.INTEGRITY_STATE in s.attributes
    ]
    return dict(run_span.attributes or {}), spans


FLAVORS = ["genai", "openinference"]


def _finding_events(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    return [
        dict(e.attributes or {})
        for s in spans
        for e in s.events
        if e.name == semconv.EV_INTEGRITY_FINDING
    ]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_parked_maps_tool_still_offered_is_flagged(
    flavor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    attributes, spans = in_process(flavor, "parked", monkeypatch)
    assert attributes[semconv.INTEGRITY_STATE] == "fail"
    assert attributes["footprint.integrity.row.invariant_violation.compose"] == "fail"
    (finding,) = _finding_events(spans)
    assert finding[semconv.IF_KIND] == "invariant-violation"
    assert tuple(finding[semconv.IF_SUBJECTS]) == ("map:skill-map", "tool:get_zone_info")
    assert finding[semconv.IF_ITERATION] == 4
    assert "integrity.invariant-violation" in attributes[semconv.SIGNALS]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_an_invented_id_is_flagged(flavor: str, monkeypatch: pytest.MonkeyPatch) -> None:
    attributes, spans = in_process(flavor, "invented", monkeypatch)
    assert attributes[semconv.INTEGRITY_STATE] == "fail"
    assert attributes["footprint.integrity.row.unsupported_argument.choice"] == "fail"
    (finding,) = _finding_events(spans)
    assert finding[semconv.IF_KIND] == "unsupported-argument"
    assert finding[semconv.IF_PREDICATE] == "machine"
    assert "host-zeta-99" in finding[semconv.IF_MESSAGE]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_grounded_run_is_clean(flavor: str, monkeypatch: pytest.MonkeyPatch) -> None:
    attributes, spans = in_process(flavor, "grounded", monkeypatch)
    assert attributes[semconv.INTEGRITY_STATE] == "pass"
    assert attributes["footprint.integrity.row.unsupported_argument.choice"] == "pass"
    assert attributes[semconv.INTEGRITY_FINDINGS] == 0
    assert _finding_events(spans) == []


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_run_without_captured_content_is_unreachable_never_a_pass(
    flavor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    attributes, spans = in_process(flavor, "invented", monkeypatch, content=False)
    assert attributes[semconv.INTEGRITY_STATE] == "unreachable"
    assert attributes["footprint.integrity.row.unsupported_argument.choice"] == "unreachable"
    assert "unsupported-argument@choice" in attributes[semconv.INTEGRITY_UNREACHABLE]
    assert _finding_events(spans) == []
    (run_span,) = [s for s in spans if s.attributes and semconv.INTEGRITY_STATE in s.attributes]
    explanation = next(
        dict(e.attributes or {})[semconv.EVAL_EXPLANATION]
        for e in run_span.events
        if (e.attributes or {}).get(semconv.EVAL_NAME)
        == "footprint.integrity.unsupported-argument@choice"
    )
    assert "Could not be judged: the messages shown at pass" in explanation


# ── through `otel-footprint serve` ──────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hop(sink: Sink, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    base: Path = tmp_path_factory.mktemp("integrity-hop")
    proc = HopProcess(
        base / "data", sink.endpoint, "--set", "processing.release_grace=300ms"
    ).start()
    yield proc
    assert proc.terminate() == 0, proc.stderr()


@pytest.mark.parametrize(
    ("flavor", "scenario", "state", "row", "row_state"),
    [
        ("genai", "parked", "fail", "invariant_violation.compose", "fail"),
        ("openinference", "invented", "fail", "unsupported_argument.choice", "fail"),
        ("openinference", "grounded", "pass", "unsupported_argument.choice", "pass"),
        ("genai", "grounded", "pass", "unsupported_argument.choice", "pass"),
        ("genai", "invented", "fail", "unsupported_argument.choice", "fail"),
    ],
)
def test_through_serve(
    flavor: str,
    scenario: str,
    state: str,
    row: str,
    row_state: str,
    hop: HopProcess,
    sink: Sink,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = TracerProvider()
    install_attach(provider)
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=hop.grpc, insecure=True, timeout=10), schedule_delay_millis=50
        )
    )
    run_agent(flavor, scenario, provider, monkeypatch)
    provider.force_flush()
    provider.shutdown()
    run_id = f"{flavor}-{scenario}"

    def annotated() -> bool:
        return any(
            attrs(s).get(semconv.RUN_ID) == run_id and semconv.INTEGRITY_STATE in attrs(s)
            for s in sink.spans()
        )

    assert sink.wait_for(annotated, 20.0), hop.stderr()
    run_span = next(
        s
        for s in sink.spans()
        if attrs(s).get(semconv.RUN_ID) == run_id and semconv.INTEGRITY_STATE in attrs(s)
    )
    got = attrs(run_span)
    assert got[semconv.INTEGRITY_STATE] == state
    assert got[f"footprint.integrity.row.{row}"] == row_state
    findings = [
        e
        for s in sink.spans()
        if s.trace_id == run_span.trace_id
        for e in s.events
        if e.name == semconv.EV_INTEGRITY_FINDING
    ]
    assert len(findings) == (1 if state == "fail" else 0)
