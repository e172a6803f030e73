"""The decision timed in one checkout, for ``benchmarks/compare.py``: run with that checkout first on
``PYTHONPATH``, so it imports only names every tree since 321e9b7 has (the engine moved from
``otel_footprint.runs.engine`` to ``otel_footprint.engine.decide``).

Reads one OTLP export request (the driver records it once, with its own tree, so both trees decide
the same bytes), views its spans as the hop does (``OtlpSpanView``), and times ``decide_run`` with
the account (the hop's options) as ``bench_decide.py`` does: thread CPU, batches of ``batch`` fresh
copies through fresh ``MemoryRunStore`` s, best of ``repeat``. Prints one JSON object. Usage::

    PYTHONPATH=TREE python benchmarks/compare_decide.py REQUEST.pb [--batch 20] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import otel_footprint
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView
from otel_footprint.runs.store import MemoryRunStore

try:
    from otel_footprint.engine.decide import EngineOptions, decide_run
except ImportError:  # trees before the engine had its own package
    from otel_footprint.runs.engine import EngineOptions, decide_run  # type: ignore[no-redef]


def measure(request: bytes, batch: int, repeat: int) -> dict[str, Any]:
    pbs = [
        span
        for resource in ExportTraceServiceRequest.FromString(request).resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    group_s: list[float] = []
    decide_s: list[float] = []
    passes = 0
    codes: set[str] = set()
    for _ in range(repeat):
        inputs = [[OtlpSpanView(pb) for pb in pbs] for _ in range(batch)]
        gc.collect()
        start = time.thread_time()
        grouped = [group_runs(views) for views in inputs]
        group_s.append(time.thread_time() - start)
        stores = [MemoryRunStore() for _ in grouped]
        options = EngineOptions()
        start = time.thread_time()
        for runs, store in zip(grouped, stores, strict=True):
            for run in runs:
                verdict = decide_run(run, store, options)
                codes.update(r.code for r in verdict.reasons)
        decide_s.append(time.thread_time() - start)
        passes = sum(len(run.passes) for run in grouped[0])
    scale = 1e6 / batch / max(passes, 1)
    return {
        "package": str(Path(otel_footprint.__file__).resolve().parent),
        "compiled": bool(getattr(otel_footprint, "compiled", False)),
        "passes": passes,
        "group_us_per_pass": round(min(group_s) * scale, 2),
        "decide_us_per_pass": round(min(decide_s) * scale, 2),
        "reasons": sorted(codes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("request", type=Path)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.request.read_bytes(), args.batch, args.repeat)))


if __name__ == "__main__":
    main()
