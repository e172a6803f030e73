"""``otel-footprint import agentfootprint``: files, stdout, and real OTLP receivers on loopback."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from _shared import RECORDINGS as _RECORDINGS
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.bridges.otlpjson import read_otlp_json_lines
from otel_footprint.commands.cli import main

_FIXTURE = Path(__file__).resolve().parent / "data" / "recordings" / "park-trap.ndjson"
RECORDING = _FIXTURE if _FIXTURE.exists() else _RECORDINGS / "park-trap.ndjson"

pytestmark = pytest.mark.skipif(not RECORDING.exists(), reason="park-trap recording not found")


def _expected() -> list[bytes]:
    lines = RECORDING.read_text().splitlines()
    return [r.SerializeToString() for r in recording_to_requests(lines)]


def _import(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["import", "agentfootprint", *args], out=out)
    return code, out.getvalue()


def test_writes_otlp_json_lines_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    code, printed = _import(str(RECORDING), "-o", str(target))
    assert code == 0
    assert "1 run legs, 12 spans" in printed and str(target) in printed
    back = list(read_otlp_json_lines(target.read_text().splitlines()))
    assert [r.SerializeToString() for r in back] == _expected()


@pytest.mark.parametrize("extra", [[], ["-o", "-"]])
def test_stdout_is_the_default(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, printed = _import(str(RECORDING), *extra)
    assert code == 0
    back = list(read_otlp_json_lines(printed.splitlines()))
    assert [r.SerializeToString() for r in back] == _expected()
    assert "run legs" in capsys.readouterr().err  # the summary stays off the data stream


def test_renewal_grace_option_reaches_the_plan(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    assert _import(str(RECORDING), "-o", str(target), "--renewal-grace", "5")[0] == 0
    assert '"footprint.renewal_grace","value":{"intValue":"5"}' in target.read_text()
    with pytest.raises(SystemExit) as stopped:
        _import(str(RECORDING), "--renewal-grace", "0")
    assert stopped.value.code == 2


def test_bad_input_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.ndjson"
    good = RECORDING.read_text().splitlines()[0]
    bad.write_text(f"{good}\n{good}\nnot json at all\n")
    assert _import(str(bad))[0] == 2
    assert "line 3: not JSON" in capsys.readouterr().err
    assert _import(str(tmp_path / "missing.ndjson"))[0] == 2
    assert "cannot read" in capsys.readouterr().err


# ── real receivers ───────────────────────────────────────────────────────────────────────────


class _Received:
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []


def _http_receiver(received: _Received, reject: int = 0, status: int = 200) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.paths.append(self.path)
            received.content_types.append(self.headers["Content-Type"])
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.requests.append(request)
            response = ExportTraceServiceResponse()
            if reject:
                response.partial_success.rejected_spans = reject
                response.partial_success.error_message = "too old"
            payload = response.SerializeToString()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, _Received]]:
    received = _Received()
    server = _http_receiver(received)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_sends_http_protobuf_to_v1_traces(http_receiver: tuple[str, _Received]) -> None:
    url, received = http_receiver
    code, printed = _import(str(RECORDING), "--endpoint", url, "--protocol", "http/protobuf")
    assert code == 0 and "http/protobuf" in printed
    assert received.paths == ["/v1/traces"]
    assert received.content_types == ["application/x-protobuf"]
    assert [r.SerializeToString() for r in received.requests] == _expected()


def test_http_rejections_and_errors_fail_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    for reject, status, expected in ((3, 200, "rejected 3 spans"), (0, 503, "HTTP 503")):
        server = _http_receiver(_Received(), reject=reject, status=status)
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/custom/path"
            assert _import(str(RECORDING), "--endpoint", url, "--protocol", "http/protobuf")[0] == 1
            assert expected in capsys.readouterr().err
        finally:
            server.shutdown()
            server.server_close()


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: _Received) -> None:
        self.received = received

    def Export(
        self, request: ExportTraceServiceRequest, context: Any
    ) -> ExportTraceServiceResponse:
        self.received.requests.append(request)
        return ExportTraceServiceResponse()


def test_sends_grpc_with_the_trace_service_stub() -> None:
    received = _Received()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(received), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        code, printed = _import(
            str(RECORDING), "--endpoint", f"http://127.0.0.1:{port}", "--protocol", "grpc"
        )
        assert code == 0 and "grpc" in printed
        assert [r.SerializeToString() for r in received.requests] == _expected()
    finally:
        server.stop(grace=None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [("grpc", "(grpc 127.0.0.1:"), ("http/protobuf", "(http/protobuf http")],
)
def test_a_refusing_endpoint_is_a_clear_error(
    protocol: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port nothing listens on: one short line before anything is sent (one TCP connection
    tried first), not the exporter's retries and gRPC's status text."""
    url = f"http://127.0.0.1:{_free_port()}"
    code, _ = _import(str(RECORDING), "--endpoint", url, "--protocol", protocol, "--timeout", "3")
    assert code == 1
    error = capsys.readouterr().err
    assert error.startswith(f"otel-footprint import agentfootprint: error: cannot reach {url} ")
    assert expected in error
    assert error.rstrip().endswith("): Connection refused; nothing sent"), error


def test_protocol_defaults_follow_the_environment_then_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from otel_footprint.sdk.endpoint import pick_protocol

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    # One rule (sdk/endpoint.py): no port guessing; the OTLP/HTTP path says HTTP, else grpc.
    assert pick_protocol("http://127.0.0.1:4317") == "grpc"
    assert pick_protocol("127.0.0.1:4318") == "grpc"
    assert pick_protocol("http://127.0.0.1:4318/v1/traces") == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    assert pick_protocol("http://127.0.0.1:4318") == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    assert pick_protocol("http://127.0.0.1:4318/v1/traces") == "grpc"


def test_resource_attributes_and_id_salt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project per import (resource attributes) and fresh ids per re-import (salt)."""
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,team=a%2Cb")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)

    def imported(*extra: str) -> list[ExportTraceServiceRequest]:
        target = tmp_path / "out.jsonl"
        assert main(["import", "agentfootprint", str(RECORDING), "-o", str(target), *extra]) == 0
        return list(read_otlp_json_lines(target.read_text().splitlines()))

    plain = imported()
    named = imported("--resource-attribute", "openinference.project.name=p1", "--id-salt", "x")
    resource = {
        kv.key: kv.value.string_value for kv in named[0].resource_spans[0].resource.attributes
    }
    assert resource == {
        "deployment.environment": "ci",
        "team": "a,b",
        "openinference.project.name": "p1",
        "service.name": "agentfootprint",
    }
    plain_ids = {
        s.span_id
        for r in plain
        for rs in r.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    }
    salted_ids = {
        s.span_id
        for r in named
        for rs in r.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    }
    assert len(plain_ids) == len(salted_ids) and not plain_ids & salted_ids
    assert imported() == plain  # no salt: the same ids as every earlier import
