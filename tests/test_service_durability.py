"""Durability of the hop (subprocess): a downstream outage and a SIGKILL lose no acknowledged span.

The outage test takes ~20 s (a 10 s outage is the point); it is marked ``slow`` but runs by default.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_service_support import HopProcess, Sink, attrs, emit_run

from otel_footprint import semconv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _provider_with_copy(exporter: Any) -> tuple[Any, Any, Any]:
    """A TracerProvider exporting through ``exporter`` (batched) and keeping a copy of every span."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    copy = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "durability"}))
    provider.add_span_processor(SimpleSpanProcessor(copy))
    if exporter is not None:
        provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=50, max_export_batch_size=64)
        )
    return provider, provider.get_tracer("durability"), copy


@pytest.mark.slow
def test_downstream_outage_of_10s_every_span_arrives_once(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    sink = Sink().start()
    port = sink.port
    hop = HopProcess(
        tmp_path / "data",
        sink.endpoint,
        "--set",
        "processing.release_grace=300ms",
        "--set",
        "exporters.otlp.retry.max_interval=1s",
        "--set",
        "exporters.otlp.timeout=2s",
    ).start()
    provider, tracer, copy = _provider_with_copy(
        OTLPSpanExporter(endpoint=hop.grpc, insecure=True, timeout=10)
    )
    stop = threading.Event()
    runs: list[str] = []

    def agent() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            _, run_span = emit_run(tracer, f"outage-{n}", passes=2)
            runs.append(run_span)
            time.sleep(0.05)

    thread = threading.Thread(target=agent)
    try:
        thread.start()
        time.sleep(2.0)
        sink.stop()  # downstream goes away mid-stream ...
        time.sleep(10.0)
        sink.port = port
        sink.start()  # ... and comes back on the same port
        time.sleep(2.0)
        stop.set()
        thread.join()
        provider.force_flush()
        sent = {format(s.context.span_id, "016x") for s in copy.get_finished_spans()}
        assert len(sent) > 200

        def all_arrived() -> bool:
            return sent <= {s.span_id.hex() for s in sink.spans()}

        assert sink.wait_for(all_arrived, 30), "spans were lost during the outage"
        time.sleep(1.0)  # anything duplicated would arrive by now
        counts = Counter(s.span_id.hex() for s in sink.spans())
        duplicated = [sid for sid, n in counts.items() if n > 1]
        assert duplicated == [], f"{len(duplicated)} spans arrived more than once"
        # And every run was still annotated.
        arrived = {s.span_id.hex(): s for s in sink.spans()}
        assert all(semconv.RUN_COMPLETE in attrs(arrived[r]) for r in runs)
        metrics = hop.metrics()
        assert metrics["otel_footprint_forward_retries_total"] > 0  # the outage was really seen
    finally:
        stop.set()
        provider.shutdown()
        assert hop.terminate() == 0, hop.stderr()
        sink.stop()


def test_sigkill_mid_stream_and_restart_loses_no_acknowledged_span(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    sink = Sink().start()
    port = _free_port()
    # max_wait bounds how long a run whose run span was never acknowledged stays held.
    args = (
        "--grpc",
        f"127.0.0.1:{port}",
        "--set",
        "processing.release_grace=1s",
        "--set",
        "processing.max_wait=4s",
    )
    data = tmp_path / "data"
    first = HopProcess(data, sink.endpoint, *args).start()

    # Real SDK spans (20 runs), exported in chunks by the SDK's OTLP exporter, in end order.
    provider, tracer, copy = _provider_with_copy(None)
    for n in range(20):
        emit_run(tracer, f"kill-{n}", passes=3)
    spans = list(copy.get_finished_spans())
    chunks = [spans[i : i + 7] for i in range(0, len(spans), 7)]
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=2)
    acked: set[str] = set()
    second: HopProcess | None = None
    try:
        for i, chunk in enumerate(chunks):
            if i == len(chunks) // 2:
                first.kill()  # SIGKILL: no shutdown, no flush
            if i == len(chunks) // 2 + 1:
                second = HopProcess(data, sink.endpoint, *args).start()
            if exporter.export(chunk) is SpanExportResult.SUCCESS:
                acked.update(format(s.context.span_id, "016x") for s in chunk)
        assert second is not None
        assert 0 < len(acked) < len(spans)  # some exports failed while the hop was down

        def all_acked_arrived() -> bool:
            return acked <= {s.span_id.hex() for s in sink.spans()}

        assert sink.wait_for(all_acked_arrived, 20), "acknowledged spans were lost"
        # The restarted hop found the killed one's held spans in the journal.
        assert "recovered from the journal" in second.stderr()
        assert second.terminate() == 0, second.stderr()
    finally:
        exporter.shutdown()
        provider.shutdown()
        first.kill()
        if second is not None:
            second.kill()
        sink.stop()
