"""Runs without run spans under load: no refusal, journal ≤ 2 × pending + 4 segments (issue 13, 2).

The short version of ``benchmarks/bench_journal_pinned.py`` (the issue's figure is 10 minutes:
``--duration 600``), against the real hop subprocess and a real OTLP/gRPC sink.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_journal_pinned


@pytest.mark.slow  # 10 s of load against a disk bound: a benchmark's threshold
def test_runs_that_never_send_their_run_span_do_not_fill_the_journal() -> None:
    result = bench_journal_pinned.run(
        duration=10.0, rate=1500, pin_every=0.25, segment="128KiB", max_wait="5m"
    )
    assert result["refused_requests"] == 0, result
    assert result["samples"] > 10, result
    # Without compaction the files keep growing past the bound within these 10 s.
    assert result["worst_disk_minus_bound_bytes"] <= 0, result
