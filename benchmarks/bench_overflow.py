"""A request that overflows the run buffer, against the real hop, while both receivers are probed.

Issue 22. With thousands of runs held (``--held``, from many senders), one request of ``--burst``
one-span agent traces pushes the buffer past ``processing.max_runs``: each trace over it releases
the oldest trace of the sender holding the most (``overflow``). Meanwhile small requests go to the
gRPC and the HTTP receiver one after another, and ``--fuzz`` hostile requests from
``bench_hop_fuzz`` run beside them (the issue's fuzz burst). Measured: how long the big request
took, the longest any probe waited for its answer (the promise: under a second), and whether every
probe was answered.

    .venv/bin/python benchmarks/bench_overflow.py [--held 6000] [--burst 10001] [--fuzz 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import bench_hop_fuzz
from servers import poll

from otel_footprint import semconv
from tests.test_service_support import TRACE_EXPORT, HopProcess, Sink

GRPC_REFUSED = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})


def one_span_traces(first: int, count: int, service: str) -> bytes:
    """``count`` traces of one model-call span each (a parent not sent: held until ``max_wait``)."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value=service))
    )
    spans = rs.scope_spans.add().spans
    for n in range(first, first + count):
        span = spans.add()
        span.trace_id = n.to_bytes(16, "big")
        span.span_id = (n << 1 | 1).to_bytes(8, "big")
        span.parent_span_id = (n << 1).to_bytes(8, "big")
        span.name = "chat"
        span.kind = Span.SPAN_KIND_CLIENT
        span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
        span.attributes.append(
            KeyValue(key=semconv.GEN_AI_OPERATION_NAME, value=AnyValue(string_value="chat"))
        )
    return request.SerializeToString()


def plain_span(n: int) -> bytes:
    """One span of no run (passed straight through)."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = (1 << 100 | n).to_bytes(16, "big")
    span.span_id = (n + 1).to_bytes(8, "big")
    span.name = "GET /health"
    return request.SerializeToString()


class Probes:
    """Small requests to both receivers, one after another per receiver, timing each answer."""

    def __init__(self, hop: HopProcess) -> None:
        self.hop = hop
        self.waits: dict[str, list[float]] = {"grpc": [], "http": []}
        self.unanswered: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._grpc, daemon=True),
            threading.Thread(target=self._http, daemon=True),
        ]

    def __enter__(self) -> Probes:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _numbers(self, base: int) -> Iterator[int]:
        n = base
        while not self._stop.is_set():
            yield n
            n += 1
            time.sleep(0.05)

    def _grpc(self) -> None:
        with grpc.insecure_channel(self.hop.grpc) as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            for n in self._numbers(0):
                t0 = time.monotonic()
                try:
                    export(plain_span(n), timeout=60)
                except grpc.RpcError as err:
                    if err.code() not in GRPC_REFUSED:
                        self.unanswered.append(f"grpc {err.code()}")
                self.waits["grpc"].append(time.monotonic() - t0)

    def _http(self) -> None:
        host, port = self.hop.http.rsplit(":", 1)
        for n in self._numbers(1 << 20):
            t0 = time.monotonic()
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            try:
                conn.request(
                    "POST",
                    "/v1/traces",
                    plain_span(n),
                    {"Content-Type": "application/x-protobuf"},
                )
                status = conn.getresponse().status
                if status not in (200, 429, 503):
                    self.unanswered.append(f"http {status}")
            except OSError as err:
                self.unanswered.append(f"http {err!r}")
            finally:
                conn.close()
            self.waits["http"].append(time.monotonic() - t0)


def run(tmp_path: Path, held: int, burst: int, fuzz: int = 0) -> dict[str, Any]:
    """Prefill ``held`` runs from many clients, send one request of ``burst`` one-span traces
    (over ``max_runs``) beside ``fuzz`` hostile requests, probing both receivers meanwhile; the
    figures as a dict."""
    sink = Sink().start()
    hop = HopProcess(tmp_path / "data", sink.endpoint, "--set", "processing.max_wait=600s")
    hop.start()
    try:
        with grpc.insecure_channel(hop.grpc) as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            per_request = 200
            for first in range(0, held, per_request):
                body = one_span_traces(first + 1, per_request, f"client-{first // per_request}")
                export(body, timeout=60)
            assert hop.metric("otel_footprint_runs_held") == held
            big = one_span_traces(1 << 40, burst, "flood")
            fuzzed: list[Any] = []
            fuzzing = threading.Thread(
                target=lambda: fuzzed.append(bench_hop_fuzz.drive(hop.grpc, hop.http, 22, fuzz)),
                daemon=True,
            )
            with Probes(hop) as probes:
                fuzzing.start()
                time.sleep(0.5)
                t0 = time.monotonic()
                export(big, timeout=120)
                big_seconds = time.monotonic() - t0
                time.sleep(0.5)
                fuzzing.join(600)
            # Released runs are counted once decided and written out (after the answer).
            overflow = poll(
                lambda: hop.metric("otel_footprint_runs_released_overflow_total"),
                lambda n: n >= burst + held - 10_000,
                timeout=120,
                what="the overflowing runs released",
            )
        waits = probes.waits
        return {
            "big_request_seconds": round(big_seconds, 3),
            "probes": {k: len(v) for k, v in waits.items()},
            "longest_probe_wait": round(max(waits["grpc"] + waits["http"], default=0.0), 3),
            "unanswered": probes.unanswered,
            "overflow": overflow,
            "runs_held": hop.metric("otel_footprint_runs_held"),
            "fuzz_requests": fuzzed[0].sent if fuzzed else 0,
            "fuzz_wrong_answers": len(fuzzed[0].bad or []) if fuzzed else 0,
        }
    finally:
        assert hop.stop() == 0, hop.tail()
        sink.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, default=6000, help="runs held before the burst")
    parser.add_argument("--burst", type=int, default=10_001, help="one-span traces in the request")
    parser.add_argument("--fuzz", type=int, default=0, help="hostile requests beside it")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-overflow-") as tmp:
        result = run(Path(tmp), ns.held, ns.burst, ns.fuzz)
    print(json.dumps(result))
    ok = not result["unanswered"] and result["longest_probe_wait"] < 1.0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
