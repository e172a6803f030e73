"""The hop's real-memory backstop: the process's resident memory read against the one memory limit.

What counts against ``processing.max_bytes`` is accounted by the buffer (``RunHolding.used_bytes``)
from estimates; this reads what the kernel says the process really occupies (``VmRSS``, from
``/proc/self/statm``), as the Collector's memory_limiter reads the Go heap, so load no estimate
covers (an attack generator's request shapes, allocator slack) cannot grow the process past the
bound either. The pipeline asks :meth:`MemoryGuard.over` before admitting input; while it is over
the limit the hop answers with back-pressure (``RESOURCE_EXHAUSTED`` + RetryInfo / 503 +
``Retry-After``) and the decision cache gives way. Free memory the allocator keeps is handed back to
the kernel (``malloc_trim``, glibc) at most every few seconds while over, so a spike that has passed
does not leave the process refusing. Where ``/proc`` is absent the guard is off.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["MemoryGuard", "resident_bytes"]

CHECK_EVERY = 0.1
"""Seconds between readings of the resident size (a reading costs one small ``/proc`` read)."""
TRIM_EVERY = 5.0
"""Seconds between ``malloc_trim`` calls while over the limit (one can take some milliseconds)."""

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STATM = Path("/proc/self/statm")


def resident_bytes() -> int | None:
    """The process's resident set size in bytes (None where ``/proc`` is not there)."""
    try:
        return int(_STATM.read_bytes().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def _malloc_trim() -> Callable[[], None] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    with contextlib.suppress(OSError, AttributeError):
        trim = ctypes.CDLL(name).malloc_trim
        trim.argtypes = [ctypes.c_size_t]
        return lambda: trim(0)
    return None


class MemoryGuard:
    """Whether the process's resident memory is at or past ``limit`` (read at most every
    :data:`CHECK_EVERY` seconds; thread-safe enough: readers see the last reading)."""

    def __init__(
        self,
        limit: int,
        *,
        reader: Callable[[], int | None] = resident_bytes,
        clock: Callable[[], float] = time.monotonic,
        trim: Callable[[], None] | None = None,
    ) -> None:
        self.limit = limit
        self._reader = reader
        self._clock = clock
        self._trim = trim if trim is not None else _malloc_trim()
        self._checked = -1e18
        self._trimmed = -1e18
        self.rss = reader() or 0
        """The last reading (bytes; 0 when the guard cannot read the resident size)."""
        self.enabled = reader() is not None
        self.is_over = False

    def over(self) -> bool:
        """Whether the last reading (refreshed when due) is at or past the limit."""
        if not self.enabled:
            return False
        now = self._clock()
        if now - self._checked >= CHECK_EVERY:
            self._checked = now
            rss = self._reader() or 0
            if rss >= self.limit and self._trim is not None and now - self._trimmed >= TRIM_EVERY:
                # Memory freed but kept by the allocator counts in RSS: hand it back first.
                self._trimmed = now
                self._trim()
                rss = self._reader() or 0
            self.rss = rss
            self.is_over = rss >= self.limit
        return self.is_over
