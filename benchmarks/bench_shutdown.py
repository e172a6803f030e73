"""SIGTERM under load: how long the hop takes to stop, and whether every acknowledged span arrives.

Issue 22. The real hop subprocess takes ``bench_overload``'s workload (agent runs, 100 spans a
request) from several OTLP/gRPC clients at a fixed rate; after ``--load-before`` seconds it gets
SIGTERM while the clients keep sending. Measured: the seconds from the signal to the process's exit
(the promise: within ``service.shutdown_timeout`` plus at most a second). Then a second hop starts
on the same data directory, with no load, and every span the first one acknowledged must reach the
sink (delivered before the stop, or still journaled and delivered after the restart).

    .venv/bin/python benchmarks/bench_shutdown.py [--rate 2000] [--shutdown-timeout 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_overload import SPANS_PER_REQUEST, IdSink, Requests, Tally, drive

from tests.test_service_support import HopProcess


def _missing(sink: IdSink, acked: list[int]) -> list[int]:
    seen = sink.seen
    return [i for r in acked for i in Requests.span_ids(r) if not seen[i]]


def run(
    *,
    rate: float = 2000.0,
    clients: int = 8,
    load_before: float = 6.0,
    load_after: float = 3.0,
    shutdown_timeout: float = 5.0,
    release_grace: str = "2s",
    drain_timeout: float = 120.0,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Load, SIGTERM under load, restart, drain; the figures as a dict."""
    budget = int((load_before + load_after) * rate / SPANS_PER_REQUEST) + 1000
    sink = IdSink(budget).start()
    requests = Requests()
    sets = [
        f"service.shutdown_timeout={shutdown_timeout:g}s",
        f"processing.release_grace={release_grace}",
        *extra,
    ]
    args = [a for s in sets for a in ("--set", s)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-shutdown-") as tmp:
            data = Path(tmp) / "data"
            hop = HopProcess(data, sink.endpoint, *args).start()
            assert hop.proc is not None
            tally = Tally()
            load = threading.Thread(
                target=drive,
                args=(hop.grpc, requests, 0, clients, load_before + load_after, rate, tally),
                daemon=True,
            )
            load.start()
            time.sleep(load_before)
            held = hop.metric("otel_footprint_spans_held")
            pending = hop.metric("otel_footprint_queue_batches")
            signalled = time.monotonic()
            hop.proc.send_signal(signal.SIGTERM)
            code = hop.proc.wait(timeout=120)
            stop_seconds = time.monotonic() - signalled
            load.join()
            with tally.lock:
                acked = sorted(tally.acked)
            missing_at_stop = len(_missing(sink, acked))
            # The same data directory: what was acknowledged and not yet delivered replays.
            again = HopProcess(data, sink.endpoint, *args).start()
            try:
                deadline = time.monotonic() + drain_timeout
                missing = _missing(sink, acked)
                while missing and time.monotonic() < deadline:
                    time.sleep(0.5)
                    missing = _missing(sink, acked)
            finally:
                again_code = again.stop()
            log = hop.stderr()
    finally:
        sink.stop()
    return {
        "rate": rate,
        "shutdown_timeout": shutdown_timeout,
        "stop_seconds": round(stop_seconds, 2),
        "exit_code": code,
        "restart_exit_code": again_code,
        "spans_held_at_signal": held,
        "queue_batches_at_signal": pending,
        "acknowledged_spans": len(acked) * SPANS_PER_REQUEST,
        "undelivered_at_stop": missing_at_stop,
        "lost": len(missing),
        "refusals": tally.exhausted,
        "client_errors": dict(tally.errors),
        "stop_log": [line for line in log.splitlines() if "stop" in line][-3:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=2000.0, help="spans/s offered")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--load-before", type=float, default=6.0)
    parser.add_argument("--shutdown-timeout", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    result = run(
        rate=ns.rate,
        clients=ns.clients,
        load_before=ns.load_before,
        shutdown_timeout=ns.shutdown_timeout,
    )
    if ns.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
    ok = result["lost"] == 0 and result["stop_seconds"] <= result["shutdown_timeout"] + 1.0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
