"""Where the shared reference data lives: ``../shared`` beside the checkout (as CI lays it out).

``OTEL_FOOTPRINT_SHARED`` overrides the shared folder; ``OTEL_FOOTPRINT_HOLDOUT`` names extra
recordings (the holdout set) that every recording test also runs over when present.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("OTEL_FOOTPRINT_SHARED") or _REPO.parent / "shared")
RECORDINGS = SHARED / "recordings"
VECTORS = SHARED / "conformance" / "engagement-public.jsonl"
SPEC = SHARED / "spec" / "agentfootprint-reference.md"
HOLDOUT = Path(os.environ.get("OTEL_FOOTPRINT_HOLDOUT") or SHARED.parent / "holdout" / "recordings")


def recordings() -> list[Path]:
    """Every recording of the shared set and, when present, of the holdout set."""
    return sorted(p for d in (RECORDINGS, HOLDOUT) if d.is_dir() for p in d.glob("*.ndjson"))


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until it holds (AssertionError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)
