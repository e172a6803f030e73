"""Structured logs for the hop: one JSON object per line on stderr (time, level, message, fields)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any

LOGGER_NAME = "otel_footprint.service"

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()) | {"message"}


class JsonFormatter(logging.Formatter):
    """``{"ts": ..., "level": ..., "logger": ..., "msg": ..., <extra fields>}``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        # ensure_ascii escapes a lone surrogate from hostile input instead of failing to write it.
        return json.dumps(entry, default=str, separators=(",", ":"))


def configure(level: str = "info") -> None:
    """Route the hop's logger to stderr as JSON lines; idempotent.

    Everything else that could write to stderr goes the same way, so no plain-text traceback
    breaks the JSON log: other libraries' loggers (gRPC logs a handler's exception on its own
    logger) at warning and above, Python warnings, and exceptions escaping a thread.
    """
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)  # Python warnings too, as JSON lines (logger "py.warnings")
    threading.excepthook = _thread_excepthook


def get(name: str = "") -> logging.Logger:
    """A child of the hop's logger (``otel_footprint.service.<name>``)."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


class Throttled:
    """One log line per key per ``interval`` seconds; the lines held back are counted in the next.

    For events that can repeat per request or per trace under attack or overload (refused
    requests, traces released early): the log stays readable and bounded, the metrics keep the
    exact counts.
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, level: int, key: str, msg: str, fields: dict[str, Any]) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._held[key] = self._held.get(key, 0) + 1
                return
            if len(self._last) > 1000:  # keys come from a small closed set; bound it anyway
                self._last.clear()
                self._held.clear()
            self._last[key] = now
            suppressed = self._held.pop(key, 0)
        if suppressed:
            fields = {**fields, "suppressed_since_last": suppressed}
        self.logger.log(level, msg, extra=fields)


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    get().error(
        "uncaught exception in a thread",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
        extra={"thread": args.thread.name if args.thread is not None else None},
    )
