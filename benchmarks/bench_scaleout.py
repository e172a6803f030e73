"""Scale-out throughput: spans/s through the real Collector's ``load_balancing`` exporter into one
``otel-footprint serve`` hop, then into two hops sharing one Redis run store, in one run.

Chain (collector-config/load_balancing/): load generator -> edge Collector (``load_balancing``,
``routing_key: traceID``, static resolver listing the hops) -> N annotating hops (Redis run store,
fsync on) -> an in-process OTLP/gRPC receiver that counts spans. The workload is bench_hop.py's:
10-span agent traces, pre-serialized, sent from a few threads. spans/s = spans sent / (first request
sent -> last span received downstream). Also reported: CPU-seconds used by the hops, the Collector,
and this process (the load generator and the receiver).

The machine has 2 cores: the load generator, the Collector, the receiver and both hops share them, so
two hops cannot double the rate here; the ratio says how much of the second hop the CPUs allow.

Needs the Collector built by ``scripts/otelcol.sh build`` (``OTEL_FOOTPRINT_OTELCOL_BIN``, else
.otelcol/bin/otelcol-footprint) and ``redis-server``. Usage::

    .venv/bin/python benchmarks/bench_scaleout.py [--spans 30000] [--threads 4] [--no-fsync] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hop import CountingSink, build_requests, send_all

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "collector-config" / "load_balancing"
TOKEN = "bench-scaleout"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


class Proc:
    """A subprocess with its log in ``workdir``; stopped with SIGTERM (SIGKILL after 30 s)."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


def start_hop(
    workdir: Path, name: str, sink_port: int, redis_url: str, prefix: str, fsync: bool
) -> tuple[Proc, int]:
    port = free_port()
    command = Path(sys.executable).with_name("otel-footprint")
    argv = [
        str(command if command.exists() else "otel-footprint"),
        "serve",
        "--config",
        str(CONFIGS / "otel-footprint.yaml"),
        "--grpc",
        f"127.0.0.1:{port}",
        "--http",
        "127.0.0.1:0",
        "--telemetry",
        "127.0.0.1:0",
        "--data-dir",
        str(workdir / name),
        "--forward",
        f"127.0.0.1:{sink_port}",
        "--set",
        f"processing.run_store.url={redis_url}",
        "--set",
        f"processing.run_store.key_prefix={prefix}",
        "--set",
        "receivers.otlp.protocols.grpc.max_concurrent_requests=64",
        "--set",
        "receivers.otlp.grpc_workers=8",
        "--set",
        f"exporters.otlp.queue.fsync={'true' if fsync else 'false'}",
    ]
    env = {"FOOTPRINT_TOKEN": TOKEN, "FOOTPRINT_INSTANCE": name}
    hop = Proc(argv, workdir / f"{name}.log", env)
    wait_until(lambda: connectable(port) or hop.proc.poll() is not None, 60, f"hop {name}")
    if hop.proc.poll() is not None:
        raise RuntimeError(f"hop {name} exited: {(workdir / f'{name}.log').read_text()[-2000:]}")
    return hop, port


def start_edge(binary: str, workdir: Path, name: str, hop_ports: list[int]) -> tuple[Proc, int]:
    cfg = yaml.safe_load((CONFIGS / "edge-collector.yaml").read_text())
    grpc_port, health_port = free_port(), free_port()
    cfg["receivers"]["otlp"]["protocols"] = {"grpc": {"endpoint": f"127.0.0.1:{grpc_port}"}}
    for pipeline in cfg["service"]["pipelines"].values():
        pipeline["processors"] = []  # no memory_limiter: it could refuse load in a benchmark
    cfg["exporters"]["load_balancing"]["resolver"]["static"]["hostnames"] = [
        f"127.0.0.1:{p}" for p in hop_ports
    ]
    cfg["extensions"] = {"health_check": {"endpoint": f"127.0.0.1:{health_port}"}}
    cfg["service"]["extensions"] = ["health_check"]
    cfg["service"]["telemetry"] = {"metrics": {"level": "none"}, "logs": {"level": "warn"}}
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    edge = Proc(
        [binary, "--config", str(path)], workdir / f"{name}.log", {"FOOTPRINT_TOKEN": TOKEN}
    )

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/", timeout=1) as r:
                return r.status == 200
        except OSError:
            return edge.proc.poll() is not None

    wait_until(healthy, 60, f"Collector {name}")
    if edge.proc.poll() is not None:
        raise RuntimeError(
            f"Collector {name} exited: {(workdir / f'{name}.log').read_text()[-2000:]}"
        )
    return edge, grpc_port


def measure(
    binary: str, workdir: Path, hops: int, redis_url: str, spans: int, threads: int, fsync: bool
) -> dict[str, float]:
    sink = CountingSink()
    started: list[Proc] = []
    try:
        hop_ports = []
        hop_procs = []
        for i in range(hops):
            hop, port = start_hop(
                workdir, f"{hops}hop-{i + 1}", sink.port, redis_url, f"bench-{hops}-", fsync
            )
            started.append(hop)
            hop_procs.append(hop)
            hop_ports.append(port)
        edge, edge_port = start_edge(binary, workdir, f"edge-{hops}hop", hop_ports)
        started.append(edge)
        target = f"127.0.0.1:{edge_port}"
        # Offsets keep every run's trace ids distinct (one Redis serves both modes).
        warmup = build_requests(2_000, offset=hops * 10_000_000)
        send_all(target, warmup, threads)
        if not sink.wait_for(2_000, 120):
            raise RuntimeError(f"warm-up: {sink.count} of 2000 spans arrived")
        requests = build_requests(spans, offset=hops * 10_000_000 + 1_000_000)
        cpu0 = {p.proc.pid: cpu_seconds(p.proc.pid) for p in started}
        self0 = time.process_time()
        t0 = time.perf_counter()
        send_all(target, requests, threads)
        if not sink.wait_for(2_000 + spans, 180):
            raise RuntimeError(f"{sink.count - 2_000} of {spans} spans arrived")
        elapsed = time.perf_counter() - t0
        hop_cpu = sum(cpu_seconds(p.proc.pid) - cpu0[p.proc.pid] for p in hop_procs)
        edge_cpu = cpu_seconds(edge.proc.pid) - cpu0[edge.proc.pid]
        load_cpu = time.process_time() - self0
        return {
            "hops": hops,
            "spans": spans,
            "seconds": round(elapsed, 2),
            "spans_per_s": round(spans / elapsed),
            "hop_cpu_s": round(hop_cpu, 2),
            "collector_cpu_s": round(edge_cpu, 2),
            "loadgen_and_receiver_cpu_s": round(load_cpu, 2),
        }
    finally:
        for proc in reversed(started):
            proc.stop()
        sink.server.stop(grace=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=30_000, help="spans per mode (default 30000)")
    parser.add_argument("--threads", type=int, default=4, help="sender threads (default 4)")
    parser.add_argument(
        "--no-fsync", action="store_true", help="hops journal without fsync (default: fsync on)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    default_bin = REPO / ".otelcol" / "bin" / "otelcol-footprint"
    binary = os.environ.get("OTEL_FOOTPRINT_OTELCOL_BIN") or str(default_bin)
    if not Path(binary).is_file():
        print(f"no Collector at {binary}: run scripts/otelcol.sh build", file=sys.stderr)
        return 2
    redis = shutil.which("redis-server")
    if redis is None:
        print("redis-server is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as tmp:
        workdir = Path(tmp)
        redis_port = free_port()
        redis_proc = Proc(
            [
                redis,
                "--port",
                str(redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                tmp,
            ],
            workdir / "redis.log",
        )
        try:
            wait_until(lambda: connectable(redis_port), 10, "redis-server")
            url = f"redis://127.0.0.1:{redis_port}/0"
            fsync = not args.no_fsync
            one = measure(binary, workdir, 1, url, args.spans, args.threads, fsync)
            two = measure(binary, workdir, 2, url, args.spans, args.threads, fsync)
        finally:
            redis_proc.stop()
    result = {
        "one_hop": one,
        "two_hops": two,
        "ratio_two_over_one": round(two["spans_per_s"] / one["spans_per_s"], 2),
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for row in (one, two):
            print(
                f"{row['hops']} hop(s): {row['spans_per_s']:>7,} spans/s  ({row['spans']:,} spans in "
                f"{row['seconds']} s; hop CPU {row['hop_cpu_s']} s, Collector CPU "
                f"{row['collector_cpu_s']} s, load generator + receiver CPU "
                f"{row['loadgen_and_receiver_cpu_s']} s)"
            )
        print(f"ratio two hops / one hop: {result['ratio_two_over_one']} on {result['cpus']} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
