"""The journal's file I/O, as one small seam: every call the journal makes on its files goes here.

:class:`FileIO` is the real thing (``os`` on real files). The journal is written against this class
only, so a test can put a subclass in its place that numbers each call and fails or "crashes" at a
chosen one (``tests/journal_faults.py``): a crash before a call, after it, or in the middle of a
write, then a restart from the files as left, is how the journal's promise is checked at every
point (``tests/test_journal_crashpoints.py``).
"""

from __future__ import annotations

import os
from pathlib import Path


class FileIO:
    """The journal's file operations on real files (a seam: tests subclass it to inject faults)."""

    def makedirs(self, path: Path) -> None:
        """Create ``path`` (and its parents) private to this user, or make it so."""
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.chmod(0o700)

    def listdir(self, path: Path) -> list[str]:
        return [entry.name for entry in path.iterdir()]

    def open(self, path: Path, flags: int, mode: int = 0o600) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        """Write at ``offset``; may write less than asked (the journal loops)."""
        return os.pwrite(fd, data, offset)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def rename(self, source: Path, target: Path) -> None:
        source.rename(target)

    def unlink(self, path: Path) -> None:
        path.unlink()

    def fsync_dir(self, path: Path) -> None:
        """Make the directory's entries (a file created, renamed or removed) durable."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


REAL_IO = FileIO()
