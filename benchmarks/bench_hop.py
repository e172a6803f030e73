"""Throughput of ``otel-footprint serve`` with and without annotation, and memory per buffered span.

One run measures, against the same workload and the same downstream receiver:

1. spans/s end to end (first request sent -> last span received downstream) through the hop with
   ``processing.annotate: true`` (group, decide, annotate, forward);
2. the same with ``processing.annotate: false`` (journal + forward only: the baseline);
3. resident memory per buffered span (spans held because their runs have not ended).

The hop runs as a subprocess (``python -m otel_footprint.commands.cli serve``); the load generator sends
pre-serialized OTLP/gRPC requests of synthetic agent runs from a few threads, and an in-process
OTLP/gRPC receiver counts what arrives. Usage::

    .venv/bin/python benchmarks/bench_hop.py [--spans 60000] [--held-spans 50000] [--json]

``--run-page SECONDS`` measures instead what the live run page costs: annotating runs with the page
open (a reader fetching ``/runs`` and the newest run's view every SECONDS) against runs with the
page off (``service.telemetry.run_page.enabled=false``), alternating, as a ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

import otel_footprint
from otel_footprint import semconv
from otel_footprint.annotate.otlp import to_any_value
from otel_footprint.codec import encode_payload

# The hop runs the otel_footprint this interpreter imports (``-m`` puts the cwd first on the path):
# one copy of this script can then measure two checkouts side by side, each with its own venv.
REPO = Path(otel_footprint.__file__).resolve().parents[1]
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
SPANS_PER_TRACE = 10
TRACES_PER_REQUEST = 10


# ---------------------------------------------------------------------------------------------
# Workload: agent runs in the input schema (run span, 4 model calls with events, 2 tools, 3 plain)
# ---------------------------------------------------------------------------------------------


def _attr(span: Span, key: str, value: Any) -> None:
    kv = span.attributes.add(key=key)
    to_any_value(value, kv.value)


def _event(span: Span, name: str, payload: dict[str, Any], t: int) -> None:
    ev = span.events.add(name=name, time_unix_nano=t)
    for key, value in encode_payload(payload).items():
        to_any_value(value, ev.attributes.add(key=key).value)


def _content(chat: Span, i: int, n: int) -> None:
    """What an instrumentation with content capture records on model call ``i`` of 4: the
    question and the earlier tool results in, a tool call (or, last, the answer) out."""
    inputs: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"type": "text", "content": "why was order ORD-42 late?"}]}
    ]
    for j in range(1, i):
        call = {"type": "tool_call", "id": f"call-{n}-{j}", "name": "lookup"}
        call["arguments"] = {"order_id": "ORD-42"}
        inputs.append({"role": "assistant", "parts": [call]})
        response = {"type": "tool_call_response", "id": f"call-{n}-{j}"}
        response["response"] = '[{"order_id": "ORD-42", "status": "delayed"}]'
        inputs.append({"role": "tool", "parts": [response]})
    if i < 4:
        out = {"type": "tool_call", "id": f"call-{n}-{i}", "name": "lookup"}
        out["arguments"] = {"order_id": "ORD-42"}
    else:
        out = {"type": "text", "content": "ORD-42 was delayed at the depot."}
    _attr(chat, semconv.GEN_AI_INPUT_MESSAGES, json.dumps(inputs))
    _attr(chat, semconv.GEN_AI_OUTPUT_MESSAGES, json.dumps([{"role": "assistant", "parts": [out]}]))
    _attr(chat, semconv.GEN_AI_RESPONSE_FINISH_REASONS, ["tool_calls" if i < 4 else "stop"])
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    _attr(chat, semconv.GEN_AI_TOOL_DEFINITIONS, json.dumps(tools))


def _trace(
    n: int, with_run_span: bool = True, *, recorder: bool = True, content: bool = False
) -> list[Span]:
    """One agent run. ``recorder=False``: the same run with its instrumentation only (no
    ``footprint.*`` event, no run id, no pass numbers: an observed run); ``content``: the model
    calls carry their messages and offered tools (content capture on)."""
    trace_id = (n + 1).to_bytes(16, "big")
    base = 1_700_000_000_000_000_000 + n * 1_000_000

    def new(k: int, parent: bytes, name: str, start: int, end: int) -> Span:
        return Span(
            trace_id=trace_id,
            span_id=(n * 100 + k + 1).to_bytes(8, "big"),
            parent_span_id=parent,
            name=name,
            start_time_unix_nano=base + start,
            end_time_unix_nano=base + end,
            kind=Span.SPAN_KIND_INTERNAL,
        )

    run_id = (n * 100 + 1).to_bytes(8, "big")
    spans: list[Span] = []
    for i in range(1, 5):
        chat = new(i, run_id, "chat mock-model", i * 1000, i * 1000 + 500)
        _attr(chat, semconv.GEN_AI_OPERATION_NAME, "chat")
        _attr(chat, semconv.GEN_AI_REQUEST_MODEL, "mock-model")
        _attr(chat, semconv.GEN_AI_USAGE_INPUT_TOKENS, 1200)
        if content:
            _content(chat, i, n)
        spans.append(chat)
        if not recorder:
            continue
        _attr(chat, semconv.PASS_ITERATION, i)
        _event(
            chat,
            semconv.EV_CONTEXT_EVALUATED,
            {
                "iteration": i,
                "activeIds": ["billing"],
                "cursorMove": {"to": "billing", "by": "lexical"},
            },
            base + i * 1000,
        )
        _event(
            chat,
            semconv.EV_CONTEXT_INJECTED,
            {
                "slot": "system",
                "source": "skill",
                "sourceId": "billing",
                "contentHash": "h",
                "chars": 400,
            },
            base + i * 1000,
        )
    for j, k in enumerate((5, 6)):
        tool = new(k, run_id, "execute_tool lookup", 1600 + j * 1000, 1700 + j * 1000)
        _attr(tool, semconv.GEN_AI_OPERATION_NAME, "execute_tool")
        _attr(tool, semconv.GEN_AI_TOOL_NAME, "lookup")
        _attr(tool, semconv.GEN_AI_TOOL_CALL_ID, f"call-{n}-{j}")
        if recorder:
            _attr(tool, semconv.PASS_ITERATION, j + 1)
        spans.append(tool)
        for m in range(2 if j == 0 else 1):
            http = new(
                7 + j * 2 + m, tool.span_id, "GET /api/orders", 1610 + j * 1000, 1690 + j * 1000
            )
            _attr(http, "http.request.method", "GET")
            _attr(http, "url.full", "http://orders.internal/api/orders/42")
            _attr(http, "http.response.status_code", 200)
            spans.append(http)
    if with_run_span:
        run = new(0, b"", "invoke_agent ops-assistant", 0, 6000)
        _attr(run, semconv.GEN_AI_OPERATION_NAME, "invoke_agent")
        _attr(run, semconv.GEN_AI_AGENT_NAME, "ops-assistant")
        spans.append(run)  # ends last, exported last (as a BatchSpanProcessor would)
        if not recorder:
            return spans
        _attr(run, semconv.RUN_ID, f"bench-{n}")
        _event(
            run,
            semconv.EV_MAPS_MOUNTED,
            {
                "maps": [
                    {
                        "id": "skills",
                        "memberIds": ["billing", "shipping"],
                        "toolNames": ["read_skill"],
                    }
                ],
                "renewalGrace": 2,
                "enforced": False,
            },
            base,
        )
    return spans


def build_requests(
    total_spans: int,
    offset: int,
    with_run_span: bool = True,
    *,
    recorder: bool = True,
    content: bool = False,
) -> list[bytes]:
    traces = total_spans // SPANS_PER_TRACE
    out: list[bytes] = []
    for first in range(0, traces, TRACES_PER_REQUEST):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        _attr(rs.resource, "service.name", "bench-agent")  # type: ignore[arg-type]
        ss = rs.scope_spans.add()
        ss.scope.name = "bench"
        for n in range(first, min(first + TRACES_PER_REQUEST, traces)):
            ss.spans.extend(_trace(offset + n, with_run_span, recorder=recorder, content=content))
        out.append(req.SerializeToString())
    return out


# ---------------------------------------------------------------------------------------------
# Downstream receiver (counts spans) and the hop subprocess
# ---------------------------------------------------------------------------------------------


class CountingSink:
    def __init__(self) -> None:
        self.count = 0
        self.cv = threading.Condition()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(self._export)},
        )
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _export(self, data: bytes, context: Any) -> bytes:
        req = ExportTraceServiceRequest.FromString(data)
        n = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
        with self.cv:
            self.count += n
            self.cv.notify_all()
        return b""

    def wait_for(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cv:
            while self.count < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)
        return True


class Hop:
    """``otel-footprint serve`` as a subprocess; ``tree``: the checkout whose ``otel_footprint`` it
    runs (put first on its path: ``benchmarks/compare.py`` starts another commit's hop this way)."""

    def __init__(self, data_dir: Path, forward: str, *sets: str, tree: Path = REPO) -> None:
        # Older trees had the command line at otel_footprint/cli.py.
        commands = tree / "otel_footprint" / "commands" / "cli.py"
        argv = [
            sys.executable,
            "-m",
            "otel_footprint.commands.cli" if commands.exists() else "otel_footprint.cli",
            "serve",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--telemetry",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            "--forward",
            forward,
            "--set",
            "receivers.otlp.protocols.grpc.max_concurrent_requests=64",
            "--set",
            "receivers.otlp.grpc_workers=8",
        ]
        for item in sets:
            argv += ["--set", item]
        self.stderr = (data_dir.parent / f"{data_dir.name}.log").open("w")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(tree), env.get("PYTHONPATH"))))
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True, cwd=tree, env=env
        )
        self.addresses: dict[str, str] = {}
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if parts == ["ready"]:
                break
            if len(parts) == 2:
                self.addresses[parts[0]] = parts[1]
        else:
            raise RuntimeError("hop did not start; see " + self.stderr.name)

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(
            f"http://{self.addresses['telemetry']}/metrics", timeout=5
        ) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.stderr.close()


def send_all(target: str, requests: list[bytes], threads: int) -> None:
    channel = grpc.insecure_channel(target)
    export = channel.unary_unary(TRACE_EXPORT, request_serializer=None, response_deserializer=None)
    work: queue.Queue[bytes] = queue.Queue()
    for r in requests:
        work.put(r)

    def worker() -> None:
        while True:
            try:
                data = work.get_nowait()
            except queue.Empty:
                return
            while True:
                try:
                    export(data, timeout=30)
                    break
                except grpc.RpcError as err:
                    if err.code() not in (
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        grpc.StatusCode.UNAVAILABLE,
                    ):
                        raise
                    time.sleep(0.05)  # the hop asked to retry

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    channel.close()


def throughput(
    tmp: Path,
    annotate: bool,
    spans: int,
    threads: int,
    warmup: list[bytes],
    requests: list[bytes],
    sets: tuple[str, ...] = (),
    page_every: float | None = None,
) -> dict[str, float]:
    sink = CountingSink()
    hop = Hop(
        tmp / ("annotate" if annotate else "baseline"),
        f"127.0.0.1:{sink.port}",
        f"processing.annotate={'true' if annotate else 'false'}",
        "processing.release_grace=100ms",
        *sets,
    )
    try:
        warm_spans = len(warmup) * TRACES_PER_REQUEST * SPANS_PER_TRACE
        send_all(hop.addresses["grpc"], warmup, threads)
        if not sink.wait_for(warm_spans, 60):
            raise RuntimeError("warm-up spans did not arrive")
        reader = _PageReader(hop.addresses["telemetry"], page_every) if page_every else None
        cpu0 = _cpu_seconds(hop.proc.pid)
        threads0 = _thread_cpu_seconds(hop.proc.pid)
        started = time.perf_counter()
        send_all(hop.addresses["grpc"], requests, threads)
        sent = time.perf_counter()
        if not sink.wait_for(warm_spans + spans, 300):
            raise RuntimeError(f"only {sink.count - warm_spans} of {spans} spans arrived")
        done = time.perf_counter()
        pages = reader.stop() if reader is not None else (0, 0)
        cpu = _cpu_seconds(hop.proc.pid) - cpu0
        by_thread = _thread_cpu_seconds(hop.proc.pid)
        busiest = max(
            (used - threads0.get(tid, 0.0) for tid, used in by_thread.items()), default=0.0
        )
        annotated = hop.metric("otel_footprint_spans_annotated_total")
        latency_sum = hop.metric("otel_footprint_decision_latency_seconds_sum")
        latency_count = hop.metric("otel_footprint_decision_latency_seconds_count")
    finally:
        hop.stop()
        sink.server.stop(0)
    elapsed = done - started
    return {
        "spans": spans,
        "seconds": round(elapsed, 3),
        "ingest_seconds": round(sent - started, 3),
        "spans_per_second": round(spans / elapsed, 1),
        "hop_cpu_seconds": round(cpu, 3),
        "spans_per_hop_cpu_second": round(spans / cpu, 1) if cpu > 0 else 0.0,
        # The share of that CPU one thread used (annotating: the release worker, which decides):
        # what caps a hop however many cores it has.
        "busiest_thread_cpu_share": round(busiest / cpu, 3) if cpu > 0 else 0.0,
        "spans_annotated": annotated,
        "mean_decision_ms": round(1000 * latency_sum / latency_count, 3) if latency_count else 0.0,
        "pages_read": pages[0],
        "page_bytes_read": pages[1],
    }


class _PageReader:
    """A person with the run page open: ``/runs`` and the newest run's view every ``every`` s."""

    def __init__(self, telemetry: str, every: float) -> None:
        self.base = f"http://{telemetry}/runs"
        self.every = every
        self.pages = 0
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _get(self, url: str) -> str:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = resp.read()
        self.pages += 1
        self.bytes += len(body)
        return body.decode()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            listing = self._get(self.base)
            start = listing.find("class='open' href='")
            if start >= 0:
                href = listing[start + len("class='open' href='") :].split("'", 1)[0]
                self._get(self.base.rsplit("/", 1)[0] + "/" + href)

    def stop(self) -> tuple[int, int]:
        self._stop.set()
        self._thread.join(timeout=15)
        return self.pages, self.bytes


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each of the process's threads, by thread id."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[task.name] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def memory_per_held_span(tmp: Path, held_spans: int, threads: int) -> dict[str, float]:
    sink = CountingSink()
    hop = Hop(
        tmp / "memory",
        f"127.0.0.1:{sink.port}",
        "processing.release_grace=10m",
        "processing.max_wait=10m",
        "processing.max_bytes=4GiB",
    )
    try:
        # Runs whose run span has not arrived: every span stays held.
        warm = build_requests(2000, 10_000_000, with_run_span=False)
        send_all(hop.addresses["grpc"], warm, threads)
        time.sleep(1.0)
        before_rss, before_held = hop.rss_bytes(), hop.metric("otel_footprint_spans_held")
        requests = build_requests(held_spans, 20_000_000, with_run_span=False)
        wire = sum(len(r) for r in requests)
        send_all(hop.addresses["grpc"], requests, threads)
        time.sleep(1.0)
        after_rss, after_held = hop.rss_bytes(), hop.metric("otel_footprint_spans_held")
    finally:
        hop.stop()
        sink.server.stop(0)
    held = after_held - before_held
    return {
        "held_spans": held,
        "rss_delta_bytes": after_rss - before_rss,
        "bytes_per_held_span": round((after_rss - before_rss) / held, 1) if held else 0.0,
        "wire_bytes_per_span": round(
            wire / max(1, held_spans // SPANS_PER_TRACE * (SPANS_PER_TRACE - 1)), 1
        ),
    }


# ---------------------------------------------------------------------------------------------
# The OTLP/HTTP receiver: throughput, and service under slow / idle connections
# ---------------------------------------------------------------------------------------------


def send_all_http(address: str, requests: list[bytes], threads: int) -> list[float]:
    """POST every request over keep-alive connections; returns each request's latency (s)."""
    import http.client

    host, port = address.rsplit(":", 1)
    work: queue.Queue[bytes] = queue.Queue()
    for r in requests:
        work.put(r)
    latencies: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        mine: list[float] = []
        while True:
            try:
                data = work.get_nowait()
            except queue.Empty:
                break
            while True:
                started = time.perf_counter()
                try:
                    conn.request(
                        "POST",
                        "/v1/traces",
                        body=data,
                        headers={"Content-Type": "application/x-protobuf"},
                    )
                    resp = conn.getresponse()
                    resp.read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=30)
                    continue
                if resp.status == 200:
                    mine.append(time.perf_counter() - started)
                    break
                if resp.status not in (429, 503):
                    raise RuntimeError(f"HTTP {resp.status}")
                time.sleep(0.05)
        conn.close()
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return latencies


def http_throughput(
    tmp: Path, spans: int, threads: int, warmup: list[bytes], requests: list[bytes]
) -> dict[str, float]:
    """Spans/s through the OTLP/HTTP receiver (annotation off: the receiver, journal, forward)."""
    sink = CountingSink()
    hop = Hop(tmp / "http", f"127.0.0.1:{sink.port}", "processing.annotate=false")
    try:
        warm_spans = len(warmup) * TRACES_PER_REQUEST * SPANS_PER_TRACE
        send_all_http(hop.addresses["http"], warmup, threads)
        if not sink.wait_for(warm_spans, 60):
            raise RuntimeError("warm-up spans did not arrive")
        cpu0 = _cpu_seconds(hop.proc.pid)
        started = time.perf_counter()
        latencies = sorted(send_all_http(hop.addresses["http"], requests, threads))
        sent = time.perf_counter()
        if not sink.wait_for(warm_spans + spans, 300):
            raise RuntimeError(f"only {sink.count - warm_spans} of {spans} spans arrived")
        cpu = _cpu_seconds(hop.proc.pid) - cpu0
    finally:
        hop.stop()
        sink.server.stop(0)
    elapsed = sent - started
    return {
        "requests": len(requests),
        "requests_per_second": round(len(requests) / elapsed, 1),
        "spans_per_second": round(spans / elapsed, 1),
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
        "hop_cpu_seconds": round(cpu, 3),
    }


def http_under_slow_connections(tmp: Path, connections: int, seconds: float) -> dict[str, float]:
    """A legitimate client's success rate while ``connections`` slow or idle connections are open.

    Half the attackers connect and send nothing; half send the request's headers one byte per
    second (slowloris). The legitimate client opens a fresh connection per request, one request
    every 0.1 s, each with a 5 s timeout.
    """
    import http.client
    import socket

    sink = CountingSink()
    hop = Hop(tmp / "slow", f"127.0.0.1:{sink.port}", "processing.annotate=false")
    host, port = hop.addresses["http"].rsplit(":", 1)
    stop = threading.Event()
    attackers: list[socket.socket] = []
    opened = 0

    def slowloris() -> None:
        nonlocal opened
        for _ in range(connections):
            try:
                sock = socket.create_connection((host, int(port)), timeout=5)
            except OSError:
                continue
            attackers.append(sock)
            opened += 1
        header = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nX-Pad: "
        at = 0
        while not stop.wait(1.0):
            for i, sock in enumerate(list(attackers)):
                if i % 2:
                    continue  # the idle half sends nothing at all
                try:
                    sock.send(header[at % len(header) : at % len(header) + 1] or b"a")
                except OSError:
                    # Closed by the server: reconnect, as an attacker would.
                    attackers.remove(sock)
                    with contextlib.suppress(OSError):
                        attackers.append(socket.create_connection((host, int(port)), timeout=5))
            at += 1

    (body,) = build_requests(SPANS_PER_TRACE, 50_000_000)
    thread = threading.Thread(target=slowloris, daemon=True)
    ok = failed = 0
    try:
        thread.start()
        time.sleep(2.0)  # the connections are open
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=5)
                conn.request(
                    "POST",
                    "/v1/traces",
                    body=body,
                    headers={"Content-Type": "application/x-protobuf"},
                )
                status = conn.getresponse().status
                conn.close()
                ok += status == 200
                failed += status != 200
            except (OSError, http.client.HTTPException):
                failed += 1
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=10)
        for sock in attackers:
            sock.close()
        hop.stop()
        sink.server.stop(0)
    return {
        "slow_connections": opened,
        "seconds": seconds,
        "legitimate_ok": ok,
        "legitimate_failed": failed,
        "success_ratio": round(ok / max(1, ok + failed), 4),
    }


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    ordered = sorted(runs, key=lambda r: r["spans_per_second"])
    return ordered[len(ordered) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=60_000, help="spans per throughput run")
    parser.add_argument(
        "--held-spans",
        type=int,
        default=50_000,
        help="spans held for the memory run (0: skip it)",
    )
    parser.add_argument("--threads", type=int, default=4, help="client threads")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="throughput runs per mode, alternating modes; the median run is reported (noisy VMs)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--http",
        action="store_true",
        help="measure only the OTLP/HTTP receiver: throughput, and a legitimate client's success "
        "under --slow-connections slow/idle connections for --slow-seconds",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a hop setting for the throughput runs (repeatable), e.g. processing.account_lines=false",
    )
    parser.add_argument(
        "--run-page",
        type=float,
        default=None,
        metavar="SECONDS",
        help="measure the run page's cost instead: annotating with the page open and read every "
        "SECONDS against the page off",
    )
    parser.add_argument(
        "--zero-code",
        action="store_true",
        help="compare, both annotating, a stream of zero-code runs (instrumentation only, content "
        "capture on: observed runs) with the same stream written with the recorder",
    )
    parser.add_argument("--slow-connections", type=int, default=500)
    parser.add_argument("--slow-seconds", type=float, default=30.0)
    args = parser.parse_args()
    if args.http:
        return http_main(args)
    if args.zero_code:
        return zero_code_main(args)
    spans = (
        args.spans // (SPANS_PER_TRACE * TRACES_PER_REQUEST) * SPANS_PER_TRACE * TRACES_PER_REQUEST
    )
    warmup = build_requests(3000, 0)
    requests = build_requests(spans, 1_000_000)
    if args.run_page is not None:
        return run_page_main(args, spans, warmup, requests)
    with tempfile.TemporaryDirectory(prefix="bench-hop-") as d:
        tmp = Path(d)
        runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for i in range(max(1, args.repeat)):
            (tmp / str(i)).mkdir()
            for annotate in (True, False):
                runs[annotate].append(
                    throughput(
                        tmp / str(i),
                        annotate,
                        spans,
                        args.threads,
                        warmup,
                        requests,
                        tuple(args.set),
                    )
                )
        annotated, baseline = _median(runs[True]), _median(runs[False])
        memory = (
            memory_per_held_span(tmp, args.held_spans, args.threads)
            if args.held_spans > 0
            else {
                "held_spans": 0,
                "rss_delta_bytes": 0,
                "bytes_per_held_span": 0.0,
                "wire_bytes_per_span": 0.0,
            }
        )
    result: dict[str, Any] = {
        "workload": f"{SPANS_PER_TRACE} spans/trace (run, 4 model calls with 2 footprint events, 2 tools, "
        f"3 plain), {TRACES_PER_REQUEST} traces/request, {args.threads} client threads, fsync on",
        "annotating": annotated,
        "annotation_off": baseline,
        "ratio_annotating_to_off": round(
            annotated["spans_per_second"] / baseline["spans_per_second"], 3
        ),
        "memory": memory,
        # the build the hop subprocess imports (REPO); trees before the compiled core have no flag
        "compiled": getattr(otel_footprint, "compiled", False),
    }
    if args.repeat > 1:
        result["runs_spans_per_second"] = {
            "annotating": [r["spans_per_second"] for r in runs[True]],
            "annotation_off": [r["spans_per_second"] for r in runs[False]],
        }
        # The figure to compare on a shared machine: work per CPU-second of the hop process.
        result["runs_spans_per_hop_cpu_second"] = {
            "annotating": [r["spans_per_hop_cpu_second"] for r in runs[True]],
            "annotation_off": [r["spans_per_hop_cpu_second"] for r in runs[False]],
        }
        result["runs_busiest_thread_cpu_share"] = {
            "annotating": [r["busiest_thread_cpu_share"] for r in runs[True]],
            "annotation_off": [r["busiest_thread_cpu_share"] for r in runs[False]],
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"workload: {result['workload']}")
    print(f"otel_footprint.compiled: {result['compiled']}")
    for name in ("annotating", "annotation_off"):
        r = result[name]
        assert isinstance(r, dict)
        print(
            f"{name:>15}: {r['spans_per_second']:>10,.0f} spans/s end to end "
            f"({r['spans']} spans in {r['seconds']} s; hop CPU {r['hop_cpu_seconds']} s = "
            f"{r['spans_per_hop_cpu_second']:,.0f} spans per hop-CPU-second, "
            f"{100 * r['busiest_thread_cpu_share']:.0f}% of it on one thread; "
            f"mean decision {r['mean_decision_ms']} ms per trace)"
        )
    print(f"          ratio: annotating / annotation off = {result['ratio_annotating_to_off']}")
    print(
        f"         memory: {memory['bytes_per_held_span']:,.0f} bytes resident per buffered span "
        f"({memory['held_spans']:.0f} spans held, RSS +{memory['rss_delta_bytes'] / 2**20:.1f} MiB; "
        f"~{memory['wire_bytes_per_span']:.0f} B/span on the wire)"
    )
    return 0


def run_page_main(
    args: argparse.Namespace, spans: int, warmup: list[bytes], requests: list[bytes]
) -> int:
    """Annotating throughput with the run page open and read, over the same with the page off."""
    off = ("service.telemetry.run_page.enabled=false",)
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-hop-page-") as d:
        for i in range(max(1, args.repeat)):
            tmp = Path(d) / str(i)
            for page in (True, False):
                (tmp / ("page" if page else "nopage")).mkdir(parents=True)
                runs[page].append(
                    throughput(
                        tmp / ("page" if page else "nopage"),
                        True,
                        spans,
                        args.threads,
                        warmup,
                        requests,
                        tuple(args.set) + (() if page else off),
                        page_every=args.run_page if page else None,
                    )
                )
    with_page, without = _median(runs[True]), _median(runs[False])
    result = {
        "page_read_every_seconds": args.run_page,
        "page_open": with_page,
        "page_off": without,
        "ratio_page_open_to_off": round(
            with_page["spans_per_second"] / without["spans_per_second"], 3
        ),
        "ratio_per_hop_cpu_second": round(
            with_page["spans_per_hop_cpu_second"] / without["spans_per_hop_cpu_second"], 3
        ),
        "runs_spans_per_second": {
            "page_open": [r["spans_per_second"] for r in runs[True]],
            "page_off": [r["spans_per_second"] for r in runs[False]],
        },
        "runs_spans_per_hop_cpu_second": {
            "page_open": [r["spans_per_hop_cpu_second"] for r in runs[True]],
            "page_off": [r["spans_per_hop_cpu_second"] for r in runs[False]],
        },
    }
    print(json.dumps(result, indent=2))
    return 0


def zero_code_main(args: argparse.Namespace) -> int:
    """Throughput, annotating, of zero-code runs against the same runs with the recorder."""
    spans = (
        args.spans // (SPANS_PER_TRACE * TRACES_PER_REQUEST) * SPANS_PER_TRACE * TRACES_PER_REQUEST
    )
    streams = {
        "recorder": (True, build_requests(spans, 1_000_000, recorder=True, content=True)),
        "zero_code": (False, build_requests(spans, 2_000_000, recorder=False, content=True)),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in streams}
    with tempfile.TemporaryDirectory(prefix="bench-hop-") as d:
        tmp = Path(d)
        for i in range(max(1, args.repeat)):
            for name, (recorder, requests) in streams.items():
                warmup = build_requests(3000, 0, recorder=recorder, content=True)
                (tmp / f"{i}-{name}").mkdir()
                runs[name].append(
                    throughput(
                        tmp / f"{i}-{name}",
                        True,
                        spans,
                        args.threads,
                        warmup,
                        requests,
                        tuple(args.set),
                    )
                )
    recorded, zero = _median(runs["recorder"]), _median(runs["zero_code"])
    result: dict[str, Any] = {
        "workload": f"{SPANS_PER_TRACE} spans/trace (agent span, 4 model calls with their messages "
        f"and offered tools, 2 tools, 3 plain), {TRACES_PER_REQUEST} traces/request, "
        f"{args.threads} client threads; recorder: + run id, pass numbers, 2 events per call, "
        "the plan",
        "recorder": recorded,
        "zero_code": zero,
        "ratio_zero_code_to_recorder": round(
            zero["spans_per_second"] / recorded["spans_per_second"], 3
        ),
        "ratio_per_hop_cpu_second": round(
            zero["spans_per_hop_cpu_second"] / recorded["spans_per_hop_cpu_second"], 3
        )
        if recorded["spans_per_hop_cpu_second"]
        else 0.0,
        "runs_spans_per_second": {k: [r["spans_per_second"] for r in v] for k, v in runs.items()},
        "runs_spans_per_hop_cpu_second": {
            k: [r["spans_per_hop_cpu_second"] for r in v] for k, v in runs.items()
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"workload: {result['workload']}")
    for name in ("recorder", "zero_code"):
        r = result[name]
        print(
            f"{name:>10}: {r['spans_per_second']:>10,.0f} spans/s end to end, "
            f"{r['spans_per_hop_cpu_second']:,.0f} spans per hop-CPU-second, "
            f"{r['spans_annotated']:.0f} spans annotated, mean decision {r['mean_decision_ms']} ms"
        )
    print(
        f"     ratio: zero-code / recorder = {result['ratio_zero_code_to_recorder']} end to end, "
        f"{result['ratio_per_hop_cpu_second']} per hop-CPU-second"
    )
    return 0


def http_main(args: argparse.Namespace) -> int:
    spans = (
        args.spans // (SPANS_PER_TRACE * TRACES_PER_REQUEST) * SPANS_PER_TRACE * TRACES_PER_REQUEST
    )
    warmup = build_requests(3000, 0)
    requests = build_requests(spans, 1_000_000)
    if args.run_page is not None:
        return run_page_main(args, spans, warmup, requests)
    with tempfile.TemporaryDirectory(prefix="bench-hop-http-") as d:
        tmp = Path(d)
        runs = []
        for i in range(max(1, args.repeat)):
            (tmp / str(i)).mkdir()
            runs.append(http_throughput(tmp / str(i), spans, args.threads, warmup, requests))
        slow = http_under_slow_connections(tmp, args.slow_connections, args.slow_seconds)
    result = {"throughput": _median(runs), "slow_connections": slow}
    if args.repeat > 1:
        result["runs_spans_per_second"] = {"http": [r["spans_per_second"] for r in runs]}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
