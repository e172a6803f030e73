"""Memory per span held in the hop's run buffer, measured with tracemalloc (no subprocess, no RSS noise).

The ``bench_hop`` workload's runs without their run span (so every span stays held) are parsed,
classified, routed and held exactly as ``Pipeline.ingest_traces`` does; the request objects are then
dropped, so what remains allocated is what the buffer really keeps per span (goal: <= 600 B).
Usage::

    .venv/bin/python benchmarks/bench_held.py [--spans 50000]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hop import build_requests

from otel_footprint.service.buffer import BufferLimits, RunBuffer
from otel_footprint.service.pipeline import classify


def rss() -> int:
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def held_bytes_per_span(spans: int, traced: bool) -> tuple[float, int, float]:
    """(bytes per held span, spans held, wire bytes per span): traced by tracemalloc, or else
    resident (RSS; tracemalloc's own bookkeeping would inflate it, so it is off then).

    tracemalloc sees Python's allocations only; protobuf's upb arenas are allocated outside it,
    so the resident figure is measured beside it (in a second pass).
    """
    requests = build_requests(spans, 20_000_000, with_run_span=False)
    wire = sum(len(r) for r in requests)
    buffer = RunBuffer(BufferLimits(max_runs=1_000_000, max_bytes=1 << 40, max_wait=3600))
    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else rss()
    for seq, payload in enumerate(requests, start=1):
        request = ExportTraceServiceRequest.FromString(payload)
        hold, _late, _passed = buffer.route(classify(request))
        buffer.hold(hold, seq, now=0.0)
        del request, hold
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if traced else rss()
    tracemalloc.stop()
    held = buffer.core.spans_held
    return (after - before) / held, held, wire / held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    args = parser.parse_args()
    # Resident first: in a fresh process, nothing freed by the traced pass is there to be reused.
    resident, _, _ = held_bytes_per_span(args.spans, traced=False)
    traced, held, wire = held_bytes_per_span(args.spans, traced=True)
    print(
        f"{traced:,.0f} B traced (tracemalloc), {resident:,.0f} B resident (RSS) per held span "
        f"({held:,} spans held; {wire:,.0f} B/span on the wire)"
    )


if __name__ == "__main__":
    main()
