"""The dead-letter file: records the next hop can never take, set aside instead of blocking the queue.

A record lands here when a single span (or log record) is larger than the forward request limit
even alone, or when the next hop refuses a request permanently (a non-retryable OTLP status).
Each entry is the untouched OTLP export request, so it can be inspected or replayed by hand:

    magic u16 | kind u8 | 0 u8 | items u32 | unix time ns u64 | reason length u32 |
    payload length u32 | crc32 of payload u32 | reason (utf-8) | payload (an OTLP export request)

The file is bounded (``exporters.otlp.dead_letter.max_size``); past the bound entries are dropped
with the ``dead_letter_dropped`` metric and a log line. Written 0600 in the 0700 data directory.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

FILE_NAME: Final = "dead-letter.otlp"
_MAGIC: Final = 0xDEAD
_HEADER = struct.Struct("<HBBIQIII")


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One entry read back (for tests and for replaying by hand)."""

    kind: int
    items: int
    time_unix_nano: int
    reason: str
    payload: bytes


class DeadLetterFile:
    """Append-only, size-bounded, fsync'd before the journal record is retired."""

    def __init__(self, path: Path, max_bytes: int, *, fsync: bool = True) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.fsync = fsync
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def add(self, kind: int, payload: bytes, items: int, reason: str) -> bool:
        """Append one entry durably; False when the file's bound leaves no room (nothing written)."""
        why = reason.encode("utf-8", "replace")[:4096]
        header = _HEADER.pack(
            _MAGIC, kind, 0, items, time.time_ns(), len(why), len(payload), zlib.crc32(payload)
        )
        entry = header + why + payload
        with self._lock:
            if self.size + len(entry) > self.max_bytes:
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                view = memoryview(entry)
                while view:
                    view = view[os.write(fd, view) :]
                if self.fsync:
                    os.fdatasync(fd)
            finally:
                os.close(fd)
        return True

    def entries(self) -> Iterator[DeadLetter]:
        """Every complete entry, oldest first (a torn tail is ignored)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        offset = 0
        while offset + _HEADER.size <= len(data):
            magic, kind, _, items, ts, why_len, length, crc = _HEADER.unpack_from(data, offset)
            start = offset + _HEADER.size
            end = start + why_len + length
            if magic != _MAGIC or end > len(data):
                return
            payload = data[start + why_len : end]
            if zlib.crc32(payload) != crc:
                return
            reason = data[start : start + why_len].decode("utf-8", "replace")
            yield DeadLetter(kind, items, ts, reason, payload)
            offset = end
