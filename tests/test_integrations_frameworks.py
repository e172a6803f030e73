"""The OpenAI Agents SDK (+ OpenInference agents and openai instrumentations) and LangGraph
(+ OpenInference LangChain), from PyPI, against the loopback server, through their adapters.

Each runs in a fresh interpreter (tests/integration_agents.py). For each: the same verdicts as the
plain recorder; the verdicts on the framework's spans; exactly one pass per model call (the
framework span, not the client span under it); guard and summary calls neither counted nor
annotated; the framework's agent / chain spans are no runs; re-explaining the annotated output
changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from hypothesis import given, settings
from hypothesis import strategies as st
from integration_agents import SCRIPT, reference_facts, run_stack, verdict_facts
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint import semconv
from otel_footprint.commands.explain import Loaded, explain_requests
from otel_footprint.runs.spans import OtlpSpanView

FRAMEWORKS = {
    "openai-agents": ("agents", "openinference.instrumentation.openai_agents", "generation"),
    "langgraph": ("langgraph", "openinference.instrumentation.langchain", "ChatOpenAI"),
}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(SCRIPT) as fake:
        yield fake


def _views(request: Any) -> list[OtlpSpanView]:
    return [
        OtlpSpanView(span)
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _explain(request: Any) -> list[Any]:
    return explain_requests(Loaded(traces=[request], logs=[]))


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_framework_gives_the_plain_recorders_verdicts_on_its_own_spans(
    name: str, server: FakeOpenAI
) -> None:
    framework, instrumentation, pass_span = FRAMEWORKS[name]
    pytest.importorskip(framework, reason="pip install -e '.[integrations]'")
    pytest.importorskip(instrumentation, reason="pip install -e '.[integrations]'")
    raw, annotated = run_stack(name, server.url)
    assert server.models_called() == ["guard-m", "agent-m", "agent-m", "summary-m"]
    (verdict,) = _explain(raw)  # one run: the framework's agent spans are containers
    assert verdict_facts(verdict) == reference_facts()
    out = _views(annotated)
    assert len(out) == len(_views(raw))
    passes = [v for v in out if v.attribute(semconv.ENG_ENGAGED_MAPS) is not None]
    assert sorted(v.attribute(semconv.PASS_ITERATION) for v in passes) == [1, 2]
    assert {v.name for v in passes} == {pass_span}
    calls = [v for v in out if v.attribute(semconv.OPENINFERENCE_SPAN_KIND) == "LLM"]
    others = [v for v in calls if v not in passes]
    # guard + summary, plus (Agents SDK) the client span under each framework span
    assert len(others) == (4 if name == "openai-agents" else 2)
    for view in others:
        assert [kv.key for kv in view.pb.attributes if kv.key.startswith("footprint.")] == []
    runs = [v for v in out if v.attribute(semconv.RUN_PASSES) is not None]
    assert len(runs) == 1 and runs[0].name == "invoke_agent support"
    (again,) = _explain(annotated)
    assert verdict_facts(again) == verdict_facts(verdict)


_RECORDED: dict[str, Any] = {}


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_framework_runs_decide_the_same_whatever_order_their_spans_arrive_in(
    data: st.DataObject,
) -> None:
    pytest.importorskip("agents", reason="pip install -e '.[integrations]'")
    if "raw" not in _RECORDED:
        with FakeOpenAI(SCRIPT) as fake:
            _RECORDED["raw"], _ = run_stack("openai-agents", fake.url)
    spans = [s for r in _RECORDED["raw"].resource_spans for sc in r.scope_spans for s in sc.spans]
    order = data.draw(st.permutations(spans), label="arrival order")
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(order)
    (verdict,) = _explain(request)
    assert verdict_facts(verdict) == reference_facts()


@pytest.mark.parametrize("order", ["", ":tracer-first", ":handler-first"])
def test_prebuilt_react_agent_lands_every_pass_whichever_handler_runs_first(order: str) -> None:
    """LangGraph's prebuilt ``create_react_agent`` merges callback managers, which orders the
    OpenInference tracer and the adapter's handler as a set does (it varied run to run): each
    order, forced, and the unforced one over three runs, decides every pass."""
    pytest.importorskip("langgraph.prebuilt", reason="pip install -e '.[integrations]'")
    pytest.importorskip("openinference.instrumentation.langchain")
    script = {"agent-m": [*SCRIPT["agent-m"]] * 3}
    with FakeOpenAI(script) as fake:
        raw, annotated = run_stack("langgraph-prebuilt" + order, fake.url)
    verdicts = _explain(raw)
    assert len(verdicts) == 3
    for verdict in verdicts:
        assert verdict_facts(verdict) == reference_facts()
    passes = [v for v in _views(annotated) if v.attribute(semconv.ENG_ENGAGED_MAPS) is not None]
    assert [v.attribute(semconv.PASS_ITERATION) for v in passes] == [1, 2] * 3
    assert {v.name for v in passes} == {"ChatOpenAI"}


def test_a_pass_no_open_span_took_is_a_reason_at_its_call_not_merged_into_the_next() -> None:
    """Forced, an order LangChain does not give (the tracer starts its span after the handler's
    start and ends it before the handler's end): each pass is given up when its call ends, with
    a reason, never landed on a later call with that call's events added."""
    pytest.importorskip("langgraph.prebuilt", reason="pip install -e '.[integrations]'")
    pytest.importorskip("openinference.instrumentation.langchain")
    script = {"agent-m": [*SCRIPT["agent-m"]] * 3}
    with FakeOpenAI(script) as fake:
        raw, annotated = run_stack("langgraph-prebuilt:inverted", fake.url)
    for verdict in _explain(raw):
        facts = verdict_facts(verdict)
        assert facts["passes"] == [] and not facts["complete"]
        assert "unattached-pass" in facts["reasons"]
        (first, *_) = [r for r in verdict.reasons if r.code == "unattached-pass"]
        assert first.message.startswith("pass 1's staged events")
        assert "LangChain model call ended" in first.message
    assert not [v for v in _views(annotated) if v.attribute(semconv.PASS_ITERATION) is not None]


def test_agents_sdk_run_streamed_gives_the_plain_recorders_verdicts(server: FakeOpenAI) -> None:
    """Streamed, the OpenInference ``generation`` span records no output messages: the
    responses in its ``output.value`` say which tools the model asked for (none, on the answering
    pass), so the run keeps its checks and is not marked ``tool-calls-unrecorded``."""
    pytest.importorskip("agents", reason="pip install -e '.[integrations]'")
    pytest.importorskip("openinference.instrumentation.openai_agents")
    raw, annotated = run_stack("openai-agents:streamed", server.url)
    assert server.models_called() == ["guard-m", "agent-m", "agent-m", "summary-m"]
    (verdict,) = _explain(raw)
    facts = verdict_facts(verdict)
    assert facts == reference_facts()
    assert facts["checks"] and "tool-calls-unrecorded" not in facts["reasons"]
    passes = [v for v in _views(annotated) if v.attribute(semconv.ENG_ENGAGED_MAPS) is not None]
    assert sorted(v.attribute(semconv.PASS_ITERATION) for v in passes) == [1, 2]
    assert {v.name for v in passes} == {"generation"}
