"""The OTLP/HTTP receiver under 500 slow and idle connections (issue 13, defect 5).

The short version of ``benchmarks/bench_hop.py --http`` (the real hop subprocess): half the
connections never send a byte, half send their headers one byte a second; a legitimate client
opening a fresh connection per request must keep at least 95% success. The stdlib server this
replaced served 0 of 98 such requests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_hop


@pytest.mark.slow  # a success ratio under load: a benchmark's threshold
def test_a_legitimate_client_is_served_beside_500_slow_connections(tmp_path: Path) -> None:
    result = bench_hop.http_under_slow_connections(tmp_path, connections=500, seconds=8.0)
    assert result["slow_connections"] == 500, result
    assert result["legitimate_ok"] >= 40, result
    assert result["success_ratio"] >= 0.95, result
