"""Span pipeline cost: FootprintSpanProcessor vs a plain BatchSpanProcessor, same exporter, one run.

Both pipelines end in the same null exporter that only counts spans (so export cost is not what is
measured) and use the same batch settings (a queue large enough that nothing is dropped). For each
workload it reports, side by side:

* caller: wall time on the application thread to create and end the spans (what the app pays);
* end-to-end: the same plus draining everything through to the exporter (``force_flush``), which
  for the processor includes grouping, deciding and annotating every run on its worker thread;
* app CPU: the application process's CPU time (all its threads) over the end-to-end span, and
  for ``decide_in="process"`` the decision process's CPU besides (read from ``/proc``, in clock
  ticks): what the work costs, where wall time on a shared machine also measures the neighbours;
* GC: the wall time the application process spent in CPython's cycle collector over the same
  span (``gc.callbacks``), part of the app's CPU: the workload is made in one burst, the held runs
  waiting for their decision pile up, and the collector's full passes walk all of them.

Each pipeline is warmed with one run (and the decision process started) before the clock starts.

Workloads: plain spans of no agent run; agent runs without footprint events; agent runs recorded
with footprint events (the recorder's scripted routed run). ``--variants`` adds processor
settings to compare on the runs with footprint events: ``process`` (``decide_in="process"``) and
``no-lines`` (``AnnotateOptions(include_lines=False)``).

``--stages`` measures instead what each stage of the processor costs per span, outside the
application's own span making: routed runs are recorded once, then their ``on_start`` /
``on_end`` calls are replayed into each pipeline in rounds of 25 runs, each round flushed (so no
backlog piles up), and the process's CPU per span is read (best of ``--repeat``). The pipelines:
the batch processor alone; the footprint processor whose decider returns no notes (the hooks, the
holding, the worker); one whose decider hands back notes decided beforehand (plus the annotated
copies: everything but the decision); the processor itself (plus the decision); and
``decide_in="process"`` (the application's side, and the child's CPU). The ``hooks`` column is the
calling thread's CPU in ``on_start`` / ``on_end`` alone (best of ``--repeat``). Usage:

    .venv/bin/python benchmarks/bench_processor.py [--scale 1.0] [--repeat 5] [--variants process no-lines]
    .venv/bin/python benchmarks/bench_processor.py --stages [--scale 1.0] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

import otel_footprint
from otel_footprint import semconv as sc
from otel_footprint.annotate.form import AnnotateOptions, SpanNote
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.runs.model import Reason
from otel_footprint.sdk.decide import make_decider
from otel_footprint.sdk.processor import FootprintSpanProcessor

QUEUE = 2_000_000
Notes = dict[str, SpanNote]
ATTRS = {f"app.attribute_{i}": f"value-{i}" for i in range(10)}


class CountingExporter(SpanExporter):
    """Counts spans; nothing else."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def plain_spans(tracer: Tracer, n: int) -> int:
    for _ in range(n):
        with tracer.start_as_current_span("GET /orders", attributes=ATTRS):
            pass
    return n


def runs_without_events(tracer: Tracer, runs: int, passes: int = 5) -> int:
    agent = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "a", **ATTRS}
    for r in range(runs):
        with tracer.start_as_current_span(
            "invoke_agent a", attributes={**agent, sc.RUN_ID: f"r{r}"}
        ):
            for i in range(1, passes + 1):
                attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.PASS_ITERATION: i, **ATTRS}
                with tracer.start_as_current_span("chat m", attributes=attrs):
                    pass
                tool = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "t"}
                with tracer.start_as_current_span("execute_tool t", attributes=tool):
                    pass
    return runs * (1 + 2 * passes)


def runs_with_events(tracer: Tracer, runs: int) -> int:
    script = SCENARIOS["routed-delivered"].script  # run span + 2 passes + 1 tool, ~20 events
    for _ in range(runs):
        run_script(tracer, script)
    return runs * 4


@dataclass(frozen=True)
class Result:
    spans: int
    caller_s: float
    total_s: float
    exported: int
    note: str
    cpu_s: float
    """The application process's CPU over the end-to-end span."""
    child_cpu_s: float
    """Its child processes' CPU over the same span (the decision process)."""
    gc_s: float
    """Time in the cycle collector over the same span (part of ``cpu_s``)."""


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class CollectorClock:
    """Wall time spent in CPython's cycle collector while ``on`` (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.on = False
        self.seconds = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def start(self) -> None:
        self.seconds, self.on = 0.0, True

    def stop(self) -> float:
        self.on = False
        return self.seconds


COLLECTOR = CollectorClock()


def children_cpu() -> float:
    """CPU seconds of this process's live children (``/proc``; 0 where there is none)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{os.getpid()}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def measure(
    make: Callable[[CountingExporter], SpanProcessor], work: Callable[[Tracer], int]
) -> Result:
    exporter = CountingExporter()
    processor = make(exporter)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    # Warm: the first run starts the decision process (when there is one) and fills caches.
    warm = runs_with_events(tracer, 1)
    processor.force_flush(120_000)
    if exporter.count != warm:
        raise SystemExit(f"warm-up: exported {exporter.count} of {warm} spans")
    exporter.count = 0
    gc.collect()
    cpu, child = time.process_time(), children_cpu()
    COLLECTOR.start()
    start = time.perf_counter()
    spans = work(tracer)
    caller = time.perf_counter() - start
    processor.force_flush(120_000)
    total = time.perf_counter() - start
    collector = COLLECTOR.stop()
    cpu, child = time.process_time() - cpu, children_cpu() - child
    note = ""
    if isinstance(processor, FootprintSpanProcessor):
        stats = processor.stats()
        note = (
            f"decided {stats.runs_decided - 1}, no-footprint {stats.runs_without_footprint}, "
            f"annotated {stats.spans_annotated}, overflow {stats.runs_overflowed}, "
            f"errors {stats.decision_errors}"
        )
    provider.shutdown()
    return Result(spans, caller, total, exporter.count, note, cpu, child, collector)


VARIANTS: dict[str, dict[str, Any]] = {
    "process": {"decide_in": "process"},
    "no-lines": {"annotate_options": AnnotateOptions(include_lines=False)},
}
"""Processor settings ``--variants`` compares with the default one."""


def bsp(exporter: CountingExporter) -> SpanProcessor:
    """The plain batch processor every figure is measured against."""
    return BatchSpanProcessor(exporter, max_queue_size=QUEUE, schedule_delay_millis=50)


def footprint(exporter: CountingExporter, **options: Any) -> SpanProcessor:
    """Ours with the same batch settings (a short grace: runs end as soon as the workload's do)."""
    return FootprintSpanProcessor(
        exporter,
        grace_seconds=0.05,
        max_runs=100_000,
        bsp_max_queue_size=QUEUE,
        bsp_schedule_delay_millis=50,
        **options,
    )


def best(results: list[Result]) -> Result:
    return min(results, key=lambda r: r.total_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply workload sizes")
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell (best is kept)")
    parser.add_argument(
        "--variants",
        nargs="*",
        choices=sorted(VARIANTS),
        default=[],
        help="processor settings also run on the runs with footprint events",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="what each stage costs per span (recorded runs replayed; see the module's doc)",
    )
    args = parser.parse_args()
    print(f"otel_footprint.compiled: {getattr(otel_footprint, 'compiled', False)}")
    scale = args.scale
    if args.stages:
        stages(int(1_000 * scale), args.repeat)
        return

    workloads: list[tuple[str, Callable[[Tracer], int]]] = [
        ("plain spans (no run)", lambda t: plain_spans(t, int(30_000 * scale))),
        ("runs, no footprint events", lambda t: runs_without_events(t, int(2_000 * scale))),
        ("runs with footprint events", lambda t: runs_with_events(t, int(1_000 * scale))),
    ]
    header = (
        f"{'workload':28} {'pipeline':22} {'spans':>7} {'caller µs/span':>15} "
        f"{'caller spans/s':>15} {'e2e µs/span':>12} {'e2e spans/s':>12} "
        f"{'app CPU µs/span':>16} {'child CPU µs/span':>18} {'GC µs/span':>11}"
    )
    print(header)
    print("-" * len(header))
    ratios: list[str] = []
    for name, work in workloads:
        pipelines: list[tuple[str, Callable[[CountingExporter], SpanProcessor]]] = [
            ("BatchSpanProcessor", bsp),
            ("FootprintSpanProcessor", footprint),
        ]
        if work is workloads[-1][1]:
            for variant in args.variants:
                options = VARIANTS[variant]
                pipelines.append(
                    (f"Footprint {variant}", lambda e, o=options: footprint(e, **o))  # type: ignore[misc]
                )
        samples: dict[str, list[Result]] = {label: [] for label, _ in pipelines}
        # Interleaved, best of N: a machine shared with other work slows whichever runs then.
        for _ in range(args.repeat):
            for label, make in pipelines:
                samples[label].append(measure(make, work))
        cells = {label: best(results) for label, results in samples.items()}
        for label, _ in pipelines:
            r = cells[label]
            if r.exported != r.spans:
                raise SystemExit(f"{label}: exported {r.exported} of {r.spans} spans")
            print(
                f"{name:28} {label:22} {r.spans:>7} {r.caller_s / r.spans * 1e6:>15.2f} "
                f"{r.spans / r.caller_s:>15,.0f} {r.total_s / r.spans * 1e6:>12.2f} "
                f"{r.spans / r.total_s:>12,.0f} {r.cpu_s / r.spans * 1e6:>16.2f} "
                f"{r.child_cpu_s / r.spans * 1e6:>18.2f} {r.gc_s / r.spans * 1e6:>11.2f}"
            )
            if r.note:
                print(f"{'':28} {'':22} {r.note}")
        base = cells["BatchSpanProcessor"]
        for label, _ in pipelines[1:]:
            ours = cells[label]
            ratios.append(
                f"{name + ' (' + label + ')':52} caller x{ours.caller_s / base.caller_s:.2f} "
                f"(+{(ours.caller_s - base.caller_s) / ours.spans * 1e6:.2f} µs/span), "
                f"end-to-end x{ours.total_s / base.total_s:.2f} "
                f"(+{(ours.total_s - base.total_s) / ours.spans * 1e6:.2f} µs/span), "
                f"app CPU +{(ours.cpu_s - base.cpu_s) / ours.spans * 1e6:.2f} µs/span"
            )
    print()
    print("ratio FootprintSpanProcessor / BatchSpanProcessor (same exporter, same run):")
    for line in ratios:
        print("  " + line)
    print()
    hook_cost(bsp, footprint)


def hook_cost(
    bsp: Callable[[CountingExporter], SpanProcessor],
    footprint: Callable[[CountingExporter], SpanProcessor],
    n: int = 100_000,
) -> None:
    """on_start + on_end alone on one ended plain span (no span creation): the steadiest number
    on a shared machine, and what every span of no agent run pays."""
    provider = TracerProvider()
    span = provider.get_tracer("bench").start_span("GET /orders", attributes=ATTRS)
    span.end()
    costs: dict[str, float] = {}
    for label, make in (("BatchSpanProcessor", bsp), ("FootprintSpanProcessor", footprint)):
        processor = make(CountingExporter())
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                processor.on_start(span)  # type: ignore[arg-type]
                processor.on_end(span)
            samples.append((time.perf_counter() - start) / n * 1e6)
        costs[label] = min(samples)
        processor.shutdown()
    base, ours = costs["BatchSpanProcessor"], costs["FootprintSpanProcessor"]
    print(
        f"hooks only, plain span: BatchSpanProcessor {base:.2f} µs, FootprintSpanProcessor "
        f"{ours:.2f} µs (+{ours - base:.2f} µs/span, x{ours / base:.2f})"
    )


ROUND = 25
"""Runs per flushed round in ``--stages``."""

Call = tuple[bool, ReadableSpan]
"""A recorded hook: (started, span): ``on_start`` of the live span, or ``on_end`` of the ended one."""


class Recorder(SpanProcessor):
    """Every ``on_start`` and ``on_end`` in order (what ``--stages`` replays)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.calls.append((True, span))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append((False, span))


def recorded_rounds(runs: int) -> list[list[Call]]:
    """``runs`` routed runs recorded, cut into rounds of :data:`ROUND` runs."""
    recorder = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    runs_with_events(provider.get_tracer("bench"), runs)
    rounds: list[list[Call]] = [[]]
    roots = 0
    for started, span in recorder.calls:
        if started and span.parent is None:  # a run begins
            if roots == ROUND:
                rounds.append([])
                roots = 0
            roots += 1
        rounds[-1].append((started, span))
    return rounds


def replay(processor: SpanProcessor, calls: Sequence[Call]) -> None:
    for started, span in calls:
        if started:
            processor.on_start(span)  # type: ignore[arg-type]
        else:
            processor.on_end(span)


def stages(runs: int, repeat: int) -> None:
    """Each pipeline's CPU per span on the same recorded runs (see the module's doc)."""
    rounds = recorded_rounds(runs)
    warm = recorded_rounds(1)[0]
    decider = make_decider()
    decided: dict[int, dict[str, SpanNote]] = {}
    for calls in [warm, *rounds]:
        traces: dict[int, list[ReadableSpan]] = {}
        for started, span in calls:
            if not started and span.context is not None:
                traces.setdefault(span.context.trace_id, []).append(span)
        for trace_id, members in traces.items():
            decided[trace_id] = decider(members, None)

    def ready(spans: Sequence[ReadableSpan], incomplete: Reason | None, /, **_: Any) -> Notes:
        context = spans[0].context
        return dict(decided[context.trace_id]) if context is not None else {}

    def nothing(spans: Sequence[ReadableSpan], incomplete: Reason | None, /, **_: Any) -> Notes:
        return {}

    pipelines: list[tuple[str, Callable[[CountingExporter], SpanProcessor]]] = [
        (
            "BatchSpanProcessor",
            bsp,
        ),
        ("Footprint, no notes", lambda e: footprint(e, decider=nothing)),
        ("Footprint, notes given", lambda e: footprint(e, decider=ready)),
        ("FootprintSpanProcessor", footprint),
        ("Footprint process", lambda e: footprint(e, decide_in="process")),
    ]
    spans = sum(1 for calls in rounds for started, _ in calls if not started)
    best: dict[str, tuple[float, float, float, float]] = {}
    hooks_best: dict[str, float] = {}
    for _ in range(repeat):
        for label, make in pipelines:
            exporter = CountingExporter()
            processor = make(exporter)
            replay(processor, warm)
            processor.force_flush(60_000)
            exporter.count = 0
            gc.collect()
            cpu, child = time.process_time(), children_cpu()
            COLLECTOR.start()
            hooks = 0.0  # the calling thread's CPU in on_start / on_end
            for calls in rounds:
                begun = time.thread_time()
                replay(processor, calls)
                hooks += time.thread_time() - begun
                processor.force_flush(120_000)
            collector = COLLECTOR.stop()
            cpu, child = time.process_time() - cpu, children_cpu() - child
            processor.shutdown()
            if exporter.count != spans:
                raise SystemExit(f"{label}: exported {exporter.count} of {spans} spans")
            cell = (
                cpu / spans * 1e6,
                collector / spans * 1e6,
                child / spans * 1e6,
                hooks / spans * 1e6,
            )
            if label not in best or cell[0] < best[label][0]:
                best[label] = cell
            # The hooks' own best: the run of least CPU need not be the one of the fastest hooks.
            hooks_best[label] = min(hooks_best.get(label, math.inf), cell[3])
    print(
        f"stages: {spans} spans of routed runs replayed in rounds of {ROUND} runs, "
        f"best of {repeat} (process CPU per span)"
    )
    print(
        f"{'pipeline':24} {'app CPU µs/span':>16} {'GC µs/span':>11} {'child CPU µs/span':>18} "
        f"{'hooks µs/span':>14}"
    )
    for label, _ in pipelines:
        cpu_us, gc_us, child_us, _ = best[label]
        print(
            f"{label:24} {cpu_us:>16.2f} {gc_us:>11.2f} {child_us:>18.2f} "
            f"{hooks_best[label]:>14.2f}"
        )
    base = best["BatchSpanProcessor"][0]
    none, given = best["Footprint, no notes"][0], best["Footprint, notes given"][0]
    thread, process = best["FootprintSpanProcessor"][0], best["Footprint process"][0]
    print(
        f"hooks, holding and worker +{none - base:.1f}; annotated copies +{given - none:.1f}; "
        f"the decision (thread) +{thread - given:.1f}; the process path's application side "
        f"over notes given +{process - given:.1f} (child {best['Footprint process'][2]:.1f}) "
        "µs/span"
    )


if __name__ == "__main__":
    main()
