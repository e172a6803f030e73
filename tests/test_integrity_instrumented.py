"""Integrity over real instrumentation: the agent of :mod:`integrity_agent` on the real ``openai``
client, traced by the official GenAI instrumentation (``opentelemetry-instrumentation-openai-v2``),
OpenInference (``openinference-instrumentation-openai``) or OpenLLMetry
(``opentelemetry-instrumentation-openai``), against a fake OpenAI-compatible server on loopback —
each run in a fresh interpreter (instrumentations patch ``openai`` globally).

Three runs — a parked map's tool stays on the offered list, the model invents an id, everything is
grounded — come out flagged, flagged, clean; in-process (``otel_footprint.sdk.setup``) and through
``otel-footprint serve`` (a subprocess forwarding to an OTLP receiver). A run traced without content
capture is ``unreachable`` with the reason, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai", reason="pip install -e '.[integrations]'")

from fake_openai import FakeOpenAI
from integrity_agent import MODEL, SCENARIOS, run_agent
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from test_service_support import HopProcess, Sink, attrs

from otel_footprint import semconv
from otel_footprint.runs.spans import key_values_to_pairs

MODULES = {
    "genai": "opentelemetry.instrumentation.openai_v2",
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
}
FLAVORS = sorted(MODULES)


def _needs(flavor: str) -> None:
    pytest.importorskip(MODULES[flavor], reason="pip install -e '.[integrations]'")


def _spans(request: ExportTraceServiceRequest) -> list[Any]:
    return [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]


def in_process(
    flavor: str, scenario: str, folder: Path, *, content: bool = True, state_tools: bool = True
) -> tuple[dict[str, Any], list[Any]]:
    """The run, annotated by the in-process processor: (run span attributes, every span)."""
    _needs(flavor)
    with FakeOpenAI({MODEL: SCENARIOS[scenario]}) as server:
        request = run_agent(
            flavor, scenario, server.url, content=content, folder=folder, state_tools=state_tools
        )
        spans = _spans(request)
        assert len(server.requests) == len(SCENARIOS[scenario])
    (run_span,) = [s for s in spans if semconv.INTEGRITY_SUMMARY in attrs(s)]
    return attrs(run_span), spans


def findings(spans: list[Any]) -> list[dict[str, Any]]:
    return [
        dict(key_values_to_pairs(e.attributes))
        for s in spans
        for e in s.events
        if e.name == semconv.EV_INTEGRITY_FINDING
    ]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_parked_maps_tool_still_offered_is_flagged(flavor: str, tmp_path: Path) -> None:
    attributes, spans = in_process(flavor, "parked", tmp_path)
    assert attributes[semconv.INTEGRITY_STATE] == "fail"
    assert attributes[semconv.ROW_INVARIANT_VIOLATION_COMPOSE] == "fail"
    (finding,) = findings(spans)
    assert finding[semconv.IF_KIND] == "invariant-violation"
    assert tuple(finding[semconv.IF_SUBJECTS]) == ("map:skill-map", "tool:get_zone_info")
    assert finding[semconv.IF_ITERATION] == 4
    assert "integrity.invariant-violation" in attributes[semconv.SIGNALS]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_an_invented_id_is_flagged(flavor: str, tmp_path: Path) -> None:
    attributes, spans = in_process(flavor, "invented", tmp_path)
    assert attributes[semconv.INTEGRITY_STATE] == "fail"
    assert attributes[semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE] == "fail"
    (finding,) = findings(spans)
    assert finding[semconv.IF_KIND] == "unsupported-argument"
    assert finding[semconv.IF_PREDICATE] == "machine"
    assert "host-zeta-99" in finding[semconv.IF_MESSAGE]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_grounded_run_is_clean(flavor: str, tmp_path: Path) -> None:
    attributes, spans = in_process(flavor, "grounded", tmp_path)
    assert attributes[semconv.INTEGRITY_STATE] == "pass"
    assert attributes[semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE] == "pass"
    assert attributes[semconv.INTEGRITY_FINDINGS] == 0
    assert findings(spans) == []


@pytest.mark.parametrize(
    ("flavor", "state_tools", "state"),
    [
        ("genai", True, "pass"),
        ("genai", False, "unreachable"),
        ("openinference", True, "pass"),
        ("openllmetry", True, "pass"),
    ],
)
def test_an_enum_member_is_never_filed_as_invented(
    flavor: str, state_tools: bool, state: str, tmp_path: Path
) -> None:
    """``region="us-east"`` is a member of the enum get_host declares. Where the schema is recorded
    (OpenInference, OpenLLMetry, or the agent stating its tools under openai-v2) it passes; openai-v2
    alone records no tool list, and without the schema an enum member cannot be told from an
    invented value: unreachable, naming the schema — never a finding."""
    attributes, spans = in_process(flavor, "enum", tmp_path, state_tools=state_tools)
    assert attributes[semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE] == state
    assert attributes[semconv.INTEGRITY_STATE] == state
    assert findings(spans) == []


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_run_without_captured_content_is_unreachable_never_a_pass(
    flavor: str, tmp_path: Path
) -> None:
    attributes, spans = in_process(flavor, "invented", tmp_path, content=False)
    assert attributes[semconv.INTEGRITY_STATE] == "unreachable"
    assert attributes[semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE] == "unreachable"
    assert "unsupported-argument@choice" in attributes[semconv.INTEGRITY_UNREACHABLE]
    assert findings(spans) == []
    (run_span,) = [s for s in spans if semconv.INTEGRITY_SUMMARY in attrs(s)]
    explanation = next(
        dict(key_values_to_pairs(e.attributes))[semconv.EVAL_EXPLANATION]
        for e in run_span.events
        if dict(key_values_to_pairs(e.attributes)).get(semconv.EVAL_NAME)
        == "footprint.integrity.unsupported-argument@choice"
    )
    assert explanation.startswith("Could not be judged: ")
    assert "pass 2" in explanation


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
    ("flavor", "scenario", "state", "row"),
    [
        ("genai", "parked", "fail", semconv.ROW_INVARIANT_VIOLATION_COMPOSE),
        ("genai", "invented", "fail", semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE),
        ("genai", "grounded", "pass", semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE),
        ("openinference", "parked", "fail", semconv.ROW_INVARIANT_VIOLATION_COMPOSE),
        ("openinference", "invented", "fail", semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE),
        ("openinference", "grounded", "pass", semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE),
        ("openllmetry", "invented", "fail", semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE),
        ("openllmetry", "grounded", "pass", semconv.ROW_UNSUPPORTED_ARGUMENT_CHOICE),
    ],
)
def test_through_serve(
    flavor: str, scenario: str, state: str, row: str, hop: HopProcess, sink: Sink, tmp_path: Path
) -> None:
    _needs(flavor)
    with FakeOpenAI({MODEL: SCENARIOS[scenario]}) as server:
        raw = _spans(run_agent(flavor, scenario, server.url, endpoint=hop.grpc, folder=tmp_path))
    # What left the agent carries no verdict: the hop wrote every one of them.
    assert not any(semconv.INTEGRITY_STATE in attrs(s) for s in raw)
    run_id = f"{flavor}-{scenario}"

    def annotated() -> list[Any]:
        return [
            s
            for s in sink.spans()
            if attrs(s).get(semconv.RUN_ID) == run_id and semconv.INTEGRITY_STATE in attrs(s)
        ]

    assert sink.wait_for(lambda: bool(annotated()), 20.0), hop.stderr()
    (run_span,) = annotated()
    got = attrs(run_span)
    assert got[semconv.INTEGRITY_STATE] == state
    assert got[row] == state
    in_trace = [s for s in sink.spans() if s.trace_id == run_span.trace_id]
    assert len(findings(in_trace)) == (1 if state == "fail" else 0)


def test_an_agents_sdk_run_seen_by_framework_and_client_spans(tmp_path: Path) -> None:
    """OpenAI Agents SDK + OpenInference (agents and openai): each model call is a framework
    ``generation`` span with the client's ``ChatCompletion`` under it. The framework span records
    no tool list, so there is nothing to compare at the wire: unarmed, not unreachable."""
    pytest.importorskip("agents", reason="pip install -e '.[integrations]'")
    pytest.importorskip("openinference.instrumentation.openai_agents")
    from integration_agents import SCRIPT, run_stack

    from otel_footprint.commands.explain import Loaded, explain_requests

    with FakeOpenAI(SCRIPT) as server:
        raw, _ = run_stack("openai-agents", server.url)
    (verdict,) = explain_requests(Loaded(traces=[raw], logs=[]))
    result = verdict.integrity
    assert result is not None
    wire = result.row("invariant-violation", "wire")
    assert (wire.armed, wire.state) == (False, "not-applicable")
    assert result.state == "not-applicable"  # the map never parks in this two-pass run
    assert len(result.pass_spans) == 2  # one pass per model call, the client spans are views
