"""Self-metrics through the OpenTelemetry metrics API: :func:`observe` for both delivery paths.

Every instrument is a row of ``semconv``'s table (name, kind, unit, attribute keys, description).
The in-process path registers its rows on the application's MeterProvider, read from the run
buffer's ``stats()`` at collection; the hop (``service/metrics.py``) registers its rows the same way
on its own MeterProvider. Nothing here needs more than ``opentelemetry-api``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry.metrics import Meter, MeterProvider, Observation

from otel_footprint import semconv

if TYPE_CHECKING:  # sdk/decide imports the Counter below; the buffer imports sdk/decide
    from otel_footprint.sdk.buffer import BufferStats

# BufferStats field -> its footprint.outcome value
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


def observe(
    meter: Meter, metric: semconv.Metric, read: Callable[[], Iterable[Observation]]
) -> None:
    """Register a counter or gauge row of the table as an observable instrument read by ``read``."""
    create = (
        meter.create_observable_counter
        if metric.kind == "counter"
        else meter.create_observable_gauge
    )
    create(metric.name, [lambda _options: read()], metric.unit, metric.description)


class Counter:
    """A count per attribute-value tuple, observed as an OpenTelemetry counter.

    Kept here and observed at collection: an increment is a dict update under a lock (about 0.5 µs,
    against 3 to 5 µs for the SDK's synchronous ``Counter.add``), and a count stays readable in tests.
    """

    def __init__(self, meter: Meter, metric: semconv.Metric) -> None:
        self.metric = metric
        # An unlabelled counter is exposed (as 0) from the start, as Prometheus clients do.
        self._counts: dict[tuple[str, ...], float] = {} if metric.attributes else {(): 0.0}
        self._lock = threading.Lock()
        observe(meter, metric, self._observations)

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        if amount < 0 or len(labels) != len(self.metric.attributes):
            raise ValueError(f"{self.metric.name}: inc({amount}, {labels}) cannot count")
        with self._lock:
            self._counts[labels] = self._counts.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._counts.get(labels, 0.0)

    def _observations(self) -> list[Observation]:
        with self._lock:
            counts = list(self._counts.items())
        keys = self.metric.attributes
        return [
            Observation(value, dict(zip(keys, labels, strict=True))) for labels, value in counts
        ]


def register_metrics(
    meter_provider: MeterProvider, stats: Callable[[], BufferStats], component: str
) -> None:
    """Observable counters (spans, runs by outcome) and gauges (held runs/spans) for one buffer."""
    meter = meter_provider.get_meter("otel_footprint.sdk")
    base = {semconv.METRIC_ATTR_COMPONENT: component}

    def outcomes(table: dict[str, str]) -> Callable[[], list[Observation]]:
        def read() -> list[Observation]:
            values = stats().as_dict()
            return [
                Observation(values[key], {**base, semconv.METRIC_ATTR_OUTCOME: outcome})
                for key, outcome in table.items()
            ]

        return read

    def held(key: str) -> Callable[[], list[Observation]]:
        return lambda: [Observation(stats().as_dict()[key], base)]

    observe(meter, semconv.PROCESSOR_SPANS, outcomes(_SPAN_OUTCOMES))
    observe(meter, semconv.PROCESSOR_RUNS, outcomes(_RUN_OUTCOMES))
    observe(meter, semconv.PROCESSOR_HELD_RUNS, held("held_runs"))
    observe(meter, semconv.PROCESSOR_HELD_SPANS, held("held_spans"))
