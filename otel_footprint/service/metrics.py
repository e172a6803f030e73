"""The hop's self-metrics on prometheus_client, rendered for ``/metrics`` and bridged to OTel metrics.

Each hop has its own ``CollectorRegistry`` (tests run several hops in one process); the names,
labels and help texts are declared once in :class:`HopMetrics`. The same numbers are offered to an
OpenTelemetry ``Meter`` when OTLP metrics are configured (``service.telemetry.metrics.otlp``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import prometheus_client
from prometheus_client import CollectorRegistry

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

PREFIX = "otel_footprint_"

# Only the value series: no ``_created`` timestamp beside each counter and histogram.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class Counter:
    """A monotonically increasing count (``<name>_total`` in the exposition)."""

    def __init__(
        self, registry: CollectorRegistry, name: str, help_text: str, label_names: Sequence[str]
    ) -> None:
        self.name = PREFIX + name + "_total"
        self.help = help_text
        self.label_names = tuple(label_names)
        self._registry = registry
        self._counter = prometheus_client.Counter(
            PREFIX + name, help_text, self.label_names, registry=registry
        )

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        (self._counter.labels(*labels) if labels else self._counter).inc(amount)

    def value(self, *labels: str) -> float:
        found = self._registry.get_sample_value(
            self.name, dict(zip(self.label_names, labels, strict=True))
        )
        return found or 0.0

    def items(self) -> list[tuple[tuple[str, ...], float]]:
        return [
            (tuple(sample.labels[n] for n in self.label_names), sample.value)
            for family in self._counter.collect()
            for sample in family.samples
            if sample.name == self.name
        ]


class Gauge:
    """A value that goes up and down; set directly or read from a callback at scrape time."""

    def __init__(self, registry: CollectorRegistry, name: str, help_text: str) -> None:
        self.name = PREFIX + name
        self.help = help_text
        self._gauge = prometheus_client.Gauge(self.name, help_text, registry=registry)
        self._read: Callable[[], float] | None = None

    def set(self, value: float) -> None:
        self._gauge.set(value)

    def set_reader(self, read: Callable[[], float]) -> None:
        """Read the value from ``read`` at scrape time instead of a stored number."""
        self._read = read
        self._gauge.set_function(lambda: float(read()))

    def value(self) -> float:
        if self._read is not None:
            return float(self._read())
        return next(s.value for family in self._gauge.collect() for s in family.samples)


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


class Histogram:
    """Observations in fixed buckets (in seconds)."""

    def __init__(
        self, registry: CollectorRegistry, name: str, help_text: str, buckets: Sequence[float]
    ) -> None:
        self.name = PREFIX + name
        self.help = help_text
        self._registry = registry
        self._histogram = prometheus_client.Histogram(
            self.name, help_text, buckets=tuple(buckets), registry=registry
        )
        self._listeners: list[Callable[[float], None]] = []

    def observe(self, value: float) -> None:
        self._histogram.observe(value)
        for listener in self._listeners:
            listener(value)

    @property
    def count(self) -> int:
        return int(self._registry.get_sample_value(self.name + "_count") or 0)

    @property
    def sum(self) -> float:
        return self._registry.get_sample_value(self.name + "_sum") or 0.0

    def add_listener(self, listener: Callable[[float], None]) -> None:
        self._listeners.append(listener)


class Registry:
    """Every metric of one hop, in one ``CollectorRegistry``."""

    def __init__(self) -> None:
        self.collector = CollectorRegistry(auto_describe=True)
        self._metrics: list[Counter | Gauge | Histogram] = []

    def counter(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Counter:
        metric = Counter(self.collector, name, help_text, label_names)
        self._metrics.append(metric)
        return metric

    def gauge(self, name: str, help_text: str, read: Callable[[], float] | None = None) -> Gauge:
        metric = Gauge(self.collector, name, help_text)
        if read is not None:
            metric.set_reader(read)
        self._metrics.append(metric)
        return metric

    def histogram(
        self, name: str, help_text: str, buckets: Sequence[float] = DEFAULT_SECONDS_BUCKETS
    ) -> Histogram:
        metric = Histogram(self.collector, name, help_text, buckets)
        self._metrics.append(metric)
        return metric

    def render_prometheus(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        return prometheus_client.generate_latest(self.collector).decode()

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
            else:
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
        self.served_chars_while_parked = r.counter(
            "served_chars_while_parked",
            "Shadow mode: characters that rode after the kernel would have parked them "
            "(what parking would have saved), summed over decided runs.",
        )
        self.served_passes_while_parked = r.counter(
            "served_passes_while_parked",
            "Shadow mode: passes on which some parked injection still rode, over decided runs.",
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
        self.memory_bytes = r.gauge(
            "memory_bytes",
            "Bytes counted against processing.max_bytes: runs held and releasing, the journal's "
            "outbound batches in memory, the verdict log's accounts (refused at 90%).",
        )
        self.decision_cache_traces = r.gauge(
            "decision_cache_traces",
            "Decided traces kept in the decision cache (to annotate their late spans).",
        )
        self.decision_cache_bytes = r.gauge(
            "decision_cache_bytes",
            "Memory the decision cache takes (packed notes and what it keeps of each trace, "
            "estimated): at most processing.decision_cache.max_bytes, within what the runs "
            "leave of processing.max_bytes.",
        )
        self.resident_bytes = r.gauge(
            "resident_bytes",
            "The process's resident memory as the memory backstop last read it (VmRSS).",
        )
        self.memory_limit_bytes = r.gauge(
            "memory_limit_bytes",
            "processing.memory_limit (default processing.max_bytes): resident memory past which "
            "input is refused.",
        )
        self.memory_limit_refusals = r.counter(
            "memory_limit_refusals",
            "Requests refused (RESOURCE_EXHAUSTED / 503, with a retry delay) because the "
            "process's resident memory was past processing.memory_limit.",
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
