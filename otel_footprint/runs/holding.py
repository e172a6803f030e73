"""The run-holding core shared by both delivery paths: which spans wait, for how long, and together.

Pure and single-threaded (the adapters call it under their own lock) with times passed in from the
adapter's injected clock. It never reads a span: an adapter offers each span with its ids, its role,
whether it carries footprint events, its size in bytes and an opaque item, and gets back
:class:`Release` s — the held items of one trace, grouped by run — when they are due:

* a run ``release_grace`` after its run span arrives (late children get that long);
* the whole trace ``release_grace`` after its root span arrives (cause ``root`` when some run
  never got its run span, else ``ended``);
* a trace with no run span in sight ``orphan_wait`` after its latest span (``max_wait`` unless set);
* everything ``max_wait`` after the trace's first held span (``timeout``);
* at once when a limit is hit (``overflow``, with the limit), choosing the oldest trace of the
  client holding the most, so one client's flood cannot evict every other client's runs.

One grouping rule: a span belongs to its nearest run-span ancestor by parent links seen so far
(a run span started but not ended counts: the in-process path registers it at start); when the
trace is closed, a broken chain in a trace with exactly one run joins that run (as ``group_runs``
does). After a release the trace's parent links and decided notes stay in a bounded cache, so a
late span of a decided run is recognised as late and gets the same note.

The in-process processor (``sdk/buffer.py``: a worker thread, SDK spans) and the OTLP hop
(``service/buffer.py``: journal bookkeeping, protobuf spans) are adapters around this one core.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar

from otel_footprint.runs.model import Reason
from otel_footprint.runs.recognize import SpanRole

Cause: TypeAlias = Literal["ended", "root", "timeout", "overflow", "shutdown", "flush"]
Limit: TypeAlias = Literal["runs", "bytes", "spans", "events", "worker"]
"""Which bound released a run unannotated (``worker``: the decision worker was a buffer behind)."""
Route: TypeAlias = Literal["hold", "late", "pass"]

K = TypeVar("K", bound=Hashable)
"""Trace and span ids: bytes on the hop, ints in-process. A falsy parent id means a root span."""


class Holdable(Protocol):
    """What the core reads of an adapter's held span item (kept on the item: no wrapper per span)."""

    @property
    def runish(self) -> bool:
        """Part of an agent run: a run, model-call or tool span, or one carrying footprint events."""
        ...

    @property
    def size(self) -> int:
        """Bytes it holds (counted against ``max_bytes``)."""
        ...

    @property
    def parent_id(self) -> Any:
        """Its parent's span id (falsy for a root): held spans keep their own link."""
        ...


T = TypeVar("T", bound=Holdable)
"""The adapter's held span item."""
E = TypeVar("E")
"""The adapter's held event item (footprint events that arrived as log records)."""


@dataclass(frozen=True, slots=True)
class HoldLimits:
    """The one limits type, with the one set of defaults (both paths, the docs, the settings)."""

    release_grace: float = 1.0
    """Seconds a run waits after its run span (or the trace's root span) arrives, for late children."""
    max_wait: float = 300.0
    """Seconds a trace is held at most (then decided with ``footprint.run.complete=false``)."""
    orphan_wait: float | None = None
    """Seconds a trace with footprint spans but no run span waits after its latest span (None:
    ``max_wait``). In-process a run span starts before its children, so a short wait suffices."""
    max_runs: int = 10_000
    """Traces held at once."""
    max_bytes: int = 256 << 20
    """The hard memory bound on :meth:`RunHolding.used_bytes` (spans and events held, and more);
    the decision cache keeps notes only within what that leaves of it."""
    max_spans_per_run: int = 20_000
    """Spans held in one trace."""
    max_events_per_run: int = 20_000
    """Footprint events (that arrived as log records) held in one trace."""
    cache_traces: int = 20_000
    """Decided traces remembered for their late spans."""
    cache_spans: int = 1_000_000
    """Parent links remembered across those traces."""
    cache_bytes: int | None = None
    """Bytes the decision cache may take (None: :data:`CACHE_SHARE` of ``max_bytes``): its own
    share of the one memory limit, as the Collector's tail sampler bounds its decision cache, so
    decided runs' notes never crowd out the runs held; within what those leave of ``max_bytes``."""

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):
            value, floor = getattr(self, name), 1 if name in _AT_LEAST_ONE else 0
            exclusive = name == "max_wait"  # a wait bound of 0 would release every trace at once
            if value is not None and (value <= floor if exclusive else value < floor):
                raise ValueError(
                    f"{name} must be {'>' if exclusive else '>='} {floor:g} (got {value})"
                )

    @property
    def cache_budget(self) -> int:
        """The decision cache's byte share (``cache_bytes`` resolved)."""
        return int(self.max_bytes * CACHE_SHARE) if self.cache_bytes is None else self.cache_bytes


_AT_LEAST_ONE = frozenset(("max_runs", "max_bytes", "max_spans_per_run", "max_events_per_run"))
CACHE_SHARE = 1 / 8
"""The share of ``max_bytes`` the decision cache takes unless ``cache_bytes`` says otherwise."""
DEFAULT_LIMITS = HoldLimits()
HIGH_WATER = 0.9
"""The share of ``max_bytes`` / ``max_runs`` held past which new input is refused (back-pressure)."""

_TEXT: dict[Cause, str] = {
    "timeout": "the run was decided when the buffer's wait bound passed, before it had ended",
    "overflow": "the run buffer hit a limit; the run was forwarded without a decision",
    "shutdown": "the buffer shut down before the run ended; decided on the spans that had arrived",
    "flush": "decided at a flush before the run ended",
    "root": "the trace's root span ended before this run's run span arrived",
}


def reason_for(cause: Cause, limit: Limit | None, *, run_span: bool) -> Reason | None:
    """Why a released run is incomplete (None: it is not). One table for both paths."""
    if cause == "ended" or (cause == "root" and run_span):
        return None
    if cause == "overflow":
        return Reason("overflow", f"{_TEXT['overflow']} (limit: {limit})")
    if cause == "root":
        return Reason("missing-spans", _TEXT["root"])
    return Reason(cause, _TEXT[cause])


class Unit(Generic[K, T, E]):
    """One run to decide: its run span (None when it never arrived), members, joined log events.

    A plain slotted class, as :class:`Release` (not a dataclass: mypyc cannot build a generic
    dataclass, and the compiled wheel compiles this module)."""

    __slots__ = ("log_events", "members", "run_arrived", "run_span")

    def __init__(
        self,
        run_span: T | None,
        members: list[T],
        log_events: dict[K, list[E]],
        run_arrived: float | None,
    ) -> None:
        self.run_span = run_span
        self.members = members
        """Every held item of the run, the run span included."""
        self.log_events = log_events
        self.run_arrived = run_arrived


class Release(Generic[K, T, E]):
    """Items leaving the core together (one trace), with why and what to decide."""

    __slots__ = (
        "cause",
        "events",
        "late",
        "late_notes",
        "limit",
        "others",
        "seqs",
        "size",
        "trace_id",
        "units",
    )

    def __init__(
        self,
        trace_id: K,
        cause: Cause,
        limit: Limit | None,
        units: list[Unit[K, T, E]],
        others: list[T],
    ) -> None:
        self.trace_id = trace_id
        self.cause = cause
        self.limit = limit
        self.units = units
        self.others = others
        """Held items of no run (e.g. the trace's plain root): handed on as they are."""
        self.late: list[T] = []
        """Held items whose run turned out to be already decided (a chain closed later)."""
        self.late_notes: dict[K, object] = {}
        """The decision cache's notes for ``late`` items that have one, by span id."""
        self.events: list[E] = []
        """Every event item leaving with this release (joined or not), for the adapter's
        bookkeeping."""
        self.seqs: list[int] = []
        """The adapter's own bookkeeping (the hop: the journal record of each item leaving, retired
        only once the release is written out)."""
        self.size = 0

    def spans(self) -> Iterator[T]:
        for unit in self.units:
            yield from unit.members
        yield from self.others
        yield from self.late

    @property
    def span_count(self) -> int:
        return sum(len(u.members) for u in self.units) + len(self.others) + len(self.late)


_EMPTY: dict[Any, Any] = {}
"""The shared, never written, empty map an entry's rarely used maps start as (64 bytes each a
trace otherwise); :meth:`_Entry.own` gives the entry its own before the first write."""


class _State(Enum):
    ACTIVE = 1
    DONE = 2
    """Every run released normally; a new run in the same trace may still start."""
    CLOSED = 3
    """Released on root / timeout / overflow / shutdown: anything later is late."""


class _Entry(Generic[K, T, E]):
    """One trace held (or remembered): a plain slotted class, built once per trace on the hot path."""

    __slots__ = (
        "cached",
        "client",
        "closed_cause",
        "due",
        "event_count",
        "events",
        "first_seen",
        "footprint",
        "held",
        "last_seen",
        "notes",
        "parents",
        "released_runs",
        "root_arrival",
        "runs",
        "size",
        "state",
        "trace_id",
    )

    def __init__(self, trace_id: K, client: Hashable, now: float) -> None:
        self.trace_id = trace_id
        self.client = client
        self.first_seen = self.last_seen = now
        self.state = _State.ACTIVE
        self.held: dict[K, T] = {}
        self.runs: dict[K, float | None] = _EMPTY
        """Run spans by id: when each arrived (None: started, not yet ended). Shared empty until
        the first: a trace is mostly held before its run span, which ends (and arrives) last."""
        self.parents: dict[K, K] = _EMPTY
        """Parent links of spans not held (held spans carry theirs: one map entry less per span)."""
        self.released_runs: dict[K, None] = _EMPTY
        self.events: dict[K, list[tuple[E, int]]] = _EMPTY
        self.notes: dict[K, object] = _EMPTY
        self.cached = 0
        """Bytes its remembered notes take (the adapter's estimate), in ``cache_bytes``."""
        self.event_count = 0
        self.root_arrival: float | None = None
        self.closed_cause: Cause | None = None
        self.footprint = False
        """Some span or event of the trace carries footprint events (set by the adapter's offers)."""
        self.size = 0
        self.due = -1.0

    def own(self, name: str) -> dict[Any, Any]:
        """The entry's own map ``name`` (runs, parents, released_runs, events, notes), made on first
        write."""
        mine: dict[Any, Any] = getattr(self, name)
        if mine is _EMPTY:
            mine = {}
            setattr(self, name, mine)
        return mine

    def nearest_run(self, span_id: K, parent_id: K | None) -> K | None:
        """The closest run span at or above this span, following parent links seen so far."""
        runs = self.runs
        if span_id in runs:
            return span_id
        cur = parent_id
        parents, held = self.parents, self.held
        for _ in range(len(parents) + len(held) + 1):
            if not cur:
                return None
            if cur in runs:
                return cur
            nxt = parents.get(cur)
            if nxt is None:
                item = held.get(cur)
                if item is None:
                    return None
                nxt = item.parent_id
            cur = nxt
        return None  # a parent cycle: treat as broken

    def is_late(self, span_id: K, parent_id: K | None) -> bool:
        if self.state is _State.CLOSED:
            return True
        run = self.nearest_run(span_id, parent_id)
        return run is not None and run in self.released_runs


class _Clients(Generic[K]):
    """The traces each client holds, oldest first, and which client holds the most, in O(1).

    A limit releases one trace per span over it: a request of 10,000 one-span traces against a
    full buffer evicts thousands, so the victim must not be found by scanning every client or
    every held trace (that was quadratic, and the receivers wait on the buffer's lock meanwhile).
    Counts move by one, so the largest is tracked with a bucket of clients per count.
    """

    __slots__ = ("_buckets", "_top", "_traces")

    def __init__(self) -> None:
        self._traces: dict[Hashable, collections.OrderedDict[K, None]] = {}
        self._buckets: dict[int, dict[Hashable, None]] = {}
        """Clients by how many traces they hold (in the order they reached that count)."""
        self._top = 0

    def add(self, client: Hashable, trace_id: K) -> None:
        traces = self._traces.get(client)
        if traces is None:
            traces = self._traces[client] = collections.OrderedDict()
        count = len(traces)
        traces[trace_id] = None
        self._move(client, count, count + 1)

    def remove(self, client: Hashable, trace_id: K) -> None:
        traces = self._traces.get(client)
        if traces is None or traces.pop(trace_id, False) is False:
            return
        count = len(traces)
        if not count:
            del self._traces[client]
        self._move(client, count + 1, count)

    def _move(self, client: Hashable, old: int, new: int) -> None:
        buckets = self._buckets
        if old:
            bucket = buckets[old]
            del bucket[client]
            if not bucket:
                del buckets[old]
                if self._top == old and new < old:
                    self._top = new  # the client just moved is in the next bucket down
        if new:
            buckets.setdefault(new, {})[client] = None
            self._top = max(self._top, new)

    def victim(self) -> K:
        """The oldest trace of the client holding the most (ties: the one that got there first)."""
        biggest = next(iter(self._buckets[self._top]))
        return next(iter(self._traces[biggest]))


class RunHolding(Generic[K, T, E]):
    """Held runs by trace, release scheduling, limits and the decision cache (see the module)."""

    def __init__(self, limits: HoldLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._orphan_wait = limits.max_wait if limits.orphan_wait is None else limits.orphan_wait
        self._entries: dict[K, _Entry[K, T, E]] = {}
        self._active: dict[K, None] = {}
        """Traces held, in the order they started holding (a plain map: only added to, popped
        from and listed; an ordered map's links cost ~40 B more a trace)."""
        self._clients: _Clients[K] = _Clients()
        """Traces held by client, oldest first (for the limits' victim)."""
        self._idle: collections.OrderedDict[K, None] = collections.OrderedDict()
        self._heap: list[tuple[float, int, K]] = []
        self._tick = itertools.count()
        self._links = 0
        self._dropped: list[E] = []
        self.bytes_held = 0
        self.releasing_bytes = 0
        """Bytes of released runs the adapter still has in memory (deciding, writing out): set by
        the adapter; counted with ``bytes_held`` against ``max_bytes`` for back-pressure."""
        self.cache_bytes = 0
        """Bytes of the decision cache's notes (the adapter's estimates, see :meth:`remember`)."""
        self.cache_cap: int | None = None
        """A tighter bound on ``cache_bytes`` than its share while the adapter says memory is
        short (the hop: its resident memory past the limit); None: the share."""
        self.outside_bytes: Callable[[], int] = int  # int() is 0
        """Memory the adapter keeps outside the buffer that counts against ``max_bytes`` too (the
        hop: batches waiting for the forwarder, recent accounts); read without a lock, so cheap."""
        self.spans_held = 0
        self.events_held = 0
        self.traces_held_total = 0
        """Traces that started being held (a decided trace holding again counts again)."""
        self.bounded = True
        """False while an adapter restores what it held before a restart: recovered runs are
        released when due (``ended``), never as ``overflow`` because the backlog is large."""
        self.wait_for_root = False
        """Set by an adapter that holds observed runs (traces with no recorder input): a trace
        with no footprint input then waits for its root span (or ``max_wait``), not
        ``orphan_wait`` after its latest span: an observed run has no run span to wait for, and
        its agent may still be running (a slow tool) when its spans pause."""

    # -- state ---------------------------------------------------------------------------------

    @property
    def runs_held(self) -> int:
        return len(self._active)

    def cached_traces(self) -> int:
        """Decided traces kept in the decision cache (for late spans)."""
        return len(self._idle)

    def knows(self, trace_id: K) -> bool:
        """Whether the trace is held or remembered (a lock-free peek: one dict lookup)."""
        return trace_id in self._entries

    def is_held(self, trace_id: K) -> bool:
        entry = self._entries.get(trace_id)
        return entry is not None and entry.state is _State.ACTIVE

    def has_footprint(self, trace_id: K) -> bool:
        entry = self._entries.get(trace_id)
        return entry is not None and entry.state is _State.ACTIVE and entry.footprint

    def has_events(self, trace_id: K, span_id: K) -> bool:
        """Whether footprint events that arrived as log records name this span."""
        entry = self._entries.get(trace_id)
        return entry is not None and span_id in entry.events

    def room(self, fraction: float = HIGH_WATER) -> bool:
        """Whether what is held is under ``fraction`` of the hard limits. An adapter answers "full"
        (back-pressure: the sender retries later) when not, so load is shed before a limit has to
        release runs unannotated and before memory grows past the bound."""
        lim = self.limits
        return (
            self.used_bytes() < lim.max_bytes * fraction
            and len(self._active) < lim.max_runs * fraction
        )

    def used_bytes(self) -> int:
        """What counts against ``max_bytes`` (the one place that says so): the runs held, those
        released but not yet written out, and what the adapter keeps outside (:attr:`outside_bytes`).
        The decision cache is not in it: it keeps notes only within what this leaves."""
        return self.bytes_held + self.releasing_bytes + self.outside_bytes()

    # -- routing -------------------------------------------------------------------------------

    def link(self, trace_id: K, span_id: K, parent_id: K | None) -> None:
        """Learn a parent link of a decided trace (before routing a batch: order within it is
        free). A held trace needs none: its spans are held whatever their chain, with their links."""
        entry = self._entries.get(trace_id)
        if (
            entry is not None
            and entry.state is not _State.ACTIVE
            and parent_id
            and span_id not in entry.parents
        ):
            entry.own("parents")[span_id] = parent_id
            self._links += 1

    def route(self, trace_id: K, span_id: K, parent_id: K | None, runish: bool) -> Route:
        """Where an arriving span goes: held, late (its run is decided) or passed on at once.

        ``runish``: the span is part of an agent run, or others of its batch in the trace are.
        """
        entry = self._entries.get(trace_id)
        if entry is None:
            return "hold" if runish else "pass"
        if entry.is_late(span_id, parent_id):
            return "late"
        return "hold" if entry.state is _State.ACTIVE or runish else "pass"

    def late(
        self, trace_id: K, span_id: K, parent_id: K | None
    ) -> tuple[object | None, K | None, Cause | None]:
        """The cached note (if any), the run and the trace's closing cause of a span
        :meth:`route` called late."""
        entry = self._entries[trace_id]
        return entry.notes.get(span_id), entry.nearest_run(span_id, parent_id), entry.closed_cause

    def offer(
        self,
        trace_id: K,
        span_id: K,
        role: SpanRole,
        item: T,
        releases: list[Release[K, T, E]],
        *,
        opens: bool,
        footprint: bool,
        now: float,
    ) -> Route:
        """:meth:`route` and :meth:`hold` for one span arriving alone (the in-process path).

        ``opens``: the span may start holding a trace not held yet (a run span, or footprint).
        """
        entry = self._entries.get(trace_id)
        parent_id = item.parent_id
        if entry is None or entry.state is not _State.ACTIVE:
            self.link(trace_id, span_id, parent_id)
            where = self.route(trace_id, span_id, parent_id, opens)
            if where != "hold":
                return where
        elif entry.released_runs and entry.is_late(span_id, parent_id):
            return "late"  # a child of a nested run already decided
        elif (
            role is not SpanRole.RUN
            and parent_id
            and entry.runs
            and span_id not in entry.held
            and len(entry.held) < self.limits.max_spans_per_run
        ):
            # The common child of a held run (the hot path in-process): its due time cannot move.
            entry.held[span_id] = item
            entry.last_seen = now
            if footprint:
                entry.footprint = True
            self.spans_held += 1
            entry.size += item.size
            self.bytes_held += item.size
            return "hold"
        self.hold(trace_id, span_id, role, item, now=now, footprint=footprint, releases=releases)
        return "hold"

    # -- holding -------------------------------------------------------------------------------

    def run_started(
        self, trace_id: K, span_id: K, now: float, releases: list[Release[K, T, E]]
    ) -> None:
        """A run span started (in-process): its trace is held and its children group under it."""
        entry = self._activate(trace_id, now, None, releases)
        entry.own("runs").setdefault(span_id, None)
        if entry.due < 0:
            self._schedule(entry)

    def hold(
        self,
        trace_id: K,
        span_id: K,
        role: SpanRole,
        item: T,
        *,
        now: float,
        footprint: bool = False,
        client: Hashable = None,
        releases: list[Release[K, T, E]],
    ) -> bool:
        """Keep one span; releases forced by a limit are appended to ``releases``.

        False for a duplicate (a sender's retry): the first copy is kept and nothing is counted.
        """
        entry = self._entries.get(trace_id)
        if entry is None or entry.state is not _State.ACTIVE:
            entry = self._activate(trace_id, now, client, releases)
        elif span_id in entry.held:
            return False
        held = entry.held
        held[span_id] = item
        entry.last_seen = now
        if footprint:
            entry.footprint = True
        self.spans_held += 1
        # Only a run span, a root, or a span of a trace with no run yet moves the due time.
        moves = not entry.runs
        if role is SpanRole.RUN:
            entry.own("runs")[span_id] = now
            moves = True
        if not item.parent_id:
            entry.root_arrival = now
            moves = True
        over = len(held) > self.limits.max_spans_per_run
        self._added(entry, item.size, over, "spans", releases, moves)
        return True

    def _added(
        self,
        entry: _Entry[K, T, E],
        size: int,
        over: bool,
        limit: Limit,
        releases: list[Release[K, T, E]],
        moves: bool = True,
    ) -> None:
        """Count what was just held; release the trace when it went ``over`` its ``limit``."""
        entry.size += size
        self.bytes_held += size
        if over and self.bounded:
            releases.append(self._release_all(entry, "overflow", limit))
        elif moves or entry.due < 0:
            self._schedule(entry)

    def hold_event(
        self,
        trace_id: K,
        span_id: K,
        item: E,
        *,
        size: int,
        now: float,
        create: bool = True,
        releases: list[Release[K, T, E]],
    ) -> bool:
        """Keep a footprint event that arrived as a log record, for the join with its span.

        Not kept (False) when its run is already decided, or when the trace is not held and
        ``create`` is False (in-process a run span starts before any record can name it).
        """
        entry = self._entries.get(trace_id)
        if entry is not None and entry.state is not _State.ACTIVE:
            if entry.is_late(span_id, self._parent(entry, span_id)):
                return False
        elif entry is None and not create:
            return False
        # Log records carry no sender of their own here: they join the trace's client (or none).
        entry = self._activate(trace_id, now, entry.client if entry else None, releases)
        entry.own("events").setdefault(span_id, []).append((item, size))
        entry.event_count += 1
        entry.footprint = True
        self.events_held += 1
        over = entry.event_count > self.limits.max_events_per_run
        self._added(entry, size, over, "events", releases)
        return True

    def enforce(self, releases: list[Release[K, T, E]]) -> None:
        """Release traces while the held bytes exceed the hard limit (after a batch of holds)."""
        self._trim_cache()  # the decision cache yields first
        while self.bytes_held > self.limits.max_bytes and self._active and self.bounded:
            releases.append(self._release_all(self._entries[self._victim()], "overflow", "bytes"))

    def discard(self, trace_id: K) -> list[T]:
        """Forget a held trace with nothing to decide (every run ended, no footprint events): no
        release, no cache entry (a straggler of it then passes as a span of no run would).
        Returns the items it held, for the adapter to hand on as they are."""
        entry = self._entries.get(trace_id)
        if entry is not None and entry.state is _State.ACTIVE and not entry.events:
            self._forget(trace_id)
            del self._active[trace_id]
            self.bytes_held -= entry.size
            self.spans_held -= len(entry.held)
            self._clients.remove(entry.client, trace_id)
            return list(entry.held.values())
        return []

    def has_runs(self, trace_id: K) -> bool:
        """Whether the held trace has a run span (started or arrived): recorder input."""
        entry = self._entries.get(trace_id)
        return entry is not None and entry.state is _State.ACTIVE and bool(entry.runs)

    def runs_pending(self, trace_id: K) -> bool:
        """Whether the held trace has a run span started that has not arrived yet."""
        entry = self._entries.get(trace_id)
        return entry is not None and any(a is None for a in entry.runs.values())

    def _activate(
        self, trace_id: K, now: float, client: Hashable, releases: list[Release[K, T, E]]
    ) -> _Entry[K, T, E]:
        entry = self._entries.get(trace_id)
        if entry is not None and entry.state is _State.ACTIVE:
            return entry
        if len(self._active) >= self.limits.max_runs and self.bounded:
            releases.append(self._release_all(self._entries[self._victim()], "overflow", "runs"))
        if entry is None:
            entry = _Entry(trace_id, client, now)
            self._entries[trace_id] = entry
        else:
            # A DONE trace starts a new run: hold again (its decided runs stay decided).
            self._idle.pop(trace_id, None)
            entry.state = _State.ACTIVE
            entry.first_seen = entry.last_seen = now
            entry.client = client
        self._active[trace_id] = None
        self._clients.add(client, trace_id)
        self.traces_held_total += 1
        return entry

    def _victim(self) -> K:
        """The trace a limit releases: the oldest of the client holding the most traces."""
        return self._clients.victim()

    def _schedule(self, entry: _Entry[K, T, E]) -> None:
        lim = self.limits
        due = entry.first_seen + lim.max_wait
        if entry.root_arrival is not None:
            due = min(due, entry.root_arrival + lim.release_grace)
        orphan = True
        for run, arrived in entry.runs.items():
            orphan = False
            if arrived is not None and run not in entry.released_runs:
                due = min(due, arrived + lim.release_grace)
        if orphan and self._orphan_waits(entry):
            due = min(due, entry.last_seen + self._orphan_wait)
        if due != entry.due:
            entry.due = due
            heapq.heappush(self._heap, (due, next(self._tick), entry.trace_id))
            if len(self._heap) > 4 * len(self._active) + 64:
                self._compact()

    def _orphan_waits(self, entry: _Entry[K, T, E]) -> bool:
        """Whether ``orphan_wait`` bounds a trace with no run span (see :attr:`wait_for_root`)."""
        return entry.footprint or not self.wait_for_root

    def _compact(self) -> None:
        """Drop superseded deadlines (skipped when due anyway; this bounds the heap)."""
        live = [item for item in self._heap if not self._stale(item[0], item[2])]
        heapq.heapify(live)
        self._heap = live

    # -- releasing -----------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """When :meth:`poll` next has something to do (None: nothing held)."""
        heap = self._heap
        while heap and self._stale(heap[0][0], heap[0][2]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _stale(self, due: float, trace_id: K) -> bool:
        """A deadline superseded by a later schedule, or of a trace no longer held."""
        entry = self._entries.get(trace_id)
        return entry is None or entry.state is not _State.ACTIVE or entry.due != due

    def poll(self, now: float) -> list[Release[K, T, E]]:
        """Every release that is due at ``now``."""
        releases: list[Release[K, T, E]] = []
        while self._heap and self._heap[0][0] <= now:
            due, _, trace_id = heapq.heappop(self._heap)
            if self._stale(due, trace_id):
                continue
            entry = self._entries[trace_id]
            releases.extend(self._release_due(entry, now))
            if entry.state is _State.ACTIVE:
                entry.due = -1.0
                self._schedule(entry)
        return releases

    def release_everything(self, now: float, cause: Cause = "shutdown") -> list[Release[K, T, E]]:
        """At a flush or shutdown: finished runs as usual, the rest with ``cause``."""
        releases: list[Release[K, T, E]] = []
        for trace_id in list(self._active):
            entry = self._entries[trace_id]
            releases.extend(self._release_due(entry, now + self.limits.release_grace))
            if entry.state is _State.ACTIVE:
                releases.append(self._release_all(entry, cause, None))
        return releases

    def _groups(self, entry: _Entry[K, T, E], final: bool) -> dict[K | None, list[K]]:
        """Held span ids by their nearest run. Only a ``final`` grouping (the trace is closing)
        applies the broken-chain rule: before that, a missing parent may not be here yet."""
        groups: dict[K | None, list[K]] = {}
        only_run = next(iter(entry.runs)) if final and len(entry.runs) == 1 else None
        for span_id, held in entry.held.items():
            run = entry.nearest_run(span_id, held.parent_id)
            if run is None and held.runish and only_run is not None:
                run = only_run
            groups.setdefault(run, []).append(span_id)
        return groups

    def _release_due(self, entry: _Entry[K, T, E], now: float) -> list[Release[K, T, E]]:
        lim = self.limits
        if now >= entry.first_seen + lim.max_wait:
            return [self._release_all(entry, "timeout", None)]
        if entry.root_arrival is not None and now >= entry.root_arrival + lim.release_grace:
            orphans = self._groups(entry, final=True).get(None, [])
            # The trace is over. "root" only when some run never got its run span.
            runish = any(entry.held[s].runish for s in orphans)
            return [self._release_all(entry, "root" if runish else "ended", None)]
        if (
            not entry.runs
            and self._orphan_waits(entry)
            and now >= entry.last_seen + self._orphan_wait
        ):
            return [self._release_all(entry, "root", None)]
        groups = self._groups(entry, final=False)
        release: Release[K, T, E] = Release(entry.trace_id, "ended", None, [], [])
        ids: list[K] = []
        for run, members in groups.items():
            if run is None:
                continue
            if run in entry.released_runs:
                self._add_late(entry, release, members)
                ids += members
                continue
            arrived = entry.runs.get(run)
            if arrived is not None and now >= arrived + lim.release_grace:
                self._add_unit(entry, release, run, members)
                ids += members
        rest = groups.get(None, [])
        pending = any(r not in entry.released_runs for r in entry.runs)
        finished = not pending and not any(entry.held[s].runish for s in rest)
        if finished:
            # Nothing left to decide: plain spans go too, and the trace waits no longer.
            release.others.extend(entry.held[s] for s in rest)
            ids += rest
        if ids:
            self._take(entry, release, ids)
        if finished and not entry.events:
            self._finish(entry, _State.DONE, None)
        return [release] if ids else []

    def _add_late(
        self, entry: _Entry[K, T, E], release: Release[K, T, E], members: list[K]
    ) -> None:
        for span_id in members:
            release.late.append(entry.held[span_id])
            note = entry.notes.get(span_id)
            if note is not None:
                release.late_notes[span_id] = note

    def _add_unit(
        self, entry: _Entry[K, T, E], release: Release[K, T, E], run: K | None, members: list[K]
    ) -> None:
        """Release ``members`` as the run ``run`` (None: spans of a run whose run span never came)."""
        held = entry.held
        run_span = held[run] if run is not None and run in held else None
        events: dict[K, list[E]] = {
            sid: [e for e, _ in entry.events[sid]] for sid in members if sid in entry.events
        }
        arrived = None
        if run is not None:
            arrived = entry.runs.get(run)
            entry.own("released_runs")[run] = None
        release.units.append(Unit(run_span, [held[s] for s in members], events, arrived))

    def _release_all(
        self, entry: _Entry[K, T, E], cause: Cause, limit: Limit | None
    ) -> Release[K, T, E]:
        release: Release[K, T, E] = Release(entry.trace_id, cause, limit, [], [])
        for run, members in self._groups(entry, final=True).items():
            if run is not None and run in entry.released_runs:
                self._add_late(entry, release, members)
            elif run is None and not any(entry.held[s].runish for s in members):
                release.others.extend(entry.held[s] for s in members)
            else:
                self._add_unit(entry, release, run, members)
        self._take(entry, release, list(entry.held))
        self._finish(entry, _State.CLOSED, cause)
        return release

    def _take(self, entry: _Entry[K, T, E], release: Release[K, T, E], ids: list[K]) -> None:
        """Remove the released spans ``ids`` (and their events) from the entry."""
        for span_id in ids:
            held = entry.held.pop(span_id)
            if held.parent_id:
                # Kept for the decision cache: a late span's chain may lead through this one.
                entry.own("parents")[span_id] = held.parent_id
                self._links += 1
            entry.size -= held.size
            self.bytes_held -= held.size
            self.spans_held -= 1
            release.size += held.size
            for event, size in entry.events.pop(span_id, ()):
                entry.size -= size
                entry.event_count -= 1
                self.bytes_held -= size
                self.events_held -= 1
                release.size += size
                release.events.append(event)

    def _finish(self, entry: _Entry[K, T, E], state: _State, cause: Cause | None) -> None:
        """The entry holds nothing more: drop never-joined events, move it to the decision cache."""
        for events in entry.events.values():
            for event, size in events:
                self.bytes_held -= size
                self.events_held -= 1
                self._dropped.append(event)
        entry.events = _EMPTY
        if not entry.held:
            entry.held = {}  # a fresh map: the emptied one keeps its table (~0.6 KB a trace)
        entry.event_count = 0
        entry.size = 0
        entry.state = state
        entry.closed_cause = cause
        entry.due = -1.0
        self._active.pop(entry.trace_id, None)
        self._clients.remove(entry.client, entry.trace_id)
        self._idle[entry.trace_id] = None
        self._idle.move_to_end(entry.trace_id)
        self._trim_cache()

    @staticmethod
    def _parent(entry: _Entry[K, T, E], span_id: K) -> K | None:
        held = entry.held.get(span_id)
        return held.parent_id if held is not None else entry.parents.get(span_id)

    def take_dropped_events(self) -> list[E]:
        """Event items dropped because their span never came (for the adapter's bookkeeping)."""
        dropped, self._dropped = self._dropped, []
        return dropped

    def _trim_cache(self) -> None:
        lim = self.limits
        # The cache keeps its own share of max_bytes, and only what the held and releasing runs
        # leave of it: it is memory too, and the first to go (a late span then passes unannotated).
        room = min(lim.cache_budget, lim.max_bytes - self.used_bytes())
        self.shrink_cache(room if self.cache_cap is None else min(room, self.cache_cap))

    def shrink_cache(self, room: int) -> None:
        """Forget decided traces, oldest first, until the cache's notes take at most ``room``
        bytes (and it is within its trace and link counts)."""
        lim = self.limits
        while self._idle and (
            len(self._idle) > lim.cache_traces
            or self._links > lim.cache_spans
            or self.cache_bytes > room
        ):
            self._forget(self._idle.popitem(last=False)[0])

    def _forget(self, trace_id: K) -> None:
        entry = self._entries.pop(trace_id)
        self._links -= len(entry.parents)
        self.cache_bytes -= entry.cached

    # -- the decision cache --------------------------------------------------------------------

    def remember(self, trace_id: K, notes: dict[K, object], size: int = 0) -> None:
        """Keep a decided run's notes so its late spans get the same annotations; ``size`` is
        the memory they take (the adapter's estimate), counted in ``cache_bytes``."""
        entry = self._entries.get(trace_id)
        if entry is not None:
            if notes:
                entry.own("notes").update(notes)
            entry.cached += size
            self.cache_bytes += size
        self._trim_cache()
