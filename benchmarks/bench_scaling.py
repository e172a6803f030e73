"""Per-pass cost of the hop's decision path as one run grows: 30, 300 and 3,000 passes.

The run is the stuck turn of the demo stretched to N passes (a lexical guess engages zone-audit, the
model calls ``screen_open`` once per pass and answers on the last), recorded with
``otel_footprint.record``, encoded as OTLP protobuf and read through ``OtlpSpanView`` as the hop
reads it. Three variants: ``shadow`` (no kernel in the agent), ``verify`` (the agent runs the kernel
and reports its changes) and ``shadow-noiter`` (the tool spans carry no ``footprint.pass.iteration``:
their pass is found from the start times, as for an agent that does not number its tool calls).

One decision = ``group_runs`` + ``decide_run`` (with the account) + ``annotations_for`` +
``apply_note`` on every span: the work the hop's decision thread does for a run. Times are thread
CPU time (the machine is shared), best of ``--repeat``; ``stall`` is the longest single decision of
a run in wall-clock time. Usage::

    .venv/bin/python benchmarks/bench_scaling.py [--passes 30 300 3000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Sequence
from dataclasses import replace

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv
from otel_footprint.annotate.form import AnnotateOptions, annotations_for
from otel_footprint.annotate.otlp import apply_note
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView
from otel_footprint.runs.store import MemoryRunStore

VARIANTS = ("shadow", "verify", "shadow-noiter")


def workload_spans(variant: str, passes: int) -> tuple[ReadableSpan, ...]:
    """One run of ``passes`` passes as recorded (ended SDK spans; a new trace id each call). The
    ``-noiter`` variants' tool spans are changed only in :func:`workload`'s protobuf."""
    base = SCENARIOS["stuck-verify" if variant == "verify" else "stuck-shadow"].script
    screen = base.passes[0]
    script = replace(
        base, run_id=f"scaling-{variant}-{passes}", passes=(*((screen,) * (passes - 1)), ())
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_script(provider.get_tracer("bench"), script)
    provider.shutdown()
    return exporter.get_finished_spans()


def workload(variant: str, passes: int) -> bytes:
    """One run of ``passes`` passes as a serialized ExportTraceServiceRequest."""
    request = encode_spans(workload_spans(variant, passes))
    if variant.endswith("-noiter"):
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    if span.name.startswith(semconv.OP_EXECUTE_TOOL + " "):
                        kept = [a for a in span.attributes if a.key != semconv.PASS_ITERATION]
                        del span.attributes[:]
                        span.attributes.extend(kept)
    return bytes(request.SerializeToString())


def decide_once(data: bytes) -> tuple[float, float, int]:
    """(thread CPU seconds, wall seconds, passes) of one decision of the run in ``data``."""
    request = ExportTraceServiceRequest.FromString(data)
    spans = [s for r in request.resource_spans for s in r.scope_spans for s in s.spans]
    engine, annotate = EngineOptions(), AnnotateOptions()
    gc.collect()
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    views = {}
    for span in spans:
        view = OtlpSpanView(span)
        views[view.span_id] = view
    passes = 0
    for run in group_runs(list(views.values())):
        verdict = decide_run(run, MemoryRunStore(), engine)
        passes += len(verdict.passes)
        for span_hex, note in annotations_for(verdict, annotate).items():
            view = views.get(span_hex)
            if view is not None:
                apply_note(view.pb, note)
    return time.thread_time() - cpu0, time.perf_counter() - wall0, passes


def measure(variant: str, passes: int, repeat: int) -> dict[str, float | int | str]:
    data = workload(variant, passes)
    cpu: list[float] = []
    wall: list[float] = []
    decided = 0
    # Small runs are timed in batches so the clock's resolution does not matter.
    inner = max(1, 300 // passes)
    for _ in range(repeat):
        batch_cpu = batch_wall = 0.0
        for _ in range(inner):
            c, w, decided = decide_once(data)
            batch_cpu += c
            batch_wall = max(batch_wall, w)
        cpu.append(batch_cpu / inner)
        wall.append(batch_wall)
    if decided != passes:
        raise RuntimeError(f"{variant}/{passes}: {decided} passes decided, expected {passes}")
    best = min(cpu)
    return {
        "variant": variant,
        "passes": passes,
        "cpu_ms_per_run": round(best * 1e3, 2),
        "us_per_pass": round(best * 1e6 / passes, 1),
        "stall_ms": round(min(wall) * 1e3, 1),
    }


def print_table(rows: Sequence[dict[str, float | int | str]]) -> None:
    print(f"{'variant':15} {'passes':>6} {'CPU ms/run':>11} {'µs/pass':>8} {'stall ms':>9}")
    for row in rows:
        print(
            f"{row['variant']:15} {row['passes']:>6} {row['cpu_ms_per_run']:>11} "
            f"{row['us_per_pass']:>8} {row['stall_ms']:>9}"
        )
    by_variant: dict[str, list[dict[str, float | int | str]]] = {}
    for row in rows:
        by_variant.setdefault(str(row["variant"]), []).append(row)
    for variant, group in by_variant.items():
        first, last = group[0], group[-1]
        ratio = float(last["us_per_pass"]) / float(first["us_per_pass"])
        print(f"{variant}: µs/pass at {last['passes']} passes / at {first['passes']} = {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, nargs="*", default=[30, 300, 3000])
    parser.add_argument("--repeat", type=int, default=5, help="timed decisions per cell (best)")
    parser.add_argument("--variant", nargs="*", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args()
    if args.repeat < 1 or any(n < 2 for n in args.passes):
        parser.error("--repeat must be at least 1 and every --passes at least 2")
    rows = [measure(v, n, args.repeat) for v in args.variant for n in args.passes]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
