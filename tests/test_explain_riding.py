"""Shadow mode's finding as a signal: the characters that rode after the kernel would have parked them.

The stuck shadow scenario (30 calls, parked on call 4 with no kernel in the agent) must say so in the
summary, the signals, the run span and the hop's metrics; the verify twin (the agent parks) must not.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.bridges.otlpjson import read_otlp_json_lines
from otel_footprint.commands.cli import main
from otel_footprint.commands.scenarios import SCENARIOS, SKILL_BODIES, run_script
from otel_footprint.runs.spans import key_values_to_pairs
from otel_footprint.service.annotation import FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions

ZONE_CHARS = len(SKILL_BODIES["zone-audit"])
RIDING_PASSES = 27  # calls 4..30


def _explain_json(tmp_path: Path, *scenarios: str) -> list[dict[str, Any]]:
    target = tmp_path / "demo.jsonl"
    args = ["demo", "-o", str(target)]
    for name in scenarios:
        args += ["--scenario", name]
    assert main(args, io.StringIO()) == 0
    out = io.StringIO()
    assert main(["explain", str(target), "--format", "json"], out) == 0
    runs: list[dict[str, Any]] = json.loads(out.getvalue())["runs"]
    return runs


def test_the_stuck_shadow_summary_names_the_riding_skill_and_its_characters() -> None:
    out = io.StringIO()
    assert main(["demo", "--scenario", "stuck-shadow"], out) == 0
    summary = next(line for line in out.getvalue().splitlines() if line.startswith("Run "))
    total = f"{RIDING_PASSES * ZONE_CHARS:,}"
    assert summary.startswith("Run stuck-30-shadow — costly: zone-audit kept riding on 27 calls")
    assert "skill-map" in summary and f"{total} characters" in summary


def test_the_verify_twin_raises_no_riding_signal(tmp_path: Path) -> None:
    (run,) = _explain_json(tmp_path, "stuck-verify")
    assert "rode-while-parked" not in run["signals"]
    assert run["rodeWhileParked"] == []


def test_explain_json_gives_the_totals_per_map_and_the_signal(tmp_path: Path) -> None:
    (run,) = _explain_json(tmp_path, "stuck-shadow")
    assert run["signals"][0] == "rode-while-parked"
    assert run["summary"]["tone"] == "warn"
    (rode,) = run["rodeWhileParked"]
    assert rode["map"] == "skill-map"
    assert rode["ids"] == ["zone-audit"]
    assert rode["passes"] == RIDING_PASSES
    assert rode["chars"] == RIDING_PASSES * ZONE_CHARS
    assert (rode["firstIteration"], rode["lastIteration"]) == (4, 30)
    assert all(p.startswith(run["traceId"]) for p in rode["pointers"])


def test_the_run_span_carries_the_roll_up(tmp_path: Path) -> None:
    target = tmp_path / "demo.jsonl"
    assert main(["demo", "--scenario", "stuck-shadow", "-o", str(target)], io.StringIO()) == 0
    spans = [
        span
        for request in read_otlp_json_lines(target.read_text().splitlines())
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    (run,) = [s for s in spans if dict(key_values_to_pairs(s.attributes)).get(sc.RUN_ID)]
    attrs = dict(key_values_to_pairs(run.attributes))
    assert attrs[sc.RUN_SERVED_PASSES_WHILE_PARKED] == RIDING_PASSES
    assert attrs[sc.RUN_SERVED_WHILE_PARKED] == ("zone-audit",)
    assert attrs[sc.RUN_SERVED_WHILE_PARKED_MAPS] == ("skill-map",)
    assert attrs[sc.RUN_SERVED_CHARS_WHILE_PARKED_BY_MAP] == (RIDING_PASSES * ZONE_CHARS,)
    assert attrs[sc.RUN_SERVED_CHARS_WHILE_PARKED] == RIDING_PASSES * ZONE_CHARS
    assert "rode-while-parked" in attrs[sc.SIGNALS]
    assert attrs[sc.SUMMARY_TONE] == "warn"


def test_the_hop_counts_what_parking_would_have_saved(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for name in ("stuck-shadow", "stuck-verify", "stuck-shadow"):
        run_script(tracer, SCENARIOS[name].script)
    provider.shutdown()
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    metrics = HopMetrics()
    now = [100.0]
    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=10.0)),
        journal,
        FootprintAnnotation(),
        metrics,
        clock=lambda: now[0],
    )
    pipeline.ingest_traces(encode_spans(exporter.get_finished_spans()), None, "test")
    now[0] += 2.0
    assert pipeline.process_due() == 3
    assert metrics.served_chars_while_parked.value() == 2 * RIDING_PASSES * ZONE_CHARS
    assert metrics.served_passes_while_parked.value() == 2 * RIDING_PASSES
    assert "otel_footprint_served_chars_while_parked_total" in metrics.render_prometheus()
    journal.close()
