"""The hop's pipeline between receivers and forwarder: journal, run buffer, release worker, annotation.

A receiver hands over a parsed request; the pipeline classifies its spans, journals them (held
input or outbound batch), updates the run buffer and returns only once the journal is fsync'd —
then the receiver acknowledges. The release worker decides released runs, writes their annotated
spans to the journal as outbound batches (several runs per append and fsync: a group commit), and
only then retires the held input records. It decides in slices (``runs/slices.py``): releases are
decided round-robin, a few milliseconds each, and releases that fall due meanwhile join them, so
a trace released behind a 3,000-pass run is not held up for that whole decision.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint.annotate.backoff import Backoff
from otel_footprint.annotate.phoenix import Annotation
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.slices import SLICE_SECONDS, Slices, Steps, StoreTurns, Ticket
from otel_footprint.service import jsonlog
from otel_footprint.service.annotation import AnnotationStage, Decision
from otel_footprint.service.buffer import (
    BufferLimits,
    LateSpan,
    PackedNotes,
    Release,
    RunBuffer,
    SpanInfo,
)
from otel_footprint.service.journal import (
    KIND_HELD_LOGS,
    KIND_HELD_TRACES,
    KIND_OUT_LOGS,
    KIND_OUT_TRACES,
    Journal,
    QueueFullError,
    Replay,
)
from otel_footprint.service.memory import MemoryGuard
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.otlp import (
    Origin,
    count_log_records,
    count_spans,
    footprint_log_events,
    footprint_log_subset,
    group_spans,
    has_footprint_events,
    iter_spans,
    serialize_request,
    span_role,
    span_wires,
)
from otel_footprint.service.phoenix import PhoenixAnnotations
from otel_footprint.service.verdicts import VerdictLog
from otel_footprint.service.worker import Worker

_log = jsonlog.get("pipeline")
_early = jsonlog.Throttled(_log, interval=10.0)

GROUP_COMMIT_RELEASES = 64
"""At most this many decided traces share one journal append and fsync (when that many are due)."""
GROUP_COMMIT_SECONDS = 0.05
"""... and a decided trace waits at most about this long for the others of its group."""
WRITE_RETRY = Backoff(0.05, 2.0)
"""A journal write that failed (a full disk) is tried again after 50 ms, then twice as long each
time up to 2 s (the one backoff policy, annotate/backoff.py; no jitter: a local disk, no herd)."""


@dataclass(slots=True)
class _Decided:
    """A release decided and serialized, waiting for its group commit."""

    release: Release
    decisions: list[Decision]
    payload: bytes | None
    count: int
    annotations: list[Annotation]
    notes: dict[bytes, object] = field(default_factory=dict)
    pack: PackedNotes | None = None
    """The notes packed for the decision cache (off the lock, on the decision worker)."""


class OverloadedError(Exception):
    """The hop cannot take this request now; the sender should retry after ``retry_after`` s."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class JournalBlockedError(OverloadedError):
    """The journal cannot write (a full disk, an I/O error) and refuses input until a write
    succeeds: the hop is unavailable rather than overloaded (gRPC UNAVAILABLE, HTTP 503), and the
    sender retries after ``retry_after`` s as it would from an overloaded hop."""


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    annotate: bool = True
    forward_logs: bool = True
    limits: BufferLimits = field(default_factory=BufferLimits)


def classify(request: ExportTraceServiceRequest, wire: bytes | None = None) -> list[SpanInfo]:
    """Every span of a request with its role (reads only the recognition keys and event names)
    and its bytes as ``wire`` (the request's serialized form, if known) holds them.

    A span's client is its resource (the sending service): the buffer's limits release the oldest
    trace of the client holding the most, so one client's flood cannot evict the others' runs.
    """
    out: list[SpanInfo] = []
    other, agent = SpanRole.OTHER, SpanRole.AGENT
    clients: dict[int, bytes] = {}
    wires = span_wires(request, request.SerializeToString() if wire is None else wire)
    for (origin, span), data in zip(iter_spans(request), wires, strict=True):
        client = clients.get(id(origin))
        if client is None:
            client = clients[id(origin)] = origin.resource.SerializeToString(deterministic=True)
        role = span_role(span)
        out.append(
            SpanInfo(
                origin,
                span,
                role,
                # Only a span of no role (or an agent span, a container) needs its event names
                # read: a role of a run already makes it runish.
                (role is other or role is agent) and has_footprint_events(span),
                span.trace_id,
                span.span_id,
                span.parent_span_id,
                data,
                client,
            )
        )
    return out


def _serialize(items: Sequence[tuple[Origin, Span | bytes]]) -> bytes:
    # Written around each span's own bytes: copying every span into a request first cost ~3%.
    return serialize_request(group_spans(items))


RSS_LOW_WATER = 0.1
"""Over the resident-memory limit, input is refused while the runs held and releasing exceed this
share of ``max_bytes`` (or of the memory limit, if lower) instead of 90%: ~25 MiB by default,
several seconds of the sustainable rate."""
RSS_CACHE_SHARE = 0.25
"""... and the decision cache keeps at most this part of its share."""

JOURNAL_MEMORY = 64 << 20
"""The journal's in-memory outbound batches at most, whatever ``max_bytes`` (beyond: read back)."""


def memory_shares(max_bytes: int) -> tuple[int, int]:
    """``(journal, verdicts)``: the bytes of ``processing.max_bytes`` the journal's in-memory
    outbound batches (a quarter, at most :data:`JOURNAL_MEMORY`) and the verdict log's accounts
    (an eighth) may take. Both count against it (:meth:`Pipeline.outside_bytes`), so each is kept
    to a share that leaves the runs most of it: they give way (oldest first), never refuse."""
    return min(JOURNAL_MEMORY, max_bytes // 4), max_bytes // 8


class Pipeline:
    """Journal + run buffer + release worker; thread-safe entry points for the receivers."""

    def __init__(
        self,
        options: PipelineOptions,
        journal: Journal,
        stage: AnnotationStage,
        metrics: HopMetrics,
        verdicts: VerdictLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        commit_hooks: Sequence[Callable[[], None]] = (),
        decided_hooks: Sequence[Callable[[Decision], None]] = (),
        phoenix: PhoenixAnnotations | None = None,
        memory: MemoryGuard | None = None,
    ) -> None:
        self.options = options
        self.journal = journal
        self.stage = stage
        self.metrics = metrics
        self.verdicts = verdicts
        self.clock = clock
        self.commit_hooks = tuple(commit_hooks)
        """Called at each group commit, before held input is retired (flush the run store...)."""
        self.decided_hooks = tuple(decided_hooks)
        """Called with each decided run, beside the query service's copy (the live run page)."""
        self.phoenix = phoenix
        self.memory = memory
        """The real-memory backstop (None: none): see :meth:`_admit`."""
        self.buffer = RunBuffer(options.limits)
        self.buffer.core.outside_bytes = self.outside_bytes
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._forced: list[Release] = []
        self._stop = False
        self._deadline: float | None = None
        """Set by :meth:`flush`: past it (monotonic), releases are no longer decided."""
        self._worker = Worker("otel-footprint-release", self._step)
        self.slice_seconds = SLICE_SECONDS
        """How long one release's decision keeps the release worker before the next one's turn."""
        self.longest_turn = 0.0
        """The longest the release worker was held by one release's decision at a time (seconds;
        a readout for the benchmarks and tests)."""
        self.longest_turn_cpu = 0.0
        """The same turn's longest thread CPU time (seconds)."""
        m = metrics
        m.runs_held.set_reader(lambda: self.buffer.core.runs_held)
        m.spans_held.set_reader(lambda: self.buffer.core.spans_held)
        m.bytes_held.set_reader(lambda: self.buffer.core.bytes_held + self.buffer.releasing_bytes)
        m.memory_bytes.set_reader(self.buffer.core.used_bytes)
        m.decision_cache_bytes.set_reader(lambda: self.buffer.core.cache_bytes)
        m.decision_cache_traces.set_reader(self.buffer.core.cached_traces)
        m.queue_bytes.set_reader(lambda: journal.pending_bytes)
        m.queue_disk_bytes.set_reader(lambda: journal.disk_bytes)
        m.queue_batches.set_reader(lambda: journal.outbound_count)
        m.queue_blocked.set_reader(lambda: journal.blocked is not None)
        journal.on_write_failure = lambda error: m.queue_write_failures.inc(1, error)
        if memory is not None:
            m.resident_bytes.set_reader(lambda: memory.rss)
            m.memory_limit_bytes.set_reader(lambda: memory.limit)

    def outside_bytes(self) -> int:
        """What the hop keeps in memory outside the run buffer that counts against ``max_bytes``
        with the runs held and releasing (:meth:`RunHolding.used_bytes`), as the Collector's
        memory_limiter counts the whole process: the journal's outbound batches waiting for the
        forwarder, and the verdict log's accounts. Lock-free reads (called under the buffer's lock)."""
        verdicts = self.verdicts.memory_bytes if self.verdicts is not None else 0
        return self.journal.memory_bytes + verdicts

    # -- startup -------------------------------------------------------------------------------

    def recover(self, replay: Replay) -> None:
        """Put held input found in the journal back into the buffer (after a crash or restart)."""
        now = self.clock()
        spans = events = 0
        with self._lock, self.buffer.recovering():
            for record, payload in replay.held:
                if record.kind == KIND_HELD_TRACES:
                    request = ExportTraceServiceRequest.FromString(payload)
                    infos = classify(request, payload)
                    self._forced.extend(self.buffer.hold(infos, record.seq, now))
                    if not self.buffer.holds_record(record.seq):
                        # Every span a duplicate of one held from an earlier record.
                        self.journal.mark_done([record.seq])
                    spans += len(infos)
                elif record.kind == KIND_HELD_LOGS:
                    logs = ExportLogsServiceRequest.FromString(payload)
                    found = [(e.trace_id, e.span_id, e.event) for e in footprint_log_events(logs)]
                    size = len(payload) // max(len(found), 1)
                    kept, releases = self.buffer.hold_events(found, record.seq, size, now)
                    self._forced.extend(releases)
                    events += kept
                    if kept == 0:
                        self.journal.mark_done([record.seq])
        for damage in replay.damaged:
            self.metrics.queue_quarantined.inc()
            self.metrics.queue_quarantined_bytes.inc(damage.size)
        if replay.held or replay.outbound:
            _log.info(
                "recovered from the journal",
                extra={
                    "held_spans": spans,
                    "held_log_events": events,
                    "outbound_batches": replay.outbound,
                    "truncated_bytes": replay.truncated_bytes,
                    "quarantined_regions": len(replay.damaged),
                },
            )

    def start(self) -> None:
        self._worker.start()

    # -- the receivers' side -------------------------------------------------------------------

    def _admit(self, *, locked: bool = True) -> None:
        # Released runs still waiting for the worker count against the memory bound with the
        # held ones (buffer.releasing_bytes): when the worker falls behind, senders are told to
        # retry instead of memory growing, before a limit releases runs unannotated.
        # Unlocked (before classifying a request, so a refused one costs no more memory): the
        # same answer from the last readings, lock-free ints; under the lock it is authoritative.
        if not self.buffer.core.room():
            raise OverloadedError("the run buffer is full", retry_after=1.0)
        memory = self.memory
        if memory is None:
            return
        core = self.buffer.core
        if locked and not memory.over():
            core.cache_cap = None
            return
        if not locked and not memory.is_over:
            return
        # The backstop: the process really occupies more than the limit, whatever the estimates
        # say. The decision cache gives way first; input is refused while the runs held and
        # releasing (what drains by itself) exceed a low-water share of the limit, so memory
        # stops growing and what is freed is reused, yet a process that stays big after a spike
        # (allocator slack) still serves at that reduced holding.
        limits = core.limits
        if locked:
            core.cache_cap = int(limits.cache_budget * RSS_CACHE_SHARE)
            core.shrink_cache(core.cache_cap)
        low_water = min(limits.max_bytes, memory.limit) * RSS_LOW_WATER
        if core.bytes_held + core.releasing_bytes > low_water:
            self.metrics.memory_limit_refusals.inc()
            raise OverloadedError(
                f"the process is over its memory limit ({memory.rss} of {memory.limit} "
                "resident bytes)",
                retry_after=1.0,
            )

    def ingest_traces(
        self, request: ExportTraceServiceRequest, wire: bytes | None, transport: str
    ) -> int:
        """Accept a traces request durably; returns the number of spans accepted."""
        total = count_spans(request)
        if total == 0:
            return 0
        if wire is None:
            wire = request.SerializeToString()
        if not self.options.annotate:
            self._append_and_sync([(KIND_OUT_TRACES, wire, total)])
            self.metrics.spans_received.inc(total, transport)
            self.metrics.spans_passed_through.inc(total)
            self.metrics.spans_queued.inc(total)
            return total
        self._admit(locked=False)
        infos = classify(request, wire)
        late_annotated = 0
        duplicate: int | None = None
        with self._lock:
            self._admit()
            hold, late, passed = self.buffer.route(infos)
            outbound: list[tuple[Origin, Span | bytes]] = [(s.origin, s.wire) for s in passed]
            for item in late:
                if self._annotate_late(item):
                    late_annotated += 1
                    outbound.append((item.info.origin, item.info.span))
                else:
                    outbound.append((item.info.origin, item.info.wire))
            records: list[tuple[int, bytes, int]] = []
            if hold:
                payload = (
                    wire if len(hold) == total else _serialize([(s.origin, s.wire) for s in hold])
                )
                records.append((KIND_HELD_TRACES, payload, len(hold)))
            if outbound:
                untouched = len(outbound) == total and late_annotated == 0
                payload = wire if untouched else _serialize(outbound)
                records.append((KIND_OUT_TRACES, payload, len(outbound)))
            last = self._append(records)
            if hold:
                held_seq = last - len(records) + 1
                releases = self.buffer.hold(hold, held_seq, self.clock())
                self._queue_releases(releases)
                if not self.buffer.holds_record(held_seq):
                    duplicate = held_seq
        self.journal.sync(last)
        if duplicate is not None:
            # A sender's retry of spans still held: the first copy stands, this record is done.
            self.journal.mark_done([duplicate])
        self.metrics.spans_received.inc(total, transport)
        if passed:
            self.metrics.spans_passed_through.inc(len(passed))
        if late:
            self.metrics.late_spans.inc(len(late))
            self.metrics.spans_annotated.inc(late_annotated)
        if passed or late:
            self.metrics.spans_queued.inc(len(passed) + len(late))
        return total

    def _annotate_late(self, item: LateSpan) -> bool:
        try:
            return self.stage.annotate_late(item)
        except Exception:  # a bad cached note must not stop the span
            self.metrics.decision_errors.inc()
            _log.exception("annotating a late span failed; forwarding it as received")
            return False

    def ingest_logs(
        self, request: ExportLogsServiceRequest, wire: bytes | None, transport: str
    ) -> int:
        """Accept a logs request: forwarded as is, footprint events kept for the span join."""
        total = count_log_records(request)
        if total == 0:
            return 0
        if wire is None:
            wire = request.SerializeToString()
        records: list[tuple[int, bytes, int]] = []
        if self.options.forward_logs:
            records.append((KIND_OUT_LOGS, wire, total))
        events = footprint_log_events(request) if self.options.annotate else []
        event_size = 0
        if events:
            subset = footprint_log_subset(request)
            assert subset is not None
            held_wire = subset.SerializeToString()
            # Held log events count against the buffer's byte bound like held spans do.
            event_size = len(held_wire) // len(events)
            records.append((KIND_HELD_LOGS, held_wire, len(events)))
        if not records:
            return total
        done_now: list[int] = []
        with self._lock:
            if events:
                self._admit()
            last = self._append(records)
            if events:
                found = [(e.trace_id, e.span_id, e.event) for e in events]
                kept, releases = self.buffer.hold_events(found, last, event_size, self.clock())
                self._queue_releases(releases)
                if kept == 0:
                    done_now.append(last)
        self.journal.sync(last)
        if done_now:
            self.journal.mark_done(done_now)
        self.metrics.log_records_received.inc(total, transport)
        return total

    def _append(self, records: list[tuple[int, bytes, int]]) -> int:
        try:
            seqs = self.journal.append(records)
        except QueueFullError as exc:
            if self.journal.blocked is not None:  # refused until a write succeeds again
                raise JournalBlockedError(str(exc), retry_after=2.0) from exc
            raise OverloadedError(str(exc), retry_after=2.0) from exc
        except OSError as exc:
            # The journal is as it was before this write and refuses input until a write
            # succeeds (it logged what it waits for): this sender retries like the next ones.
            raise JournalBlockedError(
                f"the disk queue cannot write: {exc}", retry_after=2.0
            ) from exc
        return seqs[-1]

    def _append_and_sync(self, records: list[tuple[int, bytes, int]]) -> None:
        last = self._append(records)
        self.journal.sync(last)

    def _queue_releases(self, releases: list[Release]) -> None:
        if releases:
            self._forced.extend(releases)
            self.buffer.releasing_bytes += sum(r.size for r in releases)
            self._wake.notify()

    # -- the release worker --------------------------------------------------------------------

    def _step(self) -> bool:
        # One turn of the release worker (a failing settle is logged by the Worker; its held
        # input stays in the journal).
        with self._lock:
            if self._stop:
                return False
            releases, orphans = self._take_due()
            if not releases and not orphans:
                due = self.buffer.core.next_due()
                wait = 0.5 if due is None else min(0.5, max(0.0, due - self.clock()))
                self._wake.wait(wait)
                return True
        self._settle(releases, orphans, poll=True)
        return True

    def _take_due(self) -> tuple[list[Release], list[int]]:
        # Called with the lock held. Due releases stay in memory until written out: they count
        # against max_bytes from here (forced ones were counted when queued).
        due = self.buffer.poll(self.clock())
        self.buffer.releasing_bytes += sum(r.size for r in due)
        releases = self._forced + due
        self._forced = []
        return releases, self.buffer.take_orphan_done()

    def _settle(self, releases: list[Release], orphans: list[int], *, poll: bool = False) -> None:
        """Decide and commit ``releases`` (emptied as it goes: a decided release holds its
        parsed, annotated spans, several times their wire size, and one poll can hand over
        thousands; each is let go once committed, not when the last of them is).

        The releases are decided in slices, round-robin (``runs/slices.py``): each gets the thread
        for at most :attr:`slice_seconds` at a time. With ``poll`` (the worker), releases that
        fall due while a long decision is under way join the round at once."""
        if orphans:
            self.journal.mark_done(orphans)
        # Group commit: several decided releases go to the journal as one append (one write, and
        # one wake-up of the forwarder, which then merges them into one send) and share one fsync;
        # only then are their held input records retired (a crash before the fsync replays them).
        batch: list[_Decided] = []
        slices: Slices[Release, _Decided] = Slices(self.slice_seconds)
        turns = StoreTurns()
        for release in releases:
            slices.add(release, self._decide_steps(release, turns.ticket()))
        releases.clear()
        opened = polled = time.monotonic()
        try:
            while slices:
                if self._deadline is not None and time.monotonic() >= self._deadline:
                    self._leave_undecided(slices.tags())
                    break
                ended = slices.step()
                if ended is not None:
                    decided = ended[1]
                    if isinstance(decided, BaseException):
                        raise decided
                    batch.append(decided)
                now = time.monotonic()
                if batch and (
                    len(batch) >= GROUP_COMMIT_RELEASES or now - opened >= GROUP_COMMIT_SECONDS
                ):
                    done, batch = batch, []
                    self._commit(done)
                    opened = time.monotonic()
                if poll and slices and now - polled >= self.slice_seconds:
                    polled = now
                    with self._lock:
                        poll = not self._stop  # once stopped, flush() takes what is still due
                        due, orphans = self._take_due() if poll else ([], [])
                    if orphans:
                        self.journal.mark_done(orphans)
                    for release in due:
                        slices.add(release, self._decide_steps(release, turns.ticket()))
            if batch:
                done, batch = batch, []
                self._commit(done)
        except BaseException:
            # What was neither committed nor handed to _commit leaves memory with this frame:
            # stop counting it, or back-pressure would refuse senders until a restart (its input
            # records are still in the journal and replay after one).
            leftover = sum(r.size for r in slices.tags()) + sum(d.release.size for d in batch)
            if leftover:
                with self._lock:
                    self.buffer.releasing_bytes -= leftover
            raise
        finally:
            self.longest_turn = max(self.longest_turn, slices.longest_turn)
            self.longest_turn_cpu = max(self.longest_turn_cpu, slices.longest_turn_cpu)

    def process_due(self) -> int:
        """Decide and queue whatever is due now, on the calling thread; returns releases handled.

        The worker does this continuously; tests with a fake clock call it directly.
        """
        with self._lock:
            releases, orphans = self._take_due()
        count = len(releases)
        self._settle(releases, orphans)
        return count

    def _decide_steps(self, release: Release, turn: Ticket) -> Steps[_Decided]:
        """Decide a release, annotate its spans in place and serialize them (no journal yet), in
        steps. ``decision_latency`` is the wall time from its first step to its last: the turns
        other releases took in between count (that is the delay the trace sees)."""
        started = time.perf_counter()
        decisions: list[Decision] = []
        failed = False
        try:
            decisions = yield from self.stage.annotate_steps(release, turn)
        except Exception:  # the spans must flow on whatever the engine does
            failed = True
            self.metrics.decision_errors.inc()
            _log.exception(
                "deciding a released trace failed; forwarding it unannotated",
                extra={"trace_id": release.trace_id.hex()},
            )
        finally:
            turn.close()
        elapsed = time.perf_counter() - started
        yield None  # publishing and serializing a long run's spans are steps of their own
        if self.verdicts is not None:
            # Before the spans leave: whoever sees the annotation can query the account.
            for d in decisions:
                try:
                    self.verdicts.publish(d)
                except Exception:  # the query service's copy must not hold the spans back
                    _log.exception("cannot record a decided run for the query service")
        for hook in self.decided_hooks:
            for d in decisions:
                try:
                    hook(d)
                except Exception:  # a reader's copy must not hold the spans back
                    _log.exception("cannot hand a decided run to a reader")
        count = release.span_count
        if not count:
            return _Decided(release, decisions, None, 0, [])
        self.metrics.decision_latency.record(elapsed)
        annotations: list[Annotation] = []
        if self.phoenix is not None and decisions:
            annotations = self.phoenix.annotations_for(release, decisions)
        notes: dict[bytes, object] = {}
        for d in decisions:
            notes.update(d.notes)
        # A run that ended is noted only where its decisions' notes and the cached notes of its
        # late spans say (AnnotationStage): a span read but not noted leaves as held.
        ended = release.cause == "ended" and not failed
        noted = notes.keys() | release.late_notes.keys()
        payload = _serialize(
            [(h.origin, h.wire(not ended or h.span_id in noted)) for h in release.spans()]
        )
        pack = PackedNotes(notes) if notes else None
        return _Decided(release, decisions, payload, count, annotations, notes, pack)

    def _commit(self, batch: list[_Decided]) -> None:
        queued = [d for d in batch if d.payload is not None]
        records = [(KIND_OUT_TRACES, d.payload, d.count) for d in queued if d.payload is not None]
        for d in batch:
            # Counted before the forwarder can see the records: whoever sees the spans arrive
            # downstream sees them counted.
            self._account(d.release, d.decisions, d.count)
        last, retire = self._write_out(batch, queued, records)
        for hook in self.commit_hooks:
            try:
                hook()
            except Exception:  # a state store that cannot write must not stop the spans
                _log.exception("cannot write decided run state; going on without it")
        if last:
            self._retrying(lambda: self.journal.sync(last), batch, counted=False)
        if retire:
            self.journal.mark_done(retire)

    def _write_out(
        self, batch: list[_Decided], queued: list[_Decided], records: list[tuple[int, bytes, int]]
    ) -> tuple[int, list[int]]:
        """Append the decided traces' spans as outbound records (tried until it succeeds: a
        decided run is never dropped from memory); returns the last sequence number and the
        input records to retire once it is durable."""
        out: list[int] = []

        def append() -> None:
            with self.phoenix.registering() if self.phoenix is not None else nullcontext():
                if records:
                    seqs = self.journal.append(records, admit=False)
                    out.append(seqs[-1])
                    if self.phoenix is not None:
                        for d, seq in zip(queued, seqs, strict=True):
                            self.phoenix.expect(seq, d.annotations)

        self._retrying(append, batch, counted=True, locked=True)
        with self._lock:
            for d in batch:
                self.buffer.releasing_bytes -= d.release.size
            for d in queued:
                # Every decided trace is counted in the cache's share, notes or not.
                self.buffer.remember_packed(d.release.trace_id, d.pack, d.notes, d.count)
            # Written out: the input records nothing held or releasing refers to any more are
            # retired (after the fsync). Not at release time: see RunBuffer.retire.
            retire = [seq for d in batch for seq in self.buffer.retire(d.release)]
        return (out[0] if out else 0), retire

    def _retrying(
        self,
        write: Callable[[], None],
        batch: list[_Decided],
        *,
        counted: bool,
        locked: bool = False,
    ) -> None:
        """Run a journal ``write`` until it succeeds, waiting (off the lock, backing off) while
        it fails: the journal stays as it was before each failed try and refuses new input
        meanwhile, so what waits here is bounded. At shutdown a failing write is given up on:
        the held input records stay pending and replay after the restart."""
        attempt = 0
        while True:
            try:
                if locked:
                    with self._lock:
                        write()
                else:
                    write()
                return
            except OSError:
                with self._lock:
                    if self._stop:
                        if counted:  # they leave memory with this frame
                            for d in batch:
                                self.buffer.releasing_bytes -= d.release.size
                        raise
                    self._wake.wait(WRITE_RETRY.delay(attempt))
                attempt += 1

    def _account(self, release: Release, decisions: list[Decision], spans: int) -> None:
        m = self.metrics
        m.spans_queued.inc(spans)
        m.spans_annotated.inc(sum(d.annotated_spans for d in decisions))
        for d in decisions:
            if d.verdict is not None:
                m.verdicts.record(d.verdict, d.agent)
            if d.verdict is not None and d.verdict.rode_while_parked:
                m.served_chars_while_parked.inc(sum(r.chars for r in d.verdict.rode_while_parked))
                m.served_passes_while_parked.inc(
                    sum(1 for p in d.verdict.passes if p.served_while_parked)
                )
        runs = max(len(release.units), 1) if spans else 0
        if runs:
            m.runs_released.inc(runs, release.cause)
        if release.cause == "timeout":
            m.runs_released_timeout.inc(runs)
        elif release.cause == "overflow":
            m.runs_released_overflow.inc(runs, release.limit or "unknown")
        now = self.clock()
        for unit in release.units:
            if unit.run_arrived is not None:
                m.release_delay.record(max(0.0, now - unit.run_arrived))
        if release.cause in ("overflow", "timeout"):
            # One line per cause and limit per interval (runs_released_* count every trace):
            # under overload a line per trace would flood the log.
            _early.log(
                logging.WARNING,
                f"{release.cause}:{release.limit}",
                "released a trace early",
                {
                    "trace_id": release.trace_id.hex(),
                    "cause": release.cause,
                    "limit": release.limit,
                    "spans": spans,
                },
            )

    # -- shutdown ------------------------------------------------------------------------------

    def _leave_undecided(self, releases: Sequence[Release]) -> None:
        """Past the shutdown deadline: ``releases`` are not decided. Their input records stay
        pending in the journal (a record is retired only when every release it fed is written
        out: docs/design.md), so they are held again and decided after the restart; here they
        only leave memory."""
        with self._lock:
            self.buffer.releasing_bytes -= sum(r.size for r in releases)
        _log.info(
            "the shutdown deadline passed: runs left in the journal, decided after the restart",
            extra={
                "traces": len(releases),
                "spans": sum(r.span_count for r in releases),
            },
        )

    def flush(self, deadline: float | None = None) -> None:
        """Stop the worker, then release and queue everything still held (graceful shutdown).

        With a ``deadline`` (monotonic), deciding stops there, the worker's decisions under way
        included: what was decided is written out, the rest stays in the journal for the next
        start (deciding thousands of held runs took 30 s, far past ``shutdown_timeout``)."""
        with self._lock:
            self._stop = True
            self._deadline = deadline
            self._wake.notify_all()
        self._worker.join()
        with self._lock:
            releases, orphans = self._take_due()
            releases += self.buffer.release_everything(self.clock())
            orphans += self.buffer.take_orphan_done()
        try:
            self._settle(releases, orphans)
        except OSError as exc:  # a commit that still cannot be written is not retried now
            _log.error(
                "stopping while the disk queue cannot write; the runs held stay in the journal "
                "and are replayed at the next start",
                extra={"error": str(exc), "waiting_for": self.journal.blocked},
            )

    @property
    def is_running(self) -> bool:
        return self._worker.is_alive
