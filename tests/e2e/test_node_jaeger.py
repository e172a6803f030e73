"""The TypeScript agent's runs into Jaeger: ``openai_agent.mjs`` (the ``openai`` npm client under each
of the three JavaScript instrumentations, recorded with ``@otel-footprint/recorder``) and the OpenAI
Agents SDK agent send OTLP/HTTP through ``otel-footprint serve`` (collector-config/jaeger/
otel-footprint.yaml, bearer token and all) and the backend Collector (``scripts/otelcol.sh start``)
to Jaeger v2 (``scripts/jaeger.sh start``). Each run is found in Jaeger by its run id; its verdicts
equal the Python agent's doing the same work through the same chain (stating the offered tools when
the instrumentation under test records them: the same integrity inputs); and the Python run's verdicts,
typed as a Jaeger search, find exactly the TypeScript run's span, pass by pass.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from servers import HopProcess

from otel_footprint import semconv as sc

from .node_agents import (
    PASS_VERDICT,
    PASSES,
    RUN_VERDICT,
    SPANS,
    assert_stuck_turn,
    from_jaeger,
    passes_by_iteration,
    python_agent,
    records_offered_tools,
    run_agents_sdk_agent,
    run_openai_agent,
    scenario,
    scripted,
    verdicts_of,
)
from .otel_stack import (
    WAIT_S,
    JaegerClient,
    JaegerSpan,
    jaeger_hop,
    poll,
    search,
    text,
)
from .sdk_export import E2E_SERVICE_NAME, exporting_provider, make_exporter

pytestmark = [pytest.mark.e2e, pytest.mark.jaeger, pytest.mark.collector]

TOKEN = "e2e-" + uuid.uuid4().hex[:12]
NODE_ENV = {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"Authorization=Bearer%20{TOKEN}"}
"""The hop's bearer token, given to the Node.js agents as the OpenTelemetry JS exporter reads it."""


@dataclass(frozen=True, slots=True)
class InJaeger:
    """One run as Jaeger holds it: its trace and the verdicts read from it."""

    service: str
    run_id: str
    trace_id: str
    spans: Sequence[JaegerSpan]
    verdicts: Mapping[str, Any]


def in_jaeger(jaeger: JaegerClient, service: str, run_id: str, spans: int) -> InJaeger:
    """Find the run in ``service`` by its run id (the search a person types), wait for all
    ``spans`` of its trace, and read its verdicts."""
    traces = poll(
        lambda: jaeger.find(service, {sc.RUN_ID: run_id}),
        lambda found: len(found) == 1,
        timeout=WAIT_S,
        what=f"run {run_id} in Jaeger service {service}",
    )
    [trace_id] = traces
    trace = jaeger.wait_trace(trace_id, spans)
    assert len(trace) == spans, [s.operation for s in trace]
    verdicts = verdicts_of([from_jaeger(s) for s in trace], run_id)
    return InJaeger(service, run_id, trace_id, trace, verdicts)


def verdict_tags(attributes: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
    """The verdict attributes a span carries, as Jaeger search tags."""
    return {name: text(attributes[name]) for name in names if attributes.get(name) is not None}


def assert_found_by_python_verdicts(jaeger: JaegerClient, python: InJaeger, ts: InJaeger) -> None:
    """The Python run's verdicts, typed as Jaeger searches in the TypeScript agent's service, find
    exactly the TypeScript run span and, with the pass number, exactly each pass span."""
    [py_run] = [s for s in python.spans if s.tags.get(sc.RUN_ID) == python.run_id]
    [ts_run] = [s for s in ts.spans if s.tags.get(sc.RUN_ID) == ts.run_id]
    run_tags = {sc.RUN_ID: ts.run_id, **verdict_tags(py_run.tags, RUN_VERDICT)}
    assert len(run_tags) >= 10, run_tags  # the run's verdicts are there to search by
    found = search(jaeger, ts.service, run_tags, ts.trace_id)
    assert [s.span_id for s in found] == [ts_run.span_id]
    py_passes = passes_by_iteration(from_jaeger(s) for s in python.spans)
    ts_passes = passes_by_iteration(from_jaeger(s) for s in ts.spans)
    assert sorted(py_passes) == sorted(ts_passes) == list(range(1, PASSES + 1))
    for iteration, py_pass in py_passes.items():
        tags = {
            sc.PASS_ITERATION: str(iteration),
            **verdict_tags(py_pass.attributes, PASS_VERDICT),
        }
        assert len(tags) >= 4, tags
        found = search(jaeger, ts.service, tags, ts.trace_id)
        assert [s.span_id for s in found] == [ts_passes[iteration].span_id], tags


@pytest.fixture(scope="module")
def hop(backend_collector: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    """One ``otel-footprint serve`` for the module, forwarding to the backend Collector."""
    data_dir = tmp_path_factory.mktemp("hop-node-jaeger") / "data"
    process = jaeger_hop(data_dir, backend_collector, TOKEN).start()
    with process.stopped_cleanly():
        yield process


@pytest.fixture(scope="module")
def python_run(
    jaeger: JaegerClient, hop: HopProcess, server: FakeOpenAI, openai_agent: Path
) -> Callable[[bool], InJaeger]:
    """The Python agent's run through the same hop, Collector and Jaeger, stating the offered tools
    or not (one run of each, on first use): the verdicts to match."""

    @functools.cache
    def reference(offered_tools: bool) -> InJaeger:
        run_id = f"py-jaeger-{uuid.uuid4().hex[:12]}"
        exporter = make_exporter(
            "http/protobuf",
            http_url=f"http://{hop.http}/v1/traces",
            grpc_endpoint=None,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        with exporting_provider(exporter, f"py-jaeger-{run_id}", min_spans=SPANS) as provider:
            passes = python_agent(
                provider.get_tracer("python-agent"),
                run_id,
                scripted(server),
                scenario(),
                offered_tools=offered_tools,
            )
        assert passes == PASSES
        run = in_jaeger(jaeger, E2E_SERVICE_NAME, run_id, SPANS)
        assert run.verdicts["parents"] == [True]
        assert_stuck_turn(run.verdicts, offered_tools=offered_tools)
        return run

    return reference


@pytest.mark.parametrize("instrumentation", ["otel", "openinference", "traceloop"])
def test_typescript_agent_in_jaeger_gets_the_python_agents_verdicts(
    jaeger: JaegerClient,
    hop: HopProcess,
    server: FakeOpenAI,
    openai_agent: Path,
    python_run: Callable[[bool], InJaeger],
    instrumentation: str,
) -> None:
    run_id = f"ts-jaeger-{instrumentation}-{uuid.uuid4().hex[:12]}"
    summary = run_openai_agent(
        server, f"http://{hop.http}", run_id, instrumentation, "next", env=NODE_ENV
    )
    ts = in_jaeger(
        jaeger, f"otel-footprint-openai-agent-{instrumentation}", run_id, summary["spans"]
    )
    assert ts.trace_id == summary["traceId"]
    offered_tools = records_offered_tools(instrumentation)
    python = python_run(offered_tools)
    assert ts.verdicts == python.verdicts
    assert ts.verdicts["parents"] == [True]  # each pass span is the client span, under the run
    assert_stuck_turn(ts.verdicts, offered_tools=offered_tools)
    assert_found_by_python_verdicts(jaeger, python, ts)
    assert hop.metric("otel_footprint_spans_annotated_total") > 0


def test_agents_sdk_agent_in_jaeger_gets_the_python_agents_verdicts(
    jaeger: JaegerClient,
    hop: HopProcess,
    server: FakeOpenAI,
    openai_agent: Path,
    python_run: Callable[[bool], InJaeger],
) -> None:
    """The SDK's LLM spans record no offered tools: the Python run that states none is the match."""
    python = python_run(False)
    run_id = f"ts-jaeger-agents-sdk-{uuid.uuid4().hex[:12]}"
    summary = run_agents_sdk_agent(server, f"http://{hop.http}", run_id, env=NODE_ENV)
    assert (summary["passes"], summary["toolCalls"], summary["attached"]) == (PASSES, 5, PASSES)
    ts = in_jaeger(jaeger, "otel-footprint-agents-sdk-agent", run_id, summary["spans"])
    got = dict(ts.verdicts)
    got.pop("parents")  # the SDK's LLM spans sit under its turn spans
    expected = dict(python.verdicts)
    expected.pop("parents")
    assert got == expected
    assert_found_by_python_verdicts(jaeger, python, ts)
