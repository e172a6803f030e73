"""TLS (server + client certificates) and the bearer-token check on both receivers, and CLI refusals."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from test_service_support import REPO, TRACE_EXPORT, HopProcess, Sink, emit_plain

from otel_footprint.commands import cli


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
            cwd=d,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            cwd=d,
        )
    return d


def test_tls_with_client_certificates_and_a_bearer_token(pki: Path, tmp_path: Path) -> None:
    sink = Sink().start()
    config = tmp_path / "hop.yaml"
    tls = (
        f"          cert_file: {pki / 'server.crt'}\n"
        f"          key_file: {pki / 'server.key'}\n"
        f"          client_ca_file: {pki / 'ca.crt'}\n"
    )
    config.write_text(
        "receivers:\n  otlp:\n    auth:\n      bearer_token: ${env:HOP_TEST_TOKEN}\n    protocols:\n"
        f"      grpc:\n        tls:\n{tls.replace('          ', '          ')}"
        f"      http:\n        tls:\n{tls}"
    )
    hop = HopProcess(
        tmp_path / "data", sink.endpoint, "--config", str(config), env={"HOP_TEST_TOKEN": "s3cret"}
    ).start()
    try:
        creds = grpc.ssl_channel_credentials(
            root_certificates=(pki / "ca.crt").read_bytes(),
            private_key=(pki / "client.key").read_bytes(),
            certificate_chain=(pki / "client.crt").read_bytes(),
        )
        channel = grpc.secure_channel(hop.grpc, creds)
        export = channel.unary_unary(
            TRACE_EXPORT, request_serializer=None, response_deserializer=None
        )
        assert export(b"", metadata=(("authorization", "Bearer s3cret"),), timeout=5) == b""
        with pytest.raises(grpc.RpcError) as err:
            export(b"", metadata=(("authorization", "Bearer wrong"),), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            export(b"", timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        channel.close()

        # The SDK's own exporter, with TLS and the token as a header, gets through.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(
                OTLPSpanExporter(
                    endpoint=hop.grpc, credentials=creds, headers={"authorization": "Bearer s3cret"}
                )
            )
        )
        _, span_id = emit_plain(provider.get_tracer("t"))
        assert sink.wait_for(lambda: any(s.span_id.hex() == span_id for s in sink.spans()), 10)
        provider.shutdown()

        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
        url = f"https://{hop.http}/v1/traces"

        def post(headers: dict[str, str], context: ssl.SSLContext) -> int:
            req = urllib.request.Request(
                url,
                data=b"",
                method="POST",
                headers={"Content-Type": "application/x-protobuf", **headers},
            )
            try:
                with urllib.request.urlopen(req, timeout=5, context=context) as resp:
                    return int(resp.status)
            except urllib.error.HTTPError as e:
                return int(e.code)

        assert post({"Authorization": "Bearer s3cret"}, ctx) == 200
        assert post({}, ctx) == 401
        no_client_cert = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            post({"Authorization": "Bearer s3cret"}, no_client_cert)
    finally:
        assert hop.terminate() == 0, hop.stderr()
        sink.stop()


def test_config_errors_exit_with_status_2_and_name_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("exporters:\n  otlp:\n    endpoint: 127.0.0.1:9\n    retries: 3\n")
    assert cli.main(["serve", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "exporters.otlp.retries" in err and "retry" in err and "endpoint" in err


def test_non_loopback_without_tls_or_token_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--grpc", "0.0.0.0:0", "--forward", "127.0.0.1:9"]) == 2
    assert "not a loopback address" in capsys.readouterr().err


def test_forwarding_to_itself_is_refused(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "otel_footprint.commands.cli",
            "serve",
            "--grpc",
            f"127.0.0.1:{port}",
            "--http",
            "127.0.0.1:0",
            "--telemetry",
            "127.0.0.1:0",
            "--data-dir",
            str(tmp_path / "d"),
            "--forward",
            f"127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 1
    assert "own receiver" in proc.stderr


def test_check_config_prints_the_resolved_endpoints(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "serve",
            "--forward",
            "http://next:4318/v1/traces",
            "--check-config",
            "--grpc",
            "127.0.0.1:5317",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert (
        "grpc 127.0.0.1:5317" in out and "forward http/protobuf http://next:4318/v1/traces" in out
    )
