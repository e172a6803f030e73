"""The hop's pipeline driven in one checkout, for ``benchmarks/compare.py --instructions``: run with
that checkout first on ``PYTHONPATH``, so it imports only names every tree since 321e9b7 has.

Reads OTLP export requests (hex, one per line; the driver records them once, with its own tree, so
both trees see the same bytes), and drives a :class:`Pipeline` as ``otel-footprint serve`` builds
it (disk journal with fsync, SQLite run store and verdict log flushed at each group commit, the
serve command's GC thresholds) on the calling thread: ten requests ingested, their runs released
(a fake clock steps past the release grace), the outbound queue drained; repeated to the end. The
first ``--warmup`` requests warm the caches and are not timed. Prints one JSON object with the
thread CPU per span of the timed part.

Under ``valgrind --tool=callgrind`` the process's instruction count is what ``compare.py`` reads: the
count of a run with ``--warmup`` requests alone, subtracted from a run with more, divided by the
added spans, is the pipeline's instructions per span, a figure other load on the machine does not
move (CPU time on a shared machine moves by ±10%). Usage::

    PYTHONPATH=TREE python benchmarks/compare_pipeline.py REQUESTS.hex [--warmup 20]
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import otel_footprint
from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions
from otel_footprint.service.runstore import SqliteRunStore
from otel_footprint.service.verdicts import VerdictLog

GC_THRESHOLDS = (50_000, 20, 100)
"""``otel-footprint serve``'s (the same in every tree since 321e9b7; its home module moved)."""
RELEASE_EVERY = 10
"""Requests ingested between two releases."""


def drive(requests: list[bytes], warmup: int) -> dict[str, Any]:
    now = [1000.0]
    with tempfile.TemporaryDirectory(prefix="compare-pipeline-") as tmp:
        data = Path(tmp)
        queue = Journal(data / "queue")
        queue.open()
        store = SqliteRunStore(data / "runs.sqlite")
        accounts = VerdictLog(data / "accounts.sqlite")
        pipe = Pipeline(
            PipelineOptions(limits=BufferLimits()),
            queue,
            FootprintAnnotation(store),
            HopMetrics(),
            accounts,
            clock=lambda: now[0],
            commit_hooks=[accounts.flush, store.flush],
        )

        def through(batch: list[bytes]) -> tuple[float, int]:
            started, spans = time.thread_time(), 0
            for first in range(0, len(batch), RELEASE_EVERY):
                for wire in batch[first : first + RELEASE_EVERY]:
                    spans += pipe.ingest_traces(
                        ExportTraceServiceRequest.FromString(wire), wire, "grpc"
                    )
                now[0] += 1.0
                pipe.process_due()
                while records := queue.take_outbound(4 << 20, 0):
                    for record in records:
                        queue.read(record)
                    queue.mark_done([r.seq for r in records])
            return time.thread_time() - started, spans

        through(requests[:warmup])
        cpu, spans = through(requests[warmup:])
        store.close()
        accounts.close()
        queue.close()
    return {
        "package": str(Path(otel_footprint.__file__).resolve().parent),
        "spans": spans,
        "us_per_span": round(1e6 * cpu / spans, 2) if spans else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests", type=Path, help="OTLP export requests, hex, one per line")
    parser.add_argument("--warmup", type=int, default=20, help="requests not timed")
    args = parser.parse_args()
    gc.set_threshold(*GC_THRESHOLDS)
    requests = [bytes.fromhex(line) for line in args.requests.read_text().split()]
    print(json.dumps(drive(requests, args.warmup)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
