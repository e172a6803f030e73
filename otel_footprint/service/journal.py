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
"""

from __future__ import annotations

import collections
import contextlib
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from otel_footprint.service import jsonlog
from otel_footprint.service.journalio import REAL_IO, FileIO

KIND_HELD_TRACES: Final = 1
KIND_HELD_LOGS: Final = 2
KIND_OUT_TRACES: Final = 3
KIND_OUT_LOGS: Final = 4
OUT_KINDS: Final = frozenset({KIND_OUT_TRACES, KIND_OUT_LOGS})
HELD_KINDS: Final = frozenset({KIND_HELD_TRACES, KIND_HELD_LOGS})

_MAGIC: Final = 0xF07F
_PENDING: Final = 0
_DONE: Final = 1
# magic, status, kind, seq, payload length, item count (spans or log records), crc32 of payload
_HEADER = struct.Struct("<HBBQIII")
_STATUS_OFFSET: Final = 2
_MAX_RECORD: Final = 1 << 30

_log = jsonlog.get("journal")


class QueueFullError(Exception):
    """The journal would exceed its size bound: the sender should retry later."""


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


@dataclass(frozen=True, slots=True)
class Record:
    """A pending record's place in the journal (payload read on demand)."""

    seq: int
    kind: int
    count: int
    length: int


@dataclass(slots=True)
class Replay:
    """What :meth:`Journal.open` found pending from an earlier run."""

    held: list[tuple[Record, bytes]] = field(default_factory=list)
    outbound: int = 0
    truncated_bytes: int = 0


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
        self.compacted_segments = 0
        """Segments rewritten by compaction (their pending records copied forward)."""

    # -- opening and replay --------------------------------------------------------------------

    def open(self) -> Replay:
        """Scan existing segments, keep the pending records, start a new active segment."""
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
            offset = 0
            while offset < len(data):
                parsed = _parse_record(data, offset)
                if parsed is None:
                    # A torn tail (killed mid-write): that record was never acknowledged.
                    replay.truncated_bytes += len(data) - offset
                    _log.warning(
                        "truncating an incomplete journal record",
                        extra={"path": str(path), "offset": offset, "bytes": len(data) - offset},
                    )
                    io.ftruncate(fd, offset)
                    break
                status, record, payload_at = parsed
                max_seq = max(max_seq, record.seq)
                if status == _PENDING and record.seq in self._where:
                    # A record compaction copied forward; the process died before the old
                    # segment was removed. The first copy stands; this one is done.
                    io.pwrite(fd, bytes([_DONE]), offset + _STATUS_OFFSET)
                elif status == _PENDING:
                    seg.pending += 1
                    seg.live += _HEADER.size + record.length
                    self._where[record.seq] = (seg, offset, record)
                    self._pending_bytes += record.length
                    if record.kind in OUT_KINDS:
                        self._out.append(record)
                        self._out_pending += 1
                        replay.outbound += 1
                    else:
                        replay.held.append((record, data[payload_at : payload_at + record.length]))
                offset = payload_at + record.length
            seg.size = min(offset, len(data))
            self._disk_bytes += seg.size
            if seg.pending == 0:
                self._drop_segment(seg)
            else:
                self._segments[first] = seg
        self._next_seq = max_seq + 1
        self._last_written = self._synced = max_seq
        self._new_active()
        return replay

    def _new_active(self) -> None:
        # Named by the next sequence number, kept strictly increasing: compaction can start a
        # segment before any new record was numbered, and replay reads segments in name order.
        first = max(self._next_seq, self._last_first + 1)
        self._last_first = first
        path = self.directory / f"seg-{first:020d}.log"
        fd = self.io.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        seg = _Segment(path, fd, first, active=True)
        self._segments[first] = seg
        self._active = seg
        if self.fsync:
            # The new file's directory entry must survive a crash too.
            self.io.fsync_dir(self.directory)

    def _drop_segment(self, seg: _Segment) -> None:
        self.io.close(seg.fd)
        with contextlib.suppress(FileNotFoundError):
            self.io.unlink(seg.path)
        self._disk_bytes -= seg.size
        self._segments.pop(seg.first_seq, None)

    # -- writing -------------------------------------------------------------------------------

    def append(self, items: Sequence[tuple[int, bytes, int]], *, admit: bool = True) -> list[int]:
        """Write records ``(kind, payload, count)`` back to back; returns their sequence numbers.

        Not yet durable: call :meth:`sync` with the last sequence before acknowledging. With
        ``admit`` the size bound is checked first (raises :class:`QueueFullError`); internal re-queues
        (released runs) pass ``admit=False`` because refusing them would lose acknowledged data.
        """
        total = sum(len(p) + _HEADER.size for _, p, _ in items)
        with self._lock:
            if self._closed:
                raise QueueFullError("journal is closed")
            if admit and self._disk_bytes + total > self.max_bytes:
                raise QueueFullError(
                    f"disk queue is full ({self._disk_bytes} of {self.max_bytes} bytes)"
                )
            assert self._active is not None
            if self._active.size > 0 and self._active.size + total > self.segment_bytes:
                self._rotate()
            seg = self._active
            assert seg is not None
            seqs: list[int] = []
            chunks: list[bytes] = []
            offset = seg.size
            for kind, payload, count in items:
                if len(payload) >= _MAX_RECORD:
                    raise ValueError(f"record of {len(payload)} bytes is too large for the journal")
                seq = self._next_seq
                self._next_seq += 1
                record = Record(seq, kind, count, len(payload))
                header = _HEADER.pack(
                    _MAGIC, _PENDING, kind, seq, len(payload), count, zlib.crc32(payload)
                )
                chunks.append(header)
                chunks.append(payload)
                self._where[seq] = (seg, offset, record)
                offset += _HEADER.size + len(payload)
                seg.pending += 1
                seg.live += _HEADER.size + len(payload)
                self._pending_bytes += len(payload)
                seqs.append(seq)
                if kind in OUT_KINDS:
                    self._out.append(record)
                    self._out_pending += 1
                    if self._cached_bytes + len(payload) <= self.cache_bytes:
                        self._cache[seq] = payload
                        self._cached_bytes += len(payload)
            data = b"".join(chunks)
            _write_all(self.io, seg.fd, data, seg.size)
            seg.size += len(data)
            self._disk_bytes += len(data)
            self._last_written = seqs[-1] if seqs else self._last_written
            if any(kind in OUT_KINDS for kind, _, _ in items):
                self._out_cv.notify_all()
            return seqs

    def _rotate(self) -> None:
        self._roll()
        self._compact()

    def _roll(self) -> None:
        # Called with the lock held: make the old segment durable, then start a new one.
        old = self._active
        assert old is not None
        if self.fsync:
            self.io.fdatasync(old.fd)
            self._synced = max(self._synced, self._last_written)
        old.active = False
        self._new_active()
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
            data = self.io.pread(seg.fd, _HEADER.size + record.length, old_offset)
            chunks.append(data)
            placed.append((offset, record))
            offset += len(data)
        data = b"".join(chunks)
        _write_all(self.io, active.fd, data, active.size)
        if self.fsync:
            self.io.fdatasync(active.fd)
        for new_offset, record in placed:
            self._where[record.seq] = (active, new_offset, record)
            active.pending += 1
            active.live += _HEADER.size + record.length
        active.size += len(data)
        self._disk_bytes += len(data)
        seg.pending = 0
        seg.live = 0
        self._drop_segment(seg)
        if self.fsync:
            self.io.fsync_dir(self.directory)
        self.compacted_segments += 1

    def sync(self, seq: int) -> None:
        """Return once every record up to ``seq`` is on disk (one fsync serves many waiters)."""
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
                try:
                    self.io.fdatasync(fd)
                finally:
                    self._sync_cv.acquire()
                    self._syncing = False
                    self._sync_cv.notify_all()
                self._synced = max(self._synced, target)

    # -- completing ----------------------------------------------------------------------------

    def mark_done(self, seqs: Iterable[int]) -> None:
        """Mark records done (their content is safe elsewhere); drop segments that empty."""
        with self._lock:
            for seq in seqs:
                where = self._where.pop(seq, None)
                if where is None:
                    continue
                seg, offset, record = where
                self.io.pwrite(seg.fd, bytes([_DONE]), offset + _STATUS_OFFSET)
                seg.pending -= 1
                seg.live -= _HEADER.size + record.length
                self._pending_bytes -= record.length
                if record.kind in OUT_KINDS:
                    self._out_pending -= 1
                cached = self._cache.pop(seq, None)
                if cached is not None:
                    self._cached_bytes -= len(cached)
                if seg.pending == 0 and not seg.active:
                    self._drop_segment(seg)
            if self._closed or self._active is None:
                return
            # A cheap test first (pending payload without headers); the exact one in _compact.
            if self._disk_bytes - self._active.size > 2 * self._pending_bytes:
                self._compact()

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
            data = self.io.pread(seg.fd, record.length, offset + _HEADER.size)
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
                if self.fsync:
                    self.io.fdatasync(seg.fd)
                if seg.pending == 0:
                    self._drop_segment(seg)
                else:
                    self.io.close(seg.fd)
            self._segments.clear()
            self._out_cv.notify_all()


def _parse_record(data: bytes, offset: int) -> tuple[int, Record, int] | None:
    if offset + _HEADER.size > len(data):
        return None
    magic, status, kind, seq, length, count, crc = _HEADER.unpack_from(data, offset)
    start = offset + _HEADER.size
    if magic != _MAGIC or status not in (_PENDING, _DONE) or length >= _MAX_RECORD:
        return None
    if start + length > len(data) or zlib.crc32(data[start : start + length]) != crc:
        return None
    if kind not in OUT_KINDS and kind not in HELD_KINDS:
        return None
    return status, Record(seq, kind, count, length), start


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
        view = view[written:]
        offset += written
