"""Back-pressure answers carry the retry hint OTLP specifies (issue 13, defect 4's answers).

OTLP/HTTP: 429 and 503 carry ``Retry-After``; OTLP/gRPC: ``RESOURCE_EXHAUSTED`` carries RetryInfo
(checked with a full journal in tests/test_service_e2e.py). Here: the HTTP receiver's connection
bound, on the real receiver in-process.
"""

from __future__ import annotations

import http.client
import socket
import time
from pathlib import Path

from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]

from otel_footprint.sdk.settings import HostPort, ReceiverSettings
from otel_footprint.service.annotation import NoAnnotation
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions
from otel_footprint.service.receivers import HttpReceiver


def test_connections_over_the_bound_get_503_with_retry_after(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    metrics = HopMetrics()
    pipeline = Pipeline(PipelineOptions(annotate=False), journal, NoAnnotation(), metrics)
    cfg = ReceiverSettings(
        endpoint=HostPort("127.0.0.1", 0), max_request_size=1 << 20, max_concurrent_requests=4
    )
    receiver = HttpReceiver(cfg, pipeline, metrics, token=None)
    receiver.max_connections = 3
    bound = receiver.start()
    idle: list[socket.socket] = []
    try:
        for _ in range(3):
            idle.append(socket.create_connection((bound.host, bound.port), timeout=5))
        time.sleep(0.2)
        conn = http.client.HTTPConnection(bound.host, bound.port, timeout=5)
        conn.request(
            "POST", "/v1/traces", body=b"", headers={"Content-Type": "application/x-protobuf"}
        )
        resp = conn.getresponse()
        assert resp.status == 503
        assert resp.getheader("Retry-After") == "1"
        assert status_pb2.Status.FromString(resp.read()).code == code_pb2.UNAVAILABLE
        conn.close()
        assert metrics.requests_rejected.value("http", "too_many_connections") == 1
        # Once a slot frees, requests are served again.
        idle.pop().close()
        time.sleep(0.2)
        conn = http.client.HTTPConnection(bound.host, bound.port, timeout=5)
        conn.request(
            "POST", "/v1/traces", body=b"", headers={"Content-Type": "application/x-protobuf"}
        )
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        for sock in idle:
            sock.close()
        receiver.stop()
        journal.close()


def test_grpc_requests_over_the_concurrency_bound_get_retry_info(tmp_path: Path) -> None:
    """gRPC's own concurrency limit answers without RetryInfo (non-retryable for OTLP senders
    such as the Collector); the receiver's admission answers RESOURCE_EXHAUSTED with RetryInfo."""
    import threading

    import grpc
    from google.rpc import error_details_pb2  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from otel_footprint.service.receivers import GrpcReceiver

    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    metrics = HopMetrics()
    pipeline = Pipeline(PipelineOptions(), journal, NoAnnotation(), metrics)
    cfg = ReceiverSettings(
        endpoint=HostPort("127.0.0.1", 0), max_request_size=1 << 20, max_concurrent_requests=1
    )
    receiver = GrpcReceiver(cfg, pipeline, metrics, token=None, workers=4)
    bound = receiver.start()
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x01" * 8, "GET /"
    body = request.SerializeToString()
    channel = grpc.insecure_channel(str(bound))
    export = channel.unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export", request_serializer=None
    )
    results: list[object] = []
    try:
        with pipeline._lock:  # the one admitted request waits inside ingest
            first = threading.Thread(target=lambda: results.append(export(body, timeout=10)))
            first.start()
            time.sleep(0.5)
            try:
                export(body, timeout=10)
                raise AssertionError("the second request was admitted")
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                trailers = dict(err.trailing_metadata() or ())
                info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
                assert info.retry_delay.seconds >= 1
        first.join(timeout=10)
        assert results == [b""]
        assert export(body, timeout=10) == b""  # the slot was given back
        assert metrics.requests_rejected.value("grpc", "overloaded") == 1
    finally:
        channel.close()
        receiver.stop(0)
        journal.close()
