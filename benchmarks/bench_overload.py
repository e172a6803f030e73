"""2x overload of the annotating hop: memory under its limit, no acknowledged span lost, back-pressure first.

Issue 13's acceptance: drive ``otel-footprint serve`` at twice its sustainable annotating rate for
``--duration`` seconds (default 60) and show that

* its resident memory (``VmRSS``, sampled every 0.5 s) stays within the configured memory limit
  (``processing.memory_limit``, which is ``processing.max_bytes`` unless set) + 20% — reported both
  as the whole process and as growth over the warmed, idle process;
* every span the hop acknowledged reaches the downstream receiver (span ids counted there);
* the hop answers ``RESOURCE_EXHAUSTED`` with RetryInfo (back-pressure) before any run is released
  unannotated with reason ``overflow`` (verdicts shed) — best, none is.

The hop is the real subprocess (``tests/test_service_support.HopProcess``), downstream is a real
OTLP/gRPC receiver (``tests/test_service_support.Sink``, counting span ids instead of keeping
requests), the workload is ``bench_hop``'s agent runs (run span, 4 model calls with footprint events,
2 tools, 3 plain spans; 10 runs a request), each request with its own trace, span and run ids. The
clients pace requests to the offered rate and, like an OTLP exporter, retry a refused request after
the RetryInfo delay it carries. The sustainable rate is measured first on the same hop (clients
sending as fast as the hop accepts, spans/s arriving downstream), unless ``--rate`` gives it.
Usage::

    .venv/bin/python benchmarks/bench_overload.py [--duration 60] [--rate SPANS_PER_S] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The test helpers import their shared server helpers (tests/servers.py) as a top-level module,
# as pytest's rootdir-relative import does for them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_hop import SPANS_PER_TRACE, TRACE_EXPORT, TRACES_PER_REQUEST, build_requests

from otel_footprint import semconv
from otel_footprint.service.config import parse_size
from tests.test_service_support import HopProcess, Samples, Sink

SPANS_PER_REQUEST = SPANS_PER_TRACE * TRACES_PER_REQUEST
SPAN_ID_STRIDE = 100
"""``bench_hop``'s span ids: span ``k`` of trace ``n`` is ``n * 100 + k + 1``."""
RSS_EVERY = 0.5
METRICS_EVERY = 1.0


# ---------------------------------------------------------------------------------------------
# Workload: bench_hop's request, renumbered (cheap enough to make on the fly at the offered rate)
# ---------------------------------------------------------------------------------------------


class Requests:
    """Request ``i`` holds traces ``10 i .. 10 i + 9`` of ``bench_hop``'s workload, ids and run ids
    renumbered from one template (building each from scratch would cost the load generator more
    CPU than the machine can spare)."""

    def __init__(self) -> None:
        (self._template,) = build_requests(SPANS_PER_REQUEST, 0)

    def make(self, index: int) -> bytes:
        first = index * TRACES_PER_REQUEST
        req = ExportTraceServiceRequest.FromString(self._template)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    trace = int.from_bytes(span.trace_id, "big") - 1 + first
                    span.trace_id = (trace + 1).to_bytes(16, "big")
                    shift = first * SPAN_ID_STRIDE
                    span.span_id = (int.from_bytes(span.span_id, "big") + shift).to_bytes(8, "big")
                    if span.parent_span_id:
                        parent = int.from_bytes(span.parent_span_id, "big") + shift
                        span.parent_span_id = parent.to_bytes(8, "big")
                    for kv in span.attributes:
                        if kv.key == semconv.RUN_ID:
                            kv.value.string_value = f"bench-{trace}"
        return req.SerializeToString()

    @staticmethod
    def span_ids(index: int) -> list[int]:
        first = index * TRACES_PER_REQUEST
        return [
            n * SPAN_ID_STRIDE + k + 1
            for n in range(first, first + TRACES_PER_REQUEST)
            for k in range(SPANS_PER_TRACE)
        ]


# ---------------------------------------------------------------------------------------------
# Downstream: the tests' real OTLP/gRPC sink, counting span ids instead of keeping requests
# ---------------------------------------------------------------------------------------------


class IdSink(Sink):
    """Counts deliveries per span id (a byte per id: a million spans cost a megabyte)."""

    def __init__(self, max_requests: int) -> None:
        super().__init__()
        self.seen = bytearray((max_requests + 1) * TRACES_PER_REQUEST * SPAN_ID_STRIDE + 1)
        self.received = 0

    def add_traces(self, request: Any) -> None:
        seen = self.seen
        with self.changed:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        i = int.from_bytes(span.span_id, "big")
                        if i < len(seen) and seen[i] < 255:
                            seen[i] += 1
                    self.received += len(ss.spans)
            self.changed.notify_all()


# ---------------------------------------------------------------------------------------------
# Clients that honour RESOURCE_EXHAUSTED + RetryInfo
# ---------------------------------------------------------------------------------------------


def retry_delay(err: grpc.RpcError) -> float | None:
    """The RetryInfo delay of a refusal (None: it carries none)."""
    for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "google.rpc.retryinfo-bin":
            delay = error_details_pb2.RetryInfo.FromString(value).retry_delay
            return float(delay.seconds + delay.nanos / 1e9)
    return None


@dataclass
class Tally:
    """What the clients saw (under one lock)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: list[int] = field(default_factory=list)
    """Indices of the requests the hop acknowledged."""
    exhausted: int = 0
    exhausted_with_retry_info: int = 0
    retry_delays: Counter[float] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    first_refusal: float | None = None


def drive(
    target: str,
    requests: Requests,
    first_index: int,
    clients: int,
    seconds: float,
    rate: float | None,
    tally: Tally,
) -> int:
    """Send requests ``first_index, ...`` for ``seconds`` from ``clients`` threads, paced to
    ``rate`` spans/s (None: as fast as the hop accepts). A refused request is retried after its
    RetryInfo delay (0.2 s without one); one still unacknowledged at the end is abandoned (not
    counted). Returns the next unused index."""
    lock = threading.Lock()
    state = {"next": first_index}
    started = time.monotonic()
    deadline = started + seconds
    per_request = None if rate is None else SPANS_PER_REQUEST / rate

    def worker() -> None:
        channel = grpc.insecure_channel(target)
        export = channel.unary_unary(TRACE_EXPORT, request_serializer=None)
        try:
            while True:
                with lock:
                    index = state["next"]
                    state["next"] += 1
                if per_request is not None:
                    wait = started + (index - first_index) * per_request - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                if time.monotonic() >= deadline:
                    return
                body = requests.make(index)
                while time.monotonic() < deadline:
                    try:
                        export(body, timeout=30)
                    except grpc.RpcError as err:
                        delay = _refused(err, tally)
                        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                        continue
                    with tally.lock:
                        tally.acked.append(index)
                    break
        finally:
            channel.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state["next"]


def _refused(err: grpc.RpcError, tally: Tally) -> float:
    code = err.code()  # type: ignore[attr-defined]
    delay = retry_delay(err) if code == grpc.StatusCode.RESOURCE_EXHAUSTED else None
    with tally.lock:
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            tally.exhausted += 1
            if tally.first_refusal is None:
                tally.first_refusal = time.monotonic()
            if delay is not None:
                tally.exhausted_with_retry_info += 1
                tally.retry_delays[delay] += 1
        else:
            tally.errors[code.name] += 1
    return 0.2 if delay is None else delay


# ---------------------------------------------------------------------------------------------
# Sampling the hop: RSS every 0.5 s, its metrics every second
# ---------------------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Sampler:
    def __init__(self, hop: HopProcess) -> None:
        self.hop = hop
        self.rss: list[tuple[float, int]] = []
        self.metrics: list[tuple[float, Samples]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        assert self.hop.proc is not None
        last_metrics = 0.0
        while not self._stop.wait(RSS_EVERY):
            now = time.monotonic()
            self.rss.append((now, rss_bytes(self.hop.proc.pid)))
            if now - last_metrics >= METRICS_EVERY - 0.01:
                last_metrics = now
                self.metrics.append((now, self.hop.metrics()))

    def peak_rss(self, since: float) -> int:
        return max((r for t, r in self.rss if t >= since), default=0)

    def peak(self, name: str, since: float) -> float:
        return max((m.get(name, 0.0) for t, m in self.metrics if t >= since), default=0.0)

    def first_time(self, names: list[str], since: float) -> float | None:
        """When one of the counters ``names`` first grew past its value at ``since``."""
        before = [m for t, m in self.metrics if t < since]
        base = sum(before[-1].get(n, 0.0) for n in names) if before else 0.0
        for t, m in self.metrics:
            if t >= since and sum(m.get(n, 0.0) for n in names) > base:
                return t
        return None


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------

OVERFLOW = [
    f'otel_footprint_runs_released_overflow_total{{limit="{x}"}}'
    for x in ("runs", "bytes", "spans", "events")
]


def _released(m: Samples) -> dict[str, float]:
    out = {}
    for key, value in m.items():
        if key.startswith("otel_footprint_runs_released_total{"):
            out[key.split('"')[1]] = value
        if key.startswith("otel_footprint_runs_released_overflow_total{"):
            out["overflow:" + key.split('"')[1]] = value
    return out


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def run(
    *,
    duration: float = 60.0,
    rate: float | None = None,
    calibrate: float = 20.0,
    clients: int = 16,
    max_bytes: str = "256MiB",
    max_runs: int | None = None,
    memory_limit: str | None = None,
    release_grace: str = "1s",
    drain_timeout: float = 180.0,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Calibrate (unless ``rate``), then 2x that rate for ``duration`` s; the figures as a dict."""
    # The bound the process is held to: processing.memory_limit, which is max_bytes unless set.
    limit = parse_size(memory_limit or max_bytes, "memory_limit")
    sets = [f"processing.max_bytes={max_bytes}", f"processing.release_grace={release_grace}"]
    if memory_limit is not None:
        sets.append(f"processing.memory_limit={memory_limit}")
    if max_runs is not None:
        sets.append(f"processing.max_runs={max_runs}")
    sets += extra
    # Enough ids for the run whatever the rate: a request per 100 spans at up to 100k spans/s.
    budget = int((duration + calibrate + 10) * 1000) + 1000
    sink = IdSink(budget).start()
    requests = Requests()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp:
        args = [a for s in sets for a in ("--set", s)]
        hop = HopProcess(Path(tmp) / "data", sink.endpoint, *args).start()
        try:
            assert hop.proc is not None
            with Sampler(hop) as sampler:
                # Warm up (imports, the engine's caches): a few runs decided before the idle RSS.
                warm = Tally()
                index = drive(hop.grpc, requests, 0, 2, 3.0, 2000.0, warm)
                _wait_delivered(sink, warm.acked, 60.0)
                time.sleep(1.0)
                idle_rss = rss_bytes(hop.proc.pid)
                calibration: dict[str, Any] = {}
                if rate is None:
                    cal = Tally()
                    # Sustainable: what arrives downstream over the window's second half (the
                    # first fills the buffer; the hop pushes back on the rest); then drain so the
                    # overload starts from an idle hop.
                    mark: list[tuple[float, int]] = []
                    timer = threading.Timer(
                        calibrate / 2, lambda: mark.append((time.monotonic(), sink.received))
                    )
                    timer.start()
                    index = drive(hop.grpc, requests, index, clients, calibrate, None, cal)
                    timer.join()
                    rate = (sink.received - mark[0][1]) / (time.monotonic() - mark[0][0])
                    _wait_delivered(sink, cal.acked, drain_timeout)
                    calibration = {
                        "seconds": calibrate,
                        "spans_per_second": round(rate, 1),
                        "acknowledged_spans": len(cal.acked) * SPANS_PER_REQUEST,
                        "resource_exhausted": cal.exhausted,
                    }
                    time.sleep(2.0)
                offered = 2 * rate
                before = hop.metrics()
                released_before = _released(before)
                released_before_refusals = before.get(
                    "otel_footprint_memory_limit_refusals_total", 0.0
                )
                tally = Tally()
                t0 = time.monotonic()
                drive(hop.grpc, requests, index, clients, duration, offered, tally)
                sent_seconds = time.monotonic() - t0
                drained = _wait_delivered(sink, tally.acked, drain_timeout)
                drain_seconds = time.monotonic() - t0 - sent_seconds
                final = hop.metrics()
                peak_rss = sampler.peak_rss(t0)
                start_rss = max((r for t, r in sampler.rss if t < t0), default=0)
                peak_at = next((t for t, r in sampler.rss if t >= t0 and r == peak_rss), t0)
                first_overflow = sampler.first_time(OVERFLOW, t0)
                peak_bytes_held = sampler.peak("otel_footprint_bytes_held", t0)
                peak_memory_bytes = sampler.peak("otel_footprint_memory_bytes", t0)
                peak_runs_held = sampler.peak("otel_footprint_runs_held", t0)
                peak_cache_bytes = sampler.peak("otel_footprint_decision_cache_bytes", t0)
                peak_cache_traces = sampler.peak("otel_footprint_decision_cache_traces", t0)
                memory_refusals = (
                    final.get("otel_footprint_memory_limit_refusals_total", 0.0)
                    - released_before_refusals
                )
                rss_samples = len([1 for t, _ in sampler.rss if t >= t0])
        finally:
            code = hop.terminate(60.0)
            sink.stop()
    acked_ids = [i for r in tally.acked for i in Requests.span_ids(r)]
    lost = [i for i in acked_ids if not sink.seen[i]]
    twice = sum(1 for i in acked_ids if sink.seen[i] > 1)
    released = _delta(_released(final), released_before)
    first_refusal = tally.first_refusal
    shed = sum(v for k, v in released.items() if k.startswith("overflow:"))
    return {
        "config": {
            "max_bytes": parse_size(max_bytes, "max_bytes"),
            "memory_limit": limit,
            "max_runs": max_runs,
            "release_grace": release_grace,
            "clients": clients,
            "extra": list(extra),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "calibration": calibration,
        "sustainable_spans_per_second": round(rate, 1),
        "offered_spans_per_second": round(offered, 1),
        "seconds": round(sent_seconds, 1),
        "acknowledged_spans": len(acked_ids),
        "acknowledged_spans_per_second": round(len(acked_ids) / sent_seconds, 1),
        "delivered_acknowledged": len(acked_ids) - len(lost),
        "lost": len(lost),
        "delivered_twice": twice,
        "drained": drained,
        "drain_seconds": round(drain_seconds, 1),
        "resource_exhausted": tally.exhausted,
        "resource_exhausted_with_retry_info": tally.exhausted_with_retry_info,
        "retry_delays_seconds": {str(k): v for k, v in sorted(tally.retry_delays.items())},
        "other_errors": dict(tally.errors),
        "runs_released": released,
        "runs_annotated": released.get("ended", 0.0),
        "runs_overflow": shed,
        "first_refusal_after_s": None if first_refusal is None else round(first_refusal - t0, 2),
        "first_overflow_after_s": None if first_overflow is None else round(first_overflow - t0, 2),
        "backpressure_before_shedding": first_refusal is not None
        and (first_overflow is None or first_refusal <= first_overflow),
        "rss": {
            "samples": rss_samples,
            "idle_bytes": idle_rss,
            "peak_bytes": peak_rss,
            "peak_after_s": round(peak_at - t0, 1),
            "peak_before_overload_bytes": start_rss,
            "limit_bytes": limit,
            "peak_over_limit": round(peak_rss / limit, 3),
            "peak_growth_bytes": peak_rss - idle_rss,
            "growth_over_limit": round((peak_rss - idle_rss) / limit, 3),
            "peak_bytes_held": peak_bytes_held,
            "peak_memory_bytes": peak_memory_bytes,
            "peak_runs_held": peak_runs_held,
            "peak_decision_cache_bytes": peak_cache_bytes,
            "peak_decision_cache_traces": peak_cache_traces,
            "memory_limit_refusals": memory_refusals,
        },
        "hop_exit_code": code,
    }


def _wait_delivered(sink: IdSink, acked: list[int], timeout: float) -> bool:
    """Wait until every span of the ``acked`` requests arrived downstream."""
    seen = sink.seen
    missing = [i for r in acked for i in Requests.span_ids(r)]
    deadline = time.monotonic() + timeout
    while True:
        missing = [i for i in missing if not seen[i]]
        if not missing:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of 2x overload")
    parser.add_argument(
        "--rate", type=float, default=None, help="the sustainable spans/s (default: measured)"
    )
    parser.add_argument("--calibrate", type=float, default=20.0, help="seconds measuring the rate")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--max-bytes", default="256MiB", help="processing.max_bytes")
    parser.add_argument("--max-runs", type=int, default=None, help="processing.max_runs")
    parser.add_argument(
        "--memory-limit", default=None, help="processing.memory_limit (default: max_bytes)"
    )
    parser.add_argument("--set", action="append", default=[], help="more hop settings")
    parser.add_argument("--json", action="store_true", help="(the output is always JSON)")
    args = parser.parse_args()
    result = run(
        duration=args.duration,
        rate=args.rate,
        calibrate=args.calibrate,
        clients=args.clients,
        max_bytes=args.max_bytes,
        max_runs=args.max_runs,
        memory_limit=args.memory_limit,
        extra=tuple(args.set),
    )
    print(json.dumps(result, indent=2))
    ok = (
        result["lost"] == 0
        and result["drained"]
        and result["backpressure_before_shedding"]
        and result["rss"]["peak_over_limit"] <= 1.2
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
