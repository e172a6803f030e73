"""Reading a journal segment back after a restart: records, a torn tail, and damage set aside.

A segment is a run of records (header, payload; the header's checksum covers the payload). When
the bytes at some offset are not a record, two cases differ:

* a **torn tail**: the last write, cut short by the crash (an incomplete header, or a header whose
  payload runs past the end of the file) with no record after it. That write was never
  acknowledged (acknowledgement waits for the fsync), so it is cut off.
* **damage**: anything else (a checksum failure, a header that makes no sense, in the middle of a
  segment or a complete record at its end). Only the damaged bytes are lost: the scan
  resynchronises on the next good record, and the damaged bytes are copied aside into
  ``<journal>/quarantine/`` (never deleted) for a person to look at, with what they held as far as
  it can be read (the kind, sequence number and item count of an intact header, the trace ids of a
  payload that still parses).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint.service.journalio import FileIO

KIND_HELD_TRACES: Final = 1
KIND_HELD_LOGS: Final = 2
KIND_OUT_TRACES: Final = 3
KIND_OUT_LOGS: Final = 4
OUT_KINDS: Final = frozenset({KIND_OUT_TRACES, KIND_OUT_LOGS})
HELD_KINDS: Final = frozenset({KIND_HELD_TRACES, KIND_HELD_LOGS})
TRACE_KINDS: Final = frozenset({KIND_HELD_TRACES, KIND_OUT_TRACES})

MAGIC: Final = 0xF07F
PENDING: Final = 0
DONE: Final = 1
HEADER = struct.Struct("<HBBQIII")
"""magic, status, kind, seq, payload length, item count (spans or log records), crc32 of payload"""
STATUS_OFFSET: Final = 2
MAX_RECORD: Final = 1 << 30
_MAGIC_BYTES: Final = MAGIC.to_bytes(2, "little")
QUARANTINE: Final = "quarantine"
"""The journal's subdirectory where damaged bytes are kept."""
MAX_TRACE_IDS: Final = 50
"""Trace ids named per damaged region in the log line (the quarantine file has them all)."""


@dataclass(frozen=True, slots=True)
class Record:
    """A pending record's place in the journal (payload read on demand)."""

    seq: int
    kind: int
    count: int
    length: int


@dataclass(frozen=True, slots=True)
class Damage:
    """A damaged region of a segment, set aside."""

    segment: str
    offset: int
    size: int
    file: str | None
    """The quarantine file holding its bytes (None: it could not be written; the bytes stay)."""
    kind: int | None = None
    seq: int | None = None
    items: int | None = None
    trace_ids: tuple[str, ...] = ()


@dataclass(slots=True)
class Scan:
    """One segment read back: ``(status, record, payload offset)`` of each record, in order."""

    records: list[tuple[int, Record, int]] = field(default_factory=list)
    end: int = 0
    """Where the good data ends (a torn tail or trailing damage is cut off there)."""
    torn: int = 0
    """Bytes of a torn tail."""
    damage: list[tuple[int, int]] = field(default_factory=list)
    """``(offset, size)`` of each damaged region."""


def parse_record(data: bytes, offset: int) -> tuple[int, Record, int] | None:
    """The record at ``offset`` (status, record, payload offset), or None when there is none."""
    if offset + HEADER.size > len(data):
        return None
    magic, status, kind, seq, length, count, crc = HEADER.unpack_from(data, offset)
    start = offset + HEADER.size
    if magic != MAGIC or length >= MAX_RECORD or (kind not in OUT_KINDS and kind not in HELD_KINDS):
        return None
    if start + length > len(data) or zlib.crc32(data[start : start + length]) != crc:
        return None
    # Any status but DONE counts as pending: a damaged status byte costs a duplicate, not the data.
    return (DONE if status == DONE else PENDING), Record(seq, kind, count, length), start


def scan(data: bytes) -> Scan:
    """The records of one segment's bytes, with its torn tail and damaged regions told apart."""
    out = Scan()
    offset = 0
    size = len(data)
    while offset < size:
        parsed = parse_record(data, offset)
        if parsed is not None:
            out.records.append(parsed)
            offset = parsed[2] + parsed[1].length
            continue
        resume = _next_record(data, offset + 1)
        if resume is None and _incomplete(data, offset):
            out.torn = size - offset
            break
        end = size if resume is None else resume
        out.damage.append((offset, end - offset))
        if resume is None:
            break
        offset = resume
    else:
        out.end = size
        return out
    out.end = offset
    return out


def _incomplete(data: bytes, offset: int) -> bool:
    """Whether the bytes from ``offset`` to the end are the start of a record cut short."""
    left = len(data) - offset
    if left < HEADER.size:
        head: bytes = data[offset : offset + 2]
        return _MAGIC_BYTES.startswith(head)
    magic, _, _, _, length, _, _ = HEADER.unpack_from(data, offset)
    return bool(magic == MAGIC and offset + HEADER.size + length > len(data))


def _next_record(data: bytes, start: int) -> int | None:
    """The offset of the next record that parses at or after ``start`` (None: none)."""
    at = data.find(_MAGIC_BYTES, start)
    while at >= 0:
        if parse_record(data, at) is not None:
            return at
        at = data.find(_MAGIC_BYTES, at + 1)
    return None


def describe(region: bytes) -> tuple[int | None, int | None, int | None, tuple[str, ...]]:
    """What a damaged region held, as far as it can be read: ``(kind, seq, items, trace ids)``."""
    if len(region) < HEADER.size:
        return None, None, None, ()
    magic, _, kind, seq, length, count, _ = HEADER.unpack_from(region, 0)
    if magic != MAGIC or (kind not in OUT_KINDS and kind not in HELD_KINDS):
        return None, None, None, ()
    payload = region[HEADER.size : HEADER.size + length]
    ids: dict[str, None] = {}
    try:
        if kind in TRACE_KINDS:
            traces = ExportTraceServiceRequest.FromString(payload)
            for rs in traces.resource_spans:
                for ss in rs.scope_spans:
                    ids.update((s.trace_id.hex(), None) for s in ss.spans if s.trace_id)
        else:
            logs = ExportLogsServiceRequest.FromString(payload)
            for rl in logs.resource_logs:
                for sl in rl.scope_logs:
                    ids.update((r.trace_id.hex(), None) for r in sl.log_records if r.trace_id)
    except (DecodeError, ValueError):
        pass  # the payload is what was damaged: only the header can be read
    return kind, seq, count, tuple(ids)


def quarantine(
    io: FileIO, directory: Path, segment: Path, offset: int, region: bytes
) -> str | None:
    """Copy a damaged region into ``<directory>/quarantine/`` (durably); returns the file's path.

    Named by segment and offset, so a region found again at the next start (its segment still
    holds pending records) is not copied twice: the first copy is kept. None when it cannot be
    written (then the bytes are left where they are: never deleted).
    """
    folder = directory / QUARANTINE
    target = folder / f"{segment.name}@{offset}.bad"
    try:
        io.makedirs(folder)
        if target.name in io.listdir(folder):
            return str(target)
        partial = folder / (target.name + ".tmp")
        fd = io.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            written = 0
            while written < len(region):
                written += io.pwrite(fd, memoryview(region)[written:], written)
            io.fdatasync(fd)
        finally:
            io.close(fd)
        io.rename(partial, target)
        io.fsync_dir(folder)
    except OSError:
        return None
    return str(target)
