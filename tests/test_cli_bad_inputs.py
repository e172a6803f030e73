"""Every command, every bad input: one clear error line on stderr, a non-zero exit, never a traceback.

Each case runs the real command in its own process (as a person would, so gRPC's C core, argparse
and the interpreter all write where they really write) and checks the one error style of
``commands/errors.py``: the last stderr line is ``otel-footprint <command>: error: ...``, it is the
only error line, usage (when shown) is the failing command's own, and nothing says "Traceback".
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from _shared import RECORDINGS

CLI = [sys.executable, "-c", "import sys; from otel_footprint.commands.cli import main; "
       "sys.exit(main())"]  # fmt: skip


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    status: int
    says: str
    """Words the error line must contain."""
    stdin: bytes | None = None
    usage: bool = False
    """argparse's error: the failing command's usage comes first."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad")
    made = {
        "garbage": root / "garbage.bin",
        "empty": root / "empty.json",
        "empty_object": root / "empty-object.json",
        "array": root / "array.json",
        "metrics": root / "metrics.json",
        "bad_line": root / "bad-line.json",
        "not_recording": root / "not-recording.ndjson",
        "a_file": root / "a-file",
        "bad_yaml": root / "bad.yaml",
        "no_scenarios": root / "no-scenarios.jsonl",
    }
    made["garbage"].write_bytes(bytes(range(256)) * 3)
    made["empty"].write_bytes(b"")
    made["empty_object"].write_text("{}\n")
    made["array"].write_text("[1, 2]\n")
    made["jaeger_empty"] = root / "jaeger-empty.json"
    made["jaeger_empty"].write_text('{"data": [], "total": 0, "limit": 0, "offset": 0}\n')
    made["metrics"].write_text(json.dumps({"resourceMetrics": []}) + "\n")
    made["bad_line"].write_text('{"resourceSpans": []}\n{not json\n')
    made["not_recording"].write_text('{"hello": "world"}\n')
    made["a_file"].write_text("x")
    made["bad_yaml"].write_text("receivers: [unclosed\n")
    made["no_scenarios"].write_text("\n")
    made["gzip"] = root / "traces.jsonl.gz"
    made["gzip"].write_bytes(gzip.compress(b'{"resourceSpans": []}\n'))
    made["utf16"] = root / "utf16.json"
    made["utf16"].write_bytes('{"resourceSpans": []}\n'.encode("utf-16"))
    made["deep"] = root / "deep.json"
    made["deep"].write_text("[" * 100_000 + "]" * 100_000)
    made["deep_yaml"] = root / "deep.yaml"
    made["deep_yaml"].write_text("[" * 50_000 + "]" * 50_000)
    made["null"] = root / "null.json"
    made["null"].write_text("null\n")
    made["text"] = root / "notes.txt"
    made["text"].write_text("trace 4bf92f3577b34da6 was slow\n")
    made["tempo_empty"] = root / "tempo-empty.json"
    made["tempo_empty"].write_text('{"batches": []}\n')
    made["tempo_search"] = root / "tempo-search.json"
    made["tempo_search"].write_text(
        '{"traces": [{"traceID": "4bf92f3577b34da6", "rootServiceName": "agent"}], "metrics": {}}'
    )
    made["zip"] = root / "traces.zip"
    made["zip"].write_bytes(b"PK\x03\x04" + bytes(40))
    made["dir"] = root
    return made


@pytest.fixture(scope="module")
def grpc_port() -> Iterator[int]:
    """A real gRPC server (nothing registered): what an OTLP/HTTP client meets on port 4317."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


def _dead_port() -> int:
    """A port nothing listens on (bound for a moment, then closed): a connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_DEAD_PORT = _dead_port()


@pytest.fixture(scope="module")
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _cases(f: dict[str, Path], grpc_port: int, taken: int) -> dict[str, Case]:
    forward = ("--forward", "http://127.0.0.1:9/v1/traces")
    dead = _DEAD_PORT
    data = ("--data-dir", str(f["dir"] / "data"))
    return {
        # top level
        "no-command": Case((), 2, "required: COMMAND", usage=True),
        "unknown-command": Case(("frobnicate",), 2, "invalid choice", usage=True),
        # explain
        "explain-empty-object": Case(("explain", str(f["empty_object"])), 2, "an empty object"),
        "explain-empty-file": Case(("explain", str(f["empty"])), 2, "empty input"),
        "explain-garbage": Case(("explain", str(f["garbage"])), 2, "binary data"),
        "explain-garbage-stdin": Case(("explain", "-"), 2, "stdin", stdin=bytes(range(256))),
        "explain-empty-stdin": Case(("explain", "-"), 2, "empty input", stdin=b""),
        "explain-array": Case(("explain", str(f["array"])), 2, "a JSON list"),
        "explain-jaeger-no-traces": Case(
            ("explain", str(f["jaeger_empty"])), 2, "Jaeger trace download with no traces"
        ),
        "explain-metrics-only": Case(("explain", str(f["metrics"])), 2, "no traces or logs"),
        "explain-bad-line": Case(("explain", str(f["bad_line"])), 2, "line 2 is not JSON"),
        "explain-null": Case(("explain", str(f["null"])), 2, "a JSON null, not OTLP JSON"),
        "explain-text": Case(("explain", str(f["text"])), 2, "text that is not JSON (line 1: "),
        "explain-gzip": Case(("explain", str(f["gzip"])), 2, "gzip-compressed data"),
        "explain-utf16": Case(("explain", str(f["utf16"])), 2, "UTF-16 text; convert it"),
        "explain-zip": Case(("explain", str(f["zip"])), 2, "a zip archive"),
        "explain-deep-json": Case(("explain", str(f["deep"])), 2, "JSON nested too deeply"),
        "explain-tempo-search": Case(
            ("explain", str(f["tempo_search"])), 2, "a Tempo search result (trace ids, no spans)"
        ),
        "explain-tempo-no-spans": Case(
            ("explain", str(f["tempo_empty"])), 2, "a Tempo trace download with no spans in it"
        ),
        "explain-absent": Case(("explain", str(f["dir"] / "absent.json")), 2, "cannot read"),
        "explain-directory": Case(("explain", str(f["dir"])), 2, "cannot read"),
        "explain-no-input": Case(("explain",), 2, "required: INPUT", usage=True),
        "explain-bad-format": Case(
            ("explain", str(f["empty"]), "--format", "pdf"), 2, "invalid choice", usage=True
        ),
        "explain-jaeger-url-not-http": Case(
            ("explain", str(f["empty"]), "--jaeger-url", "javascript:alert(1)"),
            2,
            "expected an http:// or https:// URL",
        ),
        "explain-unknown-flag": Case(
            ("explain", str(f["empty"]), "--bogus"), 2, "unrecognized arguments", usage=True
        ),
        # import agentfootprint
        "import-garbage": Case(("import", "agentfootprint", str(f["garbage"])), 2, "not UTF-8"),
        "import-garbage-stdin": Case(
            ("import", "agentfootprint", "-"), 2, "stdin", stdin=bytes(range(256))
        ),
        "import-not-a-recording": Case(
            ("import", "agentfootprint", str(f["not_recording"])), 2, "line 1"
        ),
        "import-absent": Case(
            ("import", "agentfootprint", str(f["dir"] / "absent.ndjson")), 2, "cannot read"
        ),
        "import-directory": Case(("import", "agentfootprint", str(f["dir"])), 2, "cannot read"),
        "import-output-nowhere": Case(
            ("import", "agentfootprint", str(f["not_recording"]), "-o", "/nonexistent/x.jsonl"),
            2,
            "cannot write /nonexistent/x.jsonl: no directory /nonexistent",
        ),
        "import-output-directory": Case(
            ("import", "agentfootprint", str(f["not_recording"]), "-o", str(f["dir"])),
            2,
            "it is a directory",
        ),
        "import-unknown-scheme": Case(
            ("import", "agentfootprint", str(f["garbage"]), "--endpoint", "ftp://x:1"),
            2,
            "unknown scheme 'ftp'",
        ),
        "import-bad-timeout": Case(
            ("import", "agentfootprint", "-", "--timeout", "-1"), 2, "--timeout", usage=True
        ),
        "import-unknown-flag": Case(
            ("import", "agentfootprint", "-", "--bogus"), 2, "unrecognized", usage=True
        ),
        "import-no-kind": Case(("import",), 2, "required: KIND", usage=True),
        "import-empty": Case(("import", "agentfootprint", str(f["empty"])), 2, "empty input"),
        "import-empty-stdin": Case(("import", "agentfootprint", "-"), 2, "stdin: empty input"),
        "import-deep-json": Case(
            ("import", "agentfootprint", str(f["deep"])), 2, "JSON nested too deeply to read"
        ),
        "import-gzip": Case(
            ("import", "agentfootprint", str(f["gzip"])), 2, "gzip-compressed data"
        ),
        # demo
        "demo-output-nowhere": Case(("demo", "-o", "/nonexistent/x.jsonl"), 2, "cannot write"),
        "demo-output-directory": Case(("demo", "-o", str(f["dir"])), 2, "cannot write"),
        "demo-unknown-scheme": Case(("demo", "--endpoint", "ftp://x:1"), 2, "unknown scheme"),
        "demo-grpc-without-port": Case(
            ("demo", "--endpoint", "http://127.0.0.1", "--protocol", "grpc"), 2, "needs a port"
        ),
        "demo-http-json": Case(
            ("demo", "--endpoint", "http://127.0.0.1:1", "--protocol", "http/json"),
            2,
            "invalid choice",
            usage=True,
        ),
        "demo-unknown-scenario": Case(
            ("demo", "--scenario", "nope"), 2, "invalid choice", usage=True
        ),
        "demo-unknown-flag": Case(("demo", "--bogus"), 2, "unrecognized", usage=True),
        "demo-endpoint-dead-port": Case(
            ("demo", "--endpoint", f"http://127.0.0.1:{dead}"),
            1,
            f"cannot reach http://127.0.0.1:{dead} (grpc 127.0.0.1:{dead}): Connection refused; "
            "nothing sent",
        ),
        "demo-endpoint-port-0": Case(
            ("demo", "--endpoint", "http://127.0.0.1:0"), 2, "port 0 cannot be sent to"
        ),
        "demo-endpoint-unclosed-ipv6": Case(
            ("demo", "--endpoint", "http://[::1:4317"), 2, "cannot be read as a URL"
        ),
        "demo-endpoint-spaces": Case(
            ("demo", "--endpoint", " http://127.0.0.1:4317"), 2, "spaces around it"
        ),
        "serve-forward-unclosed-ipv6": Case(
            ("serve", "--forward", "[::1:4317", "--data-dir", str(f["dir"] / "data")),
            2,
            "cannot be read as a URL",
        ),
        "import-endpoint-unclosed-ipv6": Case(
            ("import", "agentfootprint", "-", "--endpoint", "http://[::1:4318/v1/traces"),
            2,
            "cannot be read as a URL",
        ),
        "demo-endpoint-unresolvable": Case(
            ("demo", "--endpoint", "http://otel-footprint-test.invalid:4318/v1/traces"),
            1,
            "cannot resolve otel-footprint-test.invalid",
        ),
        "import-endpoint-dead-port": Case(
            (
                "import",
                "agentfootprint",
                str(RECORDINGS / "park-trap.ndjson"),
                "--endpoint",
                f"http://127.0.0.1:{dead}/v1/traces",
            ),
            1,
            f"(http/protobuf http://127.0.0.1:{dead}/v1/traces): Connection refused; nothing sent",
        ),
        # serve
        "serve-data-dir-is-a-file": Case(
            ("serve", *forward, "--data-dir", str(f["a_file"])), 2, "is a file"
        ),
        "serve-data-dir-under-a-file": Case(
            ("serve", *forward, "--data-dir", str(f["a_file"] / "sub")), 2, "which is a file"
        ),
        "serve-data-dir-cannot-be-made": Case(
            ("serve", *forward, "--data-dir", "/proc/otel-footprint-test/x"),
            2,
            "cannot create data directory",
        ),
        "serve-config-binary": Case(
            ("serve", *forward, "--config", str(f["garbage"])), 2, "not YAML text"
        ),
        "serve-config-absent": Case(
            ("serve", *forward, "--config", str(f["dir"] / "absent.yaml")), 2, "cannot read"
        ),
        "serve-config-bad-yaml": Case(
            ("serve", *forward, "--config", str(f["bad_yaml"])), 2, "not valid YAML"
        ),
        "serve-forward-unknown-scheme": Case(
            ("serve", "--forward", "ftp://x:1", *data), 2, "unknown scheme 'ftp'"
        ),
        "serve-forward-http-json": Case(
            ("serve", *forward, *data, "--forward-protocol", "http/json"),
            2,
            "invalid choice",
            usage=True,
        ),
        "serve-no-forward": Case(("serve", *data), 2, "no forward endpoint"),
        "serve-grpc-port-taken": Case(
            ("serve", *forward, *data, "--grpc", f"127.0.0.1:{taken}", "--http", "127.0.0.1:0"),
            1,
            "Address already in use",
        ),
        "serve-grpc-not-an-address": Case(
            ("serve", *forward, *data, "--grpc", "nonsense"), 2, "HOST:PORT"
        ),
        "serve-unknown-flag": Case(("serve", "--bogus"), 2, "unrecognized", usage=True),
        "serve-config-deep-yaml": Case(
            ("serve", *forward, *data, "--config", str(f["deep_yaml"])),
            2,
            "is nested too deeply to read",
        ),
        "serve-forward-port-0": Case(
            ("serve", "--forward", "127.0.0.1:0", *data), 2, "port 0 cannot be sent to"
        ),
        "serve-forward-timeout-0": Case(
            ("serve", *forward, *data, "--set", "exporters.otlp.timeout=0s"),
            2,
            "exporters.otlp.timeout must be more than 0s",
        ),
        "serve-token-file-absent": Case(
            (
                "serve",
                *forward,
                *data,
                "--set",
                f"receivers.otlp.auth.bearer_token_file={f['dir'] / 'absent.token'}",
            ),
            2,
            "absent.token: No such file or directory",
        ),
        # conformance engagement
        "conformance-absent": Case(
            ("conformance", "engagement", str(f["dir"] / "absent.jsonl")), 2, "cannot read"
        ),
        "conformance-no-scenarios": Case(
            ("conformance", "engagement", str(f["no_scenarios"])), 2, "no scenarios"
        ),
        "conformance-empty": Case(
            ("conformance", "engagement", str(f["empty"])), 2, "no scenarios in it (it is empty)"
        ),
        "conformance-garbage": Case(
            ("conformance", "engagement", str(f["garbage"])), 2, "line 1: binary data"
        ),
        "conformance-garbage-stdin": Case(
            ("conformance", "engagement", "-"),
            2,
            "stdin: not engagement vectors",
            stdin=bytes(range(256)),
        ),
        "conformance-deep-json": Case(
            ("conformance", "engagement", str(f["deep"])), 2, "line 1: JSON nested too deeply"
        ),
        "conformance-otlp-json": Case(
            ("conformance", "engagement", str(f["metrics"])), 2, "'steps' must be a list"
        ),
        "conformance-unknown-kind": Case(("conformance", "nope"), 2, "invalid choice", usage=True),
    }


CASE_IDS = [
    *(["no-command", "unknown-command"]),
    *[
        "explain-empty-object",
        "explain-empty-file",
        "explain-garbage",
        "explain-garbage-stdin",
        "explain-empty-stdin",
        "explain-array",
        "explain-jaeger-no-traces",
        "explain-metrics-only",
        "explain-bad-line",
        "explain-null",
        "explain-text",
        "explain-gzip",
        "explain-utf16",
        "explain-zip",
        "explain-deep-json",
        "explain-tempo-search",
        "explain-tempo-no-spans",
        "explain-absent",
        "explain-directory",
        "explain-no-input",
        "explain-bad-format",
        "explain-jaeger-url-not-http",
        "explain-unknown-flag",
    ],
    *[
        "import-garbage",
        "import-garbage-stdin",
        "import-not-a-recording",
        "import-absent",
        "import-directory",
        "import-output-nowhere",
        "import-output-directory",
        "import-unknown-scheme",
        "import-bad-timeout",
        "import-unknown-flag",
        "import-no-kind",
        "import-empty",
        "import-empty-stdin",
        "import-gzip",
        "import-deep-json",
    ],
    *[
        "demo-output-nowhere",
        "demo-output-directory",
        "demo-unknown-scheme",
        "demo-grpc-without-port",
        "demo-http-json",
        "demo-unknown-scenario",
        "demo-unknown-flag",
        "demo-endpoint-dead-port",
        "demo-endpoint-port-0",
        "demo-endpoint-unclosed-ipv6",
        "demo-endpoint-spaces",
        "serve-forward-unclosed-ipv6",
        "import-endpoint-unclosed-ipv6",
        "demo-endpoint-unresolvable",
        "import-endpoint-dead-port",
    ],
    *[
        "serve-data-dir-is-a-file",
        "serve-data-dir-under-a-file",
        "serve-data-dir-cannot-be-made",
        "serve-config-binary",
        "serve-config-absent",
        "serve-config-bad-yaml",
        "serve-forward-unknown-scheme",
        "serve-forward-http-json",
        "serve-no-forward",
        "serve-grpc-port-taken",
        "serve-grpc-not-an-address",
        "serve-unknown-flag",
        "serve-config-deep-yaml",
        "serve-forward-port-0",
        "serve-forward-timeout-0",
        "serve-token-file-absent",
    ],
    *[
        "conformance-absent",
        "conformance-no-scenarios",
        "conformance-empty",
        "conformance-garbage",
        "conformance-garbage-stdin",
        "conformance-otlp-json",
        "conformance-deep-json",
        "conformance-unknown-kind",
    ],
]


def _command_of(args: tuple[str, ...]) -> str:
    """``otel-footprint import agentfootprint`` for the args of that command."""
    words = ["otel-footprint"]
    if args[:2] in (("import", "agentfootprint"), ("conformance", "engagement")):
        return " ".join([*words, *args[:2]])
    if args and args[0] in ("explain", "demo", "serve", "import", "conformance"):
        words.append(args[0])
    return " ".join(words)


def _run(args: tuple[str, ...], stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [*CLI, *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("name", CASE_IDS)
def test_a_bad_input_gets_one_clear_line(
    name: str, files: dict[str, Path], grpc_port: int, taken_port: int
) -> None:
    case = _cases(files, grpc_port, taken_port)[name]
    done = _run(case.args, case.stdin)
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert done.returncode == case.status, (done.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "nothing said on stderr"
    last = lines[-1]
    prog = _command_of(case.args)
    assert last.startswith(f"{prog}: error: "), last
    assert case.says in last, last
    assert sum(": error: " in line for line in lines) == 1, err
    if case.usage:
        assert lines[0].startswith(f"usage: {prog}"), err
    else:
        # No usage, no library noise (gRPC's "E1201 ... Failed to add port"): the one line only.
        assert lines == [last], err
    if case.args[:1] == ("demo",):
        assert done.stdout == b"", "the demo ran before refusing its arguments"


def test_http_to_a_grpc_port_says_which_protocol_to_try(grpc_port: int) -> None:
    recording = RECORDINGS / "park-trap.ndjson"
    if not recording.exists():
        pytest.skip("recordings not on this machine")
    done = _run(
        (
            "import",
            "agentfootprint",
            str(recording),
            "--endpoint",
            f"http://127.0.0.1:{grpc_port}",
            "--protocol",
            "http/protobuf",
            "--timeout",
            "5",
        ),
        None,
    )
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("otel-footprint import agentfootprint: error: ")
    assert "--protocol grpc" in line


def test_every_case_is_walked(files: dict[str, Path], grpc_port: int, taken_port: int) -> None:
    walked = set(CASE_IDS)
    defined = set(_cases(files, grpc_port, taken_port))
    assert walked == defined
    commands = {c.args[0] for c in _cases(files, grpc_port, taken_port).values() if c.args}
    assert {"explain", "import", "demo", "serve", "conformance"} <= commands


def test_grpc_to_an_http_port_fails_in_one_line_with_the_hint() -> None:
    """``demo --endpoint http://host:4318`` (no protocol: grpc) against a plain HTTP server: the
    exporter's retry warnings stay out of stderr; one line says what failed and what to try."""
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        done = _run(
            ("demo", "--scenario", "routed-delivered", "--endpoint", f"http://127.0.0.1:{port}"),
            None,
        )
    finally:
        server.shutdown()
        server.server_close()
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("otel-footprint demo: error: 4 spans could not be sent to ")
    assert "give --protocol http/protobuf" in line
