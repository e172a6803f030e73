"""Is the next hop there? One TCP connection at start, so ``serve`` warns at once when it is not.

The hop starts anyway: what it acknowledges waits in the journal and is forwarded when the next hop
answers (the forwarder retries with backoff). Without this check the first warning came only when
the first batch failed to forward, long after ``ready``. A TCP connection says the port is open,
not that an OTLP receiver is behind it; the forwarder's own errors say the rest.
"""

from __future__ import annotations

import threading

from otel_footprint.sdk.endpoint import CONNECT_TIMEOUT, unreachable
from otel_footprint.service import jsonlog
from otel_footprint.service.config import Forward

_log = jsonlog.get("forward")


def warn_if_unreachable(forward: Forward) -> threading.Thread:
    """Probe in the background (start is not held up by a silent host); log one warning."""

    def probe() -> None:
        timeout = min(CONNECT_TIMEOUT, forward.otlp.timeout)
        reason = unreachable(forward.traces_target, timeout)
        if reason is not None:
            _log.warning(
                "next hop unreachable at start; spans are kept in the journal and forwarded "
                "when it answers",
                extra={"forward": f"{forward.protocol} {forward.traces_target}", "error": reason},
            )

    thread = threading.Thread(target=probe, name="otel-footprint-next-hop-probe", daemon=True)
    thread.start()
    return thread
