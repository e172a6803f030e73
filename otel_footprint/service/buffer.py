"""The hop's run buffer: the shared run-holding core (``runs/holding.py``) plus journal bookkeeping.

The core decides which spans wait and when runs are released (one rule for both delivery paths);
this adapter classifies protobuf spans for it, counts the journal records each held span or event
still references (a record is retired once nothing of it is held or releasing: the journal's rule,
docs/design.md, is that a record is retired only when everything it holds is journaled further or
delivered), and names spans of decided runs
*late* with the decision cache's note. Not thread-safe: the hop calls it under one lock. Times are
passed in (monotonic seconds).
"""

from __future__ import annotations

import contextlib
import marshal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint.annotate.form import NoteEvent, NoteLink, SpanNote
from otel_footprint.runs import holding
from otel_footprint.runs.holding import Cause, HoldLimits, Limit, RunHolding
from otel_footprint.runs.recognize import CONTAINER_ROLES, SpanRole
from otel_footprint.runs.spans import SpanEventView
from otel_footprint.service.otlp import Origin, with_ids, without_ids

__all__ = ["BufferLimits", "Cause", "Limit", "Release", "RunBuffer", "RunUnit", "SpanInfo"]

BufferLimits = HoldLimits
"""The hop's buffer limits are the core's (one type, one set of defaults)."""


@dataclass(slots=True, eq=False)
class SpanInfo:
    """A received span with what routing needs (classified once, at the receiver)."""

    origin: Origin
    span: Span
    role: SpanRole
    has_footprint_events: bool
    """For a span of no role or an agent span: whether it carries footprint events (not read for
    the others)."""
    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    wire: bytes
    """The span's bytes as they came (sliced from its request: never serialized again)."""
    client: object | None = None  # not bare `object`: a compiled dataclass looks that name up
    """Who sent it (the limits release the oldest trace of the client holding the most)."""

    @property
    def runish(self) -> bool:
        # An agent span naming no run is a container: held only with its trace (it ends after
        # the model calls that open the trace), never read for a recorded run's unit.
        return self.role not in CONTAINER_ROLES or self.has_footprint_events


MAX_ORIGINS = 4096
"""Distinct resource/scope blocks whose detached copies are shared by held spans."""
HELD_SPAN_OVERHEAD = 200
"""Bytes a held span costs beyond its wire bytes (its record and the core's two map entries),
measured with tracemalloc by ``benchmarks/bench_held.py``: counted in ``bytes_held``."""


CACHED_TRACE_OVERHEAD = 1_000
"""Bytes a decided trace costs in the decision cache beyond its packed notes and its spans' links
(its entry, the maps it keeps for late spans, the cache's own entries), measured with tracemalloc by
``benchmarks/bench_cache.py``: counted in ``decision_cache_bytes``."""
CACHED_SPAN_OVERHEAD = 100
"""Bytes per span of a decided trace in the cache: its parent link (a late span's chain may lead
through it) and, when it has a note, the note's entry (measured as above)."""


class PackedNotes:
    """A decided trace's notes as the decision cache keeps them: one marshalled blob.

    A late span needs only its own note, and late spans are rare, so the notes are kept as marshalled
    plain tuples (~6 KB a ``bench_hop`` run against ~19 KB as objects) and rebuilt for the one span
    that asks. Not compressed: zlib took them to ~1.9 KB, but it releases the GIL on every call and
    the hop annotated 1.13x fewer spans per CPU-second with it (docs/performance.md). Notes marshal
    cannot write (never made by the engine) are kept as they are, and counted as such.
    """

    __slots__ = ("_data",)

    def __init__(self, notes: Mapping[bytes, object]) -> None:
        self._data: bytes | dict[bytes, object]
        try:
            plain = {sid: _plain(note) for sid, note in notes.items()}
            self._data = marshal.dumps(plain, 4)
        except (TypeError, ValueError):
            self._data = dict(notes)

    @property
    def size(self) -> int:
        """Bytes it holds (the blob; a fallback counts as many notes as objects)."""
        data = self._data
        return len(data) if isinstance(data, bytes) else 20_000 * max(len(data), 1)

    def get(self, span_id: bytes) -> object | None:
        """The note for ``span_id`` (None: the decision wrote none for it)."""
        data = self._data
        if not isinstance(data, bytes):
            return data.get(span_id)
        found = marshal.loads(data).get(span_id)
        return None if found is None else _note(found)


def _plain(note: object) -> tuple[object, ...]:
    if not isinstance(note, SpanNote):
        raise TypeError("not a SpanNote")
    return (
        note.attributes,
        tuple((e.name, e.attributes, e.anchor) for e in note.events),
        tuple((k.trace_id, k.span_id, k.attributes) for k in note.links),
    )


def _note(plain: tuple[Any, Any, Any]) -> SpanNote:
    attributes, events, links = plain
    return SpanNote(
        attributes,
        tuple(NoteEvent(name, attrs, anchor) for name, attrs, anchor in events),
        tuple(NoteLink(trace, span, attrs) for trace, span, attrs in links),
    )


def _unpacked(note: object | None, span_id: bytes) -> object | None:
    return note.get(span_id) if isinstance(note, PackedNotes) else note


class _Carrier:
    """The kind of a held span of no run role (``OTHER``, or ``AGENT``: a container) that carries
    footprint events, which makes it runish all the same: one shared per role."""

    __slots__ = ("role",)

    def __init__(self, role: SpanRole) -> None:
        self.role = role


_CARRIERS: Final = {role: _Carrier(role) for role in CONTAINER_ROLES}


class HeldSpan:
    """A held span as it arrived on the wire (its bytes), with what routing and grouping read.

    Holding the parsed protobuf span would cost ~5x its wire size (and keep its whole request's
    arena alive); the span is parsed only if its run's decision reads it (:attr:`span`, once),
    and forwarded from its bytes if nothing did (:meth:`wire`). Its ids are kept once, as the
    buffer's keys, and left out of the held bytes.
    """

    __slots__ = ("_data", "_kind", "origin", "parent_id", "seq", "span_id", "trace_id")

    def __init__(
        self, info: SpanInfo, seq: int, origin: Origin, trace_id: bytes, parent_id: bytes
    ) -> None:
        self._data: bytes | tuple[bytes, Span] = without_ids(info.wire)
        self.origin = origin
        # Role and runish in one slot (8 B a held span): the role as the receiver recognised it
        # (the release's views take it), or, for a span its footprint events make runish where
        # its role alone does not, that role's shared carrier.
        role = info.role
        self._kind: SpanRole | _Carrier = (
            _CARRIERS[role] if info.runish and role in CONTAINER_ROLES else role
        )
        self.trace_id = trace_id
        self.span_id = info.span_id
        self.parent_id = parent_id
        self.seq = seq

    @property
    def role(self) -> SpanRole:
        kind = self._kind
        return kind if isinstance(kind, SpanRole) else kind.role

    @property
    def runish(self) -> bool:
        """As :attr:`SpanInfo.runish` (the core reads it: ``holding.Holdable``)."""
        return self._kind not in CONTAINER_ROLES  # a carrier is not: runish

    @property
    def size(self) -> int:
        """Bytes it holds: its wire bytes (ids left out) and its record."""
        data = self._data
        return len(data if isinstance(data, bytes) else data[0]) + HELD_SPAN_OVERHEAD

    @property
    def info(self) -> HeldSpan:
        """The span as a :class:`SpanInfo` reads (``span``, ``span_id``, ``origin``, ``role``...), for
        code that reads held and late spans alike."""
        return self

    @property
    def span(self) -> Span:
        """The protobuf span, parsed from the held bytes on first use (then annotated in place;
        the bytes are kept beside it, for :meth:`wire`)."""
        data = self._data
        if isinstance(data, bytes):
            span = Span.FromString(data)
            span.trace_id, span.span_id = self.trace_id, self.span_id
            span.parent_span_id = self.parent_id
            self._data = (data, span)
            return span
        return data[1]

    def wire(self, noted: bool = True) -> bytes:
        """The span's bytes to forward: serialized (once) if it was parsed and ``noted`` (the
        decision may have written onto it), else as held with the ids written back."""
        data = self._data
        if not isinstance(data, bytes):
            if noted:
                return data[1].SerializeToString()
            data = data[0]
        return with_ids(data, self.trace_id, self.span_id, self.parent_id)


@dataclass(slots=True, eq=False)
class HeldEvent:
    event: SpanEventView
    seq: int


Release: TypeAlias = holding.Release[bytes, HeldSpan, HeldEvent]
RunUnit: TypeAlias = holding.Unit[bytes, HeldSpan, HeldEvent]


@dataclass(frozen=True, slots=True)
class LateSpan:
    """A span of an already-decided run: the cached note for it, if the decision wrote one."""

    info: SpanInfo
    note: object | None
    run_span_id: bytes | None
    cause: Cause | None


class RunBuffer:
    """The core keyed by trace id bytes, with the journal records each held item references."""

    def __init__(self, limits: HoldLimits) -> None:
        self.core: RunHolding[bytes, HeldSpan, HeldEvent] = RunHolding(limits)
        self._refs: dict[int, int] = {}
        self._origins: dict[bytes, Origin] = {}

    # -- state (the counts and gauges are the core's: ``buffer.core``) -------------------------

    def holds_record(self, seq: int) -> bool:
        """Whether a span or event held, or released and not yet written out, refers to journal
        record ``seq``."""
        return seq in self._refs

    @property
    def releasing_bytes(self) -> int:
        """Bytes of released runs not yet written out (counted against ``max_bytes``)."""
        return self.core.releasing_bytes

    @releasing_bytes.setter
    def releasing_bytes(self, value: int) -> None:
        self.core.releasing_bytes = max(0, value)

    @contextlib.contextmanager
    def recovering(self) -> Iterator[None]:
        """Restore held input after a restart: limits do not release recovered runs as overflow
        (admission refuses new input until the backlog is back under the limits)."""
        self.core.bounded = False
        try:
            yield
        finally:
            self.core.bounded = True

    # -- routing at the receiver ---------------------------------------------------------------

    def route(
        self, items: Sequence[SpanInfo]
    ) -> tuple[list[SpanInfo], list[LateSpan], list[SpanInfo]]:
        """Split a request's spans into (to hold, late, to pass through at once)."""
        core = self.core
        runish_traces = {s.trace_id for s in items if s.runish}
        for s in items:
            core.link(s.trace_id, s.span_id, s.parent_id)
        hold: list[SpanInfo] = []
        late: list[LateSpan] = []
        passed: list[SpanInfo] = []
        for s in items:
            where = core.route(s.trace_id, s.span_id, s.parent_id, s.trace_id in runish_traces)
            if where == "hold":
                hold.append(s)
            elif where == "pass":
                passed.append(s)
            else:
                note, run_span_id, cause = core.late(s.trace_id, s.span_id, s.parent_id)
                late.append(LateSpan(s, _unpacked(note, s.span_id), run_span_id, cause))
        return hold, late, passed

    # -- holding -------------------------------------------------------------------------------

    def hold(self, items: Sequence[SpanInfo], seq: int, now: float) -> list[Release]:
        """Keep spans (journal record ``seq``); returns releases forced by the limits. Each counts
        what it really holds (its wire bytes and record: :attr:`HeldSpan.size`)."""
        releases: list[Release] = []
        hold = self.core.hold
        # One bytes object per id within the request: a parent's id is its child's parent link.
        ids = {s.span_id: s.span_id for s in items}
        for s in items:
            trace_id = ids.setdefault(s.trace_id, s.trace_id)
            parent_id = ids.setdefault(s.parent_id, s.parent_id)
            kept = hold(
                trace_id,
                s.span_id,
                s.role,
                HeldSpan(s, seq, self._detached(s.origin), trace_id, parent_id),
                now=now,
                footprint=s.has_footprint_events,
                client=s.client,
                releases=releases,
            )
            if kept:
                self._ref(seq)
        self.core.enforce(releases)
        return self._settled(releases)

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
            item = HeldEvent(event, seq)
            if self.core.hold_event(
                trace_id, span_id, item, size=size_each, now=now, releases=releases
            ):
                self._ref(seq)
                kept += 1
        self.core.enforce(releases)
        return kept, self._settled(releases)

    def _detached(self, origin: Origin) -> Origin:
        """The origin copied out of its request: a protobuf sub-message keeps its whole request's
        memory alive, so a held span must not point into the request it came in."""
        mine = self._origins.get(origin.key)
        if mine is None:
            if len(self._origins) >= MAX_ORIGINS:
                self._origins.clear()  # rare: only ever-new resources; held spans keep theirs
            resource, scope = Resource(), InstrumentationScope()
            resource.CopyFrom(origin.resource)
            scope.CopyFrom(origin.scope)
            mine = Origin(
                resource,
                origin.resource_schema_url,
                scope,
                origin.scope_schema_url,
                origin.key,
                origin.resource_key,
            )
            self._origins[origin.key] = mine
        return mine

    # -- releasing -----------------------------------------------------------------------------

    def poll(self, now: float) -> list[Release]:
        return self._settled(self.core.poll(now))

    def release_everything(self, now: float) -> list[Release]:
        """At shutdown: finished runs as usual, the rest with cause ``shutdown``."""
        return self._settled(self.core.release_everything(now))

    def take_orphan_done(self) -> list[int]:
        """Journal records freed by dropping never-joined log events (mark them done)."""
        done: list[int] = []
        for event in self.core.take_dropped_events():
            self._unref(event.seq, done)
        return done

    def remember(self, trace_id: bytes, notes: Mapping[bytes, object], spans: int = 0) -> None:
        """Keep a decided trace's notes so its late spans get the same annotations (packed here:
        :meth:`remember_packed` takes them packed off the lock); ``spans``: how many it released."""
        self.remember_packed(trace_id, PackedNotes(notes) if notes else None, notes, spans)

    def remember_packed(
        self,
        trace_id: bytes,
        pack: PackedNotes | None,
        span_ids: Iterable[bytes],
        spans: int,
    ) -> None:
        """Keep ``pack`` (the notes of ``span_ids``) for a decided trace of ``spans`` released
        spans, counted in ``cache_bytes`` with what the cache keeps of the trace besides them."""
        ids = list(span_ids) if pack is not None else []
        size = CACHED_TRACE_OVERHEAD + CACHED_SPAN_OVERHEAD * max(spans, len(ids))
        if pack is not None:
            size += pack.size
        self.core.remember(trace_id, dict.fromkeys(ids, pack), size)

    def _settled(self, releases: list[Release]) -> list[Release]:
        for release in releases:
            if release.late_notes:
                # The cache keeps notes packed; the annotation stage reads plain ones.
                release.late_notes = {
                    sid: _unpacked(n, sid) for sid, n in release.late_notes.items()
                }
            # Still referenced: the records are retired when the release is written out
            # (:meth:`retire`), not now. Releases are decided in slices and committed in the
            # order their decisions end, so a short trace's commit must not retire a record that
            # a longer trace of the same request, still being decided, came from.
            release.seqs = [held.seq for held in release.spans()]
            release.seqs += [event.seq for event in release.events]
        return releases

    def retire(self, release: Release) -> list[int]:
        """``release`` is written out (journaled further): the journal records nothing held or
        releasing refers to any more, to be marked done once that write is durable."""
        done: list[int] = []
        for seq in release.seqs:
            self._unref(seq, done)
        release.seqs = []
        return done

    def _ref(self, seq: int) -> None:
        self._refs[seq] = self._refs.get(seq, 0) + 1

    def _unref(self, seq: int, done: list[int]) -> None:
        left = self._refs.get(seq, 0) - 1
        if left <= 0:
            self._refs.pop(seq, None)
            done.append(seq)
        else:
            self._refs[seq] = left
