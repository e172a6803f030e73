"""The hop's one background-loop helper: the release worker, the forwarder and the Phoenix poster.

Each is a named daemon thread that runs one step at a time until it is stopped or a step says it
is done; a step that raises is logged (JSON, with the traceback) and the loop goes on after a
pause, so no worker dies silently while the hop keeps acknowledging spans.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from otel_footprint.service import jsonlog

_log = jsonlog.get("worker")


class Worker:
    """Runs ``step`` on its own thread; ``step`` returns False when the worker has nothing more to do."""

    def __init__(self, name: str, step: Callable[[], bool], *, pause: float = 0.5) -> None:
        self.name = name
        self._step = step
        self._pause = pause
        self.stopping = threading.Event()
        """Set by :meth:`stop`; steps wait on it (``worker.stopping.wait(s)``) to sleep interruptibly."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                if not self._step():
                    return
            except Exception:
                _log.exception("a background step failed; going on", extra={"worker": self.name})
                self.stopping.wait(self._pause)

    def stop(self, timeout: float | None = None, wake: Callable[[], None] | None = None) -> None:
        """Ask the loop to end (``wake`` interrupts whatever its step waits on), then join it."""
        self.stopping.set()
        if wake is not None:
            wake()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()
