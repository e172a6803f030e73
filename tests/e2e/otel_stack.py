"""The real OpenTelemetry pipeline of the end-to-end suite: the Collector built by ``scripts/otelcol.sh``
and Jaeger v2 built by ``scripts/jaeger.sh`` (found through their env files' variables), Collectors and
``otel-footprint serve`` hops started per test, and Jaeger's HTTP query API.

Everything here uses the standard library (urllib, subprocess) and the ``otel-footprint`` console
command of this environment (the processes in ``tests/servers.py``), so the product's module layout
can change without breaking the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from servers import HopProcess, Process, free_ports, poll

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "collector-config"

OTELCOL_BIN_ENV = "OTEL_FOOTPRINT_OTELCOL_BIN"
OTELCOL_GRPC_ENV = "OTEL_FOOTPRINT_OTELCOL_GRPC"
JAEGER_URL_ENV = "OTEL_FOOTPRINT_JAEGER_URL"
JAEGER_OTLP_GRPC_ENV = "OTEL_FOOTPRINT_JAEGER_OTLP_GRPC"
JAEGER_OTLP_HTTP_ENV = "OTEL_FOOTPRINT_JAEGER_OTLP_HTTP"

WAIT_S = 30.0
"""Bound of every wait on a process or on Jaeger (ingestion through two Collectors and a hop)."""


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
        """``GET /api/traces?service=&tags=`` (the UI's search): matching traces by trace id.

        The window is all time up to a day ahead: without ``start`` Jaeger searches only its default
        lookback (48 h), so a run replayed from a recording with its recorded times would drop out of
        the search two days after it was recorded."""
        now_us = time.time_ns() // 1000
        query = urllib.parse.urlencode(
            {
                "service": service,
                "tags": json.dumps(dict(tags), ensure_ascii=False),
                "limit": str(limit),
                "start": "0",
                "end": str(now_us + 86_400_000_000),
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


def jaeger_hop(data_dir: Path, backend_collector: str, token: str) -> HopProcess:
    """``otel-footprint serve`` as collector-config/jaeger/otel-footprint.yaml deploys it (OTLP in
    behind bearer ``token``, annotated OTLP/gRPC out to ``backend_collector``, ``host:port``), on
    free loopback ports; a short release grace (the tests send whole traces), no fsync. Not started."""
    return HopProcess(
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
