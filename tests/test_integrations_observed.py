"""Observed runs: agents with their instrumentation only (no footprint code but ``setup()``) get
verdicts, from the three client instrumentations of the ``openai`` client (openai-v2 with content
capture, OpenInference, OpenLLMetry), in-process and through ``explain`` (the hop's protobuf path).

Per stack (``observed_agents.py``): a clean loop gives a verdict and no finding; an invented order
id fires at the call that used it (openai-v2 2.4b0 records no offered tools, so there the argument
check says ``unreachable``, never a guess); an empty lookup is flagged; two agent spans in one
trace are two runs and a guard call outside both is no pass; a model call with no span around it
is a run of its own; no span says ``missing-spans``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from observed_agents import INSTRUMENTORS, INVENTED, SCRIPT, run_observed

from otel_footprint import semconv
from otel_footprint.commands.explain import Loaded, explain_requests, verdict_to_json
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.spans import OtlpSpanView

pytest.importorskip("openai", reason="pip install -e '.[integrations]'")


@pytest.fixture(scope="module", params=sorted(INSTRUMENTORS))
def stack(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Any]]:
    pytest.importorskip(INSTRUMENTORS[request.param], reason="pip install -e '.[integrations]'")
    with FakeOpenAI(SCRIPT) as server:
        raw, annotated = run_observed(request.param, server.url)
    yield request.param, raw, annotated


def views(request: Any) -> list[OtlpSpanView]:
    return [
        OtlpSpanView(span)
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def by_scenario(request: Any) -> dict[str, list[RunVerdict]]:
    """The verdicts of ``explain`` over the request, by the name of their trace's top span."""
    spans = views(request)
    top = {v.trace_id: v.name for v in spans if v.parent_span_id is None}
    found: dict[str, list[RunVerdict]] = {}
    for verdict in explain_requests(Loaded(traces=[request], logs=[])):
        found.setdefault(top[verdict.trace_id], []).append(verdict)
    return found


def model_of(view: OtlpSpanView) -> str:
    """The model a model-call span asked (GenAI, or OpenInference's name)."""
    return str(view.attribute(semconv.GEN_AI_REQUEST_MODEL) or view.attribute("llm.model_name"))


def checks(verdict: RunVerdict) -> dict[str, str]:
    body = verdict_to_json(verdict)
    return {k: v["status"] for k, v in body["checks"].items()}


def integrity_rows(verdict: RunVerdict) -> dict[str, Any]:
    assert verdict.integrity is not None
    return {f"{r.check}@{r.seam}": r for r in verdict.integrity.rows}


def test_clean_run_gets_a_verdict_and_no_finding(stack: tuple[str, Any, Any]) -> None:
    name, raw, _ = stack
    (verdict,) = by_scenario(raw)["clean"]
    assert verdict.mode == "observed" and verdict.complete
    assert [p.iteration for p in verdict.passes] == [1, 2, 3]
    assert checks(verdict) == {
        "decided-delivered": "not-applicable",
        "existence": "not-applicable",
        "empty-results": "reachable",
    }
    account = verdict.account
    assert account is not None and account.signals == ()
    assert verdict.integrity is not None and verdict.integrity.findings == ()
    argument = integrity_rows(verdict)["unsupported-argument@choice"]
    if name == "openai-v2":  # 2.4b0 records no offered tools: not judged on a guess
        assert argument.checked == 0 and argument.unreachable == 2
    else:
        assert argument.checked == 2 and argument.findings == 0
    asked = [line for line in account.lines if line.row == "asked"]
    assert asked and "CUST-4411" in asked[0].text


def test_an_invented_id_fires_at_its_call(stack: tuple[str, Any, Any]) -> None:
    name, raw, _ = stack
    (verdict,) = by_scenario(raw)["invented"]
    assert verdict.integrity is not None
    if name == "openai-v2":
        assert verdict.integrity.findings == ()
        assert integrity_rows(verdict)["unsupported-argument@choice"].unreachable == 2
        return
    (finding,) = verdict.integrity.findings
    assert finding.kind == "unsupported-argument" and finding.iteration == 2
    assert INVENTED in finding.message
    assert finding.witnesses[0].ref is not None
    assert finding.witnesses[0].ref.span_id == verdict.passes[1].span_id


def test_an_empty_lookup_is_flagged(stack: tuple[str, Any, Any]) -> None:
    _, raw, _ = stack
    (verdict,) = by_scenario(raw)["empty"]
    assert verdict.account is not None
    (signal,) = verdict.account.signals
    assert signal.signal_id == "undeclared-empty-used"
    assert checks(verdict)["empty-results"] == "reachable"
    # Its evidence is where the model read the empty result: the next call's input messages.
    (pointer,) = signal.pointers
    assert pointer.span_id == verdict.passes[2].span_id
    assert pointer.attribute in ("gen_ai.input.messages", "llm.input_messages")


def test_two_agent_spans_are_two_runs_and_the_guard_is_no_pass(
    stack: tuple[str, Any, Any],
) -> None:
    _, raw, _ = stack
    spans = views(raw)
    first, second = sorted(by_scenario(raw)["two-agents"], key=lambda v: v.passes[0].iteration)
    names = {v.span_id: v.name for v in spans}
    assert {names[first.run_span_id or ""], names[second.run_span_id or ""]} == {
        "invoke_agent first",
        "invoke_agent second",
    }
    (guard,) = [v for v in spans if model_of(v) == "guard-m"]
    for verdict in (first, second):
        assert [p.iteration for p in verdict.passes] == [1, 2, 3]
        assert guard.span_id not in {p.span_id for p in verdict.passes}


def test_a_model_call_with_no_span_around_it_is_its_own_run(stack: tuple[str, Any, Any]) -> None:
    _, raw, _ = stack
    (bare,) = [v for v in views(raw) if model_of(v) == "bare-m"]
    assert bare.parent_span_id is None
    (verdict,) = [v for v in explain_requests(Loaded([raw], [])) if v.trace_id == bare.trace_id]
    assert verdict.run_span_id == bare.span_id and len(verdict.passes) == 1


def test_in_process_the_spans_carry_the_verdicts_and_no_false_reason(
    stack: tuple[str, Any, Any],
) -> None:
    _, raw, annotated = stack
    out = views(annotated)
    assert len(out) == len(views(raw))
    runs = [v for v in out if v.attribute(semconv.RUN_MODE) == "observed"]
    assert sorted(v.name for v in runs if v.parent_span_id is not None) == [
        "invoke_agent first",
        "invoke_agent second",
    ]
    # clean, invented, empty (their top spans), the two agents, the bare call.
    assert len(runs) == 6
    assert all(v.attribute(semconv.RUN_ID) is None for v in runs)
    for view in out:
        reasons = view.attribute(semconv.RUN_REASONS) or ()
        assert "missing-spans" not in reasons, view.name
    # Re-reading our own output decides the same (our output is never our input).
    again = explain_requests(Loaded([annotated], []))
    first = explain_requests(Loaded([raw], []))
    assert sorted(_facts(v) for v in again) == sorted(_facts(v) for v in first)


def test_switched_off_nothing_is_decided_and_nothing_is_stamped(
    stack: tuple[str, Any, Any],
) -> None:
    _, raw, _ = stack
    assert explain_requests(Loaded([raw], []), EngineOptions(observed=False)) == []


def _facts(verdict: RunVerdict) -> str:
    body = verdict_to_json(verdict)
    return repr(
        (
            body["mode"],
            body["complete"],
            [p["iteration"] for p in body["passes"]],
            body["checks"],
            body["signals"],
            sorted(r["code"] for r in body["reasons"]),
        )
    )


def test_an_agents_sdk_run_is_one_observed_run_and_its_invented_id_fires() -> None:
    """The OpenAI Agents SDK under OpenInference (framework and client spans), no footprint code:
    the outermost agent span is the run, the framework's model-call spans its passes (the client
    spans under them are second views), and the invented order id fires at pass 1."""
    pytest.importorskip("openinference.instrumentation.openai_agents", reason="integrations")
    with FakeOpenAI(SCRIPT) as server:
        raw, annotated = run_observed("openai-agents", server.url)
    spans = views(raw)
    (verdict,) = explain_requests(Loaded([raw], []))
    (top,) = [v for v in spans if v.parent_span_id is None]
    assert verdict.mode == "observed" and verdict.run_span_id == top.span_id
    names = {v.span_id: v.name for v in spans}
    assert [names[p.span_id or ""] for p in verdict.passes] == ["generation", "generation"]
    assert verdict.integrity is not None
    (finding,) = verdict.integrity.findings
    assert finding.kind == "unsupported-argument" and finding.iteration == 1
    assert INVENTED in finding.message
    out = {v.span_id: v for v in views(annotated)}
    assert out[top.span_id].attribute(semconv.RUN_MODE) == "observed"
