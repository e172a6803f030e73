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

__all__ = ["MemoryGuard", "limit_malloc_arenas", "resident_bytes"]

SOFT_LIMIT = 0.8
"""The share of the limit at which the guard calls the process over: input no estimate covers keeps
arriving between readings, and deciding the runs already held allocates after input stops, so
refusals start well below the bound. Measured on ``tests/test_hop_overload.py``'s backstop run
(100 MiB, runs held 20 s, an idle process of 72 MiB): 0.9 peaked at 1.22-1.23x the limit, 0.8 at
0.985x."""
ARENAS = 2
"""glibc malloc arenas the hop allows (its default is 8 a core): each thread that allocates (gRPC's
workers parsing requests, the decision worker) otherwise gets its own heap, whose freed memory
stays resident and is reused only by that thread. Measured on ``bench_overload.py --max-bytes
128MiB``: peak RSS 183 MB with the default, 162 MB with two (``MALLOC_ARENA_MAX=2``)."""
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


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _malloc_trim() -> Callable[[], None] | None:
    libc = _libc()
    with contextlib.suppress(AttributeError):
        if libc is not None:
            trim = libc.malloc_trim
            trim.argtypes = [ctypes.c_size_t]
            return lambda: trim(0)
    return None


M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter number for the arena count (malloc.h)."""


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas (see :data:`ARENAS`) unless ``MALLOC_ARENA_MAX`` says otherwise;
    call before the threads start. False where there is no glibc ``mallopt``."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _libc()
    with contextlib.suppress(AttributeError):
        if libc is not None:
            return bool(libc.mallopt(M_ARENA_MAX, arenas))
    return False


class MemoryGuard:
    """Whether the process's resident memory is at or past :data:`SOFT_LIMIT` of ``limit`` (read
    at most every :data:`CHECK_EVERY` seconds; thread-safe enough: readers see the last reading)."""

    def __init__(
        self,
        limit: int,
        *,
        reader: Callable[[], int | None] = resident_bytes,
        clock: Callable[[], float] = time.monotonic,
        trim: Callable[[], None] | None = None,
    ) -> None:
        self.limit = limit
        self.soft_limit = int(limit * SOFT_LIMIT)
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
        """Whether the last reading (refreshed when due) is at or past the soft limit."""
        if not self.enabled:
            return False
        now = self._clock()
        if now - self._checked >= CHECK_EVERY:
            self._checked = now
            rss = self._reader() or 0
            soft = self.soft_limit
            if rss >= soft and self._trim is not None and now - self._trimmed >= TRIM_EVERY:
                # Memory freed but kept by the allocator counts in RSS: hand it back first.
                self._trimmed = now
                self._trim()
                rss = self._reader() or 0
            self.rss = rss
            self.is_over = rss >= soft
        return self.is_over
