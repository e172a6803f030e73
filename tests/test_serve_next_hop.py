"""``serve`` checks its next hop at start: unreachable, it warns at once and still starts (what it
acknowledges waits in the journal); reachable, it says nothing (issue 23, edges)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from servers import HopProcess
from test_service_support import Sink

WARNING = "next hop unreachable at start"


def _warnings(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and WARNING in line:
            found.append(json.loads(line))
    return found


def _dead_port() -> int:
    """A port nothing listens on: bound, never listening, so a connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_next_hop_is_a_warning_at_start_and_the_hop_still_serves(
    tmp_path: Path,
) -> None:
    port = _dead_port()
    hop = HopProcess(tmp_path / "data", f"127.0.0.1:{port}").start()
    try:
        deadline = time.monotonic() + 10
        while not _warnings(hop.log) and time.monotonic() < deadline:
            time.sleep(0.05)
        (warning,) = _warnings(hop.log)
        assert warning["level"] == "warning"
        assert warning["forward"] == f"grpc 127.0.0.1:{port}"
        assert warning["error"] == "Connection refused"
        assert hop.metrics()  # still serving
    finally:
        assert hop.stop() == 0


def test_an_unresolvable_next_hop_says_so(tmp_path: Path) -> None:
    hop = HopProcess(tmp_path / "data", "http://otel-footprint-test.invalid:4318/v1/traces").start()
    try:
        deadline = time.monotonic() + 15
        while not _warnings(hop.log) and time.monotonic() < deadline:
            time.sleep(0.05)
        (warning,) = _warnings(hop.log)
        assert warning["error"].startswith("cannot resolve otel-footprint-test.invalid")
    finally:
        assert hop.stop() == 0


def test_a_reachable_next_hop_gives_no_warning(tmp_path: Path) -> None:
    sink = Sink().start()
    hop = HopProcess(tmp_path / "data", sink.endpoint).start()
    try:
        time.sleep(1.0)  # the probe runs beside start; give it time to (not) warn
        assert _warnings(hop.log) == []
    finally:
        assert hop.stop() == 0
        sink.stop()
