"""A TypeScript agent on the ``openai`` npm client, instrumented by each real JavaScript instrumentation
in turn and recorded with ``@otel-footprint/recorder``, against the fake OpenAI-compatible server on
loopback (tests/fake_openai.py), through ``otel-footprint serve`` into Phoenix: the verdicts Phoenix
shows are the ones of the Python agent doing the same work with the Python recorder (compared here,
pass by pass; the Python agent states the offered tools when the instrumentation under test records
them, so both sides give the integrity checks the same inputs); so are the OpenAI Agents SDK agent's. The agents and the verdict reading are
tests/e2e/node_agents.py's (shared with the Jaeger path, tests/e2e/test_node_jaeger.py)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from test_service_support import HopProcess

from otel_footprint import semconv as sc
from otel_footprint.codec import EventPointer, decode_event

from .footprint_e2e import E2E_TIMEOUT_S, start_hop
from .node_agents import (
    PASSES,
    SPANS,
    assert_stuck_turn,
    from_phoenix,
    python_agent,
    records_offered_tools,
    run_agents_sdk_agent,
    run_openai_agent,
    scenario,
    scripted,
    verdicts_of,
)
from .otlp_sink import OtlpSink, ReceivedSpan, event_pairs
from .phoenix_api import PhoenixClient
from .sdk_export import exporting_provider, make_exporter

pytestmark = pytest.mark.e2e


def verdicts(phoenix: PhoenixClient, project: str, run_id: str, spans: int) -> dict[str, Any]:
    """What Phoenix shows of one run: the run span's verdicts and each pass's, by iteration."""
    everything = phoenix.wait_for_spans(project, count=spans, timeout=E2E_TIMEOUT_S)
    assert len(everything) == spans, [s.name for s in everything]
    return verdicts_of([from_phoenix(s) for s in everything], run_id)


@pytest.fixture(scope="module")
def hop(phoenix: PhoenixClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    """One ``otel-footprint serve`` for the module, forwarding OTLP/HTTP to Phoenix."""
    data_dir = tmp_path_factory.mktemp("hop-openai") / "data"
    process = start_hop(data_dir, phoenix.otlp_http_traces_url, forward_protocol="http/protobuf")
    with process.stopped_cleanly():
        yield process


@pytest.fixture(scope="module")
def python_verdicts(
    phoenix: PhoenixClient, hop: HopProcess, server: FakeOpenAI, openai_agent: Path
) -> Callable[[bool], dict[str, Any]]:
    """The Python agent's run through the same hop, stating the offered tools or not (one run of
    each, on first use): the verdicts to match."""

    @functools.cache
    def reference(offered_tools: bool) -> dict[str, Any]:
        project = f"e2e-openai-python-{uuid.uuid4().hex[:8]}"
        run_id = f"py-openai-{uuid.uuid4().hex[:12]}"
        exporter = make_exporter(
            "http/protobuf", http_url=f"http://{hop.http}/v1/traces", grpc_endpoint=None
        )
        with exporting_provider(exporter, project, min_spans=2 * PASSES) as provider:
            passes = python_agent(
                provider.get_tracer("python-agent"),
                run_id,
                scripted(server),
                scenario(),
                offered_tools=offered_tools,
            )
        assert passes == PASSES
        got = verdicts(phoenix, project, run_id, spans=SPANS)
        assert_stuck_turn(got, offered_tools=offered_tools)
        return got

    return reference


@pytest.mark.parametrize(
    ("instrumentation", "style"),
    [
        ("otel", "next"),
        ("openinference", "next"),
        ("traceloop", "next"),
        ("otel", "helper"),
        ("none", "helper"),
    ],
)
def test_typescript_agent_gets_the_python_agents_verdicts(
    phoenix: PhoenixClient,
    hop: HopProcess,
    server: FakeOpenAI,
    openai_agent: Path,
    python_verdicts: Callable[[bool], dict[str, Any]],
    project_name: str,
    instrumentation: str,
    style: str,
) -> None:
    run_id = f"ts-openai-{instrumentation}-{uuid.uuid4().hex[:12]}"
    summary = run_openai_agent(
        server,
        f"http://{hop.http}",
        run_id,
        instrumentation,
        style,
        f"--project={project_name}",
    )
    got = verdicts(phoenix, project_name, run_id, spans=summary["spans"])
    offered_tools = records_offered_tools(instrumentation)
    assert got == python_verdicts(offered_tools)
    assert got["parents"] == [True]  # each pass span is the client span, right under the run
    # And they are the stuck turn's: engaged on pass 1, parked on the fourth call, riding on after.
    assert_stuck_turn(got, offered_tools=offered_tools)


# --- the OpenAI Agents SDK (@openai/agents) traced by its OpenInference instrumentation -----------


def test_agents_sdk_passes_land_on_the_sdks_llm_spans(openai_agent: Path) -> None:
    """No Phoenix needed: the spans as they leave the agent (a local OTLP receiver)."""
    with FakeOpenAI() as server, OtlpSink() as sink:
        summary = run_agents_sdk_agent(server, sink.http_endpoint, "agents-sdk-run")
        spans = sink.wait_for_spans(summary["spans"], timeout=10)
        requests = len(server.requests)
    assert (summary["passes"], summary["toolCalls"], summary["attached"]) == (PASSES, 5, PASSES)
    assert summary["unattached"] == 0 and requests == PASSES

    def kind(span: ReceivedSpan) -> Any:
        return span.attributes.get(sc.OPENINFERENCE_SPAN_KIND)

    llm = [s for s in spans if kind(s) == sc.OI_KIND_LLM]
    # One model-call span per request the SDK made (the recorder made none), each one pass.
    assert len(llm) == requests
    assert sorted(s.attributes[sc.PASS_ITERATION] for s in llm) == list(range(1, PASSES + 1))
    assert not [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT]
    [run] = [s for s in spans if s.attributes.get(sc.RUN_ID) == "agents-sdk-run"]
    assert {s.trace_id for s in spans} == {run.trace_id}
    for span in llm:
        iteration = span.attributes[sc.PASS_ITERATION]
        decoded = [
            decode_event(
                e.name, event_pairs(e), EventPointer(span.trace_id, span.span_id, e.name, i)
            )
            for i, e in enumerate(span.span.events)
        ]
        types = [d.type for d in decoded if d is not None]
        assert types[0] == sc.T_CONTEXT_EVALUATED and types.count(sc.T_SLOT_COMPOSED) == 2
        [evaluated] = [d for d in decoded if d is not None and d.type == sc.T_CONTEXT_EVALUATED]
        assert evaluated.payload["iteration"] == iteration
        assert evaluated.payload["cursorMove"]["by"] == ("entry" if iteration == 1 else "stay")


def test_agents_sdk_agent_gets_the_python_agents_verdicts(
    phoenix: PhoenixClient,
    hop: HopProcess,
    server: FakeOpenAI,
    openai_agent: Path,
    python_verdicts: Callable[[bool], dict[str, Any]],
    project_name: str,
) -> None:
    """The SDK's own agent and turn spans stay inside the recorder's run (issue 10's run grouping),
    so its passes get the Python agent's verdicts (its LLM spans record no offered tools)."""
    run_id = f"ts-agents-sdk-{uuid.uuid4().hex[:12]}"
    summary = run_agents_sdk_agent(
        server, f"http://{hop.http}", run_id, f"--project={project_name}"
    )
    got = verdicts(phoenix, project_name, run_id, spans=summary["spans"])
    got.pop("parents")  # the SDK's LLM spans sit under its turn spans
    expected = dict(python_verdicts(False))
    expected.pop("parents")
    assert got == expected
