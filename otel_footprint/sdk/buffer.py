"""The bounded per-trace run buffer shared by the span processor and the annotating exporter.

Callers offer ended spans (and footprint events that arrived as log records); spans of agent runs
are held until the run span has ended plus a grace period (late children), or until a maximum wait,
then decided and annotated on ONE background worker thread and handed to a sink. Bounded in runs,
spans and log records per run; overflow releases the oldest run unannotated with the reason on its
spans, and every release is counted.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal

from opentelemetry.sdk.trace import ReadableSpan, SpanLimits

from otel_footprint.annotate.form import SpanNote, unannotated_notes
from otel_footprint.annotate.sdk import annotated_copy
from otel_footprint.runs.group import is_footprint_input_event
from otel_footprint.runs.model import Reason
from otel_footprint.runs.recognize import ROLE_KEYS, SpanRole, role_of
from otel_footprint.runs.spans import SdkSpanView, SpanEventView
from otel_footprint.sdk.decide import Decider

_logger = logging.getLogger(__name__)

Sink = Callable[[Sequence[ReadableSpan]], bool | None]
"""Hands released spans on; returning False counts a failed send (``sink_failures``)."""
Cause = Literal[
    "decide", "timeout", "flush", "overflow", "span-limit", "log-limit", "orphan", "backlog"
]

# The buffer's bounds by default: one place for the processor, the exporter and the docs.
DEFAULT_GRACE_SECONDS = 2.0
"""How long after its run span ends a run waits for late children."""
DEFAULT_MAX_WAIT_SECONDS = 120.0
"""How long a run is held at most (then released with ``footprint.run.complete=false``)."""
DEFAULT_MAX_RUNS = 1000
DEFAULT_MAX_SPANS_PER_RUN = 5000
DEFAULT_MAX_LOG_RECORDS_PER_RUN = 5000

REASON_TIMEOUT = "timeout"
REASON_OVERFLOW = "overflow"
REASON_SPAN_LIMIT = "span-limit"
REASON_LOG_LIMIT = "log-limit"
REASON_FLUSH = "flush"
REASON_ERROR = "decision-error"


def span_role(span: ReadableSpan) -> SpanRole:
    """``role_of`` for an SDK span, with a cheap first test for the common span of no run.

    SDK attribute maps answer a missing key by raising and catching KeyError inside ``.get``
    (~0.5 µs a key); a set test over the span's keys settles most spans without one.
    """
    attributes = span.attributes
    if not attributes or ROLE_KEYS.isdisjoint(attributes):
        return SpanRole.OTHER
    return role_of(attributes.get)


def carries_footprint_events(span: ReadableSpan) -> bool:
    """Whether an SDK span has a footprint input event."""
    return any(is_footprint_input_event(event.name) for event in span.events)


@dataclass(frozen=True, slots=True)
class BufferStats:
    """Counters since start (and two gauges: ``held_runs``, ``held_spans``)."""

    spans_seen: int = 0
    """Spans offered."""
    spans_passed: int = 0
    """Spans of no agent run, handed on at once."""
    spans_held: int = 0
    """Spans held back until their run was decided."""
    spans_late: int = 0
    """Spans of a run already released (handed on unannotated)."""
    spans_annotated: int = 0
    """Spans handed on with a note applied."""
    spans_after_shutdown: int = 0
    runs_tracked: int = 0
    runs_decided: int = 0
    """Runs released through the engine (whatever the verdict)."""
    runs_without_footprint: int = 0
    """Runs released as they were: no footprint event, nothing to decide."""
    runs_timed_out: int = 0
    runs_flushed_open: int = 0
    """Runs released by a flush or shutdown before their run span ended."""
    runs_overflowed: int = 0
    """Oldest runs released unannotated because ``max_runs`` were held."""
    runs_span_limit: int = 0
    """Runs released unannotated because they reached ``max_spans_per_run``."""
    runs_log_limit: int = 0
    """Runs released unannotated because they reached ``max_log_records_per_run``."""
    runs_released_raw: int = 0
    """Runs released unannotated (reason ``overflow``) on the releasing thread because the worker
    was ``max_runs`` runs behind."""
    decision_errors: int = 0
    notes_unapplied: int = 0
    """Notes for spans not held (already handed on): counted, not written."""
    sink_errors: int = 0
    """The sink raised (logged)."""
    sink_failures: int = 0
    """The sink reported a failed send (an exporter's FAILURE result)."""
    log_records_seen: int = 0
    """Footprint log records offered (log records of other names are never counted)."""
    log_records_held: int = 0
    """Footprint log records joined to a held run: its decision reads them as the span's events."""
    log_records_unowned: int = 0
    """Footprint log records of a trace with no run held (no run span started, no span id):
    consumed without a decision."""
    log_records_late: int = 0
    """Footprint log records of a trace whose run was already released."""
    log_records_after_shutdown: int = 0
    held_runs: int = 0
    held_spans: int = 0
    held_log_records: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(slots=True)
class _Run:
    trace_id: int
    created: float
    max_deadline: float
    spans: list[ReadableSpan] = field(default_factory=list)
    """Every span of the trace seen so far (evidence), held or not."""
    held: list[ReadableSpan] = field(default_factory=list)
    """Spans not yet handed on: they may receive notes."""
    open_runs: int = 0
    run_seen: bool = False
    run_ended: bool = False
    grace_deadline: float | None = None
    has_footprint: bool = False
    live: list[ReadableSpan] = field(default_factory=list)
    """Run spans that started and have not ended (a processor's ``on_start``): their events so
    far say whether this run has anything to decide before its children end."""
    logs: dict[int, list[SpanEventView]] = field(default_factory=dict)
    """Footprint events that arrived as log records, by the span id they name, in arrival order."""
    log_count: int = 0


class RunBuffer:
    """Holds spans per trace and releases each trace's run through ``decide`` to ``sink``.

    ``run_started`` (from a processor's ``on_start``), ``offer`` (an ended span) and ``offer_log``
    (a footprint event that arrived as a log record) are called on application threads and only
    append under one lock; deciding, annotating and the sink run on the buffer's worker thread.
    ``offer`` returns False when the caller should hand the span on itself right away (it is still
    kept as evidence when its trace is held).
    """

    def __init__(
        self,
        sink: Sink,
        decide: Decider,
        *,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS,
        orphan_wait_seconds: float | None = None,
        max_runs: int = DEFAULT_MAX_RUNS,
        max_spans_per_run: int = DEFAULT_MAX_SPANS_PER_RUN,
        max_log_records_per_run: int = DEFAULT_MAX_LOG_RECORDS_PER_RUN,
        span_limits: SpanLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "footprint-runs",
    ) -> None:
        if grace_seconds < 0 or max_wait_seconds <= 0:
            raise ValueError("grace_seconds must be >= 0 and max_wait_seconds > 0")
        if max_runs < 1 or max_spans_per_run < 1 or max_log_records_per_run < 1:
            raise ValueError("max_runs, max_spans_per_run and max_log_records_per_run must be >= 1")
        self._sink = sink
        self._decide = decide
        self._grace = grace_seconds
        self._max_wait = max_wait_seconds
        # A trace with footprint events but no run span yet: in-process the run span starts before
        # its children, so a short wait suffices; an exporter sees the run span last and waits long.
        self._orphan_wait = max_wait_seconds if orphan_wait_seconds is None else orphan_wait_seconds
        self._max_runs = max_runs
        self._max_spans = max_spans_per_run
        self._max_logs = max_log_records_per_run
        self._limits = span_limits
        self._clock = clock
        self._lock = threading.Condition(threading.Lock())
        self._held: OrderedDict[int, _Run] = OrderedDict()
        self._released: OrderedDict[int, None] = OrderedDict()
        self._ready: list[tuple[_Run, Cause]] = []
        self._deadlines: list[tuple[float, int, int, bool]] = []  # (when, seq, trace, is_max)
        self._seq = 0
        self._busy = 0
        self._stopping = False
        self._closed = False
        self._counts: dict[str, int] = dict.fromkeys((f.name for f in fields(BufferStats)), 0)
        self._passed_quickly = itertools.count()
        # Releases may come up to one tick after their deadline (grace is a lower bound).
        self._tick = min(max(grace_seconds / 2, 0.001), 0.05)
        self._wake_at = -math.inf
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)
        self._worker.start()

    # ── application threads ───────────────────────────────────────────────────────────────────

    def run_started(self, trace_id: int, span: ReadableSpan | None = None) -> None:
        """A run span started in ``trace_id``: track the trace until every such run span ends.

        ``span`` is the live run span: its footprint events (``maps.mounted`` comes first) decide
        whether its children's model-call spans must be held or can go on at once.
        """
        with self._lock:
            if self._closed:
                return
            run = self._held.get(trace_id) or self._track(trace_id)
            run.open_runs += 1
            run.run_seen = True
            run.grace_deadline = None
            if span is not None:
                run.live.append(span)

    def is_held(self, trace_id: int) -> bool:
        """Whether spans of ``trace_id`` are being held (a lock-free peek; dict reads are atomic)."""
        return trace_id in self._held

    def pass_quickly(self, trace_id: int) -> bool:
        """True when a span of no role and no footprint event in ``trace_id`` can go on at once.

        Lock-free (dict reads and ``next`` on a counter are atomic in CPython): the common span
        of no agent run costs two lookups here. A run span of the trace starts before its
        children (``run_started`` then registers it), so a miss cannot skip a held run's child.
        """
        if trace_id in self._held or trace_id in self._released or self._closed:
            return False
        next(self._passed_quickly)
        return True

    def offer(self, span: ReadableSpan, role: SpanRole, footprint: bool) -> bool:
        """An ended span. True: the buffer holds it and will hand it on. False: hand it on now."""
        context = span.context
        if context is None:
            return False
        trace_id = context.trace_id
        with self._lock:
            counts = self._counts
            counts["spans_seen"] += 1
            if self._closed:
                counts["spans_after_shutdown"] += 1
                return False
            run = self._held.get(trace_id)
            if run is None:
                if role is not SpanRole.RUN and not footprint:
                    # A span of no run; or a straggler of a run already released, which can only
                    # go on as it is (counted: the collector's late_span_age, in spirit).
                    counts["spans_late" if trace_id in self._released else "spans_passed"] += 1
                    return False
                # A run span or footprint events always open a run, even in a released trace: a
                # trace may hold several runs one after another.
                run = self._track(trace_id)
            run.spans.append(span)
            if not footprint and run.logs and context.span_id in run.logs:
                # Its footprint events came as log records: it is held like a span carrying them
                # (notes may name it), and the decision joins the records to it.
                footprint = True
            if role is SpanRole.RUN and run.live:
                # on_end gets a fresh ReadableSpan, not the live object: match by span id.
                ended = context.span_id
                run.live = [s for s in run.live if s.context is None or s.context.span_id != ended]
            run.has_footprint = footprint or run.has_footprint or self._live_footprint(run)
            # Only spans that can receive notes wait: run and model-call spans of a run that has
            # footprint events, and spans carrying footprint events themselves.
            hold = footprint or (
                run.has_footprint and (role is SpanRole.RUN or role is SpanRole.PASS)
            )
            if hold:
                run.held.append(span)
                counts["spans_held"] += 1
            else:
                counts["spans_passed"] += 1
            now = self._clock()
            if role is SpanRole.RUN:
                run.run_seen = run.run_ended = True
                if run.open_runs > 0:
                    run.open_runs -= 1
                if run.open_runs == 0:
                    if not run.has_footprint and not run.held:
                        # Nothing to decide and nothing held: done now, no worker, no wait.
                        self._forget(run)
                        counts["runs_without_footprint"] += 1
                        return hold
                    self._set_grace(run, now + self._grace)
            elif not run.run_seen:
                # No run span in sight: an orphan waits (sliding) for one to appear.
                self._set_grace(run, now + self._orphan_wait)
            if len(run.spans) >= self._max_spans:
                self._release(run, "span-limit")
            return hold

    def offer_log(self, trace_id: int, span_id: int, event: SpanEventView) -> bool:
        """A footprint event that arrived as a log record naming span ``span_id`` of ``trace_id``.

        Joined to the trace's held run: the run now has footprint events (its run and model-call
        spans are held and it is decided, as for a span event) and the record's span is held when
        it ends. A record of a trace with no run held is not kept and holds nothing: in-process a
        run span starts (``run_started``) before any record can name it or its children, so such
        a record belongs to no run this buffer could decide. True when the event was kept.
        """
        with self._lock:
            counts = self._counts
            counts["log_records_seen"] += 1
            if self._closed:
                counts["log_records_after_shutdown"] += 1
                return False
            # Ids 0 are the invalid context: a record emitted outside any span.
            run = self._held.get(trace_id) if trace_id and span_id else None
            if run is None:
                late = trace_id in self._released
                counts["log_records_late" if late else "log_records_unowned"] += 1
                return False
            run.logs.setdefault(span_id, []).append(event)
            run.log_count += 1
            run.has_footprint = True
            counts["log_records_held"] += 1
            if run.log_count >= self._max_logs:
                self._release(run, "log-limit")
            return True

    # ── bookkeeping (lock held) ───────────────────────────────────────────────────────────────

    def _track(self, trace_id: int) -> _Run:
        while len(self._held) >= self._max_runs:
            _, oldest = next(iter(self._held.items()))
            self._release(oldest, "overflow")
        now = self._clock()
        run = _Run(trace_id, now, now + self._max_wait)
        self._held[trace_id] = run
        self._counts["runs_tracked"] += 1
        self._push(run.max_deadline, trace_id, is_max=True)
        return run

    def _set_grace(self, run: _Run, when: float) -> None:
        run.grace_deadline = min(when, run.max_deadline)
        self._push(run.grace_deadline, run.trace_id, is_max=False)

    def _push(self, when: float, trace_id: int, *, is_max: bool) -> None:
        self._seq += 1
        heapq.heappush(self._deadlines, (when, self._seq, trace_id, is_max))
        # Wake the worker only when it sleeps past this deadline by more than one tick: waking
        # it for every run that ends costs the application threads GIL hand-offs under load.
        if when + self._tick < self._wake_at:
            self._lock.notify_all()
        if len(self._deadlines) > 4 * self._max_runs + 64:
            self._compact_deadlines()

    def _compact_deadlines(self) -> None:
        """Drop deadlines of released runs (they are skipped when due; this bounds the heap)."""
        live = [
            entry
            for entry in self._deadlines
            if (run := self._held.get(entry[2])) is not None
            and entry[0] == (run.max_deadline if entry[3] else run.grace_deadline)
        ]
        heapq.heapify(live)
        self._deadlines = live

    def _live_footprint(self, run: _Run) -> bool:
        # Reads the live run spans' events (each under its own lock; never the other way round).
        return any(carries_footprint_events(live) for live in run.live)

    def _forget(self, run: _Run) -> None:
        del self._held[run.trace_id]
        self._released[run.trace_id] = None
        while len(self._released) > 4 * self._max_runs:
            self._released.popitem(last=False)

    def _release(self, run: _Run, cause: Cause) -> None:
        self._forget(run)
        if len(self._ready) >= self._max_runs:
            # The worker is a whole buffer behind: release this run unannotated right here (the
            # reason on its spans, counted) rather than grow without bound or drop it.
            self._counts["runs_released_raw"] += 1
            self._lock.release()
            try:
                self._process(run, "backlog")
            finally:
                self._lock.acquire()
            return
        self._ready.append((run, cause))
        self._lock.notify_all()

    def _collect_due(self, now: float) -> None:
        while self._deadlines and self._deadlines[0][0] <= now:
            when, _, trace_id, is_max = heapq.heappop(self._deadlines)
            run = self._held.get(trace_id)
            if run is None:
                continue
            if is_max and when == run.max_deadline:
                ended = run.run_ended and run.open_runs == 0
                self._release(run, "decide" if ended else "timeout")
            elif not is_max and when == run.grace_deadline:
                self._release(run, "decide" if run.run_seen else "orphan")

    # ── worker thread ─────────────────────────────────────────────────────────────────────────

    def _work(self) -> None:
        while True:
            with self._lock:
                while True:
                    self._collect_due(self._clock())
                    if self._ready or self._stopping:
                        break
                    now = self._clock()
                    if self._deadlines:
                        # Coalesce: deadlines a tick apart are released together.
                        self._wake_at = max(self._deadlines[0][0], now + self._tick)
                        self._lock.wait(self._wake_at - now)
                    else:
                        self._wake_at = math.inf
                        self._lock.wait()
                    self._wake_at = -math.inf  # awake: pushes need not notify
                if not self._ready and self._stopping:
                    return
                batch, self._ready = self._ready, []
                self._busy += 1
            try:
                for run, cause in batch:
                    self._process(run, cause)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._lock.notify_all()

    def _process(self, run: _Run, cause: Cause) -> None:
        held = run.held
        if not held:
            self._count("runs_decided" if run.has_footprint else "runs_without_footprint")
            return
        notes: dict[str, SpanNote]
        if cause in ("overflow", "span-limit", "log-limit", "backlog"):
            if cause == "overflow":
                self._count("runs_overflowed")
                reason = Reason(REASON_OVERFLOW, "released unannotated: too many runs held at once")
            elif cause == "span-limit":
                self._count("runs_span_limit")
                reason = Reason(
                    REASON_SPAN_LIMIT, "released unannotated: too many spans in one run"
                )
            elif cause == "log-limit":
                self._count("runs_log_limit")
                reason = Reason(
                    REASON_LOG_LIMIT,
                    "released unannotated: too many footprint log records in one run",
                )
            else:  # counted as runs_released_raw where it happened
                reason = Reason(
                    REASON_OVERFLOW, "released unannotated: the decision worker is behind"
                )
            notes = unannotated_notes([SdkSpanView(s) for s in held], reason)
        elif not run.has_footprint:
            # Nothing to decide: the run costs one hold and one hand-on.
            self._count("runs_without_footprint")
            if cause == "timeout":
                self._count("runs_timed_out")
            self._hand_on(held)
            return
        else:
            incomplete: Reason | None = None
            if cause == "timeout":
                self._count("runs_timed_out")
                incomplete = Reason(REASON_TIMEOUT, "decided at the maximum wait, run not ended")
            elif cause == "flush" and not run.run_ended:
                self._count("runs_flushed_open")
                incomplete = Reason(REASON_FLUSH, "decided at a flush before the run ended")
            try:
                if run.logs:
                    log_events = {
                        format(span_id, "016x"): events for span_id, events in run.logs.items()
                    }
                    notes = self._decide(run.spans, incomplete, log_events=log_events)
                else:
                    notes = self._decide(run.spans, incomplete)
                self._count("runs_decided")
            except Exception as exc:  # a bad run must never stop the pipeline
                _logger.exception(
                    "deciding trace %032x failed; spans go on unannotated", run.trace_id
                )
                self._count("decision_errors")
                notes = unannotated_notes(
                    [SdkSpanView(s) for s in held], Reason(REASON_ERROR, f"{type(exc).__name__}")
                )
        out: list[ReadableSpan] = []
        applied = 0
        for span in held:
            view = SdkSpanView(span)
            note = notes.pop(view.span_id, None)
            if note is None:
                out.append(span)
            else:
                out.append(annotated_copy(span, note, self._limits))
                applied += 1
        if applied:
            self._count("spans_annotated", applied)
        if notes:
            self._count("notes_unapplied", len(notes))
        self._hand_on(out)

    def _hand_on(self, spans: Sequence[ReadableSpan]) -> None:
        if not spans:
            return
        try:
            if self._sink(spans) is False:
                self._count("sink_failures")
        except Exception:
            _logger.exception("handing on %d spans failed", len(spans))
            self._count("sink_errors")

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    # ── flush, shutdown, stats ────────────────────────────────────────────────────────────────

    def flush(self, timeout_seconds: float = 30.0) -> bool:
        """Release every held run now and wait until the worker has handed them all on."""
        deadline = self._clock() + timeout_seconds
        with self._lock:
            for run in list(self._held.values()):
                # _release may drop the lock (the raw path): another thread may release it first.
                if self._held.get(run.trace_id) is run:
                    self._release(run, "flush")
            while self._ready or self._busy:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    def shutdown(self, timeout_seconds: float = 30.0) -> bool:
        """Flush runs in flight, refuse new spans, stop the worker. Idempotent."""
        with self._lock:
            if self._closed:
                return True
            self._closed = True
        done = self.flush(timeout_seconds)
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        self._worker.join(max(timeout_seconds, 0.1))
        return done and not self._worker.is_alive()

    def stats(self) -> BufferStats:
        """A snapshot of the counters."""
        with self._lock:
            counts = dict(self._counts)
            # A copy of the counter yields its current value without advancing the original.
            quick = next(copy.copy(self._passed_quickly))
            counts["spans_seen"] += quick
            counts["spans_passed"] += quick
            counts["held_runs"] = len(self._held)
            counts["held_spans"] = sum(len(r.held) for r in self._held.values())
            counts["held_log_records"] = sum(r.log_count for r in self._held.values())
        return BufferStats(**counts)
