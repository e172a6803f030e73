"""The three client instrumentations of the ``openai`` client, from PyPI, against a loopback server.

``opentelemetry-instrumentation-openai-v2`` (official GenAI), ``openinference-instrumentation-openai``
and OpenLLMetry's ``opentelemetry-instrumentation-openai`` (versions in
scripts/integrations-constraints.txt). For each: no model-call span beyond the instrumentation's
own; the same verdicts as the plain recorder; the verdicts on the instrumentation's spans; the guard
and summary calls neither counted nor annotated; one run; re-explaining the annotated output
changes nothing; the in-process processor and the OTLP path agree whatever order the spans end in.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from hypothesis import given, settings
from hypothesis import strategies as st
from integration_agents import (
    SCRIPT,
    capture,
    explain_spans,
    instrumented_agent,
    reference_facts,
    run_stack,
    verdict_facts,
)
from opentelemetry.sdk.trace import TracerProvider

from otel_footprint import semconv
from otel_footprint.commands.explain import Loaded, explain_requests
from otel_footprint.runs.spans import OtlpSpanView

openai = pytest.importorskip("openai", reason="pip install -e '.[integrations]'")

CONTENT_ENV = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}

# name -> (module, span name of a model call, environment for content capture)
STACKS: dict[str, tuple[str, str, dict[str, str]]] = {
    "openai-v2": ("opentelemetry.instrumentation.openai_v2", "chat agent-m", CONTENT_ENV),
    "openinference": ("openinference.instrumentation.openai", "ChatCompletion", {}),
    "openllmetry": ("opentelemetry.instrumentation.openai", "openai.chat", {}),
}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(SCRIPT) as fake:
        yield fake


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return reference_facts()


def _views(request: Any) -> list[tuple[str, OtlpSpanView]]:
    return [
        (scope.scope.name, OtlpSpanView(span))
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _explain(request: Any) -> list[Any]:
    return explain_requests(Loaded(traces=[request], logs=[]))


def _is_model_call(view: OtlpSpanView) -> bool:
    return (
        view.attribute(semconv.GEN_AI_OPERATION_NAME) == "chat"
        or view.attribute(semconv.OPENINFERENCE_SPAN_KIND) == "LLM"
    )


def _ours(view: OtlpSpanView) -> list[str]:
    return [kv.key for kv in view.pb.attributes if kv.key.startswith(semconv.PREFIX)]


@pytest.mark.parametrize(
    ("stream", "style"),
    [(False, ""), (True, ""), (False, ":wrapped")],
    ids=["on-the-run", "stream", "in-model_call"],
)
@pytest.mark.parametrize("name", sorted(STACKS))
def test_stack_gives_the_plain_recorders_verdicts_on_its_own_spans(
    name: str, stream: bool, style: str, server: FakeOpenAI, reference: dict[str, Any]
) -> None:
    pytest.importorskip(STACKS[name][0], reason="pip install -e '.[integrations]'")
    raw, annotated = run_stack(name + style, server.url, stream=stream, env=STACKS[name][2])
    assert server.models_called() == ["guard-m", "agent-m", "agent-m", "summary-m"]
    # No model-call span beyond the instrumentation's own: four calls, four spans, all theirs.
    calls = [(scope, v) for scope, v in _views(raw) if _is_model_call(v)]
    assert len(calls) == 4
    (scope,) = {scope for scope, _ in calls}
    assert scope != "agent"
    # One run, decided the same as the plain recorder's.
    (verdict,) = _explain(raw)
    assert verdict_facts(verdict) == reference
    # The verdicts are on the instrumentation's pass spans; guard and summary carry nothing.
    out = _views(annotated)
    assert len(out) == len(_views(raw))
    passes = [(s, v) for s, v in out if v.attribute(semconv.ENG_ENGAGED_MAPS) is not None]
    assert sorted(v.attribute(semconv.PASS_ITERATION) for _, v in passes) == [1, 2]
    assert {s for s, _ in passes} == {scope}
    others = [v for s, v in out if _is_model_call(v) and (s, v) not in passes]
    assert len(others) == 2 and all(_ours(v) == [] for v in others)
    runs = [v for _, v in out if v.attribute(semconv.RUN_PASSES) is not None]
    assert len(runs) == 1 and runs[0].attribute(semconv.RUN_PASSES) == 2
    # Our output is never our input.
    (again,) = _explain(annotated)
    assert verdict_facts(again) == verdict_facts(verdict)


def test_without_content_capture_openai_v2_tool_calls_are_a_reason_not_no_calls(
    server: FakeOpenAI, reference: dict[str, Any]
) -> None:
    pytest.importorskip(STACKS["openai-v2"][0], reason="pip install -e '.[integrations]'")
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"}
    raw, _ = run_stack("openai-v2", server.url, env=env)
    (verdict,) = _explain(raw)
    facts = verdict_facts(verdict)
    assert "tool-calls-unrecorded" in facts["reasons"] and not facts["complete"]
    assert [p[0] for p in facts["passes"]] == [1]  # pass 2 needs pass 1's batch
    # The gap stays local: check 1 reads no tool call and is as the plain recorder's; the check
    # over every call's result cannot see pass 1's calls, so it says unreachable (not "none").
    assert facts["checks"]["decided-delivered"] == reference["checks"]["decided-delivered"]
    assert facts["checks"]["empty-results"] == ("unreachable", None)


@pytest.mark.parametrize("name", sorted(STACKS))
def test_a_model_call_the_server_fails_asked_for_no_tool(
    name: str, reference: dict[str, Any]
) -> None:
    """The first loop call gets a 500 and is retried: the failed call (ERROR status, an exception
    event, no output) is a pass that asked for no tool, not one whose tool calls went unrecorded."""
    pytest.importorskip(STACKS[name][0], reason="pip install -e '.[integrations]'")
    script = {**SCRIPT, "agent-m": [{"status": 500}, *SCRIPT["agent-m"]]}
    with FakeOpenAI(script) as fake:
        raw, _ = run_stack(name, fake.url, env=STACKS[name][2])
        assert fake.models_called() == ["guard-m", *["agent-m"] * 3, "summary-m"]
    (verdict,) = _explain(raw)
    facts = verdict_facts(verdict)
    assert facts["reasons"] == [] and facts["complete"]
    assert [p[0] for p in facts["passes"]] == [1, 2, 3]
    assert facts["checks"] == reference["checks"]


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_processor_and_otlp_path_agree_whatever_order_spans_end_in(data: st.DataObject) -> None:
    spans = _recorded_openinference()
    reference = verdict_facts(explain_spans(spans)[0])
    shuffled = data.draw(st.permutations(spans), label="end order")
    (verdict,) = explain_spans(shuffled)
    assert verdict_facts(verdict) == reference
    # The same order through the OTLP path of the hop's protobuf views.
    # The in-process processor fed the same spans in that order decides the same.
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_footprint.sdk import FootprintSpanProcessor

    exporter = InMemorySpanExporter()
    processor = FootprintSpanProcessor(exporter, grace_seconds=30)
    for span in shuffled:
        processor.on_end(span)
    assert processor.force_flush(10_000)
    annotated = exporter.get_finished_spans()
    assert len(annotated) == len(spans)
    (again,) = explain_spans(annotated)
    assert verdict_facts(again) == reference
    processor.shutdown()


_RECORDED: list[Any] = []


def _recorded_openinference() -> list[Any]:
    """One OpenInference-instrumented run's raw spans, as SDK spans (recorded once)."""
    if not _RECORDED:
        module = pytest.importorskip(STACKS["openinference"][0])
        # OpenInference only: another instrumentation undone in this process leaves wrappers.
        provider = TracerProvider()
        instrumentor = module.OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            with FakeOpenAI(SCRIPT) as fake, capture(provider) as captured:
                client = openai.OpenAI(base_url=fake.url, api_key="test", max_retries=0)
                instrumented_agent(client, provider.get_tracer("agent"))
        finally:
            instrumentor.uninstrument()
            provider.shutdown()
        _RECORDED.extend(captured.raw.get_finished_spans())
    return list(_RECORDED)


def test_fake_server_runs_as_a_script() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("fake_openai.py")
    process = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        assert reply.choices[0].message.content == "done"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)
