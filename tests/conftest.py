"""Shared test setup: the reference data must be present, and helpers every test file may use.

The recordings, conformance vectors and spec excerpt under ``tests/data/reference`` (or ``OTEL_FOOTPRINT_SHARED``)
generate many tests; without them those tests would silently never exist. The suite therefore
refuses to run (exit status 4, usage error) rather than pass green on a fraction of itself.
Importable helpers (paths, ``wait_until``) live in ``_shared.py``; the ``sink`` fixture is here; the server subprocesses (the hop,
redis-server) and ``poll`` in ``servers.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from _shared import RECORDINGS, SHARED, SPEC, VECTORS

if TYPE_CHECKING:
    from test_service_support import Sink


def pytest_configure(config: pytest.Config) -> None:
    missing = [str(p) for p in (RECORDINGS, VECTORS, SPEC) if not p.exists()]
    if RECORDINGS.is_dir() and not any(RECORDINGS.glob("*.ndjson")):
        missing.append(f"{RECORDINGS}/*.ndjson")
    if missing:
        raise pytest.UsageError(
            f"the reference data is missing ({', '.join(missing)}): it ships in the repository under "
            f"tests/data/reference (looked in {SHARED}); restore it with git, or point "
            f"OTEL_FOOTPRINT_SHARED at a copy"
        )


@pytest.fixture()
def sink() -> Iterator[Sink]:
    """A fresh OTLP/gRPC sink (a real receiver on loopback) per test; files that share one per
    module define their own."""
    from test_service_support import Sink  # gRPC servers only for the tests that ask

    s = Sink().start()
    yield s
    s.stop()
