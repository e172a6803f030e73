"""Each TLS file ``serve`` is given is checked when its configuration loads: a file that cannot
serve is one line naming the setting, the file and what is wrong with it (exit 2), never gRPC's
"Failed to bind to address" at start or a refusal that speaks of another setting (issue 23)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "import sys; from otel_footprint.commands.cli import main; "
       "sys.exit(main())"]  # fmt: skip
GRPC = "receivers.otlp.protocols.grpc.tls"
HTTP = "receivers.otlp.protocols.http.tls"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")
    for name in ("server", "other"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.crt", "-days", "1", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    _openssl("x509", "-in", "server.crt", "-outform", "der", "-out", "server.der", cwd=d)
    _openssl("pkey", "-in", "server.key", "-aes256", "-passout", "pass:x", "-out", "enc.key", cwd=d)
    (d / "notes.txt").write_text("this is not a certificate\n")
    (d / "empty.pem").write_bytes(b"")
    (d / "broken.crt").write_text(
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n"
    )
    os.mkfifo(d / "fifo.pem")  # a read would wait for a writer for ever
    (d / "unreadable.crt").write_bytes((d / "server.crt").read_bytes())
    (d / "unreadable.crt").chmod(0)
    return d


CASES = {
    # setting=file pairs (relative to the pki folder), then the words the line must hold
    "cert-not-a-certificate": (
        {f"{GRPC}.cert_file": "notes.txt", f"{GRPC}.key_file": "server.key"},
        f"{GRPC}.cert_file: notes.txt holds no PEM block",
    ),
    "cert-is-a-key": (
        {f"{GRPC}.cert_file": "server.key", f"{GRPC}.key_file": "server.key"},
        "server.key holds a private key, not a certificate",
    ),
    "cert-is-der": (
        {f"{GRPC}.cert_file": "server.der", f"{GRPC}.key_file": "server.key"},
        "server.der is binary, not PEM text (a DER file?",
    ),
    "cert-empty": (
        {f"{GRPC}.cert_file": "empty.pem", f"{GRPC}.key_file": "server.key"},
        "empty.pem is empty",
    ),
    "cert-broken": (
        {f"{GRPC}.cert_file": "broken.crt", f"{GRPC}.key_file": "server.key"},
        "broken.crt: its certificate cannot be read",
    ),
    "cert-a-directory": (
        {f"{GRPC}.cert_file": ".", f"{GRPC}.key_file": "server.key"},
        "is a directory",
    ),
    "cert-a-fifo": (
        {f"{GRPC}.cert_file": "fifo.pem", f"{GRPC}.key_file": "server.key"},
        "fifo.pem is not a regular file",
    ),
    "cert-absent": (
        {f"{GRPC}.cert_file": "absent.crt", f"{GRPC}.key_file": "server.key"},
        "file absent.crt does not exist",
    ),
    "key-is-a-certificate": (
        {f"{HTTP}.cert_file": "server.crt", f"{HTTP}.key_file": "server.crt"},
        f"{HTTP}.key_file: server.crt holds a certificate, not a private key",
    ),
    "key-of-another-certificate": (
        {f"{GRPC}.cert_file": "server.crt", f"{GRPC}.key_file": "other.key"},
        "key_file other.key is not the private key of cert_file server.crt",
    ),
    "key-encrypted": (
        {f"{GRPC}.cert_file": "server.crt", f"{GRPC}.key_file": "enc.key"},
        "enc.key is an encrypted private key",
    ),
    "client-ca-alone": (
        {f"{GRPC}.client_ca_file": "server.crt"},
        f"{GRPC}.client_ca_file: clients are asked for certificates inside TLS, and this "
        "receiver serves no TLS: give cert_file and key_file too",
    ),
    "client-ca-not-a-certificate": (
        {
            f"{GRPC}.cert_file": "server.crt",
            f"{GRPC}.key_file": "server.key",
            f"{GRPC}.client_ca_file": "notes.txt",
        },
        f"{GRPC}.client_ca_file: notes.txt holds no PEM block",
    ),
    "cert-without-key": (
        {f"{GRPC}.cert_file": "server.crt"},
        "cert_file server.crt is given without key_file",
    ),
    "key-without-cert": (
        {f"{GRPC}.key_file": "server.key"},
        "key_file server.key is given without cert_file",
    ),
    "forward-ca-is-a-key": (
        {"exporters.otlp.tls.ca_file": "server.key"},
        "exporters.otlp.tls.ca_file: server.key holds a private key, not a certificate",
    ),
}
if os.geteuid() != 0:  # root reads any file
    CASES["cert-unreadable"] = (
        {f"{GRPC}.cert_file": "unreadable.crt", f"{GRPC}.key_file": "server.key"},
        "cannot read unreadable.crt: Permission denied",
    )


def _serve(pki: Path, settings: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    sets = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [*CLI, "serve", "--forward", "127.0.0.1:9", "--data-dir", str(pki / "data"),
         "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--telemetry", "127.0.0.1:0",
         *sets, *extra],
        cwd=pki, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_tls_file_is_named_with_what_is_wrong(name: str, pki: Path) -> None:
    settings, says = CASES[name]
    done = _serve(pki, settings)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("otel-footprint serve: error: configuration: "), line
    assert says in line, line
    assert "bind" not in line
    assert done.stdout == ""


def test_good_tls_files_pass_the_checks(pki: Path) -> None:
    settings = {f"{GRPC}.cert_file": "server.crt", f"{GRPC}.key_file": "server.key",
                f"{GRPC}.client_ca_file": "other.crt", "exporters.otlp.tls.ca_file": "server.crt"}  # fmt: skip
    done = _serve(pki, settings, "--check-config")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("configuration OK")
