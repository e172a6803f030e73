"""A floor under the decision of the 30-pass stuck run (issue 29's decide goal): thread CPU per pass
of reading every event attribute once from the protobuf (key, value kind, value) and nothing else,
beside ``decide_run`` with the account on the same bytes (``compare_decide.py``'s method).

No decision that reads its input can cost less than the first figure plus the kernel's own
(``bench_kernel.py``). Best of ``--repeat`` batches of ``--batch`` fresh copies. Usage::

    .venv/bin/python benchmarks/bench_floor.py [--span-attributes] [--batch 20] [--repeat 15]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import STUCK, _recorded

from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView
from otel_footprint.runs.store import MemoryRunStore


def spans(data: bytes) -> list[Span]:
    request = ExportTraceServiceRequest.FromString(data)
    return [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]


def touch(pbs: list[Span], span_attributes: bool) -> int:
    """Read each attribute's key and value once (the least a decision reading them must do)."""
    n = 0
    for span in pbs:
        blocks = [e.attributes for e in span.events]
        if span_attributes:
            blocks.append(span.attributes)
        for block in blocks:
            for kv in block:
                value = kv.value
                kind = value.WhichOneof("value")
                n += len(kv.key)
                if kind is not None:
                    getattr(value, kind)
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--span-attributes", action="store_true", help="read the spans' too")
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    data = _recorded(STUCK).SerializeToString()
    best_touch = best_decide = float("inf")
    passes = 0
    for _ in range(args.repeat):
        inputs = [spans(data) for _ in range(args.batch)]
        gc.collect()
        start = time.thread_time()
        for pbs in inputs:
            touch(pbs, args.span_attributes)
        best_touch = min(best_touch, time.thread_time() - start)
        grouped = [group_runs([OtlpSpanView(pb) for pb in spans(data)]) for _ in range(args.batch)]
        passes = sum(len(run.passes) for run in grouped[0])
        gc.collect()
        start = time.thread_time()
        for runs in grouped:
            store = MemoryRunStore()
            for run in runs:
                decide_run(run, store, EngineOptions())
        best_decide = min(best_decide, time.thread_time() - start)
    scale = 1e6 / args.batch / max(passes, 1)
    one = spans(data)
    print(
        json.dumps(
            {
                "passes": passes,
                "spans": len(one),
                "events": sum(len(s.events) for s in one),
                "read_us_per_pass": round(best_touch * scale, 1),
                "decide_us_per_pass": round(best_decide * scale, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
