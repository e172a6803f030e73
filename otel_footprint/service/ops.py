"""The hop's operations endpoint: ``/health`` (JSON) and ``/metrics`` (Prometheus text format)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otel_footprint.service import jsonlog
from otel_footprint.service.config import HostPort
from otel_footprint.service.metrics import HopMetrics

_log = jsonlog.get("ops")

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]


class _OpsServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], registry: HopMetrics, health: HealthCheck) -> None:
        self.registry = registry
        self.health = health
        super().__init__(address, _OpsHandler)


class _OpsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-footprint"
    sys_version = ""
    timeout = 10.0
    server: _OpsServer

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("ops " + (format % args))

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        if path == "/metrics":
            self._send(
                200, self.server.registry.render_prometheus().encode(), PROMETHEUS_CONTENT_TYPE
            )
        elif path in ("/health", "/healthz", "/"):
            ok, details = self.server.health()
            body = json.dumps({"status": "ok" if ok else "unavailable", **details}).encode()
            self._send(200 if ok else 503, body, "application/json")
        else:
            self._send(404, b"not found: use /health or /metrics\n", "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        self.do_GET()


class OpsServer:
    """Serves health and metrics on the telemetry endpoint (loopback by default)."""

    def __init__(self, endpoint: HostPort, registry: HopMetrics, health: HealthCheck) -> None:
        self.endpoint = endpoint
        self._server = _OpsServer((endpoint.host, endpoint.port), registry, health)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="otel-footprint-ops",
            daemon=True,
        )
        self.bound = HostPort(endpoint.host, self._server.server_address[1])

    def start(self) -> HostPort:
        self._thread.start()
        return self.bound

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever: only when it runs
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()
