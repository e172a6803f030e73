"""Verdicts as metrics (issue 26): runs decided by agent, mode, tone and check 1; integrity findings
by row; what rode while parked by agent and map; bounded label values. Read from the series
themselves: the hop's ``/metrics`` and its OTLP push (a real ``serve`` that decided the demo's five
runs), and the in-process processor's instruments on the application's MeterProvider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.commands.scenarios import run_scenarios
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk.processor import FootprintSpanProcessor
from otel_footprint.sdk.verdict_metrics import VerdictMetrics
from tests.hop_demo import DEMO_RUNS, SHADOW_RIDING_CHARS, demo_hop, demo_verdicts
from tests.servers import HopProcess, Samples
from tests.test_service_support import Sink

AGENT = "ops-assistant"  # every demo run's gen_ai.agent.name

# The demo's five runs as (mode, tone, check 1): what `otel-footprint demo` prints for each.
DEMO_RUN_SERIES = {
    ("shadow", "warn", "unreachable"): 1,  # stuck-30-shadow: the parked skill kept riding
    ("verify", "unknown", "unreachable"): 2,  # stuck-30-verify, recovery-explicit-pick
    ("shadow", "ok", "pass"): 1,  # routed-delivered
    ("shadow", "bad", "fail"): 1,  # routed-not-delivered
}
RIDING_CALLS = 27


def _runs_key(mode: str, tone: str, check: str, agent: str = AGENT) -> str:
    return (
        "footprint_verdict_runs_total{"
        f'footprint_check_decided_delivered_result="{check}",footprint_run_mode="{mode}",'
        f'footprint_summary_tone="{tone}",gen_ai_agent_name="{agent}"}}'
    )


def _riding_key(metric: str, agent: str = AGENT, map_id: str = "skill-map") -> str:
    return f'{metric}{{footprint_map_id="{map_id}",gen_ai_agent_name="{agent}"}}'


@pytest.fixture(scope="module")
def hop_and_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HopProcess, Sink]]:
    sink = Sink().start()
    data = tmp_path_factory.mktemp("verdict-metrics") / "data"
    hop = demo_hop(
        data,
        sink.endpoint,
        "--set",
        f"service.telemetry.metrics.otlp.endpoint={sink.endpoint}",
        "--set",
        "service.telemetry.metrics.otlp.interval=200ms",
    )
    yield hop, sink
    hop.kill()
    sink.stop()


def test_the_hops_series_carry_the_demos_verdicts(hop_and_sink: tuple[HopProcess, Sink]) -> None:
    hop, _ = hop_and_sink
    samples = hop.metrics()
    runs = {k: v for k, v in samples.items() if k.startswith("footprint_verdict_runs_total{")}
    want = Samples({_runs_key(*key): float(n) for key, n in DEMO_RUN_SERIES.items()})
    assert runs == want
    assert sum(runs.values()) == DEMO_RUNS
    chars = "footprint_verdict_served_chars_while_parked_total"
    calls = "footprint_verdict_served_calls_while_parked_total"
    assert samples[_riding_key(chars)] == SHADOW_RIDING_CHARS
    assert samples[_riding_key(calls)] == RIDING_CALLS
    # the hop's older unlabelled total agrees with the labelled series
    assert hop.metric("otel_footprint_served_chars_while_parked_total") == SHADOW_RIDING_CHARS
    assert hop.metric("footprint_verdict_names_folded_total") == 0


def test_the_same_series_are_pushed_over_otlp(hop_and_sink: tuple[HopProcess, Sink]) -> None:
    _, sink = hop_and_sink
    key = (
        sc.VERDICT_SERVED_CHARS_WHILE_PARKED.name,
        frozenset({(sc.GEN_AI_AGENT_NAME, AGENT), (sc.CH_MAP_ID, "skill-map")}),
    )
    assert sink.wait_for(lambda: sink.metric_sums.get(key) == SHADOW_RIDING_CHARS, 10), {
        k: v for k, v in sink.metric_sums.items() if k[0].startswith("footprint.verdict")
    }
    runs = sum(v for (name, _), v in sink.metric_sums.items() if name == sc.VERDICT_RUNS.name)
    assert runs == DEMO_RUNS


def _points(reader: InMemoryMetricReader, name: str) -> dict[frozenset[Any], float]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        frozenset((point.attributes or {}).items()): point.value
        for rm in data.resource_metrics
        for scope in rm.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points  # type: ignore[union-attr]
    }


@pytest.mark.parametrize("decide_in", ["thread", "process"])
def test_in_process_the_processor_counts_the_same_verdicts(decide_in: str) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    processor = FootprintSpanProcessor(
        InMemorySpanExporter(),
        grace_seconds=0.05,
        meter_provider=meters,
        decide_in=decide_in,  # type: ignore[arg-type]
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        run_scenarios(provider.get_tracer("verdict-metrics"))
        assert processor.force_flush(30_000)
    finally:
        provider.shutdown()
    runs = _points(reader, sc.VERDICT_RUNS.name)
    want = {
        frozenset(
            {
                sc.GEN_AI_AGENT_NAME: AGENT,
                sc.RUN_MODE: mode,
                sc.SUMMARY_TONE: tone,
                sc.METRIC_ATTR_CHECK_1: check,
            }.items()
        ): n
        for (mode, tone, check), n in DEMO_RUN_SERIES.items()
    }
    assert runs == want
    riding = frozenset({sc.GEN_AI_AGENT_NAME: AGENT, sc.CH_MAP_ID: "skill-map"}.items())
    assert _points(reader, sc.VERDICT_SERVED_CHARS_WHILE_PARKED.name) == {
        riding: SHADOW_RIDING_CHARS
    }
    assert _points(reader, sc.VERDICT_SERVED_CALLS_WHILE_PARKED.name) == {riding: RIDING_CALLS}


def test_agent_and_map_names_past_the_cap_fold_into_other_and_are_counted() -> None:
    reader = InMemoryMetricReader()
    metrics = VerdictMetrics(MeterProvider(metric_readers=[reader]).get_meter("t"), max_names=2)
    verdicts = demo_verdicts()
    assert len(verdicts) == DEMO_RUNS
    for n, verdict in enumerate(verdicts):
        metrics.record(verdict, f"agent-{n}")
    agents: dict[str, float] = {}
    for labels, value in _points(reader, sc.VERDICT_RUNS.name).items():
        agent = dict(labels)[sc.GEN_AI_AGENT_NAME]
        agents[agent] = agents.get(agent, 0) + value
    assert agents == {"agent-0": 1, "agent-1": 1, sc.METRIC_OTHER: DEMO_RUNS - 2}
    folded = _points(reader, sc.VERDICT_NAMES_FOLDED.name)
    assert folded == {frozenset({(sc.METRIC_ATTR_NAME_KIND, "agent")}): DEMO_RUNS - 2}
    # a name seen before the cap keeps its value afterwards
    metrics.record(verdicts[0], "agent-0")
    assert metrics.runs.value("agent-0", *_labels(verdicts[0])) == 2


def _labels(verdict: RunVerdict) -> tuple[str, str, str]:
    from otel_footprint.sdk.verdict_metrics import check_1_result

    tone = verdict.account.summary.tone if verdict.account is not None else "none"
    return (verdict.mode or "none", tone, check_1_result(verdict))


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_names"):
        VerdictMetrics(MeterProvider().get_meter("t"), max_names=0)
