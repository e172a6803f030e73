"""The hop's operations endpoint: ``/health`` (JSON), ``/metrics`` (Prometheus text format) and,
unless ``service.telemetry.run_page.enabled`` is off, the live run page: ``/runs`` (the recent
runs, filterable) and ``/runs/<run id>`` (one run's explain view). The run page is read-only and
asks for the receivers' bearer token when one is configured (health and metrics do not)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otel_footprint.service import jsonlog
from otel_footprint.service.config import HostPort
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.receivers import bearer_ok
from otel_footprint.service.runpage import Filters, RunPageStore

_log = jsonlog.get("ops")

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTML_CONTENT_TYPE = "text/html; charset=utf-8"
_PAGE_HEADERS = (
    # The pages carry no script and load nothing: say so to the browser, and keep them uncached
    # (they hold prompt words and change every few seconds).
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
    ),
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)

HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]


class _OpsServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        registry: HopMetrics,
        health: HealthCheck,
        run_page: RunPageStore | None,
        token: str | None,
    ) -> None:
        self.registry = registry
        self.health = health
        self.run_page = run_page
        self.token = token
        super().__init__(address, _OpsHandler)


class _OpsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-footprint"
    sys_version = ""
    timeout = 10.0
    server: _OpsServer

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("ops " + (format % args))

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
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
        elif self.path.split("?", 1)[0] == "/runs/":
            # The page's links are relative to /runs: send a trailing slash back there.
            self._send(301, b"", "text/plain", (("Location", "/runs"),))
        elif path == "/runs" or path.startswith("/runs/"):
            self._run_page(path)
        elif path in ("/health", "/healthz", "/"):
            ok, details = self.server.health()
            body = json.dumps({"status": "ok" if ok else "unavailable", **details}).encode()
            self._send(200 if ok else 503, body, "application/json")
        else:
            self._send(
                404, b"not found: use /health, /metrics or /runs\n", "text/plain; charset=utf-8"
            )

    def _text(self, status: int, text: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send(status, (text + "\n").encode(), "text/plain; charset=utf-8", headers)

    def _run_page(self, path: str) -> None:
        page = self.server.run_page
        if page is None:
            self._text(
                404,
                "the run page is off (service.telemetry.run_page.enabled: false, or the telemetry "
                "endpoint is off loopback without a bearer token)",
            )
            return
        if not bearer_ok(self.headers.get("Authorization"), self.server.token):
            self._text(
                401, "the run page needs the hop's bearer token", (("WWW-Authenticate", "Bearer"),)
            )
            return
        try:
            body = self._page_body(page, path)
        except Exception:  # a page that cannot be drawn must not take the endpoint down
            _log.exception("cannot draw the run page", extra={"path": path})
            self._text(500, "the run page could not be drawn; see the hop's log")
            return
        if body is not None:
            self._send(200, body.encode(), HTML_CONTENT_TYPE, _PAGE_HEADERS)

    def _page_body(self, page: RunPageStore, path: str) -> str | None:
        """The page's HTML, or None when an answer (400, 404) was already sent."""
        if path == "/runs":
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)

            def one(name: str) -> str | None:
                values = query.get(name)
                return values[0] if values and values[0] else None

            limit = one("limit")
            if limit is not None and not (limit.isdigit() and int(limit) > 0):
                self._text(400, f"limit must be a positive whole number, not {limit!r}")
                return None
            listing = page.listing(
                Filters(agent=one("agent"), tone=one("tone"), check=one("check")),
                int(limit) if limit is not None else None,
            )
            return page.renderer.listing(listing)
        run_id = urllib.parse.unquote(path[len("/runs/") :])
        legs = page.legs(run_id)
        if legs is None:
            self._text(
                404,
                f"run {run_id!r} is not held: the page keeps the full view of the newest "
                f"{page.settings.explained} runs (service.telemetry.run_page.explained)",
            )
            return None
        return page.renderer.run(legs)

    def do_HEAD(self) -> None:
        self.do_GET()


class OpsServer:
    """Serves health, metrics and the run page on the telemetry endpoint (loopback by default)."""

    def __init__(
        self,
        endpoint: HostPort,
        registry: HopMetrics,
        health: HealthCheck,
        run_page: RunPageStore | None = None,
        token: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._server = _OpsServer((endpoint.host, endpoint.port), registry, health, run_page, token)
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
