"""FootprintSpanProcessor: annotates agent runs in-process, then exports through a BatchSpanProcessor;
FootprintLogRecordProcessor: feeds it the footprint events that travel as log records.

Spans of no agent run go straight to the batch queue. The spans of a run that can receive notes (its
run and model-call spans, and any span carrying footprint events) are held until the run span has
ended plus a grace period, decided and annotated on a background worker, and only then queued; its
other spans go on at once and are kept by reference as evidence. Nothing is decided or exported on
the application's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_footprint import semconv
from otel_footprint.annotate.form import AnnotateOptions
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.runs.group import is_footprint_input_event
from otel_footprint.runs.holding import DEFAULT_LIMITS, HoldLimits
from otel_footprint.runs.model import RunStore
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.spans import SpanEventView
from otel_footprint.sdk.buffer import (
    BufferStats,
    RunBuffer,
    carries_footprint_events,
    is_run_span,
    span_role,
)
from otel_footprint.sdk.decide import Decider, make_decider
from otel_footprint.sdk.metrics import register_metrics
from otel_footprint.sdk.verdict_metrics import verdict_metrics_on
from otel_footprint.sdk.worker import ProcessDecider

_logger = logging.getLogger(__name__)


_ARGUMENT = {
    "release_grace": "grace_seconds",
    "max_wait": "max_wait_seconds",
    "orphan_wait": "grace_seconds",
    "max_events_per_run": "max_log_records_per_run",
}


def processor_limits(**limits: Any) -> HoldLimits:
    """The core's limits from the processor's arguments; errors name the arguments."""
    try:
        return HoldLimits(**limits)
    except ValueError as exc:
        name, _, rest = str(exc).partition(" ")
        raise ValueError(f"{_ARGUMENT.get(name, name)} {rest}") from None


def bounded(call: Callable[[], bool], timeout_seconds: float) -> bool:
    """``call()`` on a helper thread, waiting at most the timeout (False when it has not returned).

    The SDK's batch processors can block far past their timeout on an exporter that hangs; the
    application's flush and shutdown must not.
    """
    result: list[bool] = []
    helper = threading.Thread(target=lambda: result.append(call()), daemon=True)
    helper.start()
    helper.join(timeout_seconds)
    return bool(result) and result[0]


class FootprintSpanProcessor(SpanProcessor):
    """Hold each agent run's spans, decide and annotate the run, export through a batch processor.

    When and with what each run is decided is the hop's rule too (``runs/holding.py``):
    ``grace_seconds`` after a run span ends, its run is decided — late children within the grace are
    included; nested runs are decided each on its own. A run still open after ``max_wait_seconds``
    is decided on what arrived, with ``footprint.run.complete=false`` and reason ``timeout``. At most
    ``max_runs`` traces, ``max_bytes`` (estimated) and ``max_spans_per_run`` spans per trace are
    held; past a bound the oldest (or the full) run is released unannotated with reason
    ``overflow`` on its spans.

    Footprint events may also travel as log records tied to a span (the recorder's
    ``emit_as="log"``): add :meth:`log_record_processor` to the ``LoggerProvider`` the agent logs
    through (``setup(..., logger_provider=...)`` does). They are joined to their spans and the run
    is decided exactly as with span events; at most ``max_log_records_per_run`` are kept per trace,
    past which the run is released unannotated with reason ``overflow``.

    Only spans that can receive notes are held back: run and model-call spans of a run whose
    spans (the live run span included: ``maps.mounted`` comes first) carry footprint events, and
    spans carrying footprint events. Tool and other spans go on at once and are kept by reference
    as evidence; a run with no footprint event is handed on as it ends, never decided. Recognise
    run spans at start (``gen_ai.operation.name=invoke_agent`` set when the span is created, as
    the GenAI conventions ask for sampling-relevant attributes): a run span recognised only at
    its end cannot keep its tool spans as evidence. Export itself is the wrapped
    :class:`BatchSpanProcessor`'s (the ``bsp_*`` arguments are its usual settings). After
    ``os.fork`` the child gets a fresh run buffer and worker (the parent's held runs stay the
    parent's), as the SDK's batch processor does. ``force_flush`` and ``shutdown`` return within
    their timeouts even when the exporter hangs.

    ``decide_in="process"`` decides runs in a child Python process (``sdk/worker.py``) instead of
    on the worker thread: the decision's CPU no longer shares the application's GIL, at the cost
    of sending each held run's spans to the child and the notes back (same notes; the child is
    started with the processor as ``sys.executable``, restarted after a failure, and ended by
    ``shutdown``). It pays where a core is free for it; it takes no ``decider`` and no
    ``run_store``. A run the child fails to decide goes on unannotated with reason
    ``decision-error``.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        grace_seconds: float = DEFAULT_LIMITS.release_grace,
        max_wait_seconds: float = DEFAULT_LIMITS.max_wait,
        max_runs: int = DEFAULT_LIMITS.max_runs,
        max_spans_per_run: int = DEFAULT_LIMITS.max_spans_per_run,
        max_log_records_per_run: int = DEFAULT_LIMITS.max_events_per_run,
        max_bytes: int = DEFAULT_LIMITS.max_bytes,
        annotate_options: AnnotateOptions | None = None,
        engine_options: EngineOptions | None = None,
        run_store: RunStore | None = None,
        span_limits: SpanLimits | None = None,
        meter_provider: MeterProvider | None = None,
        decider: Decider | None = None,
        bsp_max_queue_size: int | None = None,
        bsp_schedule_delay_millis: float | None = None,
        bsp_max_export_batch_size: int | None = None,
        bsp_export_timeout_millis: float | None = None,
        shutdown_timeout_millis: float = 30000,
        decide_in: Literal["thread", "process"] = "thread",
    ) -> None:
        self._shutdown_timeout = shutdown_timeout_millis / 1000
        if decide_in not in ("thread", "process"):
            raise ValueError(f"decide_in must be 'thread' or 'process', not {decide_in!r}")
        if decide_in == "process" and (decider is not None or run_store is not None):
            raise ValueError(
                "decide_in='process' runs the library's own decision in a child process: "
                "it takes no decider and no run_store"
            )
        limits = processor_limits(
            release_grace=grace_seconds,
            max_wait=max_wait_seconds,
            # In-process a run span starts before its children: footprint events in a trace with
            # no run span started will not find one by waiting long.
            orphan_wait=grace_seconds,
            max_runs=max_runs,
            max_bytes=max_bytes,
            max_spans_per_run=max_spans_per_run,
            max_events_per_run=max_log_records_per_run,
        )
        # Started once every setting has been checked, so a refused one leaks no process.
        self._process: ProcessDecider | None = None
        if decide_in == "process":
            decider = self._process = ProcessDecider(
                engine_options=engine_options,
                annotate_options=annotate_options,
                verdict_metrics=verdict_metrics_on(meter_provider),
            )
        elif decider is None:
            decider = make_decider(
                store=run_store,
                engine_options=engine_options,
                annotate_options=annotate_options,
                verdict_metrics=verdict_metrics_on(meter_provider),
            )
        self._buffer = RunBuffer(
            self._enqueue,
            decider,
            limits=limits,
            span_limits=span_limits,
            name="footprint-span-processor",
            observed=(engine_options or EngineOptions()).observed,
        )
        # Created after the buffer has checked its bounds, so a refused setting leaks no thread.
        self._batch = BatchSpanProcessor(
            exporter,
            max_queue_size=bsp_max_queue_size,
            schedule_delay_millis=bsp_schedule_delay_millis,
            max_export_batch_size=bsp_max_export_batch_size,
            export_timeout_millis=bsp_export_timeout_millis,
        )
        if meter_provider is not None:
            register_metrics(meter_provider, self.stats, "span_processor")

    def _enqueue(self, spans: Sequence[ReadableSpan]) -> None:
        on_end = self._batch.on_end
        for span in spans:
            on_end(span)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # The per-trace run registry: a run span that started keeps its trace's spans held even if
        # they carry no footprint event themselves (tool spans are evidence).
        if is_run_span(span):
            context = span.get_span_context()
            self._buffer.run_started(context.trace_id, span)

    def on_end(self, span: ReadableSpan) -> None:
        role = span_role(span)
        footprint = carries_footprint_events(span)
        context = span.context
        if (
            (role is SpanRole.OTHER or role is SpanRole.TOOL)
            and not footprint
            and context is not None
            and self._buffer.pass_quickly(context.trace_id)
        ) or not self._buffer.offer(span, role, footprint):
            self._batch.on_end(span)

    def log_record_processor(
        self,
        exporter: LogRecordExporter | None = None,
        *,
        blrp_max_queue_size: int | None = None,
        blrp_schedule_delay_millis: float | None = None,
        blrp_max_export_batch_size: int | None = None,
        blrp_export_timeout_millis: float | None = None,
    ) -> FootprintLogRecordProcessor:
        """A log record processor feeding this processor's runs (add it to a ``LoggerProvider``).

        ``exporter``: where the log records go on, untouched, through a
        ``BatchLogRecordProcessor`` (the ``blrp_*`` arguments are its usual settings). None: they
        are read and go nowhere from here (other processors of the provider still see them).
        """
        return FootprintLogRecordProcessor(
            self,
            exporter,
            blrp_max_queue_size=blrp_max_queue_size,
            blrp_schedule_delay_millis=blrp_schedule_delay_millis,
            blrp_max_export_batch_size=blrp_max_export_batch_size,
            blrp_export_timeout_millis=blrp_export_timeout_millis,
        )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Decide and queue every held run now, then flush the batch processor: within the
        timeout even when the exporter hangs (False then; the flush goes on in the background)."""
        deadline = time.monotonic() + timeout_millis / 1000
        released = self._buffer.flush(timeout_millis / 1000)
        left = max(deadline - time.monotonic(), 0.0)
        return bounded(lambda: self._batch.force_flush(int(left * 1000)), left) and released

    def shutdown(self) -> None:
        """Decide the runs in flight and queue them, then shut the batch processor (which exports
        what is queued) and the exporter. Returns within ``shutdown_timeout_millis`` even when the
        exporter hangs; what is still queued then stays with the batch processor's worker."""
        deadline = time.monotonic() + self._shutdown_timeout
        self._buffer.shutdown(self._shutdown_timeout)
        if self._process is not None:
            self._process.close(max(deadline - time.monotonic(), 0.1))
        left = max(deadline - time.monotonic(), 0.0)
        bounded(lambda: self._batch.shutdown() or True, left)  # type: ignore[no-untyped-call]

    def stats(self) -> BufferStats:
        """Counters: spans passed/held/late/annotated, runs decided/timed out/overflowed, ..."""
        return self._buffer.stats()


class FootprintLogRecordProcessor(LogRecordProcessor):
    """Hands footprint events that arrive as log records to a span processor's run buffer.

    Pairs with one :class:`FootprintSpanProcessor` (or use its :meth:`~FootprintSpanProcessor.
    log_record_processor`). A record whose event name
    (``LogRecord.event_name``, or the older ``event.name`` attribute) starts ``footprint.`` or
    ``agentfootprint.`` and that names a span is kept, under its trace and span id, with the run
    that trace holds: the trace is held as for a footprint span event, and when the run is
    released its decision reads the record as one of that span's events. A record of a trace with
    no run held (no run span started, no span context, a run already released) is not kept and
    holds nothing; counted in the span processor's ``stats()`` (``log_records_*``).

    Every record, footprint or not, goes on untouched and at once to ``exporter`` (through a
    ``BatchLogRecordProcessor``) when one is given; without one the records are only read here:
    a footprint event then survives only as the annotations it leads to, unless another processor
    of the ``LoggerProvider`` exports the records. Nothing here raises into the application.
    """

    def __init__(
        self,
        span_processor: FootprintSpanProcessor,
        exporter: LogRecordExporter | None = None,
        *,
        blrp_max_queue_size: int | None = None,
        blrp_schedule_delay_millis: float | None = None,
        blrp_max_export_batch_size: int | None = None,
        blrp_export_timeout_millis: float | None = None,
    ) -> None:
        self._buffer = span_processor._buffer
        self._batch: BatchLogRecordProcessor | None = None
        if exporter is not None:
            self._batch = BatchLogRecordProcessor(
                exporter,
                max_queue_size=blrp_max_queue_size,
                schedule_delay_millis=blrp_schedule_delay_millis,
                max_export_batch_size=blrp_max_export_batch_size,
                export_timeout_millis=blrp_export_timeout_millis,
            )

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            self._read(log_record)
        except Exception:  # a malformed record must never reach the application
            _logger.exception("reading a log record for footprint events failed")
        if self._batch is not None:
            self._batch.on_emit(log_record)

    def _read(self, log_record: ReadWriteLogRecord) -> None:
        record = log_record.log_record
        attributes = record.attributes
        name = record.event_name
        if not name:
            # Ordinary log records end here after one lookup (or none).
            raw = attributes.get(semconv.LOG_EVENT_NAME_ATTR) if attributes else None
            if not isinstance(raw, str):
                return
            name = raw
        if not is_footprint_input_event(name):
            return
        # A snapshot: later processors may change the record; the decision reads what arrived.
        event = SpanEventView(
            name,
            record.timestamp or record.observed_timestamp or 0,
            list(attributes.items()) if attributes else [],
            via="log-record",
        )
        self._buffer.offer_log(record.trace_id or 0, record.span_id or 0, event)

    def shutdown(self) -> None:
        """Shut the log exporter down (the runs belong to the span processor's shutdown)."""
        if self._batch is not None:
            self._batch.shutdown()  # type: ignore[no-untyped-call]  # unannotated in the SDK

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the log exporter's batch queue (held runs are the span processor's to flush)."""
        if self._batch is None:
            return True
        return self._batch.force_flush(timeout_millis)
