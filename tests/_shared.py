"""Where the reference data lives: ``tests/data/reference`` in this checkout (see its README for
where each file came from). The suite reads nothing outside the checkout.

``OTEL_FOOTPRINT_SHARED`` points the suite at another copy of the same layout (``conformance/``,
``recordings/``, ``spec/``); ``OTEL_FOOTPRINT_HOLDOUT`` names a folder of extra recordings (a held-out
set) that every recording test also runs over when it is set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("OTEL_FOOTPRINT_SHARED") or _REPO / "tests" / "data" / "reference")
RECORDINGS = SHARED / "recordings"
VECTORS = SHARED / "conformance" / "engagement-public.jsonl"
SPEC = SHARED / "spec" / "agentfootprint-reference.md"
_HOLDOUT = os.environ.get("OTEL_FOOTPRINT_HOLDOUT")
HOLDOUT = Path(_HOLDOUT) if _HOLDOUT else None


def recordings() -> list[Path]:
    """Every reference recording and, when ``OTEL_FOOTPRINT_HOLDOUT`` names one, of the held-out set."""
    return sorted(
        p for d in (RECORDINGS, HOLDOUT) if d is not None and d.is_dir() for p in d.glob("*.ndjson")
    )


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until it holds (AssertionError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)
