"""The run buffer: holds an agent run's spans until its run span ends, then releases the run whole.

Keyed by trace (every span of a run leg shares its trace). A run is released ``release_grace``
after its run span arrives (late children get that long), the whole trace after its root span
arrives, and everything once ``max_wait`` has passed since the trace's first held span (decided
then with ``complete=false``). Spans of a run already released are *late*: they are annotated
from the decision cache and forwarded at once. Limits on traces held, bytes held and spans per
run release the oldest trace unannotated (with the reason) instead of dropping anything. Spans of
traces with no agent-run span are never held.

Not thread-safe: the hop calls it under one lock. Times are passed in (monotonic seconds).
"""

from __future__ import annotations

import collections
import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal, TypeAlias

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.spans import SpanEventView
from otel_footprint.service.otlp import Origin, run_id_of

Cause: TypeAlias = Literal["ended", "root", "timeout", "overflow", "shutdown"]
Limit: TypeAlias = Literal["runs", "bytes", "spans"]


@dataclass(slots=True, eq=False)
class SpanInfo:
    """A received span with what routing needs (classified once, at the receiver)."""

    origin: Origin
    span: Span
    role: SpanRole
    has_footprint_events: bool
    """For a span of no role: whether it carries footprint events (not read for the others)."""
    trace_id: bytes
    span_id: bytes
    parent_id: bytes

    @property
    def runish(self) -> bool:
        """Part of an agent run: a run, model-call or tool span, or one carrying footprint events."""
        return self.role is not SpanRole.OTHER or self.has_footprint_events


@dataclass(slots=True, eq=False)
class HeldSpan:
    info: SpanInfo
    seq: int
    size: int
    arrived: float


@dataclass(slots=True, eq=False)
class HeldEvent:
    event: SpanEventView
    seq: int
    size: int = 0
    """Wire bytes it stands for (its share of the held logs record), counted in ``bytes_held``."""


@dataclass(slots=True, eq=False)
class RunUnit:
    """One run to decide: its run span (None when it never arrived), members, joined log events."""

    run_span: HeldSpan | None
    members: list[HeldSpan]
    log_events: dict[bytes, list[SpanEventView]]
    run_arrived: float | None


@dataclass(frozen=True, slots=True)
class LateSpan:
    """A span of an already-decided run: the cached note for it, if the decision wrote one."""

    info: SpanInfo
    note: object | None
    run_span_id: bytes | None
    run_id: str | None
    cause: Cause | None


@dataclass(slots=True, eq=False)
class Release:
    """Spans leaving the buffer together (one trace), with why and what to decide."""

    trace_id: bytes
    cause: Cause
    limit: Limit | None
    units: list[RunUnit]
    others: list[HeldSpan]
    """Held spans of no run (e.g. the trace's plain root): forwarded as they are."""
    late: list[HeldSpan] = field(default_factory=list)
    """Held spans whose run turned out to be already decided (a chain closed later)."""
    late_notes: dict[bytes, object] = field(default_factory=dict)
    """The decision cache's notes for ``late`` spans that have one."""
    seqs_done: list[int] = field(default_factory=list)
    """Journal records no longer referenced once this release is durably re-queued."""
    size: int = 0

    def spans(self) -> Iterable[HeldSpan]:
        for unit in self.units:
            yield from unit.members
        yield from self.others
        yield from self.late

    @property
    def span_count(self) -> int:
        return sum(len(u.members) for u in self.units) + len(self.others) + len(self.late)


class _State(Enum):
    ACTIVE = "active"
    DONE = "done"
    """Every run released normally; a new run in the same trace may still start."""
    CLOSED = "closed"
    """Released on root / timeout / overflow / shutdown: anything later is late."""


@dataclass(slots=True, eq=False)
class _Entry:
    trace_id: bytes
    first_seen: float
    state: _State = _State.ACTIVE
    held: dict[bytes, HeldSpan] = field(default_factory=dict)
    events: dict[bytes, list[HeldEvent]] = field(default_factory=dict)
    parents: dict[bytes, bytes] = field(default_factory=dict)
    run_arrival: dict[bytes, float] = field(default_factory=dict)
    run_ids: dict[bytes, str | None] = field(default_factory=dict)
    released_runs: set[bytes] = field(default_factory=set)
    notes: dict[bytes, object] = field(default_factory=dict)
    root_arrival: float | None = None
    closed_cause: Cause | None = None
    size: int = 0
    due: float = 0.0

    def nearest_run(self, span_id: bytes, parent_id: bytes) -> bytes | None:
        """The closest run span at or above this span, following parent links seen so far."""
        if span_id in self.run_arrival:
            return span_id
        cur = parent_id
        for _ in range(len(self.parents) + 1):
            if not cur:
                return None
            if cur in self.run_arrival:
                return cur
            nxt = self.parents.get(cur)
            if nxt is None:
                return None
            cur = nxt
        return None  # a parent cycle: treat as broken


@dataclass(frozen=True, slots=True)
class BufferLimits:
    release_grace: float = 1.0
    max_wait: float = 300.0
    max_runs: int = 10000
    max_bytes: int = 256 << 20
    max_spans_per_run: int = 20000
    cache_traces: int = 20000
    cache_spans: int = 1_000_000


class RunBuffer:
    """Held runs by trace, release scheduling, limits and the decision cache."""

    def __init__(self, limits: BufferLimits) -> None:
        self.limits = limits
        self._entries: dict[bytes, _Entry] = {}
        self._active: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._idle: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._heap: list[tuple[float, int, bytes]] = []
        self._tick = itertools.count()
        self._refs: dict[int, int] = {}
        self._links = 0
        self._orphan_done: list[int] = []
        self.bytes_held = 0
        self.spans_held = 0

    # -- state for metrics ---------------------------------------------------------------------

    @property
    def runs_held(self) -> int:
        return len(self._active)

    def holds_record(self, seq: int) -> bool:
        """Whether a held span or event still refers to journal record ``seq``."""
        return seq in self._refs

    def cached_traces(self) -> int:
        """Decided traces kept in the decision cache (for late spans)."""
        return len(self._idle)

    # -- routing at the receiver ---------------------------------------------------------------

    def route(
        self, items: Sequence[SpanInfo]
    ) -> tuple[list[SpanInfo], list[LateSpan], list[SpanInfo]]:
        """Split a request's spans into (to hold, late, to pass through at once)."""
        runish_traces = {s.trace_id for s in items if s.runish}
        for s in items:
            entry = self._entries.get(s.trace_id)
            if entry is not None and s.span_id not in entry.parents:
                entry.parents[s.span_id] = s.parent_id
                self._links += 1
        hold: list[SpanInfo] = []
        late: list[LateSpan] = []
        passed: list[SpanInfo] = []
        for s in items:
            entry = self._entries.get(s.trace_id)
            if entry is None:
                (hold if s.trace_id in runish_traces else passed).append(s)
                continue
            run = entry.nearest_run(s.span_id, s.parent_id)
            if entry.state is _State.CLOSED or (run is not None and run in entry.released_runs):
                late.append(
                    LateSpan(
                        s,
                        entry.notes.get(s.span_id),
                        run,
                        entry.run_ids.get(run) if run is not None else None,
                        entry.closed_cause,
                    )
                )
            elif entry.state is _State.ACTIVE or s.trace_id in runish_traces:
                hold.append(s)
            else:
                passed.append(s)
        return hold, late, passed

    # -- holding -------------------------------------------------------------------------------

    def hold(
        self, items: Sequence[SpanInfo], seq: int, size_each: int, now: float
    ) -> list[Release]:
        """Keep spans (journal record ``seq``); returns releases forced by the limits."""
        releases: list[Release] = []
        touched: dict[bytes, _Entry] = {}
        for s in items:
            entry = self._activate(s.trace_id, now, releases)
            if s.span_id in entry.held:
                # A duplicate (a sender's retry): keep the first copy, account nothing.
                continue
            held = HeldSpan(s, seq, size_each, now)
            entry.held[s.span_id] = held
            if s.span_id not in entry.parents:
                entry.parents[s.span_id] = s.parent_id
                self._links += 1
            entry.size += size_each
            self.bytes_held += size_each
            self.spans_held += 1
            self._refs[seq] = self._refs.get(seq, 0) + 1
            if s.role is SpanRole.RUN:
                entry.run_arrival[s.span_id] = now
                entry.run_ids[s.span_id] = run_id_of(s.span)
            if not s.parent_id:
                entry.root_arrival = now
            touched[s.trace_id] = entry
        for entry in touched.values():
            if entry.state is not _State.ACTIVE:
                continue
            if len(entry.held) > self.limits.max_spans_per_run:
                releases.append(self._release_all(entry, "overflow", "spans", now))
            else:
                self._schedule(entry)
        releases.extend(self._enforce_bytes(now))
        self._trim_cache()
        return releases

    def hold_events(
        self,
        events: Sequence[tuple[bytes, bytes, SpanEventView]],
        seq: int,
        size_each: int,
        now: float,
    ) -> tuple[int, list[Release]]:
        """Keep footprint log events ``(trace_id, span_id, event)`` for the join.

        Events of an already-decided run are not kept (counted late by the caller). They count
        against the byte bound like spans, so log records whose spans never come cannot pile up.
        Returns how many were kept and any releases forced by the limits.
        """
        releases: list[Release] = []
        kept = 0
        for trace_id, span_id, event in events:
            entry = self._entries.get(trace_id)
            if entry is not None and entry.state is not _State.ACTIVE:
                run = entry.nearest_run(span_id, entry.parents.get(span_id, b""))
                if entry.state is _State.CLOSED or (run is not None and run in entry.released_runs):
                    continue
            entry = self._activate(trace_id, now, releases)
            entry.events.setdefault(span_id, []).append(HeldEvent(event, seq, size_each))
            entry.size += size_each
            self.bytes_held += size_each
            self._refs[seq] = self._refs.get(seq, 0) + 1
            self._schedule(entry)
            kept += 1
        releases.extend(self._enforce_bytes(now))
        return kept, releases

    def _activate(self, trace_id: bytes, now: float, releases: list[Release]) -> _Entry:
        entry = self._entries.get(trace_id)
        if entry is not None and entry.state is _State.ACTIVE:
            return entry
        if len(self._active) >= self.limits.max_runs:
            oldest = next(iter(self._active))
            releases.append(self._release_all(self._entries[oldest], "overflow", "runs", now))
        if entry is None:
            entry = _Entry(trace_id, now)
            self._entries[trace_id] = entry
        else:
            # A DONE trace starts a new run: hold again (its decided runs stay decided).
            self._idle.pop(trace_id, None)
            entry.state = _State.ACTIVE
            entry.first_seen = now
        self._active[trace_id] = None
        return entry

    def _schedule(self, entry: _Entry) -> None:
        lim = self.limits
        due = entry.first_seen + lim.max_wait
        if entry.root_arrival is not None:
            due = min(due, entry.root_arrival + lim.release_grace)
        for run, arrived in entry.run_arrival.items():
            if run not in entry.released_runs:
                due = min(due, arrived + lim.release_grace)
        if due != entry.due or not self._heap:
            entry.due = due
            heapq.heappush(self._heap, (due, next(self._tick), entry.trace_id))

    # -- releasing -----------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """When :meth:`poll` next has something to do (None: nothing held)."""
        while self._heap:
            due, _, trace_id = self._heap[0]
            entry = self._entries.get(trace_id)
            if entry is None or entry.state is not _State.ACTIVE or entry.due != due:
                heapq.heappop(self._heap)
                continue
            return due
        return None

    def poll(self, now: float) -> list[Release]:
        """Every release that is due at ``now``."""
        releases: list[Release] = []
        while self._heap and self._heap[0][0] <= now:
            due, _, trace_id = heapq.heappop(self._heap)
            entry = self._entries.get(trace_id)
            if entry is None or entry.state is not _State.ACTIVE or entry.due != due:
                continue
            releases.extend(self._release_due(entry, now))
            if entry.state is _State.ACTIVE:
                entry.due = -1.0
                self._schedule(entry)
        return releases

    def release_everything(self, now: float) -> list[Release]:
        """At shutdown: finished runs as usual, the rest with cause ``shutdown``."""
        releases: list[Release] = []
        for trace_id in list(self._active):
            entry = self._entries[trace_id]
            ready = self._release_due(entry, now + self.limits.release_grace)
            releases.extend(ready)
            if entry.state is _State.ACTIVE:
                releases.append(self._release_all(entry, "shutdown", None, now))
        return releases

    def _groups(self, entry: _Entry, final: bool) -> dict[bytes | None, list[HeldSpan]]:
        """Held spans by their nearest run. Only a ``final`` grouping (the trace is being closed)
        applies the broken-chain rule: before that, a missing parent may simply not be here yet."""
        groups: dict[bytes | None, list[HeldSpan]] = {}
        only_run = next(iter(entry.run_arrival)) if final and len(entry.run_arrival) == 1 else None
        for held in entry.held.values():
            info = held.info
            run = entry.nearest_run(info.span_id, info.parent_id)
            if run is None and info.runish and only_run is not None:
                # A broken parent chain in a trace with exactly one run: that run (as group_runs does).
                run = only_run
            groups.setdefault(run, []).append(held)
        return groups

    def _release_due(self, entry: _Entry, now: float) -> list[Release]:
        lim = self.limits
        if now >= entry.first_seen + lim.max_wait:
            return [self._release_all(entry, "timeout", None, now)]
        if entry.root_arrival is not None and now >= entry.root_arrival + lim.release_grace:
            groups = self._groups(entry, final=True)
            # The trace is over. "root" only when some run never got its run span.
            orphans = groups.get(None, [])
            cause: Cause = "root" if any(h.info.runish for h in orphans) else "ended"
            return [self._release_all(entry, cause, None, now)]
        groups = self._groups(entry, final=False)
        release = Release(entry.trace_id, "ended", None, [], [])
        for run, members in groups.items():
            if run is None:
                continue
            if run in entry.released_runs:
                self._add_late(entry, release, members)
                continue
            arrived = entry.run_arrival.get(run)
            if arrived is not None and now >= arrived + lim.release_grace:
                release.units.append(self._unit(entry, run, members))
                entry.released_runs.add(run)
        rest = groups.get(None, [])
        pending_runs = [r for r in entry.run_arrival if r not in entry.released_runs]
        finished = not pending_runs and not any(h.info.runish for h in rest)
        if finished:
            # Nothing left to decide: plain spans go too, and the trace waits no longer.
            release.others.extend(rest)
        if release.units or release.others or release.late:
            self._take(entry, release)
        if finished and not entry.events:
            self._finish(entry, _State.DONE, None)
        return [release] if (release.units or release.others or release.late) else []

    def _add_late(self, entry: _Entry, release: Release, members: list[HeldSpan]) -> None:
        release.late.extend(members)
        for held in members:
            note = entry.notes.get(held.info.span_id)
            if note is not None:
                release.late_notes[held.info.span_id] = note

    def _unit(self, entry: _Entry, run: bytes | None, members: list[HeldSpan]) -> RunUnit:
        run_span = entry.held.get(run) if run is not None else None
        ids = {m.info.span_id for m in members}
        events = {sid: [e.event for e in evs] for sid, evs in entry.events.items() if sid in ids}
        arrived = entry.run_arrival.get(run) if run is not None else None
        return RunUnit(run_span, members, events, arrived)

    def _release_all(self, entry: _Entry, cause: Cause, limit: Limit | None, now: float) -> Release:
        groups = self._groups(entry, final=True)
        release = Release(entry.trace_id, cause, limit, [], [])
        for run, members in groups.items():
            if run is not None and run in entry.released_runs:
                self._add_late(entry, release, members)
            elif run is None and not any(m.info.runish for m in members):
                release.others.extend(members)
            else:
                release.units.append(self._unit(entry, run, members))
                if run is not None:
                    entry.released_runs.add(run)
        self._take(entry, release)
        self._finish(entry, _State.CLOSED, cause)
        return release

    def _take(self, entry: _Entry, release: Release) -> None:
        """Remove the release's spans (and their events) from the entry; settle journal refs."""
        done: list[int] = []
        for held in release.spans():
            entry.held.pop(held.info.span_id, None)
            entry.size -= held.size
            self.bytes_held -= held.size
            self.spans_held -= 1
            release.size += held.size
            self._unref(held.seq, done)
            for ev in entry.events.pop(held.info.span_id, []):
                self._drop_event(entry, ev, release)
                self._unref(ev.seq, done)
        release.seqs_done = done

    def _drop_event(self, entry: _Entry, ev: HeldEvent, release: Release | None) -> None:
        entry.size -= ev.size
        self.bytes_held -= ev.size
        if release is not None:
            release.size += ev.size

    def _unref(self, seq: int, done: list[int]) -> None:
        left = self._refs.get(seq, 0) - 1
        if left <= 0:
            self._refs.pop(seq, None)
            done.append(seq)
        else:
            self._refs[seq] = left

    def _finish(self, entry: _Entry, state: _State, cause: Cause | None) -> None:
        """The entry holds nothing more: drop never-joined events, move it to the decision cache."""
        for evs in entry.events.values():
            for ev in evs:
                self._drop_event(entry, ev, None)
                self._unref(ev.seq, self._orphan_done)
        entry.events.clear()
        entry.state = state
        entry.closed_cause = cause
        entry.due = -1.0
        self._active.pop(entry.trace_id, None)
        self._idle[entry.trace_id] = None
        self._idle.move_to_end(entry.trace_id)

    def take_orphan_done(self) -> list[int]:
        """Journal records freed by dropping never-joined log events (mark them done)."""
        done, self._orphan_done = self._orphan_done, []
        return done

    def _enforce_bytes(self, now: float) -> list[Release]:
        releases: list[Release] = []
        while self.bytes_held > self.limits.max_bytes and self._active:
            oldest = next(iter(self._active))
            releases.append(self._release_all(self._entries[oldest], "overflow", "bytes", now))
        return releases

    def _trim_cache(self) -> None:
        lim = self.limits
        while self._idle and (len(self._idle) > lim.cache_traces or self._links > lim.cache_spans):
            trace_id, _ = self._idle.popitem(last=False)
            entry = self._entries.pop(trace_id)
            self._links -= len(entry.parents)

    # -- the decision cache --------------------------------------------------------------------

    def remember(self, trace_id: bytes, notes: dict[bytes, object]) -> None:
        """Keep a decided run's notes so its late spans get the same annotations."""
        entry = self._entries.get(trace_id)
        if entry is not None:
            entry.notes.update(notes)
        self._trim_cache()
