"""Runs that never send their run span, under load: the journal must track what is pending.

Issue 13, defect 2: ordinary runs whose run span never comes are held until ``max_wait``; each pins
a journal record, and before compaction a segment was freed only when all its records were done,
so delivered data piled up on disk until every request was refused. This drives the real hop (a
subprocess) with one 9-span run without run span every ``--pin-every`` seconds among complete runs
at ``--rate`` spans/s for ``--duration`` seconds, samples ``/health`` and reports the worst
``queue_disk_bytes`` against ``queue_bytes`` (pending) and the number of refused requests.

    .venv/bin/python benchmarks/bench_journal_pinned.py --duration 600 [--rate 6000] [--json]

The acceptance (issue 13): no refusal, and disk ≤ 2 × pending + a few segments: the active
segment cannot be compacted while it is written and may exceed its size by one group-commit
append, and ``/health`` reads the two numbers one after the other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))

SLACK_SEGMENTS = 4
"""The bound is ``2 × pending + SLACK_SEGMENTS × segment size`` (see the module docstring)."""

from bench_hop import (  # noqa: E402
    SPANS_PER_TRACE,
    TRACE_EXPORT,
    TRACES_PER_REQUEST,
    CountingSink,
    Hop,
    build_requests,
)


def _health(hop: Hop) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{hop.addresses['telemetry']}/health", timeout=5) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


def run(
    duration: float, rate: int, pin_every: float, segment: str, max_wait: str
) -> dict[str, Any]:
    """Drive the hop; returns the figures (see the module docstring)."""
    per_request = SPANS_PER_TRACE * TRACES_PER_REQUEST
    complete = build_requests(per_request * 200, 0)
    pins = 0
    sink = CountingSink()
    with tempfile.TemporaryDirectory(prefix="bench-pinned-") as tmp:
        hop = Hop(
            Path(tmp) / "data",
            f"127.0.0.1:{sink.port}",
            "processing.release_grace=100ms",
            f"processing.max_wait={max_wait}",
            f"exporters.otlp.queue.segment_size={segment}",
            "exporters.otlp.queue.max_size=64MiB",
        )
        segment_bytes = int(_size(segment))
        channel = grpc.insecure_channel(hop.addresses["grpc"])
        export = channel.unary_unary(TRACE_EXPORT, request_serializer=None)
        refused = sent = 0
        samples: list[tuple[int, int]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.25):
                try:
                    h = _health(hop)
                except OSError:  # counted as a failed sample: the run is reported as failing
                    samples.append((0, 1 << 62))
                    continue
                samples.append((int(h["queue_bytes"]), int(h["queue_disk_bytes"])))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        next_pin = started
        i = 0
        try:
            while (now := time.monotonic()) - started < duration:
                body = complete[i % len(complete)]
                if now >= next_pin:
                    # A distinct 9-span run each time, whose run span never comes.
                    (body,) = build_requests(SPANS_PER_TRACE, 10_000_000 + pins, False)
                    pins += 1
                    next_pin += pin_every
                try:
                    export(body, timeout=10)
                    sent += per_request
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    refused += 1
                i += 1
                lag = started + sent / rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
        finally:
            stop.set()
            sampler.join()
            channel.close()
            try:
                final = _health(hop)
            finally:
                hop.stop()
                sink.server.stop(0)
    slack = SLACK_SEGMENTS * segment_bytes
    worst_excess = max((d - 2 * p - slack for p, d in samples), default=0)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "spans_sent": sent,
        "refused_requests": refused,
        "samples": len(samples),
        "max_disk_bytes": max((d for _, d in samples), default=0),
        "max_pending_bytes": max((p for p, _ in samples), default=0),
        "worst_disk_minus_bound_bytes": worst_excess,
        "final_pending_bytes": final["queue_bytes"],
        "final_disk_bytes": final["queue_disk_bytes"],
        "segment_bytes": segment_bytes,
        "bound": f"disk <= 2 x pending + {SLACK_SEGMENTS} x segment",
    }


def _size(text: str) -> int:
    from otel_footprint.service.config import parse_size

    value: int = parse_size(text, "segment")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--rate", type=int, default=6000, help="spans per second")
    parser.add_argument("--pin-every", type=float, default=2.0, help="seconds between pinned runs")
    parser.add_argument("--segment-size", default="1MiB", help="journal segment size")
    parser.add_argument("--max-wait", default="5m", help="processing.max_wait of the hop")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = run(args.duration, args.rate, args.pin_every, args.segment_size, args.max_wait)
    ok = result["refused_requests"] == 0 and result["worst_disk_minus_bound_bytes"] <= 0
    if args.json:
        print(json.dumps({**result, "ok": ok}))
    else:
        for key, value in result.items():
            print(f"{key:30} {value}")
        print("OK" if ok else "FAILED: refusals, or disk above the bound")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
