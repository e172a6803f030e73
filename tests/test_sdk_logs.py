"""Functional: footprint events that travel as log records (the recorder's ``emit_as="log"``) are
decided in-process like span events — real TracerProvider + LoggerProvider, in-memory exporters."""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from _shared import wait_until
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

from otel_footprint import semconv as sc
from otel_footprint.annotate.form import SpanNote
from otel_footprint.codec import encode_payload
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.runs.group import is_footprint_input_event
from otel_footprint.runs.model import Reason
from otel_footprint.runs.spans import SpanEventView
from otel_footprint.sdk import FootprintLogRecordProcessor, FootprintSpanProcessor, setup
from otel_footprint.sdk.decide import make_decider

RUN_ATTRS: dict[str, AttributeValue] = {
    sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
    sc.RUN_ID: "r",
}
PASS_ATTRS: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.PASS_ITERATION: 1}
MOUNTED = encode_payload(
    {
        "maps": [{"id": "skill-map", "memberIds": ["billing"], "toolNames": []}],
        "renewalGrace": 3,
    }
)


@dataclass
class Pipeline:
    """A TracerProvider and a LoggerProvider wired by ``setup``, each with an in-memory exporter."""

    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    spans: InMemorySpanExporter
    logs: InMemoryLogRecordExporter
    processor: FootprintSpanProcessor

    @property
    def tracer(self) -> trace.Tracer:
        return self.tracer_provider.get_tracer("test")

    def record(self, scenario: str, emit_as: str = "log") -> None:
        run_script(
            self.tracer,
            SCENARIOS[scenario].script,
            emit_as=emit_as,  # type: ignore[arg-type]
            logger_provider=self.logger_provider,
        )

    def exported(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def attrs(self, name: str) -> list[dict[str, Any]]:
        return [dict(s.attributes or {}) for s in self.exported(name)]

    def emit(self, event_name: str | None, attributes: Mapping[str, Any] | None = None) -> None:
        """One log record in the current context (tied to the current span, if any)."""
        logger = self.logger_provider.get_logger("test")
        logger.emit(event_name=event_name, attributes=dict(attributes or {}))


@pytest.fixture
def pipeline() -> Iterator[Callable[..., Pipeline]]:
    made: list[Pipeline] = []

    def make(*, logs: bool = True, **options: Any) -> Pipeline:
        options.setdefault("grace_seconds", 0.02)
        options.setdefault("bsp_schedule_delay_millis", 10)
        tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
        spans = InMemorySpanExporter()
        log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        wiring: dict[str, Any] = (
            {"logger_provider": logger_provider, "log_exporter": log_exporter} if logs else {}
        )
        processor = setup(tracer_provider, spans, **wiring, **options)
        made.append(Pipeline(tracer_provider, logger_provider, spans, log_exporter, processor))
        return made[-1]

    yield make
    for p in made:
        p.processor.shutdown()
        p.logger_provider.shutdown()
        p.spans.clear()
        p.logs.clear()
    made.clear()
    # Collect now: a full collection triggered by these recordings would otherwise land inside a
    # later test's timing window (test_sdk_processor asserts within one 20 ms batch delay).
    gc.collect()


# ── comparing the annotations of two recordings of one run ─────────────────────────────────────

_HEX = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{16}\b")


def _label(span: ReadableSpan) -> str:
    attrs = span.attributes or {}
    extra = attrs.get(sc.PASS_ITERATION) if span.name.startswith("chat ") else None
    extra = attrs.get(sc.GEN_AI_TOOL_CALL_ID, extra)
    return f"{span.name}#{extra}"


def annotation_view(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Per span (by name and pass / call id): attributes, our output events and links, with every
    trace and span id written as the label of its span (two recordings have different ids)."""
    names: dict[str, str] = {}
    for span in spans:
        assert span.context is not None
        names[format(span.context.span_id, "016x")] = _label(span)
        names[format(span.context.trace_id, "032x")] = "trace"

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return _HEX.sub(lambda m: names.get(m.group(0), "?"), value)
        if isinstance(value, tuple | list):
            return tuple(clean(v) for v in value)
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items()}
        return value

    out: dict[str, Any] = {}
    for span in spans:
        events = [
            (e.name, clean(dict(e.attributes or {})))
            for e in span.events
            if not is_footprint_input_event(e.name)
        ]
        links = [
            (names.get(format(link.context.span_id, "016x")), clean(dict(link.attributes or {})))
            for link in span.links
        ]
        label = _label(span)
        assert label not in out, f"two spans labelled {label}"
        out[label] = (clean(dict(span.attributes or {})), events, links)
    return out


def passes_of(p: Pipeline) -> list[dict[str, Any]]:
    return sorted(p.attrs("chat scripted"), key=lambda a: int(a[sc.PASS_ITERATION]))


def pass_spans(p: Pipeline) -> list[ReadableSpan]:
    found = p.exported("chat scripted")
    return sorted(found, key=lambda s: str((s.attributes or {})[sc.PASS_ITERATION]).zfill(4))


# ── the stuck turn, recorded both ways ─────────────────────────────────────────────────────────


@pytest.mark.parametrize("scenario", ["stuck-verify", "stuck-shadow"])
def test_the_stuck_turn_as_log_records_is_annotated_as_with_span_events(
    pipeline: Callable[..., Pipeline], scenario: str
) -> None:
    by_spans = pipeline(logs=False)
    by_spans.record(scenario, emit_as="span")
    by_logs = pipeline()
    by_logs.record(scenario, emit_as="log")
    assert by_spans.processor.force_flush() and by_logs.processor.force_flush()

    # The log run's spans carry no input events: its decision came from the log records alone.
    assert not any(is_footprint_input_event(e.name) for s in by_logs.exported() for e in s.events)
    stats = by_logs.processor.stats()
    assert stats.runs_decided == 1 and stats.decision_errors == 0
    assert stats.log_records_held == stats.log_records_seen > 30 * 4
    assert stats.log_records_unowned == stats.log_records_late == 0

    (run,) = by_logs.attrs("invoke_agent ops-assistant")
    assert run[sc.RUN_ID] == SCENARIOS[scenario].script.run_id and run[sc.RUN_PASSES] == 30
    assert run[sc.RUN_PARKED_MAPS] == ("skill-map",)
    assert run[sc.RUN_MODE] == ("shadow" if scenario == "stuck-shadow" else "verify")
    assert sc.CHECK_DECIDED_DELIVERED in run and sc.CHECK_EXISTENCE in run
    passes = pass_spans(by_logs)
    assert len(passes) == 30
    fourth = dict(passes[3].attributes or {})
    assert fourth[sc.ENG_PARKED_MAPS] == ("skill-map",)
    parked_on = [
        i for i, s in enumerate(passes, 1) for e in s.events if e.name == sc.EV_ENGAGEMENT_PARKED
    ]
    assert parked_on == [4]
    rode = [a[sc.ENG_SERVED_WHILE_PARKED] for a in passes_of(by_logs)[3:]]
    assert rode == [("zone-audit",) if scenario == "stuck-shadow" else ()] * 27

    # And every other annotation, event and evidence link matches the span-event recording.
    assert annotation_view(by_logs.exported()) == annotation_view(by_spans.exported())


def test_log_records_go_on_to_the_log_exporter_untouched(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline()
    p.record("routed-not-delivered")
    assert p.processor.force_flush() and p.logger_provider.force_flush()
    records = [r.log_record for r in p.logs.get_finished_logs()]
    (run,) = p.exported("invoke_agent ops-assistant")
    assert run.context is not None
    assert len(records) == p.processor.stats().log_records_held == 14
    assert all(r.trace_id == run.context.trace_id for r in records)
    names = [r.event_name for r in records]
    assert names[:4] == [
        sc.EV_RUN_CONFIGURED,
        sc.EV_GRAPH_DECLARED,
        sc.EV_MAPS_MOUNTED,
        sc.EV_TURN_START,
    ]
    # Only what the recorder wrote: no annotation found its way onto a record.
    keys = {k for r in records for k in (r.attributes or {})}
    assert keys and not any(k.startswith(("footprint.run.", "footprint.engagement.")) for k in keys)


def test_events_may_come_from_spans_and_log_records_in_one_run(
    pipeline: Callable[..., Pipeline],
) -> None:
    seen: list[Mapping[str, Sequence[SpanEventView]] | None] = []
    engine = make_decider()

    def decider(
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: Mapping[str, Sequence[SpanEventView]] | None = None,
    ) -> dict[str, SpanNote]:
        seen.append(log_events)
        return engine(spans, incomplete, log_events=log_events)

    p = pipeline(decider=decider)
    with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS) as run:
        run.add_event(sc.EV_MAPS_MOUNTED, MOUNTED)
        with p.tracer.start_as_current_span("chat m", attributes=PASS_ATTRS) as model_call:
            p.emit(sc.EV_CONTEXT_EVALUATED, encode_payload({"iteration": 1, "activeIds": []}))
    assert p.processor.force_flush()
    (logs,) = seen
    assert logs is not None
    pass_id = format(model_call.get_span_context().span_id, "016x")
    assert [(e.name, e.via) for e in logs[pass_id]] == [(sc.EV_CONTEXT_EVALUATED, "log-record")]
    (attrs,) = p.attrs("chat m")
    assert attrs[sc.ENG_ENGAGED_MAPS] == () and p.attrs("invoke_agent a")[0][sc.RUN_PASSES] == 1


def test_spans_without_records_of_their_own_and_notes_on_tool_spans_match_span_events(
    pipeline: Callable[..., Pipeline],
) -> None:
    # A model call with no footprint event (held for its run's records, noted missing-evaluated)
    # and a tool span whose one event cannot be decoded (noted bad-attribute on that span).
    picked = {"footprint.skill_id": "billing", "footprint.routing": "{not json"}
    tool_attrs: dict[str, AttributeValue] = {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.GEN_AI_TOOL_NAME: "lookup",
    }

    def scene(p: Pipeline, as_log: bool) -> None:
        with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS) as run:
            if as_log:
                p.emit(sc.EV_MAPS_MOUNTED, MOUNTED)
            else:
                run.add_event(sc.EV_MAPS_MOUNTED, MOUNTED)
            with p.tracer.start_as_current_span("chat m", attributes=PASS_ATTRS):
                pass
            with p.tracer.start_as_current_span("execute_tool lookup", attributes=tool_attrs) as t:
                if as_log:
                    p.emit(sc.EV_SKILL_PICKED, picked)
                else:
                    t.add_event(sc.EV_SKILL_PICKED, picked)
        assert p.processor.force_flush()

    by_spans, by_logs = pipeline(logs=False), pipeline()
    scene(by_spans, as_log=False)
    scene(by_logs, as_log=True)
    (model_call,) = by_logs.attrs("chat m")
    (tool,) = by_logs.attrs("execute_tool lookup")
    assert model_call[sc.RUN_REASONS] == ("missing-evaluated",)
    assert tool[sc.RUN_REASONS] == ("bad-attribute",)
    stats = by_logs.processor.stats()
    assert stats.spans_annotated == 3 and stats.notes_unapplied == 0
    assert annotation_view(by_logs.exported()) == annotation_view(by_spans.exported())


def test_the_event_name_attribute_and_the_upstream_prefix_are_read(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline()
    move = {"to": "billing", "by": "entry", "witness": {"text": "bill"}}
    evaluated = encode_payload({"iteration": 1, "activeIds": ["billing"], "cursorMove": move})
    with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS):
        p.emit("agentfootprint." + sc.T_MAPS_MOUNTED, MOUNTED)
        with p.tracer.start_as_current_span("chat m", attributes=PASS_ATTRS):
            # An older log bridge: no event_name, the name in the ``event.name`` attribute.
            p.emit(None, {sc.LOG_EVENT_NAME_ATTR: sc.EV_CONTEXT_EVALUATED, **evaluated})
        assert p.processor.stats().log_records_held == 2
    assert p.processor.force_flush()
    (run,) = p.attrs("invoke_agent a")
    assert run[sc.RUN_MODE] == "shadow" and run[sc.RUN_PASSES] == 1
    (model_call,) = p.exported("chat m")
    assert (model_call.attributes or {})[sc.ENG_ENGAGED_MAPS] == ("skill-map",)
    assert [e.name for e in model_call.events] == [sc.EV_ENGAGEMENT_ENGAGED]
    assert p.processor.stats().runs_decided == 1


# ── what log records must not do ───────────────────────────────────────────────────────────────


def test_log_records_of_a_trace_with_no_run_hold_nothing(pipeline: Callable[..., Pipeline]) -> None:
    # Observed runs off: with them on, the model call's trace waits for its root as an observed
    # run (test_integrations_observed.py).
    p = pipeline(grace_seconds=30, engine_options=EngineOptions(observed=False))
    evaluated = encode_payload({"iteration": 1, "activeIds": ["billing"]})
    with p.tracer.start_as_current_span("GET /orders"):
        p.emit(sc.EV_CONTEXT_EVALUATED, evaluated)  # a span of no run
        with p.tracer.start_as_current_span("chat m", attributes=PASS_ATTRS):
            p.emit(sc.EV_CONTEXT_EVALUATED, evaluated)  # a model call of no run
    p.emit(sc.EV_MAPS_MOUNTED, MOUNTED)  # no span at all
    # The spans go on at once (no grace, no orphan wait), unannotated.
    wait_until(lambda: len(p.exported()) == 2)
    assert all(sc.RUN_REASONS not in (s.attributes or {}) for s in p.exported())
    stats = p.processor.stats()
    assert stats.held_runs == stats.held_spans == stats.held_log_records == 0
    assert stats.log_records_seen == stats.log_records_unowned == 3
    assert stats.log_records_held == stats.runs_tracked == 0
    assert p.logger_provider.force_flush() and len(p.logs.get_finished_logs()) == 3


def test_ordinary_log_records_are_only_passed_on(pipeline: Callable[..., Pipeline]) -> None:
    p = pipeline(grace_seconds=30)
    with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS):
        p.emit(None, {"http.route": "/orders"})
        p.emit("app.order.created", {"order": 7})
        p.emit("footprint.engagement.parked", {})  # our own output name, not agent input
        with p.tracer.start_as_current_span("chat m", attributes=PASS_ATTRS):
            pass
    # A run with no footprint input is handed on as it ends: the records marked nothing.
    wait_until(lambda: len(p.exported()) == 2)
    stats = p.processor.stats()
    assert stats.log_records_seen == 0 and stats.runs_without_footprint == 1
    assert p.logger_provider.force_flush() and len(p.logs.get_finished_logs()) == 3


def test_a_record_after_its_run_was_released_is_counted_late(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline()
    with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS) as run:
        p.emit(sc.EV_MAPS_MOUNTED, MOUNTED)
    wait_until(lambda: bool(p.exported("invoke_agent a")))
    with trace.use_span(run):
        p.emit(sc.EV_TURN_END, encode_payload({"finalContent": "late"}))
    stats = p.processor.stats()
    assert stats.log_records_late == 1 and stats.held_runs == 0 and stats.runs_decided == 1


def test_a_run_reaching_the_log_record_limit_is_released_with_the_reason(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline(grace_seconds=30, max_log_records_per_run=4)
    with p.tracer.start_as_current_span("invoke_agent a", attributes=RUN_ATTRS):
        p.emit(sc.EV_MAPS_MOUNTED, MOUNTED)
        for i in range(1, 3):
            attrs: dict[str, AttributeValue] = {**PASS_ATTRS, sc.PASS_ITERATION: i}
            with p.tracer.start_as_current_span("chat m", attributes=attrs):
                p.emit(sc.EV_CONTEXT_EVALUATED, encode_payload({"iteration": i}))
                p.emit(sc.EV_SLOT_COMPOSED, encode_payload({"slot": "s", "iteration": i}))
            if i == 1:
                assert p.processor.stats().held_log_records == 3
        # The fifth record (in pass 2: one past the limit) released the run: pass 1 went on marked, and pass 2,
        # ending after the release, goes on as it is (as a span past the span limit does).
        wait_until(lambda: len(p.exported("chat m")) == 2)
        first, second = sorted(p.attrs("chat m"), key=lambda a: int(a[sc.PASS_ITERATION]))
        assert first[sc.RUN_REASONS] == ("overflow",) and sc.RUN_REASONS not in second
        stats = p.processor.stats()
        assert stats.runs_log_limit == 1 and stats.held_runs == 0 and stats.spans_late == 1
        assert stats.held_log_records == 0 and stats.log_records_held == 5
        p.emit(sc.EV_TURN_END, encode_payload({"finalContent": "done"}))
    assert p.processor.stats().log_records_late == 1
    wait_until(lambda: len(p.exported()) == 3)


# ── flush, shutdown, threads, wiring ───────────────────────────────────────────────────────────


def test_force_flush_decides_runs_whose_events_are_only_log_records(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline(grace_seconds=30)
    p.record("stuck-verify")
    stats = p.processor.stats()
    assert p.exported("invoke_agent ops-assistant") == []  # held: the grace is long
    assert stats.held_runs == 1 and stats.held_log_records == stats.log_records_held > 0
    assert p.processor.force_flush(5000)
    (run,) = p.attrs("invoke_agent ops-assistant")
    assert run[sc.RUN_COMPLETE] is True and run[sc.RUN_PARKED_MAPS] == ("skill-map",)
    assert passes_of(p)[3][sc.ENG_PARKED_MAPS] == ("skill-map",)
    assert p.processor.stats().held_log_records == 0


def test_shutdown_decides_runs_in_flight_with_log_only_events(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline(grace_seconds=60)
    p.record("recovery")
    open_run = p.tracer.start_span("invoke_agent open", attributes=RUN_ATTRS)
    with trace.use_span(open_run):
        p.emit(sc.EV_MAPS_MOUNTED, MOUNTED)
        with p.tracer.start_as_current_span("chat m", attributes=PASS_ATTRS):
            p.emit(sc.EV_CONTEXT_EVALUATED, encode_payload({"iteration": 1}))
    # Nothing that takes a note has left; tool spans are evidence and go on at once (the batch
    # processor may export them before this line, so they are not asserted either way).
    assert all(
        (s.attributes or {}).get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL
        for s in p.exported()
    )
    p.processor.shutdown()
    (run,) = p.attrs("invoke_agent ops-assistant")
    assert run[sc.RUN_ID] == "recovery-explicit-pick" and run[sc.RUN_PASSES] == 5
    assert run[sc.RUN_PARKED_MAPS] == ("skill-map",)
    # The open run had log records only: held, then released at shutdown, marked.
    (opened,) = p.attrs("chat m")
    assert opened[sc.RUN_REASONS] == ("no-run-span", "flush")
    with trace.use_span(open_run):
        p.emit(sc.EV_TURN_END, encode_payload({"finalContent": "after"}))
    assert p.processor.stats().log_records_after_shutdown == 1
    open_run.end()


def test_runs_logged_from_several_threads_are_all_decided(
    pipeline: Callable[..., Pipeline],
) -> None:
    p = pipeline(grace_seconds=0.01)
    errors: list[BaseException] = []

    def agent() -> None:
        try:
            for _ in range(3):
                p.record("routed-not-delivered")
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=agent) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and p.processor.force_flush(10_000)
    runs = p.attrs("invoke_agent ops-assistant")
    assert len(runs) == 12
    assert all(r[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "not-delivered" for r in runs)
    stats = p.processor.stats()
    assert stats.runs_decided == 12 and stats.log_records_held == 12 * 14
    assert stats.held_runs == 0 and stats.decision_errors == 0


def test_runs_of_log_records_are_counted_in_the_metrics(pipeline: Callable[..., Pipeline]) -> None:
    reader = InMemoryMetricReader()
    p = pipeline(meter_provider=MeterProvider(metric_readers=[reader]))
    p.record("routed-delivered")
    p.emit(sc.EV_MAPS_MOUNTED, MOUNTED)  # no span: unowned
    assert p.processor.force_flush()
    points: dict[tuple[str, Any], Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    outcome = (point.attributes or {}).get(sc.METRIC_ATTR_OUTCOME)
                    points[(metric.name, outcome)] = point.value  # type: ignore[union-attr]
    assert points[(sc.METRIC_PROCESSOR_RUNS, "decided")] == 1
    assert points[(sc.METRIC_PROCESSOR_RUNS, "log-limit")] == 0
    assert points[(sc.METRIC_PROCESSOR_SPANS, "annotated")] == 3
    # Log-record counts have no instrument of their own yet: stats() carries them.
    stats = p.processor.stats()
    assert stats.log_records_held == 14 and stats.log_records_unowned == 1


def test_a_log_record_processor_without_an_exporter_only_reads() -> None:
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    spans = InMemorySpanExporter()
    processor = setup(tracer_provider, spans, logger_provider=logger_provider, grace_seconds=0.01)
    try:
        run_script(
            tracer_provider.get_tracer("t"),
            SCENARIOS["routed-delivered"].script,
            emit_as="log",
            logger_provider=logger_provider,
        )
        assert processor.force_flush() and logger_provider.force_flush()
        (run,) = [s for s in spans.get_finished_spans() if s.name.startswith("invoke_agent")]
        assert (run.attributes or {})[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "delivered"
        paired = FootprintLogRecordProcessor(processor)
        assert paired.force_flush() is True
        paired.shutdown()
    finally:
        processor.shutdown()
        logger_provider.shutdown()


def test_a_log_exporter_needs_a_logger_provider() -> None:
    provider = TracerProvider()
    with pytest.raises(ValueError, match="logger_provider"):
        log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        setup(provider, InMemorySpanExporter(), log_exporter=log_exporter)
    # refused before anything was wired: the provider has no footprint processor
    assert not provider._active_span_processor._span_processors


def test_a_zero_log_record_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_log_records_per_run"):
        FootprintSpanProcessor(InMemorySpanExporter(), max_log_records_per_run=0)
