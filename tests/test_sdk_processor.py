"""Functional: FootprintSpanProcessor — pass-through, grace, timeout, overflow, late spans, flush,
shutdown, concurrency, metrics — on a real TracerProvider and the real engine."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from _shared import wait_until
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.annotate.form import SpanNote
from otel_footprint.codec import encode_payload
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.runs.model import Reason
from otel_footprint.runs.recognize import ROLE_KEYS, SpanRole
from otel_footprint.sdk import FootprintSpanProcessor, setup
from otel_footprint.sdk.buffer import is_run_span, span_role

RUN_ATTRS = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.RUN_ID: "r"}


class Pipeline:
    def __init__(self, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        options.setdefault("grace_seconds", 0.05)
        options.setdefault("bsp_schedule_delay_millis", 20)
        self.processor = FootprintSpanProcessor(self.exporter, **options)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("test")

    def exported(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]

    def attrs(self, name: str) -> list[dict[str, Any]]:
        return [dict(s.attributes or {}) for s in self.exported(name)]


@pytest.fixture
def pipeline() -> Any:
    made: list[Pipeline] = []

    def make(**options: Any) -> Pipeline:
        made.append(Pipeline(**options))
        return made[-1]

    yield make
    for p in made:
        p.processor.shutdown()


def _pass_span(tracer: trace.Tracer, iteration: int, footprint: bool = True) -> None:
    attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.PASS_ITERATION: iteration}
    with tracer.start_as_current_span("chat m", attributes=attrs) as span:
        if footprint:
            span.add_event(sc.EV_CONTEXT_EVALUATED, encode_payload({"iteration": iteration}))


def test_spans_of_no_run_go_on_without_waiting_for_held_runs(pipeline: Any) -> None:
    p = pipeline(grace_seconds=30)
    run = p.tracer.start_span("invoke_agent a", attributes=RUN_ATTRS)
    with trace.use_span(run):
        _pass_span(p.tracer, 1)
    with p.tracer.start_as_current_span("GET /health"):
        pass
    wait_until(lambda: bool(p.exported("GET /health")))
    assert p.exported("chat m") == []  # still held: its run has not ended
    stats = p.processor.stats()
    assert stats.held_runs == 1 and stats.spans_held == 1 and stats.spans_passed == 1
    assert p.exported("GET /health")[0].attributes == {}
    run.end()


def test_run_is_decided_grace_after_its_run_span_ends(pipeline: Any) -> None:
    p = pipeline(grace_seconds=0.05)
    run_script(p.tracer, SCENARIOS["routed-delivered"].script)
    wait_until(lambda: bool(p.exported("invoke_agent ops-assistant")))
    (run,) = p.attrs("invoke_agent ops-assistant")
    assert run[sc.RUN_ID] == "routed-delivered" and run[sc.RUN_PASSES] == 2
    assert run[sc.RUN_COMPLETE] is True and run[sc.RUN_MODE] == "shadow"
    assert [a[sc.PASS_ITERATION] for a in p.attrs("chat scripted")] == [1, 2]
    assert all(sc.ENG_ENGAGED_MAPS in a for a in p.attrs("chat scripted"))
    stats = p.processor.stats()
    assert stats.runs_decided == 1 and stats.spans_annotated == 3 and stats.held_runs == 0
    # tool spans are evidence, handed on at once and never copied
    assert stats.spans_passed == 1


def test_late_child_within_grace_is_evidence_and_after_release_is_counted_late(
    pipeline: Any,
) -> None:
    seen: list[list[str]] = []

    def decider(spans: Sequence[ReadableSpan], incomplete: Reason | None) -> dict[str, SpanNote]:
        seen.append([s.name for s in spans])
        return {}

    p = pipeline(grace_seconds=0.3, decider=decider)
    run = p.tracer.start_span("invoke_agent a", attributes=RUN_ATTRS)
    context = trace.set_span_in_context(run)
    with trace.use_span(run):
        _pass_span(p.tracer, 1)
    run.end()
    # A child that ends after its run span, within the grace: part of the decision.
    p.tracer.start_span("execute_tool t", context, {sc.GEN_AI_OPERATION_NAME: "execute_tool"}).end()
    wait_until(lambda: bool(seen))
    assert seen == [["chat m", "invoke_agent a", "execute_tool t"]]
    # After the run was decided, a straggler goes on as it is and is counted.
    p.tracer.start_span(
        "execute_tool late", context, {sc.GEN_AI_OPERATION_NAME: "execute_tool"}
    ).end()
    wait_until(lambda: bool(p.exported("execute_tool late")))
    assert p.processor.stats().spans_late == 1


def test_a_run_still_open_at_max_wait_is_released_incomplete(pipeline: Any) -> None:
    p = pipeline(grace_seconds=0.05, max_wait_seconds=0.3)
    run = p.tracer.start_span("invoke_agent a", attributes=RUN_ATTRS)
    with trace.use_span(run):
        _pass_span(p.tracer, 1)
        _pass_span(p.tracer, 2)
    wait_until(lambda: len(p.exported("chat m")) == 2)
    for attrs in p.attrs("chat m"):
        # the run span never ended, so the passes have no run to belong to yet: both reasons
        assert attrs[sc.RUN_REASONS] == ("no-run-span", "timeout")
    assert p.processor.stats().runs_timed_out == 1
    run.end()
    assert p.processor.force_flush()
    assert len(p.exported("invoke_agent a")) == 1


def test_overflow_releases_the_oldest_run_unannotated_with_the_reason(pipeline: Any) -> None:
    p = pipeline(grace_seconds=30, max_runs=2)
    runs = [p.tracer.start_span(f"invoke_agent {i}", attributes=RUN_ATTRS) for i in range(2)]
    with trace.use_span(runs[0]):
        _pass_span(p.tracer, 1)
    runs.append(p.tracer.start_span("invoke_agent 2", attributes=RUN_ATTRS))  # evicts run 0
    wait_until(lambda: bool(p.exported("chat m")))
    (released,) = p.attrs("chat m")
    assert released[sc.RUN_REASONS] == ("overflow",)
    stats = p.processor.stats()
    assert stats.runs_overflowed == 1 and stats.held_runs == 2
    runs[0].end()  # its run span arrives after the release: it opens a run of its own
    for run in runs[1:]:
        run.end()
    assert p.processor.force_flush()
    assert len(p.exported()) == 4 and p.processor.stats().held_runs == 0


def test_a_run_reaching_the_span_limit_is_released_with_the_reason(pipeline: Any) -> None:
    p = pipeline(grace_seconds=30, max_spans_per_run=3)
    run = p.tracer.start_span("invoke_agent a", attributes=RUN_ATTRS)
    with trace.use_span(run):
        for i in range(1, 5):  # the fourth span is one past the limit
            _pass_span(p.tracer, i)
    wait_until(lambda: len(p.exported("chat m")) == 4)
    assert all(a[sc.RUN_REASONS] == ("overflow",) for a in p.attrs("chat m"))
    assert p.processor.stats().runs_span_limit == 1
    run.end()


def test_force_flush_releases_held_runs_open_ones_marked(pipeline: Any) -> None:
    p = pipeline(grace_seconds=30)
    run_script(p.tracer, SCENARIOS["recovery"].script)
    open_run = p.tracer.start_span("invoke_agent open", attributes=RUN_ATTRS)
    with trace.use_span(open_run):
        _pass_span(p.tracer, 1)
    assert p.exported("invoke_agent ops-assistant") == []
    assert p.processor.force_flush(5000)
    (done,) = p.attrs("invoke_agent ops-assistant")
    assert done[sc.RUN_COMPLETE] is True  # its run span had ended: a normal decision
    opened = p.attrs("chat m")
    assert opened[0][sc.RUN_REASONS] == ("no-run-span", "flush")
    assert p.processor.stats().runs_flushed_open == 1
    open_run.end()


def test_shutdown_exports_runs_in_flight_then_refuses_spans(pipeline: Any) -> None:
    p = pipeline(grace_seconds=60)
    run_script(p.tracer, SCENARIOS["stuck-verify"].script)
    # Tool spans are passed on at once (they only serve as evidence); the run and its passes are
    # held until the grace ends, which shutdown must not wait for.
    held_roles = {"invoke_agent", "chat"}
    assert not [
        s for s in p.exported() if (s.attributes or {}).get(sc.GEN_AI_OPERATION_NAME) in held_roles
    ]
    p.processor.shutdown()
    (run,) = p.attrs("invoke_agent ops-assistant")
    assert run[sc.RUN_PARKED_MAPS] == ("skill-map",) and run[sc.RUN_PASSES] == 30
    assert len(p.exported()) == 1 + 30 + 29
    with p.tracer.start_as_current_span("after"):
        pass
    assert p.processor.stats().spans_after_shutdown == 1


def test_runs_from_several_threads_are_all_decided(pipeline: Any) -> None:
    p = pipeline(grace_seconds=0.02)
    errors: list[BaseException] = []

    def agent() -> None:
        try:
            for _ in range(4):
                run_script(p.tracer, SCENARIOS["routed-not-delivered"].script)
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=agent) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert p.processor.force_flush(10_000)
    runs = p.attrs("invoke_agent ops-assistant")
    assert len(runs) == 24 and all(r[sc.RUN_PASSES] == 2 for r in runs)
    assert len({s.context.trace_id for s in p.exported()}) == 24  # type: ignore[union-attr]
    assert len(p.exported()) == 24 * 4
    stats = p.processor.stats()
    assert stats.runs_decided == 24 and stats.held_runs == 0 and stats.decision_errors == 0


def test_a_failing_decision_lets_spans_through_with_the_reason(pipeline: Any) -> None:
    def decider(spans: Sequence[ReadableSpan], incomplete: Reason | None) -> dict[str, SpanNote]:
        raise RuntimeError("bug")

    p = pipeline(decider=decider)
    run_script(p.tracer, SCENARIOS["routed-delivered"].script)
    assert p.processor.force_flush()
    (run,) = p.attrs("invoke_agent ops-assistant")
    assert run[sc.RUN_REASONS] == ("decision-error",) and run[sc.RUN_COMPLETE] is False
    assert p.processor.stats().decision_errors == 1


def test_a_run_without_footprint_events_is_not_decided_nor_copied(pipeline: Any) -> None:
    calls: list[int] = []

    def decider(spans: Sequence[ReadableSpan], incomplete: Reason | None) -> dict[str, SpanNote]:
        calls.append(len(spans))
        return {}

    p = pipeline(decider=decider, grace_seconds=30)
    with p.tracer.start_as_current_span("invoke_agent plain", attributes=RUN_ATTRS):
        _pass_span(p.tracer, 1, footprint=False)
    # nothing to decide: no grace wait, nothing held
    wait_until(lambda: len(p.exported()) == 2)
    stats = p.processor.stats()
    assert stats.held_runs == 0 and stats.spans_held == 0
    assert calls == [] and stats.runs_without_footprint == 1
    assert len(p.exported()) == 2
    assert not any(
        k.startswith("footprint.run.c") for s in p.exported() for k in s.attributes or {}
    )


def test_counters_are_exported_as_metrics(pipeline: Any) -> None:
    reader = InMemoryMetricReader()
    p = pipeline(meter_provider=MeterProvider(metric_readers=[reader]))
    run_script(p.tracer, SCENARIOS["routed-delivered"].script)
    assert p.processor.force_flush()
    data = reader.get_metrics_data()
    points: dict[tuple[str, str | None], int] = {}
    for resource in data.resource_metrics:  # type: ignore[union-attr]
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    outcome = (
                        point.attributes.get(sc.METRIC_ATTR_OUTCOME) if point.attributes else None
                    )
                    points[(metric.name, outcome)] = point.value  # type: ignore[union-attr]
    assert points[(sc.METRIC_PROCESSOR_RUNS, "decided")] == 1
    assert points[(sc.METRIC_PROCESSOR_SPANS, "annotated")] == 3
    assert points[(sc.METRIC_PROCESSOR_HELD_RUNS, None)] == 0


def test_setup_adds_the_processor_to_a_given_provider() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    processor = setup(provider, exporter, grace_seconds=0.01)
    try:
        run_script(provider.get_tracer("t"), SCENARIOS["routed-delivered"].script)
        assert processor.force_flush()
        assert any(sc.RUN_MODE in (s.attributes or {}) for s in exporter.get_finished_spans())
    finally:
        processor.shutdown()


@pytest.mark.parametrize("kwargs", [{"max_runs": 0}, {"grace_seconds": -1}])
def test_bad_bounds_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        FootprintSpanProcessor(InMemorySpanExporter(), **kwargs)


def test_role_prefilter_covers_every_attribute_role_of_reads() -> None:
    from otel_footprint.runs.recognize import ROLE_KEYS, role_of

    asked: list[str] = []

    def nothing(key: str) -> None:
        asked.append(key)

    role_of(nothing)
    assert asked and set(asked) <= ROLE_KEYS


_ROLE_VALUES = st.one_of(
    st.sampled_from(
        [
            sc.OP_INVOKE_AGENT,
            sc.OP_CHAT,
            sc.OP_EXECUTE_TOOL,
            "AGENT",
            "agent",
            "LLM",
            "TOOL",
            "chat",
            "r1",
            "",
        ]
    ),
    st.integers(-2, 2),
    st.lists(st.text(max_size=3), max_size=2),
)


_TRACER = TracerProvider().get_tracer("roles")


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(ROLE_KEYS)), _ROLE_VALUES))
def test_the_run_span_shortcut_agrees_with_the_role(attributes: dict[str, Any]) -> None:
    """``on_start``'s one-lookup test gives ``span_role``'s answer on every mix of role keys."""
    span = _TRACER.start_span("s", attributes=attributes)
    assert is_run_span(span) == (span_role(span) is SpanRole.RUN)
    span.end()


def test_memory_stays_bounded_under_a_stream_of_runs(pipeline: Any) -> None:
    p = pipeline(grace_seconds=60, max_runs=4)
    for i in range(300):
        with p.tracer.start_as_current_span(f"invoke_agent {i}", attributes=RUN_ATTRS):
            _pass_span(p.tracer, 1)
    wait_until(lambda: len(p.exported("chat m")) == 296)
    stats = p.processor.stats()
    released = stats.runs_overflowed + stats.runs_released_raw
    assert stats.held_runs == 4 and released + stats.held_runs == 300
    assert all(a[sc.RUN_REASONS] == ("overflow",) for a in p.attrs("chat m"))
    buffer = p.processor._buffer  # the bounds are internal: read them directly
    assert len(buffer._core._heap) <= 4 * 4 + 64 + 2
    assert p.processor.force_flush()
    assert len(p.exported()) == 600


def test_model_calls_wait_when_only_their_live_run_span_carries_footprint_events(
    pipeline: Any,
) -> None:
    def decider(spans: Sequence[ReadableSpan], incomplete: Reason | None) -> dict[str, SpanNote]:
        return {f"{s.context.span_id:016x}": SpanNote((("noted", True),)) for s in spans}  # type: ignore[union-attr]

    p = pipeline(decider=decider)
    with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS) as run:
        run.add_event(sc.EV_MAPS_MOUNTED, encode_payload({"maps": [], "renewalGrace": 3}))
        _pass_span(p.tracer, 1, footprint=False)
    assert p.processor.force_flush()
    assert [a.get("noted") for a in p.attrs("chat m")] == [True]
    assert [a.get("noted") for a in p.attrs("invoke_agent a")] == [True]
