"""How long one long run holds the decision thread, and how long a small run released behind it waits.

The long run is ``bench_scaling.py``'s stuck turn stretched to ``--passes`` passes (3,000 by
default), the small one the same turn at ``--small`` passes (30); both are released in the same
turn of the decision thread, the long one first, through the real delivery paths:

- ``hop``: the hop's :class:`Pipeline` (journal in a temporary directory without fsync, the
  :class:`FootprintAnnotation` stage with a run store, a fake clock) with the cycle collector set
  as ``otel-footprint serve`` sets it (``GC_THRESHOLDS``, startup objects frozen): both runs
  ingested as OTLP requests, then one ``process_due`` decides, annotates, serializes and commits
  them;
- ``sdk``: the in-process :class:`FootprintSpanProcessor` (the collector at CPython's defaults,
  as in an application): both runs' ended spans offered, then one flush decides them on the
  buffer's worker and hands them to the exporter.

Figures (wall-clock milliseconds, best of ``--repeat``; the machine is shared):

- ``whole``: the long run's decision (group, decide, account, notes, applied) in one go;
- ``longest turn``: the longest the decision thread was held by one release at a time
  (``Pipeline.longest_turn`` / the buffer's ``longest_turn``; a tree that decides each release in
  one call has no such readout, and there it is the longest single decision, measured here), and
  the most thread CPU one turn took (``longest_turn_cpu``: the wall-clock turn also counts the
  time the thread waited for a core on a busy machine);
- ``longest GC``: the longest full garbage collection meanwhile (it stops every thread; its length
  follows what the whole process holds, and it counts in the turn it falls in);
- ``small waited``: from the start of the turn to the small run decided (hop: its annotation
  done; sdk: its spans handed to the exporter);
- ``long done``: the same for the long run.

The verdicts are compared with the one-go decision's (same notes on every span) in
``tests/test_slices.py``; here only the times are taken. Usage::

    .venv/bin/python benchmarks/bench_stall.py [--passes 3000] [--small 30] [--repeat 3] [--gc-off]
        [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

sys.path.insert(0, str(Path(__file__).parent))
from bench_scaling import workload, workload_spans

from otel_footprint.commands.serve import GC_THRESHOLDS
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.store import MemoryRunStore
from otel_footprint.sdk import FootprintSpanProcessor
from otel_footprint.sdk.buffer import span_role
from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits, Release
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _GcPauses:
    """The longest full (generation 2) garbage collection while it is on: it stops every thread,
    and its length grows with everything the process holds, not with one decision."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._started = 0.0

    def __enter__(self) -> _GcPauses:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif info["generation"] == 2:
            self.longest = max(self.longest, time.perf_counter() - self._started)


class _ServeGc:
    """The cycle collector as ``otel-footprint serve`` sets it, for the time of a hop run."""

    def __enter__(self) -> None:
        self._before = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        gc.freeze()

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()
        gc.set_threshold(*self._before)


class _TimedStage(FootprintAnnotation):
    """The real stage, noting when each trace's decision started and ended (both trees)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started: dict[bytes, float] = {}
        self.done: dict[bytes, float] = {}
        self.cpu: dict[bytes, float] = {}

    def annotate(self, release: Release) -> Any:  # the base tree calls this
        self.started.setdefault(release.trace_id, time.perf_counter())
        cpu = time.thread_time()
        out = super().annotate(release)
        self.cpu[release.trace_id] = time.thread_time() - cpu
        self.done[release.trace_id] = time.perf_counter()
        return out

    def annotate_steps(self, release: Release, turn: Any = None) -> Any:  # this tree
        self.started.setdefault(release.trace_id, time.perf_counter())
        out = yield from super().annotate_steps(release, turn)  # type: ignore[misc]
        self.done[release.trace_id] = time.perf_counter()
        return out


def _trace_of(data: bytes) -> bytes:
    request = ExportTraceServiceRequest.FromString(data)
    return bytes(request.resource_spans[0].scope_spans[0].spans[0].trace_id)


def _hop(tmp: Path) -> tuple[Journal, _Clock, _TimedStage, Pipeline]:
    """The hop's pipeline on a fake clock, its journal in ``tmp`` (no fsync: the decision is timed)."""
    journal = Journal(tmp / "queue", fsync=False)
    journal.open()
    clock = _Clock()
    stage = _TimedStage(store=MemoryRunStore())
    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=600.0)),
        journal,
        stage,
        HopMetrics(),
        clock=clock,
    )
    return journal, clock, stage, pipeline


def hop_once(long_data: bytes, small_data: bytes) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        journal, clock, stage, pipeline = _hop(Path(tmp))
        for data in (long_data, small_data):
            pipeline.ingest_traces(ExportTraceServiceRequest.FromString(data), data, "bench")
            clock.now += 0.1
        clock.now += 5.0
        gc.collect()
        with _ServeGc(), _GcPauses() as pauses:
            start = time.perf_counter()
            released = pipeline.process_due()
        if released != 2:
            raise RuntimeError(f"{released} releases, expected 2")
        journal.close()
    long_id, small_id = _trace_of(long_data), _trace_of(small_data)
    longest = getattr(pipeline, "longest_turn", None)
    longest_cpu = getattr(pipeline, "longest_turn_cpu", None)
    if longest is None or longest_cpu is None:  # one call each: the longest decision is the turn
        longest = max(stage.done[t] - stage.started[t] for t in stage.done)
        longest_cpu = max(stage.cpu.values())
    return {
        "longest_turn_ms": longest * 1e3,
        "longest_turn_cpu_ms": longest_cpu * 1e3,
        "longest_gc_ms": pauses.longest * 1e3,
        "small_waited_ms": (stage.done[small_id] - start) * 1e3,
        "long_done_ms": (stage.done[long_id] - start) * 1e3,
    }


def hop_whole(long_data: bytes) -> tuple[float, float]:
    """The long run's decision on the hop's stage, in one call: (wall ms, CPU ms)."""
    with tempfile.TemporaryDirectory() as tmp:
        journal, clock, stage, pipeline = _hop(Path(tmp))
        pipeline.ingest_traces(ExportTraceServiceRequest.FromString(long_data), long_data, "b")
        clock.now += 5.0
        with pipeline._lock:
            releases, _ = pipeline._take_due()
        gc.collect()
        start, cpu = time.perf_counter(), time.thread_time()
        stage.annotate(releases[0])
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
        journal.close()
    return elapsed * 1e3, cpu * 1e3


class _NoExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def sdk_once(
    long_spans: Sequence[ReadableSpan], small_spans: Sequence[ReadableSpan]
) -> dict[str, float]:
    processor = FootprintSpanProcessor(
        _NoExporter(), grace_seconds=600, bsp_max_queue_size=1 << 20, bsp_schedule_delay_millis=50
    )
    buffer = processor._buffer
    # When each trace's spans are handed on by the buffer's worker (the export is another thread).
    done: dict[int, float] = {}
    sink = buffer._sink

    def timed_sink(spans: Sequence[ReadableSpan]) -> bool | None:
        now = time.perf_counter()
        for span in spans:
            if span.context is not None:
                done[span.context.trace_id] = now
        return sink(spans)

    buffer._sink = timed_sink
    turns: list[tuple[float, float]] = []
    if not hasattr(buffer, "longest_turn_cpu"):
        # A tree without slices decides each release in one call on the worker: time that call.
        process = buffer._process

        def timed_process(release: Any, raw: bool = False) -> None:
            wall, cpu = time.perf_counter(), time.thread_time()
            process(release, raw)
            turns.append((time.perf_counter() - wall, time.thread_time() - cpu))

        buffer._process = timed_process  # type: ignore[method-assign]
    try:
        for spans in (long_spans, small_spans):
            for span in spans:
                if span_role(span) is SpanRole.RUN and span.context is not None:
                    buffer.run_started(span.context.trace_id, span)
            for span in spans:
                processor.on_end(span)
        gc.collect()
        with _GcPauses() as pauses:
            start = time.perf_counter()
            if not buffer.flush(120):
                raise RuntimeError("the flush did not end")
    finally:
        processor.shutdown()
    long_id = long_spans[0].context.trace_id  # type: ignore[union-attr]
    small_id = small_spans[0].context.trace_id  # type: ignore[union-attr]
    if turns:
        longest, longest_cpu = max(t[0] for t in turns), max(t[1] for t in turns)
    else:
        longest, longest_cpu = buffer.longest_turn, buffer.longest_turn_cpu
    return {
        "longest_turn_ms": longest * 1e3,
        "longest_turn_cpu_ms": longest_cpu * 1e3,
        "longest_gc_ms": pauses.longest * 1e3,
        "small_waited_ms": (done[small_id] - start) * 1e3,
        "long_done_ms": (done[long_id] - start) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3000)
    parser.add_argument("--small", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--variant", default="shadow", choices=("shadow", "verify", "shadow-noiter")
    )
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="also run each path with the garbage collector off: the decision's own turns alone",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    long_data = workload(args.variant, args.passes)
    small_data = workload(args.variant, args.small)
    long_spans = workload_spans(args.variant, args.passes)
    small_spans = workload_spans(args.variant, args.small)
    rows: list[dict[str, Any]] = []
    wholes = [hop_whole(long_data) for _ in range(args.repeat)]
    whole, whole_cpu = min(w[0] for w in wholes), min(w[1] for w in wholes)
    paths = [
        ("hop", lambda: hop_once(long_data, small_data)),
        ("sdk", lambda: sdk_once(long_spans, small_spans)),
    ]
    gc_off = [False, True] if args.gc_off else [False]
    for (path, once), off in [(p, off) for off in gc_off for p in paths]:
        if off:
            path += ",gc-off"
            gc.disable()
        try:
            runs = [once() for _ in range(args.repeat)]
        finally:
            gc.enable()
        best = {key: min(r[key] for r in runs) for key in runs[0]}
        rows.append(
            {"path": path, "passes": args.passes, "whole_ms": whole, "whole_cpu_ms": whole_cpu}
            | best
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"long run: {args.passes} passes ({args.variant}); small run: {args.small} passes")
    print(
        f"the long run's decision in one call (hop stage): {whole:.1f} ms ({whole_cpu:.1f} ms CPU)"
    )
    print(
        f"{'path':10} {'longest turn ms':>16} {'(CPU ms)':>9} {'longest GC ms':>14} "
        f"{'small waited ms':>16} {'long done ms':>13}"
    )
    for row in rows:
        print(
            f"{row['path']:10} {row['longest_turn_ms']:>16.1f} {row['longest_turn_cpu_ms']:>9.1f} "
            f"{row['longest_gc_ms']:>14.1f} {row['small_waited_ms']:>16.1f} "
            f"{row['long_done_ms']:>13.1f}"
        )


if __name__ == "__main__":
    main()
