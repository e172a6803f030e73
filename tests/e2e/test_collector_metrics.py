"""The Collector way to verdicts as metrics (docs/metrics.md): collector-config/metrics/
verdicts-collector.yaml, run by the Collector built from scripts/otelcol/ (span_metrics connector,
prometheus exporter), behind a ``serve`` that decided the demo's five runs. The series read from the
Collector's Prometheus endpoint must agree with the hop's own, and the page's Collector query must
answer as the hop's does."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from servers import free_ports, poll

from tests.hop_demo import DEMO_RUNS, demo_hop
from tests.test_metrics_doc import evaluate, promql_lines, promql_parser
from tests.test_service_support import Sink

from .otel_stack import CONFIGS, Collector

pytestmark = pytest.mark.collector

Series = dict[str, dict[frozenset[tuple[str, str]], float]]


def _scrape(url: str) -> Series:
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset(
                (k, v)
                for k, v in sample.labels.items()
                if k
                not in (
                    "job",
                    "instance",
                    "otel_scope_name",
                    "otel_scope_version",
                    "otel_scope_schema_url",
                )
            )
            out.setdefault(sample.name, {})[labels] = sample.value
    return out


def _by(series: Series, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    return _group(series.get(name, {}), *keys)


def _runs(series: Series) -> dict[frozenset[tuple[str, str]], float]:
    """The decided run spans' counts (only they carry a summary tone)."""
    calls = series.get("footprint_verdict_calls_total", {})
    return {labels: v for labels, v in calls.items() if dict(labels).get("footprint_summary_tone")}


def _group(
    counts: dict[frozenset[tuple[str, str]], float], *keys: str
) -> dict[tuple[str, ...], float]:
    grouped: dict[tuple[str, ...], float] = {}
    for labels, value in counts.items():
        as_dict = dict(labels)
        key = tuple(as_dict.get(k, "") for k in keys)
        grouped[key] = grouped.get(key, 0.0) + value
    return grouped


def test_the_collector_recipes_series_match_the_hops(otelcol_bin: str, tmp_path: Path) -> None:
    backend = Sink().start()
    config = yaml.safe_load((CONFIGS / "metrics" / "verdicts-collector.yaml").read_text())
    (prometheus_port,) = free_ports(1)
    config["exporters"]["otlp_grpc/backend"]["endpoint"] = backend.endpoint
    config["exporters"]["prometheus"]["endpoint"] = f"127.0.0.1:{prometheus_port}"
    collector = Collector(otelcol_bin, config, tmp_path / "collector", "verdicts").start()
    hop = None
    try:
        hop = demo_hop(tmp_path / "data", collector.receiver("grpc"))
        hop_series = _scrape(f"http://{hop.telemetry}/metrics")
        url = f"http://127.0.0.1:{prometheus_port}/metrics"
        calls = "footprint_verdict_calls_total"
        collected = poll(
            lambda: _scrape(url),
            lambda s: sum(_runs(s).values()) >= DEMO_RUNS,
            timeout=60,
            what="the Collector to count the demo's five runs",
        )
        # Runs by agent, mode and tone: the same counts.
        keys = ("gen_ai_agent_name", "footprint_run_mode", "footprint_summary_tone")
        runs = "footprint_verdict_runs_total"
        assert _group(_runs(collected), *keys) == _by(hop_series, runs, *keys)
        # Check 1 failing: the hop's one word, the span's outcome.
        fail = _by(hop_series, runs, "footprint_check_decided_delivered_result")[("fail",)]
        outcome = _group(_runs(collected), "footprint_check_decided_delivered_outcome")
        assert outcome[("not-delivered",)] == fail == 1
        # Riding calls: the Collector counts the passes, the hop per agent and map.
        rode = {
            labels: v
            for labels, v in collected[calls].items()
            if dict(labels).get("footprint_engagement_served_while_parked", "[]") != "[]"
        }
        riding = "footprint_verdict_served_calls_while_parked_total"
        assert sum(rode.values()) == sum(hop_series[riding].values()) == 27
        # docs/metrics.md's question, the Collector's way: the same answer as the hop's.
        (query,) = promql_lines(collector=True)
        answer = evaluate(promql_parser.parse(query), {calls: collected[calls]})
        assert answer == {frozenset({("gen_ai_agent_name", "ops-assistant")}): 1.0}
    finally:
        if hop is not None:
            hop.kill()
        collector.stop()
        backend.stop()
