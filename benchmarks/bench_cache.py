"""Memory per decided trace in the hop's decision cache, measured with tracemalloc (no subprocess).

``bench_hop``'s agent runs (run span, 4 model calls with footprint events, 2 tools, 3 plain spans)
go through a real :class:`~otel_footprint.service.pipeline.Pipeline` with a fake clock: ingested,
held, released after ``release_grace``, decided, annotated and written to a journal, whose outbound
batches are then taken and retired. What the cache keeps for them (notes for late spans, parent
links, the trace's entry) is what stays allocated until the cache is emptied: the difference,
divided by the traces it held, is the figure (``--traces`` of them, all within the cache's share).
It also reports the cache's own estimate (``decision_cache_bytes``) against that measure, and the
late-span window the default share gives at a rate. Usage::

    .venv/bin/python benchmarks/bench_cache.py [--traces 2000] [--rate 14000]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hop import SPANS_PER_TRACE, build_requests

from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def measure(traces: int) -> dict[str, float]:
    """Bytes per cached trace: traced (tracemalloc) and as the cache estimates them."""
    requests = build_requests(traces * SPANS_PER_TRACE, 30_000_000)
    clock = Clock()
    # Traced from the start: tracemalloc sees a block freed only if it saw it allocated.
    tracemalloc.start()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        journal = Journal(Path(tmp), fsync=False)
        journal.open()
        limits = BufferLimits(
            max_runs=1_000_000, max_bytes=1 << 40, cache_traces=10 * traces, max_wait=3600
        )
        pipeline = Pipeline(
            PipelineOptions(limits=limits),
            journal,
            FootprintAnnotation(),
            HopMetrics(),
            clock=clock,
        )
        for payload in requests:
            pipeline.ingest_traces(ExportTraceServiceRequest.FromString(payload), payload, "bench")
            clock.now += 0.001
        clock.now += 10.0
        pipeline.process_due()
        while batch := journal.take_outbound(1 << 30, timeout=0):
            journal.mark_done([r.seq for r in batch])
        buffer = pipeline.buffer
        cached = buffer.core.cached_traces()
        estimated = buffer.core.cache_bytes
        gc.collect()
        full = tracemalloc.get_traced_memory()[0]
        buffer.core.shrink_cache(0)
        gc.collect()
        empty = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        journal.close()
    return {
        "cached_traces": cached,
        "traced_bytes_per_trace": (full - empty) / cached,
        "estimated_bytes_per_trace": estimated / cached,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=14_000.0, help="spans/s for the window")
    parser.add_argument("--max-bytes", type=int, default=256 << 20, help="processing.max_bytes")
    args = parser.parse_args()
    m = measure(args.traces)
    share = BufferLimits(max_bytes=args.max_bytes).cache_budget
    window_traces = share / m["estimated_bytes_per_trace"]
    window_s = window_traces * SPANS_PER_TRACE / args.rate
    print(
        f"{m['traced_bytes_per_trace']:,.0f} B traced (tracemalloc), "
        f"{m['estimated_bytes_per_trace']:,.0f} B estimated per cached trace "
        f"({m['cached_traces']:,.0f} traces); share {share / 2**20:,.0f} MiB of max_bytes "
        f"{args.max_bytes / 2**20:,.0f} MiB: {window_traces:,.0f} traces, "
        f"{window_s:,.1f} s of late-span window at {args.rate:,.0f} spans/s"
    )


if __name__ == "__main__":
    main()
