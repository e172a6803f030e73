"""Ctrl-C at any moment of any command: one line, exit status 130, never a traceback.

Python turns SIGINT into ``KeyboardInterrupt`` wherever the main thread happens to be: in the
seconds of imports before a command starts, inside a library, or while the interpreter shuts down
(joining threads, running ``atexit`` hooks), where nothing of ours can catch it. So the console
script takes SIGINT over as early as it can (:func:`take_over`, called by ``cli`` before it imports
anything else): while a command runs, the first Ctrl-C still raises ``KeyboardInterrupt`` (the
command's ``finally`` blocks close files and connections; ``cli.main`` prints the line and the
process leaves without the interpreter's shutdown), with :data:`CLEANUP_SECONDS` to do so; at any
other moment, and on a second Ctrl-C, it prints the line and leaves at once (``os._exit``). A
command that stops gracefully on SIGINT (``serve``) installs its own handler while it runs.

Only the console script's process is taken over: code that imports ``cli`` and calls ``main``
itself (tests, embedding programs) keeps its own SIGINT handling. What comes before our first line
is Python's: a Ctrl-C in the interpreter's own start (``site``) and the console-script wrapper's
``import re`` (tens of milliseconds, more on a loaded machine) is still its traceback, so nothing
is imported before :func:`take_over` that need not be (no ``signal``, no ``typing``).
"""

from __future__ import annotations

# The C module behind ``signal`` (no stub): ``signal`` itself imports ``enum``, and ``typing`` is
# slower still; each import before take_over() widens the moment a Ctrl-C is Python's traceback.
import _signal  # type: ignore[import-not-found]
import os
import sys
from types import FrameType

EXIT_INTERRUPTED = 130
"""128 + SIGINT, what a shell reports for a process Ctrl-C stopped."""


class _State:
    prog = "otel-footprint"
    running = False
    """A command's ``run`` is on the stack: ``cli.main`` catches the ``KeyboardInterrupt``."""
    seen = False
    """A Ctrl-C already raised ``KeyboardInterrupt``: the next one leaves at once."""
    taken = False
    """:func:`take_over` ran: this process is the console script."""
    said = False
    """The one line was printed."""


_state = _State()


def is_console_script() -> bool:
    """True when this process is the ``otel-footprint`` console script (not a test importing us)."""
    name = sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1]
    return name in ("otel-footprint", "otel-footprint.exe")


def line(prog: str) -> str:
    """The one line a Ctrl-C prints."""
    return f"{prog}: error: interrupted"


def said() -> None:
    """``cli.main`` printed the line itself."""
    _state.said = True


CLEANUP_SECONDS = 2.0
"""How long a command may take to unwind after Ctrl-C (close its files) before the process leaves
anyway: an exporter flushing to an endpoint that does not answer would hold it for its timeout."""


def _leave() -> None:
    # os.write, not print: the signal may have arrived in the middle of a write to sys.stderr.
    if not _state.said:
        _state.said = True
        os.write(2, (line(_state.prog) + "\n").encode())
    os._exit(EXIT_INTERRUPTED)


def _on_sigint(_signum: int, _frame: FrameType | None) -> None:
    if _state.running and not _state.seen:
        _state.seen = True
        import threading  # loaded by now in every command that runs long enough to matter

        timer = threading.Timer(CLEANUP_SECONDS, _leave)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt
    # Between commands (imports, parsing, shutdown) or a second Ctrl-C: leave now.
    _leave()


def take_over() -> None:
    """Handle SIGINT as described above, for the rest of this process."""
    _signal.signal(_signal.SIGINT, _on_sigint)
    _state.taken = True


def leave_if_taken_over() -> None:
    """After the one line: the console script leaves now, without the interpreter's shutdown
    (an exporter's ``atexit`` flush would retry a dead endpoint for its whole timeout)."""
    if not _state.taken:
        return
    import contextlib  # here, not above: nothing is imported before take_over() that need not be

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


def command_started(prog: str) -> None:
    """A command is about to run: the first Ctrl-C now raises ``KeyboardInterrupt`` in it."""
    _state.prog = prog
    _state.running = True


def command_ended() -> None:
    """The command returned: a Ctrl-C while the interpreter shuts down leaves at once."""
    _state.running = False
