"""Security of the running hop (issue 13, defects 7 and 8): every authorization entry, file modes.

The bind rule itself (non-loopback needs TLS and a token; the telemetry endpoint; the query service
off loopback only behind a token) is checked in tests/test_service_config.py: tests bind loopback
only.
"""

from __future__ import annotations

import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from tests.test_service_support import TRACE_EXPORT, HopProcess, Sink

TOKEN = "s3cret-token"


@pytest.fixture()
def hop(sink: Sink, tmp_path: Path) -> Iterator[HopProcess]:
    h = HopProcess(
        tmp_path / "data",
        sink.endpoint,
        "--set",
        f"receivers.otlp.auth.bearer_token={TOKEN}",
        "--set",
        "processing.release_grace=100ms",
    ).start()
    yield h
    h.kill()


def _request() -> bytes:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    run = Span(trace_id=b"\x07" * 16, span_id=b"\x01" * 8, name="invoke_agent")
    run.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = "invoke_agent"
    run.attributes.add(key=semconv.RUN_ID).value.string_value = "r-sec"
    spans.append(run)
    return req.SerializeToString()


def _grpc_code(hop: HopProcess, metadata: list[tuple[str, str]]) -> grpc.StatusCode:
    with grpc.insecure_channel(hop.grpc) as channel:
        export = channel.unary_unary(TRACE_EXPORT, request_serializer=None)
        try:
            export(_request(), timeout=10, metadata=metadata)
        except grpc.RpcError as err:
            code: grpc.StatusCode = err.code()
            return code
    return grpc.StatusCode.OK


def _http_status(hop: HopProcess, authorizations: list[str]) -> int:
    import http.client

    host, port = hop.http.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    body = _request()
    conn.putrequest("POST", "/v1/traces")
    conn.putheader("Content-Type", "application/x-protobuf")
    conn.putheader("Content-Length", str(len(body)))
    for value in authorizations:
        conn.putheader("Authorization", value)
    conn.endheaders(body)
    status = conn.getresponse().status
    conn.close()
    return status


def test_every_authorization_entry_must_carry_the_token(hop: HopProcess) -> None:
    good, bad = f"Bearer {TOKEN}", "Bearer wrong"
    assert _grpc_code(hop, [("authorization", good)]) == grpc.StatusCode.OK
    assert _grpc_code(hop, []) == grpc.StatusCode.UNAUTHENTICATED
    for pair in ([good, bad], [bad, good]):
        metadata = [("authorization", v) for v in pair]
        assert _grpc_code(hop, metadata) == grpc.StatusCode.UNAUTHENTICATED, pair
        assert _http_status(hop, pair) == 401, pair
    assert _http_status(hop, [good]) == 200
    assert _http_status(hop, [good, good]) == 200


def test_the_data_directory_is_private(hop: HopProcess, sink: Sink) -> None:
    assert _grpc_code(hop, [("authorization", f"Bearer {TOKEN}")]) == grpc.StatusCode.OK
    assert sink.wait_for(lambda: len(sink.spans()) >= 1, timeout=15)
    # The query service reads accounts.sqlite: make sure it exists before looking.
    with urllib.request.urlopen(f"http://{hop.telemetry}/health", timeout=5) as resp:
        assert resp.status == 200
    data = hop.data_dir
    files = [p for p in data.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"LOCK", "runs.sqlite", "accounts.sqlite"} <= names, names
    assert any(n.startswith("seg-") for n in names)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for directory in [data, *[p for p in data.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    hop.terminate()


def test_an_existing_world_readable_data_directory_is_made_private(
    sink: Sink, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    (data / "runs.sqlite").touch(mode=0o644)
    (data / "runs.sqlite").chmod(0o644)
    hop = HopProcess(data, sink.endpoint).start()
    try:
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert stat.S_IMODE((data / "runs.sqlite").stat().st_mode) == 0o600
    finally:
        hop.terminate()


def test_health_reports_pending_and_disk_bytes_like_the_metrics(hop: HopProcess) -> None:
    import json

    with urllib.request.urlopen(f"http://{hop.telemetry}/health", timeout=5) as resp:
        health = json.loads(resp.read())
    metrics = hop.metrics()
    assert health["queue_bytes"] == metrics["otel_footprint_queue_bytes"]
    assert health["queue_disk_bytes"] == metrics["otel_footprint_queue_disk_bytes"]
    try:
        urllib.request.urlopen(f"http://{hop.telemetry}/nope", timeout=5)
    except urllib.error.HTTPError as err:
        assert err.code == 404


def test_a_failed_start_releases_what_it_acquired(sink: Sink, tmp_path: Path) -> None:
    """Hop.start unwinds its own ExitStack: the data directory lock, journal and ports are free."""
    import socket
    import threading

    from otel_footprint.service import config as c
    from otel_footprint.service.hop import Hop, StartupError

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    threads_before = set(threading.enumerate())

    def cfg(http: str) -> c.HopConfig:
        flags = c.flag_layer(
            grpc="127.0.0.1:0",
            http=http,
            telemetry="127.0.0.1:0",
            forward=sink.endpoint,
            data_dir=str(tmp_path / "data"),
        )
        return c.load(None, flags, {"XDG_STATE_HOME": str(tmp_path)})

    try:
        with pytest.raises(StartupError, match="OTLP/HTTP"):
            Hop(cfg(f"127.0.0.1:{port}")).start()
    finally:
        taken.close()
    hop = Hop(cfg("127.0.0.1:0"))
    hop.start()  # the same data directory: its lock was released
    assert hop.stop() is True
    assert hop.stop() is True  # stopping twice is harmless
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = {t for t in threading.enumerate() if t.name.startswith("otel-footprint")}
        if not left - threads_before:
            break
        time.sleep(0.1)
    assert not {
        t.name
        for t in set(threading.enumerate()) - threads_before
        if t.name.startswith("otel-footprint")
    }
