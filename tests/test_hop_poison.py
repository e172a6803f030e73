"""A record that can never be delivered never blocks the rest (issue 13, defect 1).

Real parts only: the journal on disk, the forwarder, and a real OTLP/gRPC sink with gRPC's default
4 MiB receive limit (the Collector's default). At the head of the queue sit a 6 MB run (splittable:
many spans) and a request holding one 5 MB span (not splittable); 40,000 small spans wait behind.
"""

from __future__ import annotations

import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from otel_footprint.service import config as c
from otel_footprint.service.deadletter import DeadLetterFile
from otel_footprint.service.forward import Forwarder, make_sender
from otel_footprint.service.journal import KIND_OUT_TRACES, Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.otlp import count_spans, iter_spans, split_request
from tests.test_service_support import Sink

BEHIND = 40_000


def _request(first: int, n: int, pad: int = 0) -> bytes:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add()
    ss.resource.attributes.add(key="service.name", value=AnyValue(string_value="poison-test"))
    scope = ss.scope_spans.add()
    for i in range(first, first + n):
        span = scope.spans.add()
        span.trace_id = i.to_bytes(16, "big")
        span.span_id = i.to_bytes(8, "big")
        span.name = "work"
        if pad:
            span.attributes.append(KeyValue(key="blob", value=AnyValue(string_value="x" * pad)))
    return req.SerializeToString()


def _forwarder(sink_endpoint: str, journal: Journal, dead: DeadLetterFile) -> Forwarder:
    cfg = c.load(
        None,
        c.flag_layer(forward=sink_endpoint, sets=["exporters.otlp.retry.max_interval=500ms"]),
        {"XDG_STATE_HOME": "/tmp/state"},
    ).exporter
    return Forwarder(cfg, journal, HopMetrics(), make_sender(cfg), dead_letter=dead)


def _delivered(sink: Sink) -> set[int]:
    return {int.from_bytes(s.span_id, "big") for s in sink.spans()}


def test_split_keeps_every_span_under_its_resource_and_scope() -> None:
    payload = _request(1, 300, pad=1000)
    pieces, oversized = split_request(True, payload, 64 << 10)
    assert not oversized
    assert all(len(p) <= 64 << 10 for p, _ in pieces)
    got = [
        (o.resource.attributes[0].value.string_value, int.from_bytes(s.span_id, "big"))
        for p, n in pieces
        for o, s in iter_spans(ExportTraceServiceRequest.FromString(p))
    ]
    assert got == [("poison-test", i) for i in range(1, 301)]
    assert sum(n for _, n in pieces) == 300
    big = _request(1, 1, pad=100_000)
    pieces, ((alone, n),) = split_request(True, big, 64 << 10)
    assert pieces == [] and n == 1
    assert ExportTraceServiceRequest.FromString(alone) == ExportTraceServiceRequest.FromString(big)


def test_a_poison_record_and_40000_spans_behind_it_are_all_delivered_across_a_restart(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    dead = DeadLetterFile(data / "dead-letter.otlp", 256 << 20)
    journal = Journal(data / "queue")
    journal.open()
    run = _request(1_000_000, 75, pad=80_000)  # ~6 MB: over the sink's 4 MiB limit
    giant = _request(2_000_000, 1, pad=5 << 20)  # one 5 MiB span: can never be delivered
    behind = [_request(1 + i * 100, 100) for i in range(BEHIND // 100)]
    records = [(KIND_OUT_TRACES, run, 75), (KIND_OUT_TRACES, giant, 1)]
    records += [(KIND_OUT_TRACES, b, 100) for b in behind]
    journal.sync(journal.append(records)[-1])

    # First life: the next hop is down, so nothing leaves; then a graceful stop.
    sink = Sink()
    sink.start()
    port = sink.port
    sink.stop()
    first = _forwarder(f"127.0.0.1:{port}", journal, dead)
    first.start()
    time.sleep(1.0)
    first.stop()
    journal.close()
    assert _delivered(sink) == set()

    # Second life: the same data directory, the next hop back on its port.
    sink = Sink(port)
    sink.start()
    journal = Journal(data / "queue")
    replay = journal.open()
    assert replay.outbound == len(records)
    second = _forwarder(sink.endpoint, journal, dead)
    second.start()
    try:
        wanted = set(range(1, BEHIND + 1)) | set(range(1_000_000, 1_000_075))
        assert sink.wait_for(lambda: wanted <= _delivered(sink), timeout=60), (
            f"{len(wanted - _delivered(sink))} spans not delivered; last error {second.last_error}"
        )
        deadline = time.monotonic() + 10
        while journal.outbound_count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert journal.outbound_count == 0
    finally:
        second.stop()
        journal.close()
        sink.stop()
    assert 2_000_000 not in _delivered(sink)
    (entry,) = list(dead.entries())
    assert entry.items == 1 and "exceeds" in entry.reason
    parsed = ExportTraceServiceRequest.FromString(entry.payload)
    assert parsed == ExportTraceServiceRequest.FromString(giant)
    m = second.metrics
    assert m.dead_lettered.value("traces") == 1
    assert m.forward_failed.value("traces") == 1
    assert m.forward_splits.value() >= 1
    assert m.spans_forwarded.value() == BEHIND + 75
    assert oct(dead.path.stat().st_mode & 0o777) == "0o600"
    assert all(count_spans(r) for r in sink.trace_requests)
    # Every request that reached the sink was within its limit.
    assert max(r.ByteSize() for r in sink.trace_requests) <= 4 << 20


def test_a_permanent_refusal_is_set_aside_not_retried_or_lost(tmp_path: Path) -> None:
    """INVALID_ARGUMENT is not retryable (OTLP): the request goes to the dead-letter file."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    calls: list[int] = []

    def refuse(data: bytes, context: grpc.ServicerContext) -> bytes:
        calls.append(len(data))
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "schema says no")

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.trace.v1.TraceService",
                {"Export": grpc.unary_unary_rpc_method_handler(refuse)},
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    journal = Journal(tmp_path / "queue")
    journal.open()
    dead = DeadLetterFile(tmp_path / "dead-letter.otlp", 1 << 20)
    journal.sync(journal.append([(KIND_OUT_TRACES, _request(1, 3), 3)])[-1])
    fwd = _forwarder(f"127.0.0.1:{port}", journal, dead)
    fwd.start()
    try:
        deadline = time.monotonic() + 10
        while journal.outbound_count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert journal.outbound_count == 0
    finally:
        fwd.stop()
        journal.close()
        server.stop(0)
    assert len(calls) == 1
    (entry,) = list(dead.entries())
    assert entry.items == 3 and "INVALID_ARGUMENT" in entry.reason
    assert fwd.metrics.dead_lettered.value("traces") == 3
