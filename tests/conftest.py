"""Shared test setup: the reference data must be present, and helpers every test file may use.

The recordings, conformance vectors and spec excerpt under ``../shared`` (or ``OTEL_FOOTPRINT_SHARED``)
generate many tests; without them those tests would silently never exist. The suite therefore
refuses to run (exit status 4, usage error) rather than pass green on a fraction of itself.
Importable helpers (paths, ``wait_until``) live in ``_shared.py``; the server subprocesses (the hop,
redis-server) and ``poll`` in ``servers.py``.
"""

from __future__ import annotations

import pytest
from _shared import RECORDINGS, SHARED, SPEC, VECTORS


def pytest_configure(config: pytest.Config) -> None:
    missing = [str(p) for p in (RECORDINGS, VECTORS, SPEC) if not p.exists()]
    if RECORDINGS.is_dir() and not any(RECORDINGS.glob("*.ndjson")):
        missing.append(f"{RECORDINGS}/*.ndjson")
    if missing:
        raise pytest.UsageError(
            f"the shared reference data is missing ({', '.join(missing)}): check out the shared "
            f"folder beside the repository (looked in {SHARED}) or point OTEL_FOOTPRINT_SHARED at it"
        )
