"""Scale-out with the real Collector: an edge Collector whose ``load_balancing`` exporter routes by
trace id (static resolver, two hop endpoints) -> two ``otel-footprint serve`` hops sharing one Redis run
store (collector-config/load_balancing/) -> the backend Collector -> Jaeger.

- A paused run whose resumed leg (a new trace) lands on the other hop still carries the earlier
  leg's verdict: that hop read it from Redis.
- One hop SIGKILLed mid-stream and restarted on its data directory: every span the agent's exports
  had acknowledged arrives in Jaeger, each run span annotated or carrying its reason.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _shared import RECORDINGS
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from servers import HopProcess, free_ports, otel_footprint_command, redis_server

from otel_footprint import semconv as sc

from .footprint_e2e import routed_turn
from .otel_stack import (
    CONFIGS,
    WAIT_S,
    Collector,
    JaegerClient,
    load_config,
    poll,
)

pytestmark = [pytest.mark.collector, pytest.mark.jaeger]

TOKEN = "scaleout-" + uuid.uuid4().hex[:12]
PAUSE_RESUME = RECORDINGS / "pause-resume.ndjson"
RECEIVED = "otel_footprint_spans_received_total"


def hop_args(redis_url: str, *extra: str) -> tuple[str, ...]:
    return (
        "--config",
        str(CONFIGS / "load_balancing" / "otel-footprint.yaml"),
        "--set",
        f"processing.run_store.url={redis_url}",
        "--set",
        "processing.release_grace=0.3s",
        "--set",
        "processing.max_wait=20s",
        "--set",
        "exporters.otlp.queue.fsync=false",
        *extra,
    )


@dataclass
class Stack:
    """The edge Collector and the two hops (hop i listens on a fixed port so it can be restarted
    where the edge's static resolver expects it)."""

    edge: Collector
    hops: list[HopProcess]
    ports: list[int]
    make_hop: Any

    def restart(self, index: int) -> HopProcess:
        self.hops[index] = self.make_hop(index).start()
        return self.hops[index]


@pytest.fixture(scope="module")
def stack(
    otelcol_bin: str,
    backend_collector: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("scaleout")
    redis, redis_url = redis_server(workdir)
    ports = free_ports(2)

    def make_hop(index: int) -> HopProcess:
        return HopProcess(
            workdir / f"hop-{index + 1}",
            f"http://{backend_collector}",
            *hop_args(redis_url),
            grpc=f"127.0.0.1:{ports[index]}",
            env={"FOOTPRINT_TOKEN": TOKEN, "FOOTPRINT_INSTANCE": str(index + 1)},
        )

    hops: list[HopProcess] = []
    edge: Collector | None = None
    try:
        hops = [make_hop(i).start() for i in range(2)]
        cfg = load_config(CONFIGS / "load_balancing" / "edge-collector.yaml")
        lb = cfg["exporters"]["load_balancing"]
        lb["resolver"]["static"]["hostnames"] = [f"127.0.0.1:{p}" for p in ports]
        # Retry long enough to outlast a hop's restart (the default backoff caps at 30 s apart).
        lb["retry_on_failure"] = {
            "enabled": True,
            "initial_interval": "100ms",
            "max_interval": "1s",
        }
        lb["protocol"]["otlp"]["retry_on_failure"] = {
            "enabled": True,
            "initial_interval": "100ms",
            "max_interval": "1s",
        }
        edge = Collector(otelcol_bin, cfg, workdir, "edge", env={"FOOTPRINT_TOKEN": TOKEN}).start()
        stack = Stack(edge, hops, ports, make_hop)
        yield stack
        hops = stack.hops
    finally:
        if edge is not None:
            edge.stop()
        for hop in hops:
            hop.stop()
        redis.stop()


def post_json(url: str, body: str) -> None:
    request = urllib.request.Request(
        url, data=body.encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200, response.status


def explain_runs(path: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [otel_footprint_command(), "explain", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    runs: list[dict[str, Any]] = json.loads(done.stdout)["runs"]
    return runs


def test_a_resumed_leg_on_the_other_hop_carries_the_earlier_legs_verdict(
    stack: Stack, jaeger: JaegerClient, tmp_path: Path
) -> None:
    """The agent sends leg 1 (paused), later leg 2 (resumed: a new trace, same run id). The edge
    routes by trace id; salts are tried until the two legs land on different hops (each try has a
    1/2 chance), then leg 2's run span must show the verdict only leg 1 could give it."""
    http = f"http://{stack.edge.receiver('http')}/v1/traces"
    for attempt in range(12):
        salt = uuid.uuid4().hex[:12]
        service = f"scaleout-resume-{salt}"
        legs_file = tmp_path / f"legs-{attempt}.jsonl"
        subprocess.run(
            [
                otel_footprint_command(),
                "import",
                "agentfootprint",
                str(PAUSE_RESUME),
                "--id-salt",
                salt,
                "--service-name",
                service,
                "-o",
                str(legs_file),
            ],
            capture_output=True,
            timeout=60,
            check=True,
        )
        legs = legs_file.read_text().splitlines()
        assert len(legs) == 2, "the recording has two legs (one export request each)"
        expected = {run["traceId"]: run for run in explain_runs(legs_file)}
        trace_of = [
            json.loads(leg)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
            for leg in legs
        ]
        counts = [
            len(json.loads(leg)["resourceSpans"][0]["scopeSpans"][0]["spans"]) for leg in legs
        ]
        received: list[list[float]] = []
        for leg, trace_id, count in zip(legs, trace_of, counts, strict=True):
            before = [hop.metric(RECEIVED) for hop in stack.hops]
            post_json(http, leg)  # as the agent does at the pause, then at the resume
            run_span = expected[trace_id]["runSpanId"]
            poll(
                lambda t=trace_id, r=run_span: [
                    s for s in jaeger.trace(t) if s.span_id == r and sc.RUN_COMPLETE in s.tags
                ],
                bool,
                timeout=WAIT_S,
                what=f"leg {trace_id} annotated in Jaeger",
            )
            jaeger.wait_trace(trace_id, count)
            received.append(
                [hop.metric(RECEIVED) - b for hop, b in zip(stack.hops, before, strict=True)]
            )
        where = [next(i for i, n in enumerate(r) if n > 0) for r in received]
        print(f"\nattempt {attempt + 1}: leg 1 -> hop {where[0] + 1}, leg 2 -> hop {where[1] + 1}")
        if where[0] != where[1]:
            break
    else:
        pytest.fail(f"12 salts, and the two legs always landed on the same hop: {received}")

    leg2 = expected[trace_of[1]]
    assert leg2["resumed"] is True and leg2["checks"]["decided-delivered"]["status"] == "reachable"
    # The control: leg 2 without leg 1 (what a hop with no shared store decides) is different.
    alone = tmp_path / "leg2-alone.jsonl"
    alone.write_text(legs[1] + "\n")
    [blind] = explain_runs(alone)
    assert blind["checks"]["decided-delivered"]["status"] == "unreachable"
    assert "no-prior-leg" in {r["code"] for r in blind["reasons"]}
    [run_span] = [s for s in jaeger.trace(trace_of[1]) if s.span_id == leg2["runSpanId"]]
    tags = run_span.tags
    assert tags[sc.RUN_RESUMED] is True, tags
    assert tags[sc.RUN_MODE] == leg2["mode"] == "verify", tags
    # Check 1 needs leg 1's turn-start routing: only the shared store could give it to this hop.
    assert tags[sc.CHECK_DECIDED_DELIVERED] == "reachable", tags
    outcome = leg2["checks"]["decided-delivered"].get("outcome")
    assert tags.get(sc.CHECK_DECIDED_DELIVERED_OUTCOME) == outcome, tags
    assert "no-prior-leg" not in str(tags.get(sc.RUN_REASONS, "")), tags
    # Found by tag, as a person would: the resumed leg with check 1 reachable.
    found = jaeger.find(
        f"scaleout-resume-{salt}",
        {sc.RUN_RESUMED: "true", sc.CHECK_DECIDED_DELIVERED: "reachable"},
    )
    assert set(found) == {trace_of[1]}


class AckedSpans(SpanExporter):
    """The agent's exporter: remembers the ids of every span an export acknowledged."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.acked: dict[str, set[str]] = {}
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        with self.lock:
            if result is SpanExportResult.SUCCESS:
                for span in spans:
                    ctx = span.get_span_context()
                    assert ctx is not None
                    self.acked.setdefault(f"{ctx.trace_id:032x}", set()).add(f"{ctx.span_id:016x}")
            else:
                self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def test_a_hop_killed_mid_stream_loses_no_acknowledged_span(
    stack: Stack, jaeger: JaegerClient
) -> None:
    service = f"scaleout-kill-{uuid.uuid4().hex[:8]}"
    exporter = AckedSpans(OTLPSpanExporter(endpoint=stack.edge.receiver("grpc"), insecure=True))
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=50, max_export_batch_size=64)
    )
    tracer = provider.get_tracer("scaleout-agent")
    runs = 160
    victim = stack.hops[1]
    received_before_kill = 0.0
    for i in range(runs):
        routed_turn(tracer, f"kill-{i}", delivered=i % 2 == 0)
        if i == runs // 2:
            provider.force_flush(10_000)
            received_before_kill = victim.metric(RECEIVED)
            with urllib.request.urlopen(f"http://{victim.telemetry}/health", timeout=5) as r:
                held_at_kill = json.loads(r.read())
            victim.kill()  # SIGKILL: no shutdown, no flush
        if i == runs // 2 + 20:
            victim = stack.restart(1)  # same data directory and port: the journal is replayed
        time.sleep(0.01)
    provider.force_flush(20_000)
    provider.shutdown()
    assert exporter.failed == 0
    assert received_before_kill > 0, "the killed hop had received nothing: not mid-stream"
    print(
        f"\nkilled hop 2 after it received {received_before_kill:.0f} spans; its health then: "
        f"runs_held={held_at_kill.get('runs_held')} spans_held={held_at_kill.get('spans_held')} "
        f"queue_batches={held_at_kill.get('queue_batches')}"
    )
    assert len(exporter.acked) == runs

    def missing() -> dict[str, set[str]]:
        gone: dict[str, set[str]] = {}
        for trace_id, span_ids in exporter.acked.items():
            have = {s.span_id for s in jaeger.trace(trace_id)}
            if not span_ids <= have:
                gone[trace_id] = span_ids - have
        return gone

    lost = poll(
        missing, lambda gone: not gone, timeout=90, what="every acknowledged span in Jaeger"
    )
    assert not lost
    print(
        f"all {sum(map(len, exporter.acked.values()))} acknowledged spans of {runs} runs in Jaeger"
    )
    # Every run span is annotated: decided complete, or decided with its reason.
    unexplained = []
    for trace_id in exporter.acked:
        [run] = [
            s
            for s in jaeger.trace(trace_id)
            if s.tags.get("gen_ai.operation.name") == "invoke_agent"
        ][:1]
        complete = run.tags.get(sc.RUN_COMPLETE)
        if complete is None or (complete is False and not run.tags.get(sc.RUN_REASONS)):
            unexplained.append((trace_id, run.tags))
    assert not unexplained, unexplained[:3]
    assert victim.metric(RECEIVED) > 0, "the restarted hop received nothing"
