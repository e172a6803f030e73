"""The hop's self-metrics: one small registry, rendered as Prometheus text and bridged to OTel metrics.

The Prometheus exposition is written here (it is a few lines of text) so the hop needs no client
library; the same numbers are offered to an OpenTelemetry ``Meter`` when OTLP metrics are configured.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

LabelValues = tuple[str, ...]

PREFIX = "otel_footprint_"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: LabelValues, extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        self.name = PREFIX + name
        self.help = help_text
        self.label_names = tuple(label_names)
        self._lock = threading.Lock()

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        lines.extend(self._samples())
        return lines

    def _samples(self) -> list[str]:  # pragma: no cover - overridden
        return []


_M = TypeVar("_M", bound=_Metric)


class Counter(_Metric):
    """A monotonically increasing count (``_total`` in the exposition)."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name + "_total", help_text, label_names)
        self._values: dict[LabelValues, float] = {}
        if not label_names:
            self._values[()] = 0.0

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot decrease")
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def items(self) -> list[tuple[LabelValues, float]]:
        with self._lock:
            return sorted(self._values.items())

    def _samples(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, lv)} {_format_number(v)}"
            for lv, v in self.items()
        ]


class Gauge(_Metric):
    """A value that goes up and down; either set directly or read from a callback at scrape time."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_text: str,
        read: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(name, help_text)
        self._read = read
        self._value = 0.0

    def set(self, value: float) -> None:
        self._value = value

    def set_reader(self, read: Callable[[], float]) -> None:
        """Read the value from ``read`` at scrape time instead of a stored number."""
        self._read = read

    def value(self) -> float:
        return float(self._read()) if self._read is not None else self._value

    def _samples(self) -> list[str]:
        return [f"{self.name} {_format_number(self.value())}"]


DEFAULT_SECONDS_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class Histogram(_Metric):
    """Observations in fixed buckets (cumulative in the exposition, as Prometheus expects)."""

    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, buckets: Sequence[float] = DEFAULT_SECONDS_BUCKETS
    ) -> None:
        super().__init__(name, help_text)
        self.buckets = tuple(sorted(buckets))
        self._counts = [0] * (len(self.buckets) + 1)
        self._sum = 0.0
        self._count = 0
        self._listeners: list[Callable[[float], None]] = []

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.buckets, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value
            self._count += 1
        for listener in self._listeners:
            listener(value)

    @property
    def count(self) -> int:
        return self._count

    @property
    def sum(self) -> float:
        return self._sum

    def add_listener(self, listener: Callable[[float], None]) -> None:
        self._listeners.append(listener)

    def _samples(self) -> list[str]:
        with self._lock:
            counts, total, count = list(self._counts), self._sum, self._count
        lines: list[str] = []
        running = 0
        for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
            running += n
            lines.append(f'{self.name}_bucket{{le="{_format_number(bound)}"}} {running}')
        lines.append(f"{self.name}_sum {_format_number(total)}")
        lines.append(f"{self.name}_count {count}")
        return lines


class Registry:
    """Every metric of one hop, in registration order."""

    def __init__(self) -> None:
        self._metrics: list[_Metric] = []

    def counter(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help_text, label_names))

    def gauge(self, name: str, help_text: str, read: Callable[[], float] | None = None) -> Gauge:
        return self._add(Gauge(name, help_text, read))

    def histogram(
        self, name: str, help_text: str, buckets: Sequence[float] = DEFAULT_SECONDS_BUCKETS
    ) -> Histogram:
        return self._add(Histogram(name, help_text, buckets))

    def _add(self, metric: _M) -> _M:
        if any(m.name == metric.name for m in self._metrics):
            raise ValueError(f"metric {metric.name} registered twice")
        self._metrics.append(metric)
        return metric

    def metrics(self) -> list[_Metric]:
        return list(self._metrics)

    def render_prometheus(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        lines: list[str] = []
        for metric in self._metrics:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"

    def bind_otel(self, meter: Meter) -> None:
        """Offer every metric to an OpenTelemetry meter (observable counters/gauges, histograms)."""
        for metric in self._metrics:
            otel_name = metric.name.removeprefix(PREFIX).replace("_", ".")
            otel_name = "otel_footprint." + otel_name.removesuffix(".total")
            if isinstance(metric, Counter):
                meter.create_observable_counter(
                    otel_name, callbacks=[_counter_callback(metric)], description=metric.help
                )
            elif isinstance(metric, Gauge):
                meter.create_observable_gauge(
                    otel_name, callbacks=[_gauge_callback(metric)], description=metric.help
                )
            elif isinstance(metric, Histogram):
                instrument = meter.create_histogram(otel_name, unit="s", description=metric.help)
                metric.add_listener(instrument.record)


def _counter_callback(metric: Counter) -> Callable[[CallbackOptions], Iterable[Observation]]:
    from opentelemetry.metrics import Observation

    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        out: list[Observation] = []
        for labels, value in metric.items():
            attrs: dict[str, Any] = dict(zip(metric.label_names, labels, strict=True))
            out.append(Observation(value, attrs))
        return out

    return callback


def _gauge_callback(metric: Gauge) -> Callable[[CallbackOptions], Iterable[Observation]]:
    from opentelemetry.metrics import Observation

    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(metric.value())]

    return callback


class HopMetrics:
    """The hop's named metrics (one instance per process)."""

    def __init__(self) -> None:
        r = self.registry = Registry()
        self.spans_received = r.counter(
            "spans_received", "Spans accepted by a receiver.", ("transport",)
        )
        self.log_records_received = r.counter(
            "log_records_received", "Log records accepted by a receiver.", ("transport",)
        )
        self.requests_rejected = r.counter(
            "requests_rejected", "Export requests refused, by reason.", ("transport", "reason")
        )
        self.spans_passed_through = r.counter(
            "spans_passed_through", "Spans forwarded at once (they belong to no agent run)."
        )
        self.spans_annotated = r.counter("spans_annotated", "Spans that received annotations.")
        self.late_spans = r.counter(
            "late_spans", "Spans of an already-decided run, annotated from the decision cache."
        )
        self.spans_forwarded = r.counter("spans_forwarded", "Spans accepted by the next hop.")
        self.log_records_forwarded = r.counter(
            "log_records_forwarded", "Log records accepted by the next hop."
        )
        self.forward_retries = r.counter(
            "forward_retries", "Forward attempts that will be retried."
        )
        self.forward_failed = r.counter(
            "forward_failed", "Batches the next hop refused permanently (not retried).", ("signal",)
        )
        self.forward_splits = r.counter(
            "forward_splits", "Requests split because they exceeded the forward request size."
        )
        self.dead_lettered = r.counter(
            "dead_lettered",
            "Spans or log records the next hop can never take, set aside in the dead-letter file.",
            ("signal",),
        )
        self.dead_letter_dropped = r.counter(
            "dead_letter_dropped",
            "Spans or log records that could not be delivered and found the dead-letter file full.",
            ("signal",),
        )
        self.spans_rejected_downstream = r.counter(
            "spans_rejected_downstream",
            "Spans the next hop reported as rejected (partial success).",
        )
        self.runs_released = r.counter(
            "runs_released", "Runs released from the buffer, by cause.", ("cause",)
        )
        self.runs_released_timeout = r.counter(
            "runs_released_timeout", "Runs released because the wait bound passed (complete=false)."
        )
        self.runs_released_overflow = r.counter(
            "runs_released_overflow",
            "Runs released unannotated because a limit was hit.",
            ("limit",),
        )
        self.decision_errors = r.counter(
            "decision_errors", "Runs whose decision raised; forwarded unannotated with the reason."
        )
        self.decision_latency = r.histogram(
            "decision_latency_seconds", "Time to decide and annotate one released trace."
        )
        self.release_delay = r.histogram(
            "release_delay_seconds",
            "From the run span's arrival to its spans being queued for forwarding.",
            (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0),
        )
        self.runs_held = r.gauge("runs_held", "Runs currently held in the run buffer.")
        self.spans_held = r.gauge("spans_held", "Spans currently held in the run buffer.")
        self.bytes_held = r.gauge("bytes_held", "Wire bytes of the spans held in the run buffer.")
        self.decision_cache_traces = r.gauge(
            "decision_cache_traces",
            "Decided traces kept in the decision cache (to annotate their late spans).",
        )
        self.queue_bytes = r.gauge(
            "queue_bytes", "Bytes of pending records in the disk journal (held input and outbound)."
        )
        self.queue_disk_bytes = r.gauge(
            "queue_disk_bytes",
            "Bytes the disk journal's segment files take (pending records plus finished ones not "
            "yet reclaimed; compaction keeps it near queue_bytes).",
        )
        self.queue_batches = r.gauge(
            "queue_batches", "Batches waiting in the disk queue to be forwarded."
        )
        self.spans_queued = r.counter(
            "spans_queued", "Spans written to the disk queue for forwarding."
        )
        self.phoenix_annotations_posted = r.counter(
            "phoenix_annotations_posted", "Check results Phoenix accepted as span annotations."
        )
        self.phoenix_annotations_failed = r.counter(
            "phoenix_annotations_failed",
            "Span annotations Phoenix refused, or that could not be delivered after retries.",
        )
        self.phoenix_annotations_dropped = r.counter(
            "phoenix_annotations_dropped",
            "Span annotations not attempted: queue full, spans not forwarded, or shutdown.",
            ("reason",),
        )
        self.phoenix_annotations_pending = r.gauge(
            "phoenix_annotations_pending",
            "Span annotations waiting for their spans to be forwarded or to be posted.",
        )
