"""Times the decision path stage by stage: group_runs, decide_run (without / with the account), and
annotations_for, in µs of thread CPU time per run and per pass (best of R batches of K fresh inputs
each); and the account alone (``leg_input`` + ``account_for`` on each run's facts, read beforehand).

Workloads are realistic runs: the recorder's scripted runs (the 30-call stuck turn in verify and
shadow mode, a routed 2-pass run) captured on SDK spans through an ``InMemorySpanExporter``, and the
real agentfootprint recordings of the shared folder imported as OTLP protobuf spans (one request per
leg, read through ``OtlpSpanView`` as the hop reads them). Every batch decides the legs of a
workload in order through one fresh ``MemoryRunStore`` (a resumed leg continues the earlier one).
Usage:

    .venv/bin/python benchmarks/bench_decide.py [--batch 20] [--repeat 7] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_footprint
from otel_footprint.account.account import account_for
from otel_footprint.account.input import AccountInput, ToolCall, leg_input
from otel_footprint.annotate.form import AnnotateOptions, annotations_for
from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.codec import FootprintEvent
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.group import RunSpans, group_runs
from otel_footprint.runs.passes import RunFacts, read_run
from otel_footprint.runs.spans import OtlpSpanView, SdkSpanView, SpanView
from otel_footprint.runs.store import MemoryRunStore

_REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("OTEL_FOOTPRINT_SHARED") or _REPO / "tests" / "data" / "reference")
SCRIPTED = ("stuck-verify", "stuck-shadow", "routed-delivered")

_clock = time.thread_time
"""CPU time of this thread: the machine is shared, so wall time would count other processes' work."""

Views = Callable[[], list[SpanView]]
"""Fresh span views of one workload (the OTLP view caches attributes, so each batch gets new ones)."""


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    views: Views


def scripted(name: str) -> Workload:
    """A scenario recorded with ``otel_footprint.record`` onto SDK spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_script(provider.get_tracer("bench"), SCENARIOS[name].script)
    provider.shutdown()
    spans = exporter.get_finished_spans()
    return Workload(name, lambda: [SdkSpanView(s) for s in spans])


def recording(path: Path) -> Workload:
    """An agentfootprint NDJSON recording imported as OTLP spans (all its legs)."""
    requests = recording_to_requests(path.read_text().splitlines())
    pbs = [
        span
        for request in requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    return Workload(f"rec:{path.stem}", lambda: [OtlpSpanView(s) for s in pbs])


@dataclass(slots=True)
class Row:
    name: str
    runs: int
    passes: int
    group: float
    decide: float
    decide_account: float
    annotate: float
    account: float


def _best(samples: Sequence[float]) -> float:
    return min(samples)


def _account_of(facts: RunFacts) -> AccountInput:
    """What the engine hands the account for one leg: its events, tool calls and last pass."""
    calls = [
        ToolCall(
            c.name,
            c.call_id,
            c.arguments_text,
            c.result,
            c.failed,
            c.status,
            c.trace_id,
            c.span_id,
            c.iteration,
        )
        for c in facts.tool_calls
    ]
    last = max((p.iteration for p in facts.passes), default=None)
    return AccountInput(facts.events, tuple(calls), answering_iteration=last)


def _account(inp: AccountInput, by_type: Mapping[str, Sequence[FootprintEvent]]) -> None:
    """The account alone, as the engine computes it: ``leg_input`` (handed the events indexed
    by type, as the engine's facts hold them) then ``account_for``."""
    last = inp.answering_iteration
    account_for(leg_input(inp.events, inp.tool_calls, answering_iteration=last, by_type=by_type))


def measure(workload: Workload, batch: int, repeat: int) -> Row:
    """Best-of-``repeat`` seconds per batch of ``batch`` copies of the workload, per stage."""
    plain = EngineOptions(account=False)
    full = EngineOptions()
    annotate = AnnotateOptions()
    group_s: list[float] = []
    decide_s: list[float] = []
    account_s: list[float] = []
    annotate_s: list[float] = []
    alone_s: list[float] = []
    runs_count = passes_count = 0
    for _ in range(repeat):
        inputs = [workload.views() for _ in range(batch)]
        gc.collect()
        start = _clock()
        grouped: list[list[RunSpans]] = [group_runs(views) for views in inputs]
        group_s.append(_clock() - start)

        stores = [MemoryRunStore() for _ in grouped]
        start = _clock()
        for runs, store in zip(grouped, stores, strict=True):
            for run in runs:
                decide_run(run, store, plain)
        decide_s.append(_clock() - start)

        stores = [MemoryRunStore() for _ in grouped]
        verdicts: list[RunVerdict] = []
        start = _clock()
        for runs, store in zip(grouped, stores, strict=True):
            for run in runs:
                verdicts.append(decide_run(run, store, full))
        account_s.append(_clock() - start)

        start = _clock()
        for verdict in verdicts:
            annotations_for(verdict, annotate)
        annotate_s.append(_clock() - start)

        facts = [read_run(run) for runs in grouped for run in runs]
        legs = [(_account_of(f), f.by_type) for f in facts]
        gc.collect()
        start = _clock()
        for leg, by_type in legs:
            _account(leg, by_type)
        alone_s.append(_clock() - start)

        runs_count = len(grouped[0])
        passes_count = sum(len(run.passes) for run in grouped[0])
    # A workload that stops early (a reason) would time less work than it claims: say so.
    codes = sorted({r.code for v in verdicts for r in v.reasons})
    if codes:
        print(f"  note: {workload.name} verdicts carry reasons {codes}")
    scale = 1e6 / batch  # seconds per batch -> µs per copy of the workload
    return Row(
        workload.name,
        runs_count,
        passes_count,
        _best(group_s) * scale,
        _best(decide_s) * scale,
        _best(account_s) * scale,
        _best(annotate_s) * scale,
        _best(alone_s) * scale,
    )


def print_table(rows: Sequence[Row]) -> None:
    per_run = (
        f"{'workload':24} {'runs':>4} {'passes':>6} | {'µs per run':^47} | {'µs per pass':^31}"
        f" | {'account alone':^17}"
    )
    sub = (
        f"{'':24} {'':>4} {'':>6} | {'group':>8} {'decide':>8} {'+account':>9} {'annotate':>9} "
        f"{'total':>8} | {'decide':>7} {'+account':>9} {'total':>11} | {'/run':>8} {'/pass':>8}"
    )
    print(per_run)
    print(sub)
    print("-" * len(sub))
    for row in rows:
        runs = max(row.runs, 1)
        passes = max(row.passes, 1)
        total = row.group + row.decide_account + row.annotate
        print(
            f"{row.name:24} {row.runs:>4} {row.passes:>6} | {row.group / runs:>8.1f} "
            f"{row.decide / runs:>8.1f} {row.decide_account / runs:>9.1f} "
            f"{row.annotate / runs:>9.1f} {total / runs:>8.1f} | {row.decide / passes:>7.1f} "
            f"{row.decide_account / passes:>9.1f} {total / passes:>11.1f} | "
            f"{row.account / runs:>8.1f} {row.account / passes:>8.1f}"
        )
    print()
    print(
        "decide = decide_run(account=False); +account = decide_run with the account (what the "
        "processor and the hop run); total = group + (+account) + annotate; account alone = "
        "leg_input + account_for on each run's facts (read beforehand, not timed)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=20, help="workload copies per timed batch")
    parser.add_argument("--repeat", type=int, default=7, help="batches per cell (best is kept)")
    parser.add_argument("--only", nargs="*", help="workload names to run (default: all)")
    args = parser.parse_args()
    if args.batch < 1 or args.repeat < 1:
        parser.error("--batch and --repeat must be at least 1")

    workloads = [scripted(name) for name in SCRIPTED]
    recordings_dir = SHARED / "recordings"
    if recordings_dir.is_dir():
        workloads += [recording(p) for p in sorted(recordings_dir.glob("*.ndjson"))]
    else:
        print(f"(no recordings at {recordings_dir}: scripted runs only)")
    if args.only:
        workloads = [w for w in workloads if w.name in args.only]
    rows = [measure(w, args.batch, args.repeat) for w in workloads]
    print(f"otel_footprint.compiled: {getattr(otel_footprint, 'compiled', False)}")
    print_table(rows)


if __name__ == "__main__":
    main()
