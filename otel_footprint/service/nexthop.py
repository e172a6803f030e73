"""Is the next hop there? One TCP connection at start, so ``serve`` warns at once when it is not.

The hop starts anyway: what it acknowledges waits in the journal and is forwarded when the next hop
answers (the forwarder retries with backoff). Without this check the first warning came only when
the first batch failed to forward, long after ``ready``. A TCP connection says the port is open,
not that an OTLP receiver is behind it; the forwarder's own errors say the rest.
"""

from __future__ import annotations

import socket
import threading
import urllib.parse

from otel_footprint.service import jsonlog
from otel_footprint.service.config import Forward

_log = jsonlog.get("forward")

PROBE_TIMEOUT = 3.0
"""Seconds to wait for the connection: a host that drops packets answers nothing at all."""


def address(forward: Forward) -> tuple[str, int]:
    """The host and port the forwarder connects to (gRPC ``host:port`` or an http(s) URL)."""
    target = forward.traces_target
    parts = urllib.parse.urlsplit(target if "://" in target else f"//{target}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "", port


def unreachable(forward: Forward, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why the next hop cannot be reached now, or None when a TCP connection opens."""
    host, port = address(forward)
    try:
        with socket.create_connection((host, port), timeout=min(timeout, forward.otlp.timeout)):
            return None
    except socket.gaierror as exc:
        return f"cannot resolve {host}: {exc.strerror}"
    except TimeoutError:
        return f"no answer from {host}:{port} within {min(timeout, forward.otlp.timeout):g} s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"


def warn_if_unreachable(forward: Forward) -> threading.Thread:
    """Probe in the background (start is not held up by a silent host); log one warning."""

    def probe() -> None:
        reason = unreachable(forward)
        if reason is not None:
            _log.warning(
                "next hop unreachable at start; spans are kept in the journal and forwarded "
                "when it answers",
                extra={"forward": f"{forward.protocol} {forward.traces_target}", "error": reason},
            )

    thread = threading.Thread(target=probe, name="otel-footprint-next-hop-probe", daemon=True)
    thread.start()
    return thread
