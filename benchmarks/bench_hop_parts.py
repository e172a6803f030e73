"""Where the annotating hop's CPU goes, stage by stage: ``bench_hop``'s workload without gRPC.

The hop's :class:`Pipeline` is driven in one thread, as ``otel-footprint serve`` builds it (the
disk journal with fsync, the SQLite run store and verdict log flushed at each group commit, the
serve command's GC thresholds): ten requests are ingested (what a receiver does after parsing),
their runs released (a fake clock steps past the release grace), the outbound queue drained (what
the forwarder takes). A first pass gives the thread CPU per span of the whole path; a second pass
sums the thread CPU of each stage, by wrapping the stage's function (stepwise stages: each step),
so the shares can be read against the first figure. The wrappers cost ≈ 1 µs a call and a step, so
the second pass's total is larger than the first. Usage::

    .venv/bin/python benchmarks/bench_hop_parts.py [--spans 30000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hop import SPANS_PER_TRACE, TRACES_PER_REQUEST, build_requests

from otel_footprint.commands.serve import GC_THRESHOLDS
from otel_footprint.service import annotation, buffer, journal, pipeline, runstore, verdicts
from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions, memory_shares
from otel_footprint.service.runstore import SqliteRunStore
from otel_footprint.service.verdicts import VerdictLog

MAX_BYTES = 512 << 20  # processing.max_bytes' default

cpu: collections.Counter[str] = collections.Counter()
"""Thread CPU seconds by stage (the second pass)."""
_stage: list[str] = [""]
"""The enclosing stage ("receive" or "release"): a journal call is counted under it."""


def _timed(label: str, fn: Callable[..., Any], scoped: bool = False) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        name = f"{_stage[0]}: {label}" if scoped else label
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu[name] += time.thread_time() - started

    return wrapper


def _timed_steps(label: str, fn: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        steps = fn(*args, **kwargs)
        sent: Any = None
        while True:
            started = time.thread_time()
            try:
                step = steps.send(sent)
            except StopIteration as stop:
                cpu[label] += time.thread_time() - started
                return stop.value
            cpu[label] += time.thread_time() - started
            sent = yield step

    return wrapper


@contextlib.contextmanager
def _in_stage(name: str) -> Iterator[None]:
    outer, _stage[0] = _stage[0], name
    started = time.thread_time()
    try:
        yield
    finally:
        cpu[name] += time.thread_time() - started
        _stage[0] = outer


@contextlib.contextmanager
def _stages_wrapped() -> Iterator[None]:
    """Each stage's function wrapped where the pipeline calls it (module attributes, methods);
    the originals are put back on exit."""
    wrapped: list[tuple[object, str, object]] = []

    def wrap(owner: object, name: str, timer: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        wrapped.append((owner, name, original))
        setattr(owner, name, timer(original))

    for name in ("append", "sync", "mark_done"):
        wrap(journal.Journal, name, lambda f, n=name: _timed(f"journal {n}", f, scoped=True))
    for owner, name, label in (
        (pipeline, "classify", "classify"),
        (buffer.RunBuffer, "hold", "buffer hold"),
        (buffer.RunBuffer, "route", "buffer route"),
        (buffer.RunBuffer, "poll", "buffer poll"),
        (buffer.RunBuffer, "remember_packed", "decision cache (remember)"),
        (pipeline, "PackedNotes", "decision cache (pack notes)"),
        (pipeline, "_serialize", "serialize"),
        (verdicts.VerdictLog, "publish", "query service record (publish)"),
        (verdicts.VerdictLog, "flush", "query service record (SQLite)"),
        (runstore.SqliteRunStore, "flush", "run store flush"),
        (Pipeline, "_account", "metrics (_account)"),
        (annotation, "apply_note", "apply_note"),
    ):
        wrap(owner, name, lambda f, label=label: _timed(label, f))
    for name, label in (
        ("decide_run_steps", "decide_run"),
        ("annotation_steps", "annotations_for (notes)"),
        ("group_runs_steps", "group_runs"),
    ):
        wrap(annotation, name, lambda f, label=label: _timed_steps(label, f))
    try:
        yield
    finally:
        for owner, name, original in reversed(wrapped):
            setattr(owner, name, original)


STAGES = {
    "receive": {"classify", "buffer hold", "buffer route"},
    "release": {
        "decide_run",
        "annotations_for (notes)",
        "apply_note",
        "group_runs",
        "serialize",
        "query service record (publish)",
        "query service record (SQLite)",
        "decision cache (pack notes)",
        "decision cache (remember)",
        "buffer poll",
        "metrics (_account)",
        "run store flush",
    },
    "forward (drain)": set(),
}
"""Each stage's parts (besides its journal calls, counted under it)."""


def _run(spans: int, offset: int, parts: bool) -> float:
    """Thread CPU seconds for ``spans`` spans through a fresh pipeline (after a warm-up)."""
    now = [1000.0]
    with tempfile.TemporaryDirectory(prefix="bench-hop-parts-") as tmp:
        data = Path(tmp)
        queue = Journal(data / "queue", cache_bytes=memory_shares(MAX_BYTES)[0])
        queue.open()
        store = SqliteRunStore(data / "runs.sqlite")
        accounts = VerdictLog(data / "accounts.sqlite", max_bytes=memory_shares(MAX_BYTES)[1])
        metrics = HopMetrics()
        pipe = Pipeline(
            PipelineOptions(limits=BufferLimits()),
            queue,
            FootprintAnnotation(store),
            metrics,
            accounts,
            clock=lambda: now[0],
            commit_hooks=[accounts.flush, store.flush],
        )

        def through(requests: list[bytes]) -> float:
            started = time.thread_time()
            for first in range(0, len(requests), 10):
                with _in_stage("receive") if parts else contextlib.nullcontext():
                    for wire in requests[first : first + 10]:
                        request = ExportTraceServiceRequest.FromString(wire)
                        pipe.ingest_traces(request, wire, "grpc")
                now[0] += 1.0
                with _in_stage("release") if parts else contextlib.nullcontext():
                    pipe.process_due()
                with _in_stage("forward (drain)") if parts else contextlib.nullcontext():
                    while batch := queue.take_outbound(4 << 20, 0):
                        for record in batch:
                            queue.read(record)
                        queue.mark_done([r.seq for r in batch])
            return time.thread_time() - started

        through(build_requests(min(spans, 3000), offset + 500_000))
        cpu.clear()
        used = through(build_requests(spans, offset))
        store.close()
        accounts.close()
        queue.close()
        metrics.shutdown()
    return used


def measure(spans: int, repeat: int, stages: bool = True) -> dict[str, Any]:
    """The thread CPU per span of the whole path, and (``stages``) of each stage and part (best
    of ``repeat``)."""
    plain = min(_run(spans, 1_000_000 * (i + 1), parts=False) for i in range(repeat))
    best: dict[str, float] = {}
    with _stages_wrapped() if stages else contextlib.nullcontext():
        for i in range(repeat if stages else 0):
            _run(spans, 50_000_000 * (i + 1), parts=True)
            for name, seconds in cpu.items():
                best[name] = min(best.get(name, seconds), seconds)
    us = {name: 1e6 * seconds / spans for name, seconds in best.items()}
    by_stage: dict[str, dict[str, float]] = {}
    for stage in ("receive", "release", "forward (drain)") if stages else ():
        parts = {
            name.removeprefix(f"{stage}: "): round(value, 2)
            for name, value in us.items()
            if name in STAGES[stage] or name.startswith(f"{stage}: ")
        }
        parts = dict(sorted(parts.items(), key=lambda kv: -kv[1]))
        parts["other (the stage's own work, steps, freeing)"] = round(
            us.get(stage, 0.0) - sum(parts.values()), 2
        )
        by_stage[stage] = {"total": round(us.get(stage, 0.0), 2), **parts}
    return {
        "spans": spans,
        "us_per_span": round(1e6 * plain / spans, 2),
        "spans_per_cpu_second": round(spans / plain, 1),
        "stages_us_per_span": by_stage,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=3, help="passes of each kind; best is kept")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--no-stages", action="store_true", help="only the whole path (no wrapped pass)"
    )
    args = parser.parse_args()
    spans = (
        args.spans // (SPANS_PER_TRACE * TRACES_PER_REQUEST) * SPANS_PER_TRACE * TRACES_PER_REQUEST
    )
    gc.set_threshold(*GC_THRESHOLDS)
    result = measure(spans, args.repeat, stages=not args.no_stages)
    stages = result["stages_us_per_span"]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['us_per_span']} µs of thread CPU per span ({result['spans_per_cpu_second']:,.0f} "
        f"spans per CPU-second), best of {args.repeat}; by stage (wrapped, best of {args.repeat}):"
    )
    for stage, parts in stages.items():
        print(f"  {parts['total']:8.2f} µs/span  {stage}")
        for name, value in parts.items():
            if name != "total":
                print(f"  {value:17.2f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
