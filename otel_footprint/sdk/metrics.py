"""The run buffer's counters as OpenTelemetry metrics (observable instruments read from stats())."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from otel_footprint import semconv
from otel_footprint.sdk.buffer import BufferStats

# Counter name -> (instrument, outcome attribute value)
_SPAN_OUTCOMES = {
    "spans_passed": "passed",
    "spans_held": "held",
    "spans_late": "late",
    "spans_annotated": "annotated",
    "spans_after_shutdown": "after-shutdown",
}
_RUN_OUTCOMES = {
    "runs_decided": "decided",
    "runs_without_footprint": "no-footprint",
    "runs_timed_out": "timeout",
    "runs_flushed_open": "flushed-open",
    "runs_overflowed": "overflow",
    "runs_span_limit": "span-limit",
    "runs_log_limit": "log-limit",
    "runs_released_raw": "released-raw",
    "decision_errors": "error",
}


def register_metrics(
    meter_provider: MeterProvider, stats: Callable[[], BufferStats], component: str
) -> None:
    """Observable counters (spans, runs by outcome) and gauges (held runs/spans) for one buffer."""
    meter = meter_provider.get_meter("otel_footprint.sdk")
    base = {semconv.METRIC_ATTR_COMPONENT: component}

    def outcomes(table: dict[str, str]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            values = stats().as_dict()
            return [
                Observation(values[key], {**base, semconv.METRIC_ATTR_OUTCOME: outcome})
                for key, outcome in table.items()
            ]

        return callback

    def gauge(key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(stats().as_dict()[key], base)]

        return callback

    meter.create_observable_counter(
        semconv.METRIC_PROCESSOR_SPANS, [outcomes(_SPAN_OUTCOMES)], unit="{span}"
    )
    meter.create_observable_counter(
        semconv.METRIC_PROCESSOR_RUNS, [outcomes(_RUN_OUTCOMES)], unit="{run}"
    )
    meter.create_observable_gauge(
        semconv.METRIC_PROCESSOR_HELD_RUNS, [gauge("held_runs")], unit="{run}"
    )
    meter.create_observable_gauge(
        semconv.METRIC_PROCESSOR_HELD_SPANS, [gauge("held_spans")], unit="{span}"
    )
