"""The in-process adapter of the run-holding core: SDK spans, one worker thread, the sink.

Callers offer ended spans (and footprint events that arrived as log records); the shared core
(``runs/holding.py``) says which spans wait and when each run is released — the same rule as the
hop's. Released runs are decided and annotated on ONE background worker thread and handed to a
sink; the worker decides them in slices, round-robin (``runs/slices.py``), so a run released behind
a 3,000-pass one is not held up for that whole decision. Only spans that can receive notes are held
back (run and model-call spans of a trace with footprint events, and spans carrying footprint
events); the others go on at once and stay in the core by reference as evidence. Every release is counted. The worker is re-created in a child
process after ``os.fork`` (as the SDK's batch processors do), with nothing of the parent's held.
"""

from __future__ import annotations

import copy
import itertools
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from opentelemetry.sdk.trace import ReadableSpan, SpanLimits

from otel_footprint.annotate.form import SpanNote, merge_notes, unannotated_notes
from otel_footprint.annotate.sdk import annotated_copy
from otel_footprint.runs import holding
from otel_footprint.runs.group import is_footprint_input_event
from otel_footprint.runs.holding import DEFAULT_LIMITS, HoldLimits, RunHolding, reason_for
from otel_footprint.runs.model import Reason
from otel_footprint.runs.recognize import CONTAINER_ROLES, ROLE_KEYS, SpanRole, is_run, role_of
from otel_footprint.runs.slices import SLICE_SECONDS, Slices, Steps, StoreTurns, Ticket, finish
from otel_footprint.runs.spans import SdkSpanView, SpanEventView
from otel_footprint.sdk.decide import Decider, DecisionRequest

_logger = logging.getLogger(__name__)

Sink = Callable[[Sequence[ReadableSpan]], bool | None]
"""Hands released spans on; returning False counts a failed send (``sink_failures``)."""

REASON_ERROR = "decision-error"
SPAN_BYTES = 512
"""What an ended SDK span costs held, before its attributes and events (counted in ``max_bytes``)."""


def span_role(span: ReadableSpan) -> SpanRole:
    """``role_of`` for an SDK span, with a cheap first test for the common span of no run.

    SDK attribute maps answer a missing key by raising and catching KeyError inside ``.get``
    (~0.5 µs a key); a set test over the span's keys settles most spans without one.
    """
    attributes = span.attributes
    if not attributes or ROLE_KEYS.isdisjoint(attributes):
        return SpanRole.OTHER
    return role_of(attributes.get)


def is_run_span(span: ReadableSpan) -> bool:
    """``span_role(span) is SpanRole.RUN`` for an SDK span (``is_run``: one lookup for most)."""
    attributes = span.attributes
    return attributes is not None and is_run(attributes.get)


def carries_footprint_events(span: ReadableSpan) -> bool:
    """Whether an SDK span has a footprint input event."""
    return any(is_footprint_input_event(event.name) for event in span.events)


def span_size(span: ReadableSpan, with_events: bool) -> int:
    """A cheap estimate of what a held SDK span costs in memory (bytes); its events are counted
    only ``with_events`` (``ReadableSpan.events`` copies them: spans without footprint skip it)."""
    attributes = span.attributes
    size = SPAN_BYTES + 96 * (len(attributes) if attributes else 0)
    return size + 480 * len(span.events) if with_events else size


@dataclass(frozen=True, slots=True)
class BufferStats:
    """Counters since start (and gauges: ``held_runs``, ``held_spans``, ``held_log_records``)."""

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
    """Runs released unannotated because ``max_runs`` traces or ``max_bytes`` were held."""
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
    """Footprint log records of a trace with no run held: consumed without a decision."""
    log_records_late: int = 0
    """Footprint log records of a trace whose run was already released."""
    log_records_after_shutdown: int = 0
    held_runs: int = 0
    held_spans: int = 0
    held_log_records: int = 0
    held_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(slots=True, eq=False)
class _Item:
    span: ReadableSpan
    held: bool
    """Handed on at release (False: handed on at once, kept only as evidence)."""
    runish: bool
    size: int
    parent_id: int


_Release = holding.Release[int, _Item, SpanEventView]
_Decided = dict[int, "dict[str, SpanNote] | Exception"]
"""Answers decided ahead for a batch (``decide_many``), by ``id(unit)``."""
_LIMIT_COUNTER = {"spans": "runs_span_limit", "events": "runs_log_limit"}
"""The counter of a run released by a per-run limit (else ``runs_overflowed``)."""


class RunBuffer:
    """The core keyed by trace id (int), a worker thread that decides released runs, the sink.

    ``run_started`` (from a processor's ``on_start``), ``offer`` (an ended span) and ``offer_log``
    (a footprint event that arrived as a log record) are called on application threads and only
    touch the core under one lock; deciding, annotating and the sink run on the worker thread.
    ``offer`` returns False when the caller should hand the span on itself right away (it is still
    kept as evidence when its trace is held).
    """

    def __init__(
        self,
        sink: Sink,
        decide: Decider,
        *,
        limits: HoldLimits = DEFAULT_LIMITS,
        span_limits: SpanLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "footprint-runs",
        observed: bool = False,
    ) -> None:
        self._observed = observed
        """Hold observed runs too (``EngineOptions.observed``): the model-call and agent spans of
        a trace with no recorder input, and its root span, wait for the root and are decided."""
        self._sink = sink
        self._decide = decide
        self._limits = limits
        self._span_limits = span_limits
        self._clock = clock
        self._name = name
        self.slice_seconds = SLICE_SECONDS
        """How long one release's decision keeps the worker before the next one's turn."""
        self.longest_turn = 0.0
        """The longest the worker was held by one release's decision at a time (seconds; a
        readout for the benchmarks and tests)."""
        self.longest_turn_cpu = 0.0
        """The same turn's longest thread CPU time (seconds)."""
        # Releases may come up to one tick after their deadline (grace is a lower bound).
        self._tick = min(max(limits.release_grace / 2, 0.001), 0.05)
        self._closed = False
        self._counts: dict[str, int] = dict.fromkeys((f.name for f in fields(BufferStats)), 0)
        self._reset()
        ref = weakref.ref(self)

        def reinit_in_child() -> None:
            buffer = ref()
            if buffer is not None:
                buffer._reset()

        os.register_at_fork(after_in_child=reinit_in_child)

    def _reset(self) -> None:
        """Fresh state and worker (at start, and in a child after ``os.fork``)."""
        self._lock = threading.Condition(threading.Lock())
        self._core: RunHolding[int, _Item, SpanEventView] = RunHolding(self._limits)
        self._core.wait_for_root = self._observed
        self._live: dict[int, list[ReadableSpan]] = {}
        self._ready: list[_Release] = []
        self._busy = 0
        """Releases the worker has taken and not handed on yet (being decided, in slices)."""
        self._stopping = False
        self._wake_at = -math.inf
        self._passed_quickly = itertools.count()
        self._worker = threading.Thread(target=self._work, name=self._name, daemon=True)
        if not self._closed:
            self._worker.start()

    # ── application threads ───────────────────────────────────────────────────────────────────

    def run_started(self, trace_id: int, span: ReadableSpan) -> None:
        """A run span started in ``trace_id``: its trace is held and its children group under it.

        ``span`` is the live run span: its footprint events (``maps.mounted`` comes first) decide
        whether its children's model-call spans must be held or can go on at once.
        """
        context = span.context
        if context is None:
            return
        with self._lock:
            if self._closed:
                return
            releases: list[_Release] = []
            self._core.run_started(trace_id, context.span_id, self._clock(), releases)
            self._live.setdefault(trace_id, []).append(span)
            self._queue(releases)  # a release, or the worker sleeps past this run's wait bound

    def pass_quickly(self, trace_id: int) -> bool:
        """True when a span of no role and no footprint event in ``trace_id`` can go on at once.

        Lock-free (dict reads and ``next`` on a counter are atomic in CPython): the common span
        of no agent run costs two lookups here. A run span of the trace starts before its
        children (``run_started`` then registers it), so a miss cannot skip a held run's child.
        """
        if self._core.knows(trace_id) or self._closed:
            return False
        next(self._passed_quickly)
        return True

    def offer(self, span: ReadableSpan, role: SpanRole, footprint: bool) -> bool:
        """An ended span. True: the buffer holds it and will hand it on. False: hand it on now."""
        context = span.context
        if context is None:
            return False
        freed: list[_Item] = []
        try:
            return self._offer(span, context.trace_id, context.span_id, role, footprint, freed)
        finally:
            # Held for an observed run whose trace turned out to be a recorded run with nothing
            # to decide: handed on as they are (outside the lock, as the worker hands on).
            self._hand_on([i.span for i in freed if i.held])

    def _offer(
        self,
        span: ReadableSpan,
        trace_id: int,
        span_id: int,
        role: SpanRole,
        footprint: bool,
        freed: list[_Item],
    ) -> bool:
        parent = span.parent
        # A remote parent never ends here: the span is this process's root of the trace.
        parent_id = parent.span_id if parent is not None and not parent.is_remote else 0
        with self._lock:
            counts = self._counts
            counts["spans_seen"] += 1
            if self._closed:
                counts["spans_after_shutdown"] += 1
                return False
            core = self._core
            if role is SpanRole.RUN:
                self._ended(trace_id, span_id)
            # Only spans that can receive notes wait: run and model-call spans of a trace that has
            # footprint events, spans carrying them, and spans their log records name. Only for
            # those are the live run spans' events read (tool spans are evidence either way).
            marked = footprint or core.has_footprint(trace_id)  # log records mark their trace
            notable = (
                role is SpanRole.RUN
                or role is SpanRole.PASS
                or (marked and core.has_events(trace_id, span_id))
            )
            if not marked and notable:
                marked = self._live_footprint(trace_id)
            # An observed run's notes go on its model-call and agent spans and on the trace's
            # root (its run span when it has no agent span): they wait for the root.
            observed = (
                self._observed
                and (role is SpanRole.PASS or role is SpanRole.AGENT or not parent_id)
                and not marked
                and not core.has_runs(trace_id)
            )
            hold = footprint or (marked and notable) or observed
            runish = role not in CONTAINER_ROLES or footprint
            releases: list[_Release] = []
            # Evidence is handed on at once (the export queue holds it too): counted flat.
            size = span_size(span, footprint) if hold else SPAN_BYTES
            where = core.offer(
                trace_id,
                span_id,
                role,
                _Item(span, hold, runish, size, parent_id),
                releases,
                # Only a run span or footprint events open a run here: a model call outside any
                # run span started in this process has nothing to wait for.
                # and, for observed runs, a model call or an agent span.
                opens=role is SpanRole.RUN
                or footprint
                or (observed and (role is SpanRole.PASS or role is SpanRole.AGENT)),
                footprint=marked,
                now=self._clock(),
            )
            if where != "hold":
                counts["spans_late" if where == "late" else "spans_passed"] += 1
                return False
            if core.bytes_held > self._limits.max_bytes:
                core.enforce(releases)
            counts["spans_held" if hold else "spans_passed"] += 1
            if role is SpanRole.RUN and not marked and not core.runs_pending(trace_id):
                # Nothing to decide and nothing held: done now, no worker, no wait.
                freed += core.discard(trace_id)
                self._live.pop(trace_id, None)
                counts["runs_without_footprint"] += 1
            elif releases or role is SpanRole.RUN or footprint or not parent_id:
                self._queue(releases)  # a release, or a due time that may have come nearer
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
            core = self._core
            releases: list[_Release] = []
            # Ids 0 are the invalid context: a record emitted outside any span.
            kept = bool(trace_id and span_id) and core.hold_event(
                trace_id,
                span_id,
                event,
                size=160 + 96 * len(event.attributes),
                now=self._clock(),
                create=False,
                releases=releases,
            )
            if kept:
                counts["log_records_held"] += 1
            else:
                late = core.knows(trace_id) and not core.is_held(trace_id)
                counts["log_records_late" if late else "log_records_unowned"] += 1
            core.enforce(releases)
            self._queue(releases)
            return kept

    # ── bookkeeping (lock held) ───────────────────────────────────────────────────────────────

    def _ended(self, trace_id: int, span_id: int) -> None:
        live = self._live.get(trace_id)
        if live:
            # on_end gets a fresh ReadableSpan, not the live object: match by span id.
            live[:] = [s for s in live if s.context is None or s.context.span_id != span_id]
            if not live:
                del self._live[trace_id]

    def _live_footprint(self, trace_id: int) -> bool:
        # Reads the live run spans' events (each under its own lock; never the other way round).
        return any(carries_footprint_events(live) for live in self._live.get(trace_id, ()))

    def _queue(self, releases: list[_Release]) -> None:
        for release in releases:
            if release.cause != "ended":
                self._live.pop(release.trace_id, None)
            if len(self._ready) + self._busy >= self._limits.max_runs:
                # The worker is a whole buffer behind: release this run unannotated right here (the
                # reason on its spans, counted) rather than grow without bound or drop it.
                self._counts["runs_released_raw"] += 1
                self._lock.release()
                try:
                    finish(self._process_steps(release, raw=True))
                finally:
                    self._lock.acquire()
                continue
            self._ready.append(release)
            self._lock.notify_all()
        due = self._core.next_due()
        # Wake the worker only when it sleeps past this deadline by more than one tick: waking
        # it for every run that ends costs the application threads GIL hand-offs under load.
        if due is not None and due + self._tick < self._wake_at:
            self._lock.notify_all()

    # ── worker thread ─────────────────────────────────────────────────────────────────────────

    def _work(self) -> None:
        slices: Slices[_Release, None] = Slices(self.slice_seconds)
        turns = StoreTurns()
        while True:
            with self._lock:
                while True:
                    self._ready += self._core.poll(self._clock())
                    if self._ready or self._stopping or slices:
                        break
                    now = self._clock()
                    due = self._core.next_due()
                    if due is not None:
                        # Coalesce: deadlines a tick apart are released together.
                        self._wake_at = max(due, now + self._tick)
                        self._lock.wait(self._wake_at - now)
                    else:
                        self._wake_at = math.inf
                        self._lock.wait()
                    self._wake_at = -math.inf  # awake: offers need not notify
                if not self._ready and not slices and self._stopping:
                    return
                batch, self._ready = self._ready, []
                for release in batch:
                    if release.cause != "ended":
                        self._live.pop(release.trace_id, None)
                self._busy += len(batch)
            # A decider in a child process answers the whole batch in one round trip first.
            decided = self._decide_batch(batch) if hasattr(self._decide, "decide_many") else None
            for release in batch:
                steps = self._process_steps(release, turn=turns.ticket(), decided=decided)
                slices.add(release, steps)
            # Turns until a slice's time has passed: then releases that fell due meanwhile join.
            until = time.perf_counter() + slices.budget
            while slices:
                ended = slices.step()
                if ended is not None:
                    release, outcome = ended
                    if isinstance(outcome, BaseException):
                        _logger.error(
                            "handing on trace %032x failed",
                            release.trace_id,
                            exc_info=outcome,
                        )
                    with self._lock:
                        self._busy -= 1
                        self._lock.notify_all()
                if time.perf_counter() >= until:
                    break
            self.longest_turn = max(self.longest_turn, slices.longest_turn)
            self.longest_turn_cpu = max(self.longest_turn_cpu, slices.longest_turn_cpu)

    def _process_steps(
        self,
        release: _Release,
        raw: bool = False,
        turn: Ticket | None = None,
        decided: _Decided | None = None,
    ) -> Steps[None]:
        """Decide a release and hand its spans on, in steps (one turn of the worker's round-robin
        at a time); ``turn`` orders its run-store use among the other releases'; ``decided``: the
        answers :meth:`_decide_batch` already has for its units."""
        try:
            held = [i.span for i in release.spans() if i.held]
            notes: dict[str, SpanNote] = {}
            if raw or release.cause == "overflow":
                if not raw:
                    self._count(_LIMIT_COUNTER.get(release.limit or "", "runs_overflowed"))
                reason = reason_for("overflow", "worker" if raw else release.limit, run_span=False)
                if reason is not None:
                    notes = unannotated_notes([SdkSpanView(s) for s in held], reason)
            else:
                for unit in release.units:
                    found = yield from self._decide_unit(release, unit, turn, decided)
                    notes = merge_notes(notes, found)
        finally:
            if turn is not None:
                turn.close()
        yield from self._apply(held, notes)

    def _decide_unit(
        self,
        release: _Release,
        unit: holding.Unit[int, _Item, SpanEventView],
        turn: Ticket | None,
        decided: _Decided | None = None,
    ) -> Steps[dict[str, SpanNote]]:
        if not any(i.held for i in unit.members):
            self._count("runs_without_footprint")
            return {}
        cause = release.cause
        if cause == "timeout":
            self._count("runs_timed_out")
        elif cause == "flush" and unit.run_span is None:
            self._count("runs_flushed_open")
        spans, incomplete, log_events = self._request(release, unit)
        # The engine's decider decides in steps; any other Decider in one call.
        stepped: Callable[..., Steps[dict[str, SpanNote]]] | None = getattr(
            self._decide, "steps", None
        )
        try:
            answer = decided.get(id(unit)) if decided is not None else None
            if isinstance(answer, Exception):
                raise answer
            # A decider of two arguments is asked with log events only when there are some.
            extra = {"log_events": log_events} if log_events else {}
            if answer is not None:
                notes = answer
            elif stepped is not None:
                notes = yield from stepped(spans, incomplete, turn=turn, **extra)
            else:
                notes = self._decide(spans, incomplete, **extra)
            self._count("runs_decided")
            return notes
        except Exception as exc:  # a bad run must never stop the pipeline
            _logger.exception(
                "deciding trace %032x failed; spans go on unannotated", release.trace_id
            )
            self._count("decision_errors")
            held = [SdkSpanView(i.span) for i in unit.members if i.held]
            return unannotated_notes(held, Reason(REASON_ERROR, f"{type(exc).__name__}"))

    def _request(
        self, release: _Release, unit: holding.Unit[int, _Item, SpanEventView]
    ) -> DecisionRequest:
        incomplete = reason_for(release.cause, release.limit, run_span=unit.run_span is not None)
        log_events = None
        if unit.log_events:
            log_events = {format(k, "016x"): v for k, v in unit.log_events.items()}
        return [i.span for i in unit.members], incomplete, log_events

    def _decide_batch(self, batch: Sequence[_Release]) -> _Decided:
        """Every unit of ``batch`` that will be decided, in one ``decide_many`` call: notes or the
        exception, by the unit's id (the units stay alive with the batch)."""
        asked = [
            (release, unit)
            for release in batch
            if release.cause != "overflow"
            for unit in release.units
            if any(i.held for i in unit.members)
        ]
        if not asked:
            return {}
        many: Callable[[list[DecisionRequest]], list[dict[str, SpanNote] | Exception]]
        many = self._decide.decide_many  # type: ignore[attr-defined]  # a BatchDecider
        answers = many([self._request(release, unit) for release, unit in asked])
        return {id(unit): answer for (_, unit), answer in zip(asked, answers, strict=True)}

    def _apply(self, held: list[ReadableSpan], notes: dict[str, SpanNote]) -> Steps[None]:
        out: list[ReadableSpan] = []
        applied = 0
        for span in held:
            note = notes.pop(SdkSpanView(span).span_id, None)
            if note is None:
                out.append(span)
            else:
                out.append(annotated_copy(span, note, self._span_limits))
                applied += 1
                yield None
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
        """Release every held run now and wait (at most the timeout) until all are handed on."""
        deadline = self._clock() + timeout_seconds
        with self._lock:
            self._queue(self._core.release_everything(self._clock(), "flush"))
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
            core = self._core
            counts["held_runs"] = core.runs_held
            counts["held_spans"] = core.spans_held
            counts["held_log_records"] = core.events_held
            counts["held_bytes"] = core.bytes_held
            counts["runs_tracked"] = core.traces_held_total
        return BufferStats(**counts)
