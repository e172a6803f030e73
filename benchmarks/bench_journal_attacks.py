"""Two of issue 22's attacks on a real ``otel-footprint serve``, on loopback: a full disk, a flipped byte.

``disk-full --dir MOUNT``: the hop's data directory on ``MOUNT`` (a small file system of its own,
e.g. ``mount -t tmpfs -o size=48m tmpfs /mnt/q``), the next hop down, a filler file leaving 3 MiB;
two senders export runs until the journal cannot write; after ``--blocked`` seconds the next hop
comes back and the filler is removed (space returns). Reports when the hop said it was blocked
(health, metric, log line), how long after the space returned it took input again, and whether every
acknowledged span arrived, with no restart.

``flip``: 16,000 spans acknowledged with the next hop down, the hop killed (SIGKILL), one byte
flipped in the middle of its largest journal segment, the hop started again with the next hop
up: how many acknowledged spans were lost (at most the damaged record's), what was set aside.

Usage::

    .venv/bin/python benchmarks/bench_journal_attacks.py disk-full --dir /mnt/q
    .venv/bin/python benchmarks/bench_journal_attacks.py flip
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

# The tests' real servers on loopback: the hop as a subprocess and an OTLP/gRPC sink.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import grpc
from journal_faults import Spans, request
from servers import free_ports
from test_service_support import TRACE_EXPORT, HopProcess, Sink

ARGS = (
    "--set",
    "processing.release_grace=200ms",
    "--set",
    "exporters.otlp.queue.segment_size=1MiB",
)


class Senders:
    """Threads exporting requests of runs (one long, two short) and keeping what was acked."""

    def __init__(self, port: int, threads: int = 2, long_run: int = 30, pad: int = 200) -> None:
        self.port, self.long_run, self.pad = port, long_run, pad
        self.make, self.traces = Spans(), itertools.count(1)
        self.acked: set[bytes] = set()
        self.refused = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def start(self) -> Senders:
        for t in self.threads:
            t.start()
        return self

    def _run(self) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        export = channel.unary_unary(TRACE_EXPORT)
        while not self.stop.is_set():
            spans = []
            for size in (self.long_run, 1, 2):
                spans += self.make.run(next(self.traces), size, pad=self.pad)
            try:
                export(request(*spans).SerializeToString(), timeout=5)
            except grpc.RpcError:
                self.refused += 1
                time.sleep(0.05)
                continue
            self.acked.update(s.span_id for s in spans)
        channel.close()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)


def _health(hop: HopProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{hop.telemetry}/health", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def _delivered(sink: Sink) -> set[bytes]:
    return {bytes(s.span_id) for s in sink.spans()}


def disk_full(mount: Path, blocked: float) -> dict[str, Any]:
    data, filler = mount / "data", mount / "filler"
    sink = Sink().start()
    (port,) = free_ports(1)
    hop = HopProcess(data, sink.endpoint, *ARGS, grpc=f"127.0.0.1:{port}").start()
    out: dict[str, Any] = {}
    try:
        stat = os.statvfs(mount)
        with filler.open("wb") as f:
            f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - (3 << 20)))
        sink.stop()  # the next hop away: the journal grows until the disk is full
        senders = Senders(port).start()
        started = time.monotonic()
        while time.monotonic() - started < 120 and not _health(hop).get("queue_blocked"):
            time.sleep(0.2)
        out["blocked_after_seconds"] = round(time.monotonic() - started, 1)
        out["health_queue_blocked"] = _health(hop).get("queue_blocked")
        metrics = hop.metrics()
        out["metric_queue_blocked"] = metrics.get("otel_footprint_queue_blocked")
        out["write_failures"] = {k: v for k, v in metrics.items() if "write_failures" in k}
        time.sleep(blocked)
        sink.start()
        filler.unlink()
        back = time.monotonic()
        while time.monotonic() - back < 120 and _health(hop).get("queue_blocked"):
            time.sleep(0.1)
        out["input_again_seconds_after_space"] = round(time.monotonic() - back, 1)
        before = len(senders.acked)
        time.sleep(5)
        out["acked_in_5s_after"] = len(senders.acked) - before
        senders.join()
        sink.wait_for(lambda: senders.acked <= _delivered(sink), 120)
        out["acked"] = len(senders.acked)
        out["lost"] = len(senders.acked - _delivered(sink))
        out["refused_requests"] = senders.refused
        out["restarted"] = not hop.alive()
        out["log"] = [
            json.loads(line)["msg"]
            for line in hop.stderr().splitlines()
            if line.startswith("{") and ("disk queue" in line or "background step" in line)
        ]
        out["exit_code"] = hop.terminate()
    finally:
        hop.kill()
        sink.stop()
        filler.unlink(missing_ok=True)
    return out


def flip(spans_wanted: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-flip-") as d:
        data = Path(d) / "data"
        (port, sink_port) = free_ports(2)
        sink = Sink(sink_port)  # not started: everything stays in the journal
        hop = HopProcess(data, f"127.0.0.1:{sink_port}", *ARGS, grpc=f"127.0.0.1:{port}").start()
        make, traces = Spans(), itertools.count(1)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        export = channel.unary_unary(TRACE_EXPORT)
        acked: set[bytes] = set()
        while len(acked) < spans_wanted:
            spans = []
            for _ in range(10):
                spans += make.run(next(traces), 1, pad=300)
            export(request(*spans).SerializeToString(), timeout=5)
            acked.update(s.span_id for s in spans)
        channel.close()
        time.sleep(2)  # decided and journaled outbound
        hop.kill()
        largest = max((data / "queue").glob("seg-*.log"), key=lambda p: p.stat().st_size)
        raw = bytearray(largest.read_bytes())
        raw[len(raw) // 2] ^= 0x10
        largest.write_bytes(bytes(raw))
        sink.start()
        hop = HopProcess(data, sink.endpoint, *ARGS, grpc=f"127.0.0.1:{port}").start()
        try:
            sink.wait_for(lambda: len(_delivered(sink)) >= len(acked), 60)
            time.sleep(2)
            metrics = hop.metrics()
            errors = [
                json.loads(line)
                for line in hop.stderr().splitlines()
                if line.startswith("{") and "damaged" in line
            ]
            return {
                "segment_bytes": len(raw),
                "acked": len(acked),
                "lost": len(acked - _delivered(sink)),
                "spans_per_request": 20,
                "quarantined": metrics.get("otel_footprint_queue_quarantined_total"),
                "quarantined_bytes": metrics.get("otel_footprint_queue_quarantined_bytes_total"),
                "files": [p.name for p in (data / "queue" / "quarantine").iterdir()],
                "log": [(e["level"], e["msg"], e.get("items"), e.get("trace_ids")) for e in errors],
                "exit_code": hop.terminate(),
            }
        finally:
            hop.kill()
            sink.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="attack", required=True)
    full = sub.add_parser("disk-full")
    full.add_argument("--dir", type=Path, required=True, help="a small file system of its own")
    full.add_argument("--blocked", type=float, default=5.0, help="seconds left blocked")
    flipped = sub.add_parser("flip")
    flipped.add_argument("--spans", type=int, default=16_000)
    args = parser.parse_args()
    result = disk_full(args.dir, args.blocked) if args.attack == "disk-full" else flip(args.spans)
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
