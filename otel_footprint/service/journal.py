"""The hop's disk journal: every accepted batch is written here (and fsync'd) before the sender is acked.

One append-only log of records in size-bounded segment files under ``<data_dir>/queue``. A record
is either *held* input (spans waiting in the run buffer, footprint log records waiting to be
joined) or *outbound* (a batch waiting to be forwarded). A record is marked done in place (one
status byte) when its spans have been re-queued as outbound, or forwarded; a segment whose records
are all done is deleted, and a segment pinned by a few long-pending records is compacted (those
records copied forward) so the files stay within twice the pending bytes plus the active segment.
After a crash the pending records are replayed: held input goes back into
the run buffer, outbound batches back to the forwarder. Delivery is therefore at-least-once: a
crash between forwarding and marking may send a batch twice, never zero times.

The rules it keeps (docs/design.md, "The journal's rules"): a record is retired only when
everything it holds is journaled further or delivered (the callers' side: ``service/buffer.py``);
a write that fails (a full disk, an I/O error, a short write) leaves the journal as it was before
it, refuses new input (:class:`QueueFullError`, with what it waits for) and is tried again, by the
release worker's re-queues and by new input at most once a :data:`PROBE_SECONDS`, so a full disk
recovers by itself when space returns; damage costs the damaged record only
(``service/journalscan.py``). Every file operation goes through one seam (``journalio.FileIO``),
where the crash-point tests inject their faults.
"""

from __future__ import annotations

import collections
import errno
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from otel_footprint.service import jsonlog
from otel_footprint.service.journalio import REAL_IO, FileIO
from otel_footprint.service.journalscan import (
    DONE,
    HEADER,
    HELD_KINDS,
    KIND_HELD_LOGS,
    KIND_HELD_TRACES,
    KIND_OUT_LOGS,
    KIND_OUT_TRACES,
    MAGIC,
    MAX_RECORD,
    MAX_TRACE_IDS,
    OUT_KINDS,
    PENDING,
    STATUS_OFFSET,
    Damage,
    Record,
    describe,
    quarantine,
    scan,
)

__all__ = [
    "HELD_KINDS",
    "KIND_HELD_LOGS",
    "KIND_HELD_TRACES",
    "KIND_OUT_LOGS",
    "KIND_OUT_TRACES",
    "OUT_KINDS",
    "Damage",
    "Journal",
    "QueueFullError",
    "Record",
    "Replay",
]

PROBE_SECONDS: Final = 1.0
"""While writes fail, new input tries one write at most this often (the rest are refused)."""
_DONE_MARK: Final = bytes([DONE])

_log = jsonlog.get("journal")


class QueueFullError(Exception):
    """The journal would exceed its size bound, or cannot write now: the sender should retry later."""


@dataclass(eq=False, slots=True)
class _Segment:
    path: Path
    fd: int
    first_seq: int
    size: int = 0
    pending: int = 0
    live: int = 0
    """Bytes (header and payload) of this segment's pending records."""
    active: bool = False
    dirty: bool = False
    """A failed write may have left bytes past ``size`` that could not be cut off yet."""


@dataclass(slots=True)
class Replay:
    """What :meth:`Journal.open` found pending from an earlier run."""

    held: list[tuple[Record, bytes]] = field(default_factory=list)
    outbound: int = 0
    truncated_bytes: int = 0
    """Bytes of torn tails cut off (writes the crash interrupted: never acknowledged)."""
    damaged: list[Damage] = field(default_factory=list)
    """Damaged regions set aside in the quarantine directory (their records are lost)."""


class Journal:
    """Segmented append-only journal with group-commit fsync, in-place done marks and replay."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = 16 << 20,
        max_bytes: int = 1 << 30,
        fsync: bool = True,
        cache_bytes: int = 64 << 20,
        io: FileIO = REAL_IO,
    ) -> None:
        self.directory = directory
        self.io = io
        """Every file operation goes through this seam (tests inject faults and crashes there)."""
        self.segment_bytes = segment_bytes
        self.max_bytes = max_bytes
        self.fsync = fsync
        self.cache_bytes = cache_bytes
        self._lock = threading.Lock()
        self._sync_cv = threading.Condition(self._lock)
        self._out_cv = threading.Condition(self._lock)
        self._segments: dict[int, _Segment] = {}  # by first seq, in order
        self._where: dict[int, tuple[_Segment, int, Record]] = {}
        self._out: collections.deque[Record] = collections.deque()
        self._cache: dict[int, bytes] = {}
        self._cached_bytes = 0
        self._active: _Segment | None = None
        self._next_seq = 1
        self._last_written = 0
        self._synced = 0
        self._syncing = False
        self._disk_bytes = 0
        self._pending_bytes = 0
        self._out_pending = 0
        self._closed = False
        self._last_first = 0
        self._failure: str | None = None
        self._failed_since = 0.0
        self._failed_at = 0.0
        self.compacted_segments = 0
        """Segments rewritten by compaction (their pending records copied forward)."""
        self.on_write_failure: Callable[[str], None] = lambda _error: None
        """Told of each failed write, fsync or file creation (by error name: ``ENOSPC``, ...)."""

    # -- opening and replay --------------------------------------------------------------------

    def open(self) -> Replay:
        """Scan existing segments, keep the pending records, start a new active segment.

        A torn tail (the write a crash interrupted, never acknowledged) is cut off; damaged bytes
        anywhere else are copied into the quarantine directory and skipped, the records around
        them kept (``journalscan``)."""
        io = self.io
        io.makedirs(self.directory)
        replay = Replay()
        max_seq = 0
        names = sorted(n for n in io.listdir(self.directory) if _is_segment_name(n))
        for path in (self.directory / n for n in names):
            first = int(path.stem.split("-", 1)[1])
            fd = io.open(path, os.O_RDWR)
            seg = _Segment(path, fd, first)
            self._last_first = max(self._last_first, first)
            data = _read_all(io, fd)
            found = scan(data)
            for offset, size in found.damage:
                replay.damaged.append(self._set_aside(path, offset, data[offset : offset + size]))
            cut = found.end < len(data)
            if cut and found.damage and found.damage[-1][0] == found.end:
                # Trailing damage: cut off only once its bytes are safe in the quarantine.
                cut = replay.damaged[-1].file is not None
            if cut:
                if found.torn:
                    replay.truncated_bytes += found.torn
                    _log.warning(
                        "truncating an incomplete journal record (a write the crash interrupted)",
                        extra={"path": str(path), "offset": found.end, "bytes": found.torn},
                    )
                io.ftruncate(fd, found.end)
            for status, record, payload_at in found.records:
                offset = payload_at - HEADER.size
                max_seq = max(max_seq, record.seq)
                if status == PENDING and record.seq in self._where:
                    # A record compaction copied forward; the process died before the old
                    # segment was removed. The first copy stands; this one is done.
                    io.pwrite(fd, _DONE_MARK, offset + STATUS_OFFSET)
                elif status == PENDING:
                    seg.pending += 1
                    seg.live += HEADER.size + record.length
                    self._where[record.seq] = (seg, offset, record)
                    self._pending_bytes += record.length
                    if record.kind in OUT_KINDS:
                        self._out.append(record)
                        self._out_pending += 1
                        replay.outbound += 1
                    else:
                        replay.held.append((record, data[payload_at : payload_at + record.length]))
            seg.size = found.end if cut else len(data)
            self._disk_bytes += seg.size
            if seg.pending == 0:
                self._drop_segment(seg)
            else:
                self._segments[first] = seg
        self._next_seq = max_seq + 1
        self._last_written = self._synced = max_seq
        try:
            self._install(self._create_segment())
        except OSError as exc:
            # Started on a full disk: replay what is here, refuse input, and create the
            # segment at the first write that can (the release worker's, or a probe).
            self._failed(exc)
        return replay

    def _set_aside(self, path: Path, offset: int, region: bytes) -> Damage:
        kind, seq, items, trace_ids = describe(region)
        kept = quarantine(self.io, self.directory, path, offset, region)
        damage = Damage(path.name, offset, len(region), kept, kind, seq, items, trace_ids)
        _log.error(
            "a damaged journal record was set aside; what it held is lost"
            if kept is not None
            else "a damaged journal record could not be copied aside; it is skipped and left in "
            "its segment",
            extra={
                "path": str(path),
                "offset": offset,
                "bytes": len(region),
                "quarantine_file": kept,
                "kind": kind,
                "seq": seq,
                "items": items,
                "trace_ids": list(trace_ids[:MAX_TRACE_IDS]),
            },
        )
        return damage

    def _create_segment(self) -> _Segment:
        """A new, empty segment file, durable in its directory (not yet the active one)."""
        # Named by the next sequence number, kept strictly increasing: compaction can start a
        # segment before any new record was numbered, and replay reads segments in name order.
        first = max(self._next_seq, self._last_first + 1)
        path = self.directory / f"seg-{first:020d}.log"
        fd = self.io.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self._last_first = first
        if self.fsync:
            # The new file's directory entry must survive a crash too.
            try:
                self.io.fsync_dir(self.directory)
            except OSError:
                self._close_quietly(fd)
                self._unlink_quietly(path)
                raise
        return _Segment(path, fd, first)

    def _install(self, seg: _Segment) -> None:
        seg.active = True
        self._segments[seg.first_seq] = seg
        self._active = seg

    def _drop_segment(self, seg: _Segment) -> None:
        """Close and remove a segment none of whose records is pending. A removal that fails
        leaves a file of done records (or of copies compaction made): harmless at replay."""
        self._close_quietly(seg.fd)
        self._unlink_quietly(seg.path)
        self._disk_bytes -= seg.size
        self._segments.pop(seg.first_seq, None)

    def _close_quietly(self, fd: int) -> None:
        try:
            self.io.close(fd)
        except OSError as exc:
            _log.warning("cannot close a journal segment", extra={"error": str(exc)})

    def _unlink_quietly(self, path: Path) -> None:
        try:
            self.io.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            _log.warning(
                "cannot remove a finished journal segment",
                extra={"path": str(path), "error": str(exc)},
            )

    # -- writing -------------------------------------------------------------------------------

    def append(self, items: Sequence[tuple[int, bytes, int]], *, admit: bool = True) -> list[int]:
        """Write records ``(kind, payload, count)`` back to back; returns their sequence numbers.

        Not yet durable: call :meth:`sync` with the last sequence before acknowledging. With
        ``admit`` the size bound is checked first (raises :class:`QueueFullError`); internal re-queues
        (released runs) pass ``admit=False`` because refusing them would lose acknowledged data.

        A write that fails (``OSError``: a full disk, an I/O error, a short write) leaves the
        journal as it was before it and raises; the journal then refuses admitted input
        (:class:`QueueFullError`, saying what it waits for) except one try a
        :data:`PROBE_SECONDS`, until a write succeeds again.
        """
        total = sum(len(p) + HEADER.size for _, p, _ in items)
        with self._lock:
            if self._closed:
                raise QueueFullError("journal is closed")
            if admit:
                self._admit(total)
            try:
                seqs = self._write(items, total)
            except OSError as exc:
                self._failed(exc)
                raise
            if self._failure is not None:
                self._recovered()
            if any(kind in OUT_KINDS for kind, _, _ in items):
                self._out_cv.notify_all()
            return seqs

    def _admit(self, total: int) -> None:
        if self._failure is not None and time.monotonic() - self._failed_at < PROBE_SECONDS:
            raise QueueFullError(
                f"the disk queue cannot write ({self._failure}); waiting for {_waiting_for(self._failure)}"
            )
        if self._disk_bytes + total > self.max_bytes:
            raise QueueFullError(
                f"disk queue is full ({self._disk_bytes} of {self.max_bytes} bytes)"
            )

    def _write(self, items: Sequence[tuple[int, bytes, int]], total: int) -> list[int]:
        """Write ``items`` at the active segment's end, then index them (the lock held). Nothing
        is indexed, counted or numbered for good until the write succeeded."""
        if self._active is None:
            self._install(self._create_segment())
        assert self._active is not None
        if self._active.size > 0 and self._active.size + total > self.segment_bytes:
            self._rotate()
        seg = self._active
        assert seg is not None
        if seg.dirty:
            self._cut(seg)
        chunks: list[bytes] = []
        placed: list[tuple[Record, int, bytes]] = []
        offset = seg.size
        seq = self._next_seq
        for kind, payload, count in items:
            if len(payload) >= MAX_RECORD:
                raise ValueError(f"record of {len(payload)} bytes is too large for the journal")
            record = Record(seq, kind, count, len(payload))
            seq += 1
            chunks.append(
                HEADER.pack(
                    MAGIC, PENDING, kind, record.seq, len(payload), count, zlib.crc32(payload)
                )
            )
            chunks.append(payload)
            placed.append((record, offset, payload))
            offset += HEADER.size + len(payload)
        data = b"".join(chunks)
        # Numbers are never given twice, even to records whose write failed: a failed write's
        # bytes that could not be cut off must not pass for a later record at replay.
        self._next_seq = seq
        try:
            _write_all(self.io, seg.fd, data, seg.size)
        except OSError:
            self._cut(seg, failing=True)
            raise
        for record, at, payload in placed:
            self._where[record.seq] = (seg, at, record)
            seg.pending += 1
            seg.live += HEADER.size + record.length
            self._pending_bytes += record.length
            if record.kind in OUT_KINDS:
                self._out.append(record)
                self._out_pending += 1
                if self._cached_bytes + record.length <= self.cache_bytes:
                    self._cache[record.seq] = payload
                    self._cached_bytes += record.length
        seg.size += len(data)
        self._disk_bytes += len(data)
        if placed:
            self._last_written = placed[-1][0].seq
        return [record.seq for record, _, _ in placed]

    def _cut(self, seg: _Segment, *, failing: bool = False) -> None:
        """Cut off whatever a failed write left past the segment's known end."""
        try:
            self.io.ftruncate(seg.fd, seg.size)
        except OSError:
            seg.dirty = True
            if not failing:
                raise
        else:
            seg.dirty = False

    def _failed(self, exc: OSError) -> None:
        name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        now = time.monotonic()
        self._failed_at = now
        self.on_write_failure(name)
        if self._failure is None:
            self._failure = f"{name}: {exc.strerror or exc}"
            self._failed_since = now
            _log.error(
                "the disk queue cannot write; refusing new input until it can, and trying again",
                extra={
                    "error": self._failure,
                    "waiting_for": _waiting_for(self._failure),
                    "directory": str(self.directory),
                },
            )

    def _recovered(self) -> None:
        _log.info(
            "the disk queue writes again; taking new input",
            extra={
                "was": self._failure,
                "blocked_seconds": round(time.monotonic() - self._failed_since, 3),
            },
        )
        self._failure = None

    @property
    def blocked(self) -> str | None:
        """What the journal waits for while its writes fail (None: it writes)."""
        failure = self._failure
        return None if failure is None else f"{_waiting_for(failure)} ({failure})"

    def _rotate(self) -> None:
        self._roll()
        try:
            self._compact()
        except OSError as exc:  # compaction only reclaims disk: the records stay where they are
            _log.warning("cannot compact the disk queue now", extra={"error": str(exc)})

    def _roll(self) -> None:
        # Called with the lock held: make the old segment durable, then start a new one. A
        # failure on the way leaves the old one active.
        old = self._active
        assert old is not None
        if self.fsync:
            self.io.fdatasync(old.fd)
            self._synced = max(self._synced, self._last_written)
        new = self._create_segment()
        old.active = False
        self._install(new)
        if old.pending == 0:
            self._drop_segment(old)

    def _compact(self) -> None:
        """Copy the pending records of sparse segments forward, so disk tracks what is pending.

        A segment is freed only when all its records are done, so a few long-held records (runs
        waiting for their run span) could pin many segments of delivered data. Called with the
        lock held after a rotation or when records are done: while the segment files hold more than twice the pending bytes
        plus the active segment, the sparsest finished segment's pending records are rewritten
        into the active segment (same sequence numbers), made durable, and the old file removed
        before the lock is released. A crash between the copy and the removal leaves two pending
        copies of a sequence number; :meth:`open` keeps the first.
        """
        active = self._active
        assert active is not None
        live = sum(seg.live for seg in self._segments.values())
        if self._disk_bytes - active.size <= 2 * live:
            return
        candidates = sorted(
            (seg for seg in self._segments.values() if not seg.active),
            key=lambda seg: seg.live / max(seg.size, 1),
        )
        for seg in candidates:
            if self._disk_bytes - active.size <= 2 * live:
                break
            if seg.live * 2 > seg.size:
                break  # the rest are at least half pending already
            if active.size > 0 and active.size + seg.live > self.segment_bytes:
                self._roll()  # keep the active segment within its size
                assert self._active is not None
                active = self._active
            self._move_records(seg, active)

    def _move_records(self, seg: _Segment, active: _Segment) -> None:
        moved = sorted(
            (offset, record)
            for (where_seg, offset, record) in self._where.values()
            if where_seg is seg
        )
        chunks: list[bytes] = []
        offset = active.size
        placed: list[tuple[int, Record]] = []
        for old_offset, record in moved:
            data = self.io.pread(seg.fd, HEADER.size + record.length, old_offset)
            chunks.append(data)
            placed.append((offset, record))
            offset += len(data)
        data = b"".join(chunks)
        if active.dirty:
            self._cut(active)
        try:
            _write_all(self.io, active.fd, data, active.size)
            if self.fsync:
                self.io.fdatasync(active.fd)
        except OSError:
            self._cut(active, failing=True)  # the copies are not indexed: as if never made
            raise
        for new_offset, record in placed:
            self._where[record.seq] = (active, new_offset, record)
            active.pending += 1
            active.live += HEADER.size + record.length
        active.size += len(data)
        self._disk_bytes += len(data)
        seg.pending = 0
        seg.live = 0
        self._drop_segment(seg)
        if self.fsync:
            try:
                self.io.fsync_dir(self.directory)
            except OSError as exc:  # the old file may come back after a crash: its copies are
                _log.warning("cannot sync the disk queue's directory", extra={"error": str(exc)})
        self.compacted_segments += 1

    def sync(self, seq: int) -> None:
        """Return once every record up to ``seq`` is on disk (one fsync serves many waiters).

        Raises ``OSError`` when the fsync fails: nothing is acknowledged on it (the journal then
        refuses admitted input as for a failed write, until a write or fsync succeeds)."""
        if not self.fsync:
            return
        with self._sync_cv:
            while self._synced < seq:
                if self._syncing:
                    self._sync_cv.wait()
                    continue
                self._syncing = True
                target = self._last_written
                assert self._active is not None
                fd = self._active.fd
                self._sync_cv.release()
                error: OSError | None = None
                try:
                    self.io.fdatasync(fd)
                except OSError as exc:
                    error = exc
                finally:
                    self._sync_cv.acquire()
                    self._syncing = False
                    self._sync_cv.notify_all()
                if error is not None:
                    self._failed(error)
                    raise error
                self._synced = max(self._synced, target)
                if self._failure is not None:
                    self._recovered()

    # -- completing ----------------------------------------------------------------------------

    def mark_done(self, seqs: Iterable[int]) -> None:
        """Mark records done (their content is safe elsewhere); drop segments that empty.

        Never raises for the disk: a done mark that cannot be written leaves the record pending
        on disk, so it is replayed (sent again) after a restart: a duplicate, never a loss."""
        with self._lock:
            failed: OSError | None = None
            for seq in seqs:
                where = self._where.pop(seq, None)
                if where is None:
                    continue
                seg, offset, record = where
                try:
                    self.io.pwrite(seg.fd, _DONE_MARK, offset + STATUS_OFFSET)
                except OSError as exc:
                    failed = exc
                seg.pending -= 1
                seg.live -= HEADER.size + record.length
                self._pending_bytes -= record.length
                if record.kind in OUT_KINDS:
                    self._out_pending -= 1
                cached = self._cache.pop(seq, None)
                if cached is not None:
                    self._cached_bytes -= len(cached)
                if seg.pending == 0 and not seg.active:
                    self._drop_segment(seg)
            if failed is not None:
                _log.warning(
                    "cannot mark journal records done; they will be sent again after a restart",
                    extra={"error": str(failed)},
                )
            if self._closed or self._active is None:
                return
            # A cheap test first (pending payload without headers); the exact one in _compact.
            if self._disk_bytes - self._active.size > 2 * self._pending_bytes:
                try:
                    self._compact()
                except OSError as exc:
                    _log.warning("cannot compact the disk queue now", extra={"error": str(exc)})

    # -- the forwarder's side ------------------------------------------------------------------

    def take_outbound(self, max_bytes: int, timeout: float) -> list[Record]:
        """Up to ``max_bytes`` of the oldest outbound records of one kind (waits up to ``timeout``)."""
        with self._out_cv:
            if not self._out and timeout > 0:
                self._out_cv.wait(timeout)
            if not self._out:
                return []
            kind = self._out[0].kind
            batch = [self._out.popleft()]
            size = batch[0].length
            while (
                self._out and self._out[0].kind == kind and size + self._out[0].length <= max_bytes
            ):
                record = self._out.popleft()
                batch.append(record)
                size += record.length
            return batch

    def give_back(self, records: Sequence[Record]) -> None:
        """Put records taken by :meth:`take_outbound` back at the head (e.g. on shutdown)."""
        with self._out_cv:
            self._out.extendleft(reversed(records))
            self._out_cv.notify_all()

    def read(self, record: Record) -> bytes:
        """A pending record's payload (from memory when recent, else from its segment)."""
        with self._lock:
            cached = self._cache.get(record.seq)
            if cached is not None:
                return cached
            where = self._where.get(record.seq)
            if where is None:
                raise KeyError(f"journal record {record.seq} is not pending")
            seg, offset, _ = where
            # Under the lock: compaction may move the record and close its old segment.
            data = self.io.pread(seg.fd, record.length, offset + HEADER.size)
        if len(data) != record.length:
            raise OSError(f"journal segment {seg.path} is shorter than its index says")
        return data

    def wake(self) -> None:
        """Wake a forwarder waiting in :meth:`take_outbound` (used at shutdown)."""
        with self._out_cv:
            self._out_cv.notify_all()

    # -- state ---------------------------------------------------------------------------------

    @property
    def outbound_count(self) -> int:
        """Outbound records not yet forwarded (queued or in flight)."""
        with self._lock:
            return self._out_pending

    @property
    def disk_bytes(self) -> int:
        """Bytes of the segment files: pending records, done ones not yet reclaimed, headers."""
        return self._disk_bytes

    @property
    def memory_bytes(self) -> int:
        """Payload bytes of outbound records kept in memory for the forwarder (at most
        ``cache_bytes``; the rest is read back from the segments). Read without the lock."""
        return self._cached_bytes

    @property
    def pending_bytes(self) -> int:
        """Payload bytes of the records not yet done (held input and outbound)."""
        return self._pending_bytes

    def sizes(self) -> tuple[int, int]:
        """``(pending_bytes, disk_bytes)`` read together (one consistent moment)."""
        with self._lock:
            return self._pending_bytes, self._disk_bytes

    def pending_seqs(self) -> list[int]:
        with self._lock:
            return sorted(self._where)

    def close(self) -> None:
        """Flush and close every segment (pending records stay on disk for the next start)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for seg in list(self._segments.values()):
                if seg.pending == 0:
                    self._drop_segment(seg)
                    continue
                if self.fsync:
                    try:
                        self.io.fdatasync(seg.fd)
                    except OSError as exc:  # what was acknowledged was synced before its ack
                        _log.warning(
                            "cannot sync a journal segment at close",
                            extra={"path": str(seg.path), "error": str(exc)},
                        )
                self._close_quietly(seg.fd)
            self._segments.clear()
            self._out_cv.notify_all()


def _is_segment_name(name: str) -> bool:
    if not (name.startswith("seg-") and name.endswith(".log")):
        return False
    if not name[4:-4].isdigit():
        _log.warning("ignoring a file that is not a journal segment", extra={"path": name})
        return False
    return True


def _read_all(io: FileIO, fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = io.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _write_all(io: FileIO, fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = io.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.EIO, "a write to the disk queue wrote nothing")
        view = view[written:]
        offset += written


def _waiting_for(failure: str) -> str:
    """What a failed write waits for, in words for the log line and the health answer."""
    if failure.startswith(("ENOSPC", "EDQUOT")):
        return "space on the disk queue's file system"
    return "the disk queue's file system to accept writes again"
