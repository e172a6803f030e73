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

from otel_footprint.service.annotation import NoAnnotation
from otel_footprint.service.config import HostPort, ReceiverConfig
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions
from otel_footprint.service.receivers import HttpReceiver


def test_connections_over_the_bound_get_503_with_retry_after(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    metrics = HopMetrics()
    pipeline = Pipeline(PipelineOptions(annotate=False), journal, NoAnnotation(), metrics)
    cfg = ReceiverConfig(HostPort("127.0.0.1", 0), 1 << 20, 4, None)
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
