"""``benchmarks/bench_hop_parts.py`` measures every stage it names, and leaves the hop as it found it."""

from __future__ import annotations

import sys
from pathlib import Path

from otel_footprint.annotate.otlp import apply_note
from otel_footprint.engine.decide import decide_run_steps
from otel_footprint.service import annotation, journal, pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_hop_parts


def test_every_stage_is_measured_and_the_pipeline_is_unwrapped_after() -> None:
    appended = journal.Journal.append
    classify = pipeline.classify
    result = bench_hop_parts.measure(300, 1)
    stages = result["stages_us_per_span"]
    assert result["us_per_span"] > 0
    # Each named part was reached (a renamed function would leave its wrapper uncalled: 0 or absent).
    for stage in ("receive", "release"):
        for part in bench_hop_parts.STAGES[stage]:
            if part != "run store flush":  # bench_hop's runs never pause: nothing to write
                assert stages[stage][part] > 0, (stage, part)
        assert stages[stage]["journal append"] > 0
        assert stages[stage]["total"] >= sum(
            v for k, v in stages[stage].items() if k not in ("total",) and not k.startswith("other")
        )
    # The wrappers are gone: the next test sees the hop's own functions.
    assert annotation.apply_note is apply_note
    assert annotation.decide_run_steps is decide_run_steps
    assert journal.Journal.append is appended
    assert pipeline.classify is classify
