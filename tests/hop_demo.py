"""The demo's five runs as an agent sends them (not annotated), and a ``serve`` that decided them:
shared by the tests that read the hop's verdicts (its metrics, its run page)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint.commands.scenarios import SCENARIOS, run_scenarios
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk.decide import make_decider
from otel_footprint.sdk.processor import FootprintSpanProcessor
from tests.servers import HopProcess, poll

DEMO_RUNS = len(SCENARIOS)
SHADOW_RIDING_CHARS = 7_776
"""What the stuck shadow run's parked skill cost while it kept riding (27 calls x 288 characters)."""


def demo_request_bytes() -> bytes:
    """The five scenarios' raw spans as one OTLP export request (what the agent would send)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "otel-footprint-demo"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    run_scenarios(provider.get_tracer("demo"))
    provider.shutdown()
    return bytes(encode_spans(memory.get_finished_spans()).SerializeToString())


def demo_verdicts() -> list[RunVerdict]:
    """The five scenarios decided in process (the processor's verdicts, in the order decided)."""
    verdicts: list[RunVerdict] = []
    processor = FootprintSpanProcessor(
        InMemorySpanExporter(), decider=make_decider(on_verdict=verdicts.append)
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        run_scenarios(provider.get_tracer("demo-verdicts"))
        assert processor.force_flush(30_000)
    finally:
        provider.shutdown()
    return verdicts


def send_demo(hop: HopProcess, headers: dict[str, str] | None = None) -> None:
    """POST the demo's runs to the hop's OTLP/HTTP receiver and wait until all five are decided."""
    request = urllib.request.Request(
        f"http://{hop.http}/v1/traces",
        data=demo_request_bytes(),
        headers={"Content-Type": "application/x-protobuf", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200
    poll(
        lambda: hop.metric("footprint_verdict_runs_total"),
        lambda runs: runs >= DEMO_RUNS,
        timeout=60,
        what="the hop to decide the demo's five runs",
    )


def demo_hop(data_dir: Path, forward: str, *args: str) -> HopProcess:
    """A ``serve`` on loopback (runs released 100 ms after their run span) that decided the demo."""
    hop = HopProcess(data_dir, forward, "--set", "processing.release_grace=100ms", *args).start()
    try:
        send_demo(hop)
    except BaseException:
        hop.kill()
        raise
    return hop
