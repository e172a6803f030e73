"""The hop's self-metrics: the ``HOP_*`` rows of semconv's table on the hop's own MeterProvider.

Its readers are the Prometheus exposition served on ``/metrics`` (opentelemetry-exporter-prometheus,
on a ``CollectorRegistry`` of this hop's own: tests run several hops in one process) and, when
``service.telemetry.metrics.otlp`` is set, a periodic OTLP push: one set of instruments, two exports.

Counters are ``sdk/metrics.Counter`` (counts kept in a dict, observed at collection: the hop counts
several times per request), the verdict rows ``sdk/verdict_metrics.VerdictMetrics``, as in-process.
Gauges read their source at collection; the two histograms are the SDK's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import prometheus_client
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Histogram, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader as Periodic
from opentelemetry.sdk.resources import Resource

from otel_footprint import semconv as sc
from otel_footprint.sdk.metrics import Counter, observe
from otel_footprint.sdk.settings import OtlpMetricsSettings
from otel_footprint.sdk.verdict_metrics import DEFAULT_MAX_NAMES, VerdictMetrics


class Gauge:
    """A value read from its source (``set_reader``) at collection."""

    def __init__(self, meter: Meter, metric: sc.Metric) -> None:
        self._read: Callable[[], float] = lambda: 0.0
        observe(meter, metric, lambda: [Observation(self.value())])

    def set_reader(self, read: Callable[[], float]) -> None:
        self._read = read

    def value(self) -> float:
        return float(self._read())


def otlp_reader(otlp: OtlpMetricsSettings, endpoint: str) -> MetricReader:
    """The periodic OTLP push of ``service.telemetry.metrics.otlp`` (to its ``endpoint``)."""
    exporter: MetricExporter
    if otlp.protocol in (None, "grpc"):
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(endpoint=endpoint, insecure=not endpoint.startswith("https"))
    else:
        from opentelemetry.exporter.otlp.proto.http import metric_exporter as http

        exporter = http.OTLPMetricExporter(endpoint=endpoint)
    return Periodic(exporter, export_interval_millis=otlp.interval * 1000)


class HopMetrics:
    """The hop's instruments on a MeterProvider of its own (one per hop; ``shutdown`` ends it)."""

    def __init__(self, *readers: MetricReader, max_names: int = DEFAULT_MAX_NAMES) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=False)
        prometheus = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=self.registry
        )
        self._provider = MeterProvider(
            metric_readers=[prometheus, *readers],
            resource=Resource.create({"service.name": "otel-footprint"}),
            shutdown_on_exit=False,
        )
        # The exporter's collector hands each collection over through a queue: one scrape at a time.
        self._scrape = threading.Lock()
        m = self._provider.get_meter("otel_footprint.service")

        def histogram(metric: sc.Metric) -> Histogram:
            bounds = metric.buckets
            return m.create_histogram(
                metric.name,
                metric.unit,
                metric.description,
                explicit_bucket_boundaries_advisory=bounds,
            )

        self.spans_received = Counter(m, sc.HOP_SPANS_RECEIVED)
        self.log_records_received = Counter(m, sc.HOP_LOG_RECORDS_RECEIVED)
        self.requests_rejected = Counter(m, sc.HOP_REQUESTS_REJECTED)
        self.spans_passed_through = Counter(m, sc.HOP_SPANS_PASSED_THROUGH)
        self.spans_annotated = Counter(m, sc.HOP_SPANS_ANNOTATED)
        self.late_spans = Counter(m, sc.HOP_LATE_SPANS)
        self.spans_queued = Counter(m, sc.HOP_SPANS_QUEUED)
        self.spans_forwarded = Counter(m, sc.HOP_SPANS_FORWARDED)
        self.log_records_forwarded = Counter(m, sc.HOP_LOG_RECORDS_FORWARDED)
        self.forward_retries = Counter(m, sc.HOP_FORWARD_RETRIES)
        self.forward_failed = Counter(m, sc.HOP_FORWARD_FAILED)
        self.forward_splits = Counter(m, sc.HOP_FORWARD_SPLITS)
        self.dead_lettered = Counter(m, sc.HOP_DEAD_LETTERED)
        self.dead_letter_dropped = Counter(m, sc.HOP_DEAD_LETTER_DROPPED)
        self.spans_rejected_downstream = Counter(m, sc.HOP_SPANS_REJECTED_DOWNSTREAM)
        self.runs_released = Counter(m, sc.HOP_RUNS_RELEASED)
        self.runs_released_timeout = Counter(m, sc.HOP_RUNS_RELEASED_TIMEOUT)
        self.runs_released_overflow = Counter(m, sc.HOP_RUNS_RELEASED_OVERFLOW)
        self.decision_errors = Counter(m, sc.HOP_DECISION_ERRORS)
        self.served_chars_while_parked = Counter(m, sc.HOP_SERVED_CHARS_WHILE_PARKED)
        self.served_passes_while_parked = Counter(m, sc.HOP_SERVED_PASSES_WHILE_PARKED)
        self.decision_latency = histogram(sc.HOP_DECISION_LATENCY)
        self.release_delay = histogram(sc.HOP_RELEASE_DELAY)
        self.runs_held = Gauge(m, sc.HOP_RUNS_HELD)
        self.spans_held = Gauge(m, sc.HOP_SPANS_HELD)
        self.bytes_held = Gauge(m, sc.HOP_BYTES_HELD)
        self.memory_bytes = Gauge(m, sc.HOP_MEMORY_BYTES)
        self.decision_cache_traces = Gauge(m, sc.HOP_DECISION_CACHE_TRACES)
        self.decision_cache_bytes = Gauge(m, sc.HOP_DECISION_CACHE_BYTES)
        self.resident_bytes = Gauge(m, sc.HOP_RESIDENT_BYTES)
        self.memory_limit_bytes = Gauge(m, sc.HOP_MEMORY_LIMIT_BYTES)
        self.memory_limit_refusals = Counter(m, sc.HOP_MEMORY_LIMIT_REFUSALS)
        self.queue_bytes = Gauge(m, sc.HOP_QUEUE_BYTES)
        self.queue_disk_bytes = Gauge(m, sc.HOP_QUEUE_DISK_BYTES)
        self.queue_batches = Gauge(m, sc.HOP_QUEUE_BATCHES)
        self.queue_blocked = Gauge(m, sc.HOP_QUEUE_BLOCKED)
        self.queue_write_failures = Counter(m, sc.HOP_QUEUE_WRITE_FAILURES)
        self.queue_quarantined = Counter(m, sc.HOP_QUEUE_QUARANTINED)
        self.queue_quarantined_bytes = Counter(m, sc.HOP_QUEUE_QUARANTINED_BYTES)
        self.phoenix_annotations_posted = Counter(m, sc.HOP_PHOENIX_ANNOTATIONS_POSTED)
        self.phoenix_annotations_failed = Counter(m, sc.HOP_PHOENIX_ANNOTATIONS_FAILED)
        self.phoenix_annotations_dropped = Counter(m, sc.HOP_PHOENIX_ANNOTATIONS_DROPPED)
        self.phoenix_annotations_pending = Gauge(m, sc.HOP_PHOENIX_ANNOTATIONS_PENDING)
        self.verdicts = VerdictMetrics(m, max_names)

    def render_prometheus(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        with self._scrape:
            return prometheus_client.generate_latest(self.registry).decode()

    def shutdown(self) -> None:
        """A last OTLP push (when configured); ``/metrics`` is empty from here on."""
        self._provider.shutdown()
