"""The real OpenTelemetry pipeline of the end-to-end suite: the Collector built by ``scripts/otelcol.sh``
and Jaeger v2 built by ``scripts/jaeger.sh`` (found through their env files' variables), Collectors and
``otel-footprint serve`` hops started per test, and Jaeger's HTTP query API.

Everything here uses the standard library (urllib, subprocess) and the ``otel-footprint`` console
command of this environment, so the product's module layout can change without breaking the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "collector-config"

OTELCOL_BIN_ENV = "OTEL_FOOTPRINT_OTELCOL_BIN"
OTELCOL_GRPC_ENV = "OTEL_FOOTPRINT_OTELCOL_GRPC"
JAEGER_URL_ENV = "OTEL_FOOTPRINT_JAEGER_URL"
JAEGER_OTLP_GRPC_ENV = "OTEL_FOOTPRINT_JAEGER_OTLP_GRPC"
JAEGER_OTLP_HTTP_ENV = "OTEL_FOOTPRINT_JAEGER_OTLP_HTTP"

WAIT_S = 30.0
"""Bound of every wait on a process or on Jaeger (ingestion through two Collectors and a hop)."""

T = TypeVar("T")


def poll(fetch: Callable[[], T], done: Callable[[T], bool], *, timeout: float, what: str) -> T:
    """Call ``fetch`` until ``done(result)``; fail after ``timeout`` s with the last result."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}; last: {result!r}"[:4000]
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def env_or_skip(name: str, how: str) -> str:
    """The value of environment variable ``name``; skips the test with ``how`` when it is unset."""
    value = os.environ.get(name)
    if not value:
        import pytest

        pytest.skip(f"{name} is not set: {how} (see docs/e2e.md)")
    return value


# --- Jaeger ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JaegerSpan:
    """One span of a Jaeger answer: its tags, its process (resource) tags and its logs (events)."""

    trace_id: str
    span_id: str
    operation: str
    tags: Mapping[str, Any]
    process_tags: Mapping[str, Any]
    logs: Sequence[Mapping[str, Any]]
    references: Sequence[Mapping[str, Any]] = field(default_factory=tuple)

    @property
    def parent_id(self) -> str | None:
        for ref in self.references:
            if ref.get("refType") == "CHILD_OF":
                return str(ref["spanID"])
        return None


def _pad(hex_id: str, width: int) -> str:
    return hex_id.lower().rjust(width, "0")


def _fields(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {item["key"]: item.get("value") for item in items}


class JaegerClient:
    """Jaeger's HTTP query API (``/api/...``, what the Jaeger UI calls)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def healthy(self) -> bool:
        return _http_get(f"{self.url}/api/services")[0] == 200

    def services(self) -> list[str]:
        status, body = _http_get(f"{self.url}/api/services")
        assert status == 200, (status, body[:500])
        return list(json.loads(body).get("data") or [])

    def find(
        self, service: str, tags: Mapping[str, str], *, limit: int = 1000
    ) -> dict[str, list[JaegerSpan]]:
        """``GET /api/traces?service=&tags=`` (the UI's search): matching traces by trace id."""
        query = urllib.parse.urlencode(
            {
                "service": service,
                "tags": json.dumps(dict(tags), ensure_ascii=False),
                "limit": str(limit),
                "lookback": "2h",
            }
        )
        status, body = _http_get(f"{self.url}/api/traces?{query}", timeout=20)
        assert status == 200, f"Jaeger answered {status} to tags {tags}: {body[:500]!r}"
        return self._traces(json.loads(body))

    def trace(self, trace_id: str) -> list[JaegerSpan]:
        """``GET /api/traces/{id}``: the whole trace, or [] while Jaeger does not have it."""
        status, body = _http_get(f"{self.url}/api/traces/{trace_id}", timeout=20)
        if status == 404:
            return []
        assert status == 200, f"Jaeger answered {status} for trace {trace_id}: {body[:500]!r}"
        return self._traces(json.loads(body)).get(_pad(trace_id, 32), [])

    def wait_trace(self, trace_id: str, count: int, *, timeout: float = WAIT_S) -> list[JaegerSpan]:
        """Poll until Jaeger holds at least ``count`` spans of the trace (ingestion is batched)."""
        return poll(
            lambda: self.trace(trace_id),
            lambda spans: len(spans) >= count,
            timeout=timeout,
            what=f"{count} span(s) of trace {trace_id} in Jaeger",
        )

    @staticmethod
    def _traces(answer: Mapping[str, Any]) -> dict[str, list[JaegerSpan]]:
        out: dict[str, list[JaegerSpan]] = {}
        for trace in answer.get("data") or []:
            processes = trace.get("processes") or {}
            for span in trace.get("spans") or []:
                process = processes.get(span.get("processID"), {})
                tid = _pad(span["traceID"], 32)
                out.setdefault(tid, []).append(
                    JaegerSpan(
                        trace_id=tid,
                        span_id=_pad(span["spanID"], 16),
                        operation=span.get("operationName", ""),
                        tags=_fields(span.get("tags") or []),
                        process_tags=_fields(process.get("tags") or []),
                        logs=[_fields(log.get("fields") or []) for log in span.get("logs") or []],
                        references=span.get("references") or [],
                    )
                )
        return out


def tags_field(text: str) -> dict[str, str]:
    """What the Jaeger UI's Tags field sends for ``text`` (its logfmt reading, as docs/queries.md
    describes it): space-separated ``key=value``; ``"`` opens or closes a quoted value and is
    dropped; a backslash makes the next character literal."""
    pairs: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for ch in text:
        if escaped:
            current.append("\\" + ch if ch == "=" else ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == " " and not quoted:
            if current:
                pairs.append("".join(current))
                current = []
        else:
            current.append(ch)
    assert not quoted and not escaped, f"unbalanced quoting in {text!r}"
    if current:
        pairs.append("".join(current))
    tags: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        assert sep and key, f"not a key=value pair: {pair!r} in {text!r}"
        tags[key] = value.replace("\\=", "=")
    return tags


def text(value: Any) -> str:
    """A tag value as Jaeger's search compares it (bools lowercase, ints as digits)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def matching(spans: Sequence[JaegerSpan], tags: Mapping[str, str]) -> list[JaegerSpan]:
    """The spans on which every pair holds (Jaeger 2's memory store: a span tag, a process tag or a
    field of one of its logs), so a test can say *which* span of a returned trace matched."""

    def holds(span: JaegerSpan, key: str, value: str) -> bool:
        sources: list[Mapping[str, Any]] = [span.tags, span.process_tags, *span.logs]
        return any(key in src and text(src[key]) == value for src in sources)

    return [s for s in spans if all(holds(s, k, v) for k, v in tags.items())]


def search(
    jaeger: JaegerClient, service: str, tags: Mapping[str, str], trace_id: str
) -> list[JaegerSpan]:
    """Search ``tags`` in ``service`` (polling: the chain delivers asynchronously) until the trace is
    found; the spans of that trace that satisfy the search."""
    found = poll(
        lambda: jaeger.find(service, tags),
        lambda traces: trace_id in traces,
        timeout=WAIT_S,
        what=f"trace {trace_id} in Jaeger for tags {tags}",
    )
    return matching(found[trace_id], tags)


# --- processes ---------------------------------------------------------------------------------


class Process:
    """A server subprocess this test started: its log in a file, stopped by its own pid only."""

    def __init__(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.argv = list(argv)
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, stdout: int | None = None) -> subprocess.Popen[bytes]:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=stdout if stdout is not None else log,
                stderr=log,
                env=self.env,
                cwd=str(REPO),
            )
        return self.proc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL (a crash), then reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, SIGKILL after ``timeout`` s; the exit code (None when never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


def otelcol_validate(
    binary: str, config: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``otelcol validate --config FILE`` with the real Collector (bounded)."""
    return subprocess.run(
        [binary, "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )


def load_config(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


def on_loopback(config: dict[str, Any], *, health_port: int) -> dict[str, Any]:
    """A Collector config made runnable on this machine: every OTLP receiver protocol on a free
    loopback port, a health_check extension, no internal metrics listener (its fixed port would clash
    between Collectors). Exporter endpoints are the caller's to fill in."""
    cfg = json.loads(json.dumps(config))  # a deep copy of plain YAML data
    for name, receiver in (cfg.get("receivers") or {}).items():
        if name.split("/", 1)[0] == "otlp":
            protocols = receiver.get("protocols") or {}
            ports = free_ports(len(protocols))
            for proto, port in zip(sorted(protocols), ports, strict=True):
                protocols[proto] = {**(protocols[proto] or {}), "endpoint": f"127.0.0.1:{port}"}
    cfg.setdefault("extensions", {})
    cfg["extensions"] = {
        k: v for k, v in cfg["extensions"].items() if not k.startswith("health_check")
    }
    cfg["extensions"]["health_check"] = {"endpoint": f"127.0.0.1:{health_port}"}
    service = cfg.setdefault("service", {})
    service["extensions"] = ["health_check"]
    service.setdefault("telemetry", {})["metrics"] = {"level": "none"}
    return cfg


class Collector(Process):
    """A Collector of the built distribution running ``config`` (written next to its log)."""

    def __init__(
        self,
        binary: str,
        config: dict[str, Any],
        workdir: Path,
        name: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        health_port = free_ports(1)[0]
        self.config = on_loopback(config, health_port=health_port)
        self.health_url = f"http://127.0.0.1:{health_port}/"
        self.config_path = workdir / f"{name}.yaml"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        super().__init__([binary, "--config", str(self.config_path)], workdir / f"{name}.log", env)

    def receiver(self, protocol: str, receiver: str = "otlp") -> str:
        """``host:port`` of the receiver's gRPC or HTTP protocol."""
        endpoint: str = self.config["receivers"][receiver]["protocols"][protocol]["endpoint"]
        return endpoint

    def start(self, timeout: float = WAIT_S) -> Collector:
        self.spawn()
        poll(
            lambda: (self.alive(), _http_get(self.health_url, timeout=1)[0]),
            lambda state: state[1] == 200 or not state[0],
            timeout=timeout,
            what=f"the Collector's health check {self.health_url}",
        )
        if not self.alive():
            raise AssertionError(f"the Collector exited at start:\n{self.tail()}")
        return self


def otel_footprint_command() -> str:
    """The ``otel-footprint`` console command of this environment (beside its python)."""
    candidate = Path(sys.executable).with_name("otel-footprint")
    return str(candidate) if candidate.exists() else "otel-footprint"


class Hop(Process):
    """``otel-footprint serve`` (the console command); ``grpc``/``http``/``telemetry`` once ready."""

    def __init__(
        self,
        data_dir: Path,
        forward: str,
        *args: str,
        grpc: str = "127.0.0.1:0",
        http: str = "127.0.0.1:0",
        env: Mapping[str, str] | None = None,
    ) -> None:
        argv = [
            otel_footprint_command(),
            "serve",
            "--grpc",
            grpc,
            "--http",
            http,
            "--telemetry",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            "--forward",
            forward,
            *args,
        ]
        super().__init__(argv, data_dir.parent / f"{data_dir.name}-serve.log", env)
        self.addresses: dict[str, str] = {}

    def start(self, timeout: float = 60.0) -> Hop:
        proc = self.spawn(stdout=subprocess.PIPE)
        assert proc.stdout is not None
        lines: list[str] = []
        ready = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode(errors="replace").strip()
                lines.append(line)
                parts = line.split()
                if parts == ["ready"]:
                    ready.set()
                elif len(parts) == 2:
                    self.addresses[parts[0]] = parts[1]
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout) or not self.alive():
            self.kill()
            raise AssertionError(
                f"otel-footprint serve did not become ready: {lines}\n{self.tail()}"
            )
        return self

    @property
    def grpc(self) -> str:
        return self.addresses["grpc"]

    @property
    def http(self) -> str:
        return self.addresses["http"]

    @property
    def telemetry(self) -> str:
        return self.addresses["telemetry"]

    def metric(self, name: str) -> float:
        """The sum over labels of a Prometheus counter on the hop's ``/metrics``."""
        status, body = _http_get(f"http://{self.telemetry}/metrics")
        assert status == 200, status
        total = 0.0
        for line in body.decode().splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
                total += float(line.rsplit(" ", 1)[1])
        return total


def jaeger_hop(data_dir: Path, backend_collector: str, token: str) -> Hop:
    """``otel-footprint serve`` as collector-config/jaeger/otel-footprint.yaml deploys it (OTLP in
    behind bearer ``token``, annotated OTLP/gRPC out to ``backend_collector``, ``host:port``), on
    free loopback ports; a short release grace (the tests send whole traces), no fsync. Not started."""
    return Hop(
        data_dir,
        f"http://{backend_collector}",
        "--config",
        str(CONFIGS / "jaeger" / "otel-footprint.yaml"),
        "--set",
        "processing.release_grace=0.3s",
        "--set",
        "exporters.otlp.queue.fsync=false",
        env={"FOOTPRINT_TOKEN": token},
    )


@contextlib.contextmanager
def running(*processes: Process) -> Iterator[None]:
    """Stop every process on exit (in reverse order), whatever happened."""
    try:
        yield
    finally:
        for process in reversed(processes):
            process.stop()


def redis_server(workdir: Path) -> tuple[Process, str]:
    """A private redis-server on a free loopback port (no persistence): the process and its URL."""
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        import pytest

        pytest.skip("redis-server is not installed (.ci/run installs it)")
    port = free_ports(1)[0]
    argv = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
    process = Process(argv, workdir / "redis.log")
    process.spawn()

    def up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    poll(up, bool, timeout=10, what="redis-server")
    return process, f"redis://127.0.0.1:{port}/0"
