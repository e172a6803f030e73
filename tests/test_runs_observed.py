"""Observed runs from spans alone (``runs/group.py``, ``runs/observed.py``): the one rule for
nested agent spans, passes and second views, model calls outside every agent span, recorder input
winning for the whole trace, and the evidence gaps that stay local (a failed model call asked for
no tool; one unrecorded pass takes only what reads every call)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_footprint import semconv
from otel_footprint.engine.decide import decide_run
from otel_footprint.runs.group import RunSpans, group_runs
from otel_footprint.runs.recognize import SpanRole, role_of
from otel_footprint.runs.spans import SdkSpanView

AGENT = {semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT}
OI_AGENT = {semconv.OPENINFERENCE_SPAN_KIND: "AGENT"}
OI_LLM = {semconv.OPENINFERENCE_SPAN_KIND: "LLM"}
CHAT = {semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT}


def _record(build: Callable[[Tracer], None]) -> list[SdkSpanView]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    build(provider.get_tracer("t"))
    return [SdkSpanView(s) for s in exporter.get_finished_spans()]


def _names(spans: list[SdkSpanView], run: RunSpans) -> tuple[str, list[str], list[str]]:
    assert run.run_span is not None
    return run.run_span.name, [p.name for p in run.passes], [u.name for u in run.unmarked_calls]


def test_the_outermost_agent_span_is_the_run_and_nested_ones_are_parts_of_it() -> None:
    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("root"):
            with tracer.start_as_current_span("guard", attributes=CHAT):
                pass
            with tracer.start_as_current_span("Agent workflow", attributes=OI_AGENT):
                with (
                    tracer.start_as_current_span("triage", attributes=OI_AGENT),
                    tracer.start_as_current_span("generation 1", attributes=OI_LLM),
                    tracer.start_as_current_span("client 1", attributes=OI_LLM),
                ):
                    pass
                with (
                    tracer.start_as_current_span("billing", attributes=OI_AGENT),  # handoff
                    tracer.start_as_current_span("generation 2", attributes=OI_LLM),
                ):
                    pass

    spans = _record(build)
    (run,) = group_runs(spans, observed=True)
    assert run.observed
    assert _names(spans, run) == ("Agent workflow", ["generation 1", "generation 2"], ["client 1"])
    # Off: no run at all.
    assert group_runs(spans) == []


def test_without_an_agent_span_the_top_span_is_the_run() -> None:
    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("handle"):
            for i in (1, 2):
                with tracer.start_as_current_span(f"chat {i}", attributes=CHAT):
                    pass
        with tracer.start_as_current_span("health"):  # no model call: no run
            pass

    spans = _record(build)
    (run,) = group_runs(spans, observed=True)
    assert _names(spans, run) == ("handle", ["chat 1", "chat 2"], [])


def test_the_agents_sdk_nested_agents_and_chains_are_one_run() -> None:
    """@openai/agents + OpenInference JS (tests/node/zero_code_agent.mjs): ``Agent workflow``
    (AGENT) → ``Agent workflow`` (CHAIN) → ``support`` (AGENT) → ``turn`` (CHAIN) × n, each with a
    ``generation`` and a tool span: one run, on the outermost agent span."""
    chain = {semconv.OPENINFERENCE_SPAN_KIND: "CHAIN"}
    tool = {semconv.OPENINFERENCE_SPAN_KIND: "TOOL"}

    def build(tracer: Tracer) -> None:
        with (
            tracer.start_as_current_span("Agent workflow", attributes=OI_AGENT),
            tracer.start_as_current_span("Agent workflow", attributes=chain),
            tracer.start_as_current_span("support", attributes=OI_AGENT),
        ):
            for turn in (1, 2, 3):
                with tracer.start_as_current_span("turn", attributes=chain):
                    with tracer.start_as_current_span(f"generation {turn}", attributes=OI_LLM):
                        pass
                    if turn < 3:
                        with tracer.start_as_current_span(f"tool {turn}", attributes=tool):
                            pass

    spans = _record(build)
    (run,) = group_runs(spans, observed=True)
    assert run.run_span is not None and run.run_span.span_id == spans[-1].span_id  # the outermost
    assert _names(spans, run) == (
        "Agent workflow",
        ["generation 1", "generation 2", "generation 3"],
        [],
    )
    assert [t.name for t in run.tools] == ["tool 1", "tool 2"]


def test_the_ai_sdk_top_span_is_the_run_and_its_model_calls_the_passes() -> None:
    """The Vercel AI SDK with no footprint code: ``ai.generateText`` (no run id, no agent span) is
    the trace's top span, so the run; its ``doGenerate`` spans are the passes, never itself."""
    op = semconv.AI_SDK_OPERATION_ID

    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("ai.generateText", attributes={op: "ai.generateText"}):
            for step in (1, 2, 3):
                with tracer.start_as_current_span(
                    f"doGenerate {step}", attributes={op: "ai.generateText.doGenerate"}
                ):
                    pass
                if step < 3:
                    with tracer.start_as_current_span(
                        f"tool {step}", attributes={op: "ai.toolCall"}
                    ):
                        pass

    spans = _record(build)
    (run,) = group_runs(spans, observed=True)
    assert _names(spans, run) == (
        "ai.generateText",
        ["doGenerate 1", "doGenerate 2", "doGenerate 3"],
        [],
    )
    assert [t.name for t in run.tools] == ["tool 1", "tool 2"]


def test_recorder_input_anywhere_in_the_trace_wins() -> None:
    def build(tracer: Tracer) -> None:
        with (
            tracer.start_as_current_span("root"),
            tracer.start_as_current_span("invoke_agent a", attributes=AGENT),
            tracer.start_as_current_span("chat", attributes=CHAT) as chat,
        ):
            chat.add_event(semconv.EV_CONTEXT_EVALUATED, {"footprint.iteration": 1})

    spans = _record(build)
    runs = group_runs(spans, observed=True)
    assert [r.observed for r in runs] == [False]


def _decided(build: Callable[[Tracer], None]) -> Any:
    (run,) = group_runs(_record(build), observed=True)
    return decide_run(run)


def _output(calls: list[tuple[str, str, dict[str, Any]]]) -> str:
    parts = [
        {"type": "tool_call", "id": cid, "name": name, "arguments": args}
        for cid, name, args in calls
    ]
    return json.dumps([{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}])


def test_a_failed_model_call_asked_for_no_tool() -> None:
    def build(tracer: Tracer) -> None:
        with (
            tracer.start_as_current_span("handle"),
            tracer.start_as_current_span("chat 1", attributes=OI_LLM) as chat,
        ):
            chat.set_status(Status(StatusCode.ERROR, "HTTP 500"))

    verdict = _decided(build)
    assert verdict.mode == "observed"
    assert "tool-calls-unrecorded" not in [r.code for r in verdict.reasons]
    assert verdict.complete


def test_one_unrecorded_pass_takes_only_what_reads_every_call() -> None:
    messages = json.dumps(
        [
            {"role": "user", "parts": [{"type": "text", "content": "status of ORD-1"}]},
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "c1", "response": "[]"}],
            },
        ]
    )

    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("handle"):
            # Pass 1: the instrumentation says it asked for tools but recorded no output.
            with tracer.start_as_current_span("chat 1", attributes=CHAT) as chat:
                chat.set_attribute(semconv.GEN_AI_RESPONSE_FINISH_REASONS, ["tool_calls"])
            with tracer.start_as_current_span("chat 2", attributes=CHAT) as chat:
                chat.set_attribute(semconv.GEN_AI_INPUT_MESSAGES, messages)
                chat.set_attribute(
                    semconv.GEN_AI_OUTPUT_MESSAGES,
                    _output([("c1", "order_status", {"order_id": "ORD-1"})]),
                )

    verdict = _decided(build)
    assert "tool-calls-unrecorded" in [r.code for r in verdict.reasons]
    assert verdict.account is not None  # the account is not taken away
    states = {c.check_id: c.state for c in verdict.account.checks}
    assert states["decided-delivered"] == "not-applicable"
    assert states["empty-results"] == "unreachable"
    assert any("pass 1" in line.text for line in verdict.account.lines)


# ── laws over random trees ───────────────────────────────────────────────────────────────────

ROLES = {
    "agent": AGENT,
    "llm": CHAT,
    "tool": {semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL},
    "plain": {},
}


@dataclass(frozen=True)
class _View:
    """A span as grouping reads it (ids, times, attributes), no SDK needed."""

    span_id: str
    parent_span_id: str | None
    attrs: tuple[tuple[str, Any], ...]
    start_time_unix_nano: int
    trace_id: str = "0" * 31 + "1"
    end_time_unix_nano: int = 0

    @property
    def name(self) -> str:
        return self.span_id

    def attribute(self, key: str) -> Any | None:
        return dict(self.attrs).get(key)

    @property
    def role(self) -> SpanRole:
        return role_of(self.attribute)

    def events(self) -> tuple[()]:
        return ()


@st.composite
def _trees(draw: st.DrawFn) -> list[_View]:
    """A trace: each span's parent is an earlier span (or none, for the first)."""
    size = draw(st.integers(1, 14))
    views: list[_View] = []
    for i in range(size):
        parent = None if i == 0 else f"{draw(st.integers(0, i - 1)):016x}"
        kind = draw(st.sampled_from(sorted(ROLES)))
        views.append(_View(f"{i:016x}", parent, tuple(ROLES[kind].items()), i))
    return views


def _ancestors(view: _View, by_id: dict[str, _View]) -> list[str]:
    out: list[str] = []
    parent = view.parent_span_id
    while parent is not None:
        out.append(parent)
        parent = by_id[parent].parent_span_id
    return out


@settings(max_examples=200, deadline=None)
@given(tree=_trees(), order=st.randoms())
def test_every_model_call_is_a_pass_of_at_most_one_run_under_its_run_span(
    tree: list[_View], order: Any
) -> None:
    by_id = {v.span_id: v for v in tree}
    runs = group_runs(tree, observed=True)
    shuffled = list(tree)
    order.shuffle(shuffled)
    # The arrival order decides nothing.
    again = group_runs(shuffled, observed=True)
    assert [(r.run_span_id, [p.span_id for p in r.passes]) for r in runs] == [
        (r.run_span_id, [p.span_id for p in r.passes]) for r in again
    ]
    seen: set[str] = set()
    agents = {v.span_id for v in tree if v.attrs == tuple(AGENT.items())}
    for run in runs:
        assert run.observed and run.passes
        run_id = run.run_span_id or ""
        # The run span is an outermost agent span, or (no agent span at all) the top span.
        above = _ancestors(by_id[run_id], by_id)
        if agents:
            assert run_id in agents and not agents & set(above)
        else:
            assert not above
        for call in (*run.passes, *run.unmarked_calls):
            assert call.span_id not in seen
            seen.add(call.span_id)
            assert call.span_id == run_id or run_id in _ancestors(by_id[call.span_id], by_id)
    # And every model call under a run span is in that run: none is lost.
    run_ids = {r.run_span_id for r in runs}
    for view in tree:
        if view.attrs == tuple(CHAT.items()):
            under = view.span_id in run_ids or run_ids & set(_ancestors(view, by_id))
            assert bool(under) == (view.span_id in seen)
