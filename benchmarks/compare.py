"""Side by side: this checkout against a base commit, on the same workload in one run, as ratios.

The base commit is checked out into a temporary ``git worktree`` (removed afterwards); each tree's
``otel_footprint`` runs with that tree first on ``PYTHONPATH`` under this interpreter, and the
workloads and drivers are this checkout's, so a base whose benchmark scripts differ is measured the
same way. Rounds interleave the trees (the order alternates), and each figure is the median of the
rounds. Two figures:

- **hop**: ``otel-footprint serve`` annotating (``bench_hop.py``'s subprocess, sink and senders): the
  demo's five runs replicated with fresh trace, span and run ids, one copy per request, sent by
  ``--threads`` threads; spans per hop-CPU-second (the hop process's CPU, so neighbours on a shared
  machine count less than in wall time);
- **decide**: ``decide_run`` with the account on the stuck run (30 passes, verify mode), µs of
  thread CPU per pass (``compare_decide.py``, ``bench_decide.py``'s method), on the same OTLP bytes.

With ``--instructions`` (needs ``valgrind``), a third figure that other load on the machine does
not move: the hop's pipeline in process (``compare_pipeline.py``: ingest, hold, release, decide,
annotate, serialize, journal; no gRPC) on the same demo copies, in machine instructions per span
counted by callgrind (a run of ``--ir-requests`` requests after the warm-up, minus a run of the
warm-up alone). Once per tree, not per round: the count does not vary.

Usage::

    .venv/bin/python benchmarks/compare.py --base 321e9b7 [--rounds 5] [--spans 20000] [--json]
        [--instructions] [--ir-requests 20]

A ratio above 1 means this checkout (or ``--head``) is faster than the base.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hop import CountingSink, Hop, _cpu_seconds, send_all

from otel_footprint import semconv
from otel_footprint.commands.scenarios import SCENARIOS, run_scenarios, run_script

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STUCK = "stuck-verify"


# ---------------------------------------------------------------------------------------------
# Workloads (recorded once, by this checkout)
# ---------------------------------------------------------------------------------------------


def _recorded(script: str | None) -> ExportTraceServiceRequest:
    """The demo's runs (``script=None``) or one scenario, as the agent's SDK exports them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "otel-footprint-demo"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("demo")
    if script is None:
        run_scenarios(tracer)
    else:
        run_script(tracer, SCENARIOS[script].script)
    provider.shutdown()
    return encode_spans(memory.get_finished_spans())


def demo_copies(demo: ExportTraceServiceRequest, first: int, count: int) -> list[bytes]:
    """``count`` copies of the demo request, copy ``k`` with its ids xor-ed by ``k`` (trace, span
    and parent span ids) and its run ids suffixed ``-k``: new runs to the hop, the same work."""
    out: list[bytes] = []
    for k in range(first, first + count):
        copy = ExportTraceServiceRequest()
        copy.CopyFrom(demo)
        for resource in copy.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    span.trace_id = _xor(span.trace_id, k)
                    span.span_id = _xor(span.span_id, k)
                    if span.parent_span_id:
                        span.parent_span_id = _xor(span.parent_span_id, k)
                    for kv in span.attributes:
                        if kv.key == semconv.RUN_ID:
                            kv.value.string_value = f"{kv.value.string_value}-{k}"
        out.append(copy.SerializeToString())
    return out


def _xor(ident: bytes, k: int) -> bytes:
    return (int.from_bytes(ident, "big") ^ ((k + 1) << 8)).to_bytes(len(ident), "big")


def _span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)


# ---------------------------------------------------------------------------------------------
# One measurement per tree
# ---------------------------------------------------------------------------------------------


def hop_round(
    tree: Path, tmp: Path, warmup: list[bytes], requests: list[bytes], per: int, threads: int
) -> float:
    """Spans per hop-CPU-second of ``tree``'s hop, annotating, on ``requests`` after ``warmup``."""
    sink = CountingSink()
    tmp.mkdir(parents=True)
    hop = Hop(
        tmp / "data",
        f"127.0.0.1:{sink.port}",
        "processing.annotate=true",
        "processing.release_grace=100ms",
        tree=tree,
    )
    try:
        send_all(hop.addresses["grpc"], warmup, threads)
        if not sink.wait_for(len(warmup) * per, 120):
            raise RuntimeError(f"{tree}: warm-up spans did not arrive")
        cpu0 = _cpu_seconds(hop.proc.pid)
        send_all(hop.addresses["grpc"], requests, threads)
        spans = len(requests) * per
        if not sink.wait_for(len(warmup) * per + spans, 600):
            raise RuntimeError(f"{tree}: only {sink.count} spans arrived")
        cpu = _cpu_seconds(hop.proc.pid) - cpu0
    finally:
        hop.stop()
        sink.server.stop(0)
    return spans / cpu


def decide_round(tree: Path, request: Path, batch: int, repeat: int) -> dict[str, Any]:
    """``compare_decide.py`` (this checkout's) run against ``tree``'s package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(tree), env.get("PYTHONPATH"))))
    argv = [sys.executable, str(HERE / "compare_decide.py"), str(request)]
    argv += ["--batch", str(batch), "--repeat", str(repeat)]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: compare_decide.py failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    if Path(result["package"]) != (tree / "otel_footprint").resolve():
        raise RuntimeError(f"{tree}: the decision imported {result['package']}")
    return result


def instructions_per_span(tree: Path, tmp: Path, warmup: list[bytes], timed: list[bytes]) -> float:
    """``compare_pipeline.py`` under callgrind against ``tree``'s package: the instructions of a run
    with ``timed`` after ``warmup``, less those of ``warmup`` alone, per span of ``timed``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(tree), env.get("PYTHONPATH"))))
    counts: list[int] = []
    for name, requests in (("warmup", warmup), ("timed", warmup + timed)):
        path = tmp / f"{name}.hex"
        path.write_text("\n".join(r.hex() for r in requests))
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
        argv += [str(HERE / "compare_pipeline.py"), str(path), "--warmup", str(len(warmup))]
        done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(
                f"{tree}: compare_pipeline.py under callgrind failed:\n{done.stderr}"
            )
        package = json.loads(done.stdout)["package"]
        if Path(package) != (tree / "otel_footprint").resolve():
            raise RuntimeError(f"{tree}: the pipeline imported {package}")
        counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / sum(
        _span_count(ExportTraceServiceRequest.FromString(r)) for r in timed
    )


@contextlib.contextmanager
def checkout(rev: str, tmp: Path) -> Iterator[Path]:
    """``rev`` as a detached ``git worktree`` under ``tmp``, removed afterwards."""
    path = tmp / f"tree-{rev}"
    git = ["git", "-C", str(REPO), "worktree"]
    subprocess.run([*git, "add", "--detach", "--quiet", str(path), rev], check=True)
    try:
        yield path
    finally:
        subprocess.run([*git, "remove", "--force", str(path)], check=False)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _median(values: list[float]) -> float:
    return statistics.median(values)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--head", help="a commit to compare (default: this working tree)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median is reported)")
    parser.add_argument("--spans", type=int, default=20_000, help="hop spans per round (≈)")
    parser.add_argument("--warmup", type=int, default=3_000, help="hop warm-up spans (≈)")
    parser.add_argument("--threads", type=int, default=4, help="sender threads")
    parser.add_argument("--batch", type=int, default=20, help="decide: copies per timed batch")
    parser.add_argument("--repeat", type=int, default=5, help="decide: batches (best is kept)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the in-process pipeline's instructions per span (valgrind)",
    )
    parser.add_argument(
        "--ir-requests", type=int, default=20, help="--instructions: timed requests (demo copies)"
    )
    args = parser.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on the PATH")
    if min(args.rounds, args.spans, args.batch, args.repeat, args.threads) < 1:
        parser.error("--rounds, --spans, --batch, --repeat and --threads must be at least 1")

    demo = _recorded(None)
    per = _span_count(demo)
    warmup = demo_copies(demo, 0, max(1, args.warmup // per))
    requests = demo_copies(demo, 1_000_000, max(1, args.spans // per))
    hop: dict[str, list[float]] = {"base": [], "head": []}
    decide: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
    loads: list[str] = [_load()]
    instructions: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as d, contextlib.ExitStack() as stack:
        tmp = Path(d)
        stuck = tmp / "stuck.pb"
        stuck.write_bytes(_recorded(STUCK).SerializeToString())
        trees = {
            "base": stack.enter_context(checkout(args.base, tmp)),
            "head": stack.enter_context(checkout(args.head, tmp)) if args.head else REPO,
        }
        if args.instructions:
            ir_warmup = demo_copies(demo, 2_000_000, 20)
            ir_timed = demo_copies(demo, 3_000_000, max(1, args.ir_requests))
            for name, tree in trees.items():
                (tmp / f"ir-{name}").mkdir()
                instructions[name] = instructions_per_span(
                    tree, tmp / f"ir-{name}", ir_warmup, ir_timed
                )
                if not args.json:
                    print(f"instructions: {name} {instructions[name]:,.0f} per span", flush=True)
        for i in range(args.rounds):
            order = ("base", "head") if i % 2 == 0 else ("head", "base")
            for name in order:
                hop[name].append(
                    hop_round(trees[name], tmp / f"{i}-{name}", warmup, requests, per, args.threads)
                )
                decide[name].append(decide_round(trees[name], stuck, args.batch, args.repeat))
            loads.append(_load())
            if not args.json:
                print(
                    f"round {i + 1}: hop base {hop['base'][-1]:,.0f} head {hop['head'][-1]:,.0f} "
                    f"spans/hop-CPU-s; decide base {decide['base'][-1]['decide_us_per_pass']} "
                    f"head {decide['head'][-1]['decide_us_per_pass']} µs/pass (load {loads[-1]})",
                    flush=True,
                )
    result = _summary(args, per, len(requests) * per, hop, decide, loads, instructions)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0


def _summary(
    args: argparse.Namespace,
    per: int,
    spans: int,
    hop: dict[str, list[float]],
    decide: dict[str, list[dict[str, Any]]],
    loads: list[str],
    instructions: dict[str, float],
) -> dict[str, Any]:
    def cut(name: str) -> dict[str, Any]:
        rows = decide[name]
        return {
            "hop_spans_per_cpu_second": round(_median(hop[name]), 1),
            "hop_rounds": [round(v, 1) for v in hop[name]],
            "decide_us_per_pass": round(_median([r["decide_us_per_pass"] for r in rows]), 2),
            "group_us_per_pass": round(_median([r["group_us_per_pass"] for r in rows]), 2),
            "decide_rounds": [r["decide_us_per_pass"] for r in rows],
            "passes": rows[0]["passes"],
            "reasons": rows[0]["reasons"],
            "compiled": rows[0]["compiled"],
        }

    base, head = cut("base"), cut("head")
    for name, fig in (("base", base), ("head", head)):
        if name in instructions:
            fig["pipeline_instructions_per_span"] = round(instructions[name])
    return {
        "base": args.base,
        "head": args.head or "working tree",
        "rounds": args.rounds,
        "workload": f"hop: the demo's runs ({per} spans) x {spans // per} copies with fresh ids, "
        f"{args.threads} sender threads; decide: {STUCK} ({base['passes']} passes), "
        f"{args.batch} copies x best of {args.repeat}",
        "load_average": loads,
        "base_figures": base,
        "head_figures": head,
        # > 1: head is faster. The hop: more spans per CPU-second; the decision: fewer µs per pass.
        "ratio_hop": round(head["hop_spans_per_cpu_second"] / base["hop_spans_per_cpu_second"], 3),
        "ratio_decide": round(base["decide_us_per_pass"] / head["decide_us_per_pass"], 3),
        # Fewer instructions per span: faster (one count per tree: it does not vary).
        "ratio_pipeline_instructions": round(instructions["base"] / instructions["head"], 3)
        if instructions
        else None,
        # The rounds are pairs run back to back: the median of their ratios shrugs off a round
        # in which a neighbour's load came and went.
        "ratio_hop_paired": round(
            _median([h / b for h, b in zip(hop["head"], hop["base"], strict=True)]), 3
        ),
        "ratio_decide_paired": round(
            _median(
                [
                    b["decide_us_per_pass"] / h["decide_us_per_pass"]
                    for h, b in zip(decide["head"], decide["base"], strict=True)
                ]
            ),
            3,
        ),
    }


def _print(result: dict[str, Any]) -> None:
    base, head = result["base_figures"], result["head_figures"]
    print(f"workload: {result['workload']}")
    print(f"load average (1/5/15 min) before and after each round: {result['load_average']}")
    print(
        f"hop    : base {base['hop_spans_per_cpu_second']:,.0f}  head "
        f"{head['hop_spans_per_cpu_second']:,.0f} spans per hop-CPU-second (median of "
        f"{result['rounds']})  ratio head/base {result['ratio_hop']} (paired rounds: "
        f"{result['ratio_hop_paired']})"
    )
    print(
        f"decide : base {base['decide_us_per_pass']}  head {head['decide_us_per_pass']} µs per pass "
        f"with the account  ratio base/head {result['ratio_decide']} (paired rounds: "
        f"{result['ratio_decide_paired']})"
    )
    if result["ratio_pipeline_instructions"] is not None:
        print(
            f"pipeline: base {base['pipeline_instructions_per_span']:,}  head "
            f"{head['pipeline_instructions_per_span']:,} instructions per span (callgrind, in "
            f"process)  ratio base/head {result['ratio_pipeline_instructions']}"
        )
    for name, fig in (("base", base), ("head", head)):
        if fig["reasons"]:
            print(f"  note: the {name} tree's verdicts on {STUCK} carry reasons {fig['reasons']}")


if __name__ == "__main__":
    sys.exit(main())
