"""A downstream outage under load: every acknowledged span arrives once the next hop is back.

Issue 22 (the attacks re-run on the final code). The real hop subprocess takes ``bench_overload``'s
workload (agent runs, 100 spans a request) at a fixed rate from several OTLP/gRPC clients; its next
hop, a real OTLP/gRPC sink counting span ids, is stopped ``--before`` seconds in and started again
on the same port ``--outage`` seconds later. Measured: spans acknowledged, lost (acknowledged, never
delivered), delivered more than once, refusals, and the journal's peak while the sink was away.

    .venv/bin/python benchmarks/bench_outage.py [--outage 30] [--rate 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
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


def run(
    *,
    outage: float = 30.0,
    before: float = 5.0,
    after: float = 5.0,
    rate: float = 2000.0,
    clients: int = 8,
    drain_timeout: float = 180.0,
) -> dict[str, Any]:
    """Load for ``before + outage + after`` s with the sink away for ``outage`` s; the figures."""
    seconds = before + outage + after
    sink = IdSink(int(seconds * rate / SPANS_PER_REQUEST) + 1000).start()
    requests = Requests()
    peak_queue = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-outage-") as tmp:
        hop = HopProcess(Path(tmp) / "data", sink.endpoint).start()
        try:
            tally = Tally()
            load = threading.Thread(
                target=drive,
                args=(hop.grpc, requests, 0, clients, seconds, rate, tally),
                daemon=True,
            )
            load.start()
            time.sleep(before)
            sink.stop()
            back = time.monotonic() + outage
            while time.monotonic() < back:
                peak_queue = max(peak_queue, hop.metric("otel_footprint_queue_bytes"))
                time.sleep(1.0)
            sink.start()  # the same port
            load.join()
            with tally.lock:
                acked = sorted(tally.acked)
            span_ids = [i for r in acked for i in Requests.span_ids(r)]
            deadline = time.monotonic() + drain_timeout
            while time.monotonic() < deadline and any(not sink.seen[i] for i in span_ids):
                time.sleep(0.5)
            retries = hop.metric("otel_footprint_forward_retries_total")
        finally:
            code = hop.stop()
            sink.stop()
    return {
        "outage_seconds": outage,
        "rate": rate,
        "acknowledged_spans": len(span_ids),
        "lost": sum(1 for i in span_ids if not sink.seen[i]),
        "delivered_twice": sum(1 for i in span_ids if sink.seen[i] > 1),
        "refusals": tally.exhausted,
        "refusals_with_retry_info": tally.exhausted_with_retry_info,
        "client_errors": dict(tally.errors),
        "peak_queue_bytes": peak_queue,
        "forward_retries": retries,
        "exit_code": code,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage", type=float, default=30.0, help="seconds the sink is away")
    parser.add_argument("--rate", type=float, default=2000.0, help="spans/s offered")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    result = run(outage=ns.outage, rate=ns.rate)
    print(json.dumps(result) if ns.json else "\n".join(f"{k:>26}: {v}" for k, v in result.items()))
    return 0 if result["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
