"""Decided runs for the query service: RunVerdict -> RunAccount message, kept by run id, streamed live.

Accounts are stored (SQLite beside the run store, or memory) so ``GetRun`` answers after a restart;
stream subscribers get every new verdict through a bounded queue (a slow reader loses the oldest).
"""

from __future__ import annotations

import collections
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from otel_footprint.annotate.form import AnnotateOptions, witness_policy
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.kernel.types import EngagedChange, EngagementChange, MapEngagementRecord
from otel_footprint.service.runstore import open_sqlite, write_rows

if TYPE_CHECKING:
    from otel_footprint.service.annotation import Decision
    from otel_footprint.service.proto_gen.footprint_query_pb2 import (
        EngagementChange as PbChange,
    )
    from otel_footprint.service.proto_gen.footprint_query_pb2 import (
        EngagementRecord as PbRecord,
    )
    from otel_footprint.service.proto_gen.footprint_query_pb2 import RunAccount


Witness = Callable[[str], "str | None"]


def _keep(text: str) -> str:
    return text


def _change(change: EngagementChange, out: PbChange, witness: Witness) -> None:
    out.kind = change.kind
    out.map_id = change.map_id
    out.iteration = change.iteration
    out.by = change.by
    if change.witness is not None and (shown := witness(change.witness)) is not None:
        out.witness = shown
    if isinstance(change, EngagedChange):
        out.reengaged = change.reengaged
        out.upgraded = change.upgraded
        out.tenant_changed = change.tenant_changed
        if change.at is not None:
            out.at = change.at
        if change.founded_by is not None:
            out.founded_by = change.founded_by
    else:
        out.idle_calls = change.idle_calls


def _record(record: MapEngagementRecord, out: PbRecord, witness: Witness) -> None:
    out.map_id = record.map_id
    out.standing = record.standing
    out.by = record.by
    out.since = record.since
    out.founded_by = record.founded_by
    out.founded_at = record.founded_at
    out.idle = record.idle
    if record.founded_on is not None:
        out.founded_on = record.founded_on
    if record.at is not None:
        out.at = record.at
    if record.at_by is not None:
        out.at_by = record.at_by
    if record.at_since is not None:
        out.at_since = record.at_since
    if record.witness is not None and (shown := witness(record.witness)) is not None:
        out.witness = shown


def account_message(
    verdict: RunVerdict, decided_unix_nano: int, options: AnnotateOptions | None = None
) -> RunAccount:
    """The query service's view of one decided leg, under the annotation's witness policy
    (``options``; default: the words kept, as the annotation keeps them by default)."""
    from otel_footprint.service.proto_gen.footprint_query_pb2 import RunAccount

    witness: Witness = _keep
    scrub: Callable[[str], str] = _keep
    if options is not None and options.witness != "keep":
        policy = witness_policy(verdict, options)
        witness, scrub = policy.witness, policy.scrub

    msg = RunAccount(
        run_id=verdict.run_id,
        trace_id=verdict.trace_id,
        run_span_id=verdict.run_span_id or "",
        mode=verdict.mode or "",
        complete=verdict.complete,
        resumed=verdict.resumed,
        reasons=[r.code for r in verdict.reasons],
        decided_time_unix_nano=decided_unix_nano,
        findings=list(verdict.findings),
    )
    for p in verdict.passes:
        pt = msg.passes.add(
            iteration=p.iteration,
            span_id=p.span_id or "",
            engaged_maps=list(p.engaged_maps),
            parked_maps=list(p.parked_maps),
            served_while_parked=list(p.served_while_parked),
            served_chars_while_parked=p.served_chars_while_parked,
            mismatch=p.mismatch,
        )
        for change in p.changes:
            _change(change, pt.changes.add(), witness)
    for record in verdict.engagement:
        _record(record, msg.engagement.add(), witness)
    account = verdict.account
    if account is not None:
        for check in account.checks:
            target = msg.checks[check.check_id]
            target.status = check.state
            target.label = check.label
            if check.outcome is not None:
                target.outcome = check.outcome
            if check.sentence is not None:
                target.sentence = scrub(check.sentence)
            target.pointers.extend(p.render() for p in check.pointers)
        msg.signals.extend(s.signal_id for s in account.signals)
        msg.summary.sentence = scrub(account.summary.sentence)
        msg.summary.tone = account.summary.tone
        msg.summary.template_id = account.summary.template_id
    return msg


_UPSERT = (
    "INSERT INTO run_accounts (run_id, trace_id, decided, account) VALUES (?, ?, ?, ?) "
    "ON CONFLICT(run_id, trace_id) DO UPDATE SET decided = excluded.decided, "
    "account = excluded.account"
)


class VerdictLog:
    """Recent verdicts in memory, every account by run id (SQLite or memory), live subscribers.

    SQLite rows are written in one transaction per :meth:`flush` (the hop's group commit), when
    ``max_unwritten`` wait, before any query, and at :meth:`close`, rather than one per run.
    """

    def __init__(
        self,
        path: Path | None,
        recent: int = 1000,
        subscriber_queue: int = 1000,
        *,
        max_unwritten: int = 1024,
        max_bytes: int | None = None,
        options: AnnotateOptions | None = None,
    ) -> None:
        self._options = options
        """The annotation's options: the accounts kept here follow its witness policy."""
        self._lock = threading.Lock()
        self._unwritten: list[tuple[str, str, int, bytes]] = []
        self._max_unwritten = max(1, max_unwritten)
        self._recent: collections.deque[bytes] = collections.deque()
        self._recent_limit = recent
        self._memory: dict[str, list[bytes]] = {}
        self._memory_order: collections.deque[str] = collections.deque()
        self._memory_limit = max(recent, 1000)
        self._max_bytes = max_bytes
        """Bytes the recent and in-memory accounts keep at most (oldest go first); None: counts only."""
        self._recent_bytes = 0
        self._memory_bytes = 0
        self._unwritten_bytes = 0
        self._subscribers: list[queue.Queue[bytes | None]] = []
        self._subscriber_queue = subscriber_queue
        self._db: sqlite3.Connection | None = None
        if path is not None:
            self._db = open_sqlite(path)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS run_accounts (run_id TEXT NOT NULL, trace_id TEXT NOT NULL, "
                "decided INTEGER NOT NULL, account BLOB NOT NULL, PRIMARY KEY (run_id, trace_id))"
            )

    def publish(self, decision: Decision) -> None:
        """Record a decided run (only runs the engine decided have an account)."""
        if decision.verdict is None:
            return
        data = account_message(
            decision.verdict, decision.decided_unix_nano, self._options
        ).SerializeToString()
        verdict = decision.verdict
        with self._lock:
            self._recent.append(data)
            self._recent_bytes += len(data)
            if self._db is not None:
                self._unwritten.append(
                    (verdict.run_id, verdict.trace_id, decision.decided_unix_nano, data)
                )
                self._unwritten_bytes += len(data)
                if len(self._unwritten) >= self._max_unwritten:
                    self._write_unwritten()
            else:
                if verdict.run_id not in self._memory:
                    self._memory_order.append(verdict.run_id)
                self._memory.setdefault(verdict.run_id, []).append(data)
                self._memory_bytes += len(data)
            self._trim()
            subscribers = list(self._subscribers)
        for sub in subscribers:
            _offer(sub, data)

    def flush(self) -> None:
        """Write the accounts published since the last flush (one transaction)."""
        with self._lock:
            self._write_unwritten()

    @property
    def memory_bytes(self) -> int:
        """Bytes of the accounts kept in memory: the recent ones (StreamVerdicts' replay), those
        not yet written, and with a memory store the ones it keeps. The three hold the same
        objects, each the newest accounts, so the largest covers the others. Read without the lock."""
        return max(self._recent_bytes, self._unwritten_bytes, self._memory_bytes)

    def _trim(self) -> None:
        # Called with the lock held. Counts first, then the byte bound (oldest go first; a large
        # account still leaves the newest one). Accounts not yet written are written at the next
        # group commit (or after max_unwritten), never dropped here.
        cap = self._max_bytes

        def over(size: int) -> bool:
            return cap is not None and size > cap

        while len(self._recent) > self._recent_limit or (
            len(self._recent) > 1 and over(self._recent_bytes)
        ):
            self._recent_bytes -= len(self._recent.popleft())
        while len(self._memory_order) > self._memory_limit or (
            len(self._memory_order) > 1 and over(self._memory_bytes)
        ):
            for data in self._memory.pop(self._memory_order.popleft(), []):
                self._memory_bytes -= len(data)

    def _write_unwritten(self) -> None:
        # Called with the lock held.
        if self._db is None or not self._unwritten:
            return
        try:
            write_rows(self._db, _UPSERT, self._unwritten)
        finally:
            # Dropped even when the write failed (disk full, ...): memory stays bounded, and the
            # error reaches the caller (the hop logs it and goes on without this state).
            self._unwritten.clear()
            self._unwritten_bytes = 0

    def legs(self, run_id: str) -> list[bytes]:
        """Serialized RunAccount messages of every decided leg of ``run_id``, oldest first."""
        with self._lock:
            if self._db is not None:
                self._write_unwritten()
                rows = self._db.execute(
                    "SELECT account FROM run_accounts WHERE run_id = ? ORDER BY decided", (run_id,)
                ).fetchall()
                return [bytes(r[0]) for r in rows]
            return list(self._memory.get(run_id, []))

    def subscribe(self, replay_recent: int) -> queue.Queue[bytes | None]:
        sub: queue.Queue[bytes | None] = queue.Queue(maxsize=self._subscriber_queue)
        with self._lock:
            backlog = list(self._recent)[-replay_recent:] if replay_recent else []
            for data in backlog:
                _offer(sub, data)
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: queue.Queue[bytes | None]) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    def stream(self, sub: queue.Queue[bytes | None], alive: threading.Event) -> Iterator[bytes]:
        """Yield a subscriber's verdicts until ``alive`` is cleared (or close() sends None)."""
        try:
            while alive.is_set():
                try:
                    item = sub.get(timeout=0.25)
                except queue.Empty:
                    continue
                if item is None:
                    return
                yield item
        finally:
            self.unsubscribe(sub)

    def end_streams(self) -> None:
        """Tell every live stream to finish (at shutdown)."""
        with self._lock:
            subscribers = list(self._subscribers)
            self._subscribers.clear()
        for sub in subscribers:
            _offer(sub, None)

    def close(self) -> None:
        self.end_streams()
        with self._lock:
            if self._db is not None:
                try:
                    self._write_unwritten()
                finally:
                    self._db.close()
                    self._db = None


def _offer(sub: queue.Queue[bytes | None], item: bytes | None) -> None:
    while True:
        try:
            sub.put_nowait(item)
            return
        except queue.Full:
            with contextlib.suppress(queue.Empty):
                sub.get_nowait()  # a slow reader loses the oldest verdict, never blocks the hop
