"""One error style for every command: ``otel-footprint <command>: error: <what went wrong>``.

A command raises :class:`CommandError` (or returns its exit status); ``cli.main`` prints the one
line on stderr and exits with the error's status. Never a traceback for bad input: anything else
that escapes a command is also reported on one line (``OTEL_FOOTPRINT_TRACEBACK=1`` shows it whole).
"""

from __future__ import annotations

import os
from pathlib import Path

EXIT_FAILED = 1
"""The command ran but did not succeed (an endpoint refused, a check failed)."""
EXIT_BAD_INPUT = 2
"""Bad input or usage: a file that cannot be read, a flag that cannot be used (argparse's too)."""


class CommandError(Exception):
    """A failure the user can act on; its message is the whole explanation, on one line."""

    def __init__(self, message: str, status: int = EXIT_BAD_INPUT) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status


def error_line(prog: str, message: str) -> str:
    """The one line: ``otel-footprint explain: error: x.json: empty input``."""
    return f"{prog}: error: {' '.join(message.split())}"


def check_writable(path: Path) -> None:
    """Refuse an output path that cannot be written, before any work (and without touching it)."""
    if path.is_dir():
        raise CommandError(f"cannot write {path}: it is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise CommandError(f"cannot write {path}: no directory {parent}")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CommandError(f"cannot write {path}: permission denied")
