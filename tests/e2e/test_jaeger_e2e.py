"""Jaeger end to end, with the real OpenTelemetry Collector in front of it.

Chain: a Python agent (the recorder + the SDK's OTLP exporter) -> the edge Collector
(collector-config/jaeger/edge-collector.yaml) -> ``otel-footprint serve`` (collector-config/jaeger/
otel-footprint.yaml) -> the backend Collector (collector-config/jaeger/backend-collector.yaml, run by
``scripts/otelcol.sh start``) -> Jaeger v2 (``scripts/jaeger.sh start``). The same runs also go
through the in-process processor straight to Jaeger. The verdicts are then found through Jaeger's
query API by tag, as a person would search them in the Jaeger UI; every Jaeger query of
docs/queries.md is run live, and the README's "See it in Jaeger in a minute" path is followed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from servers import otel_footprint_command

from otel_footprint import semconv as sc
from otel_footprint.sdk import setup as footprint_setup

from .footprint_e2e import EmittedRun, routed_turn, stuck_turn
from .otel_stack import (
    CONFIGS,
    JAEGER_OTLP_GRPC_ENV,
    REPO,
    WAIT_S,
    Collector,
    JaegerClient,
    JaegerSpan,
    env_or_skip,
    jaeger_hop,
    load_config,
    matching,
    poll,
    running,
    search,
    tags_field,
    text,
)
from .sdk_export import CheckedExporter

pytestmark = pytest.mark.jaeger

TOKEN = "e2e-" + uuid.uuid4().hex[:12]
SKILL_MAP_JSON = '["skill-map"]'


@dataclass(frozen=True, slots=True)
class Runs:
    """The three runs every path sends: the 30-call stuck turn (shadow mode) and two routed runs."""

    service: str
    stuck: EmittedRun
    delivered: EmittedRun
    not_delivered: EmittedRun


def agent_runs(provider: TracerProvider, service: str) -> Runs:
    tracer = provider.get_tracer("jaeger-e2e-agent")
    tag = uuid.uuid4().hex[:8]
    return Runs(
        service,
        stuck_turn(tracer, f"stuck-{tag}"),
        routed_turn(tracer, f"routed-ok-{tag}", delivered=True),
        routed_turn(tracer, f"routed-bad-{tag}", delivered=False),
    )


def jaeger_otlp() -> str:
    return env_or_skip(JAEGER_OTLP_GRPC_ENV, "start Jaeger with `scripts/jaeger.sh start`")


# --- what Jaeger must answer -------------------------------------------------------------------


def assert_verdicts_in_jaeger(jaeger: JaegerClient, runs: Runs) -> None:
    """The verdicts of the three runs, found by tag: pass 4 parked, check 1's states, the shadow-mode
    riding. Literal values, so a renamed attribute or a changed verdict fails here."""
    stuck = runs.stuck
    # Wait for the whole stuck turn (run span + 30 passes + 29 tool calls).
    spans = jaeger.wait_trace(stuck.trace_id, 60)
    by_id = {s.span_id: s for s in spans}
    run_span = by_id[stuck.run_span_id]
    expected_run = {
        sc.RUN_ID: stuck.run_id,
        sc.RUN_MODE: "shadow",
        sc.RUN_PASSES: "30",
        sc.RUN_COMPLETE: "true",
        sc.RUN_RESUMED: "false",
        sc.RUN_PARKED_MAPS: SKILL_MAP_JSON,
        sc.CHECK_DECIDED_DELIVERED: "unreachable",
        sc.CHECK_EXISTENCE: "not-applicable",
        sc.CHECK_EMPTY_RESULTS: "reachable",
        # Shadow mode's finding: zone-audit rode calls 4-30 after skill-map would have parked.
        sc.SIGNALS: '["rode-while-parked"]',
        sc.RUN_SERVED_PASSES_WHILE_PARKED: "27",
        sc.RUN_SERVED_WHILE_PARKED: '["zone-audit"]',
        sc.RUN_SERVED_WHILE_PARKED_MAPS: SKILL_MAP_JSON,
    }
    assert {k: text(run_span.tags.get(k)) for k in expected_run} == expected_run
    # The run span, found by its verdict (every pair on that one span).
    assert [s.span_id for s in search(jaeger, runs.service, expected_run, stuck.trace_id)] == [
        stuck.run_span_id
    ]

    # Pass 4 parked: the search a person types, `footprint.pass.iteration=4
    # footprint.engagement.parked_maps=["skill-map"]`, finds exactly the fourth model call.
    pass4 = {sc.PASS_ITERATION: "4", sc.ENG_PARKED_MAPS: SKILL_MAP_JSON}
    [fourth] = search(jaeger, runs.service, pass4, stuck.trace_id)
    assert fourth.span_id == stuck.pass_span_ids[4]
    assert fourth.parent_id == stuck.run_span_id
    # The park itself: an event (a Jaeger log) on that span, found by an attribute only a park has.
    park = {sc.CH_IDLE_CALLS: "3", sc.CH_MAP_ID: "skill-map", sc.CH_ITERATION: "4"}
    assert [s.span_id for s in search(jaeger, runs.service, park, stuck.trace_id)] == [
        fourth.span_id
    ]
    [park_log] = [log for log in fourth.logs if log.get(sc.CH_IDLE_CALLS) is not None]
    assert {k: text(park_log.get(k)) for k in (sc.CH_MAP_ID, sc.CH_BY, sc.CH_WITNESS)} == {
        sc.CH_MAP_ID: "skill-map",
        sc.CH_BY: "lexical",
        sc.CH_WITNESS: "zone",
    }
    # Every pass from 4 on is parked; passes 1-3 have nothing parked.
    parked = search(jaeger, runs.service, {sc.ENG_PARKED_MAPS: SKILL_MAP_JSON}, stuck.trace_id)
    assert sorted(s.span_id for s in parked) == sorted(stuck.pass_span_ids[i] for i in range(4, 31))
    unparked = search(jaeger, runs.service, {sc.ENG_PARKED_MAPS: "[]"}, stuck.trace_id)
    assert sorted(s.span_id for s in unparked) == sorted(stuck.pass_span_ids[i] for i in (1, 2, 3))

    # Shadow mode: zone-audit kept riding on exactly the parked passes, with its cost on the run.
    riding = search(
        jaeger, runs.service, {sc.ENG_SERVED_WHILE_PARKED: '["zone-audit"]'}, stuck.trace_id
    )
    assert sorted(s.span_id for s in riding) == sorted(s.span_id for s in parked)
    chars = int(run_span.tags[sc.RUN_SERVED_CHARS_WHILE_PARKED])
    assert chars > 0
    shadow = {sc.RUN_MODE: "shadow", sc.RUN_SERVED_CHARS_WHILE_PARKED: str(chars)}
    assert [s.span_id for s in search(jaeger, runs.service, shadow, stuck.trace_id)] == [
        stuck.run_span_id
    ]

    # Check 1's three states: unreachable (above), reachable + delivered, reachable + not-delivered.
    for run, outcome, label in (
        (runs.delivered, "delivered", "pass"),
        (runs.not_delivered, "not-delivered", "fail"),
    ):
        check1 = {
            sc.RUN_ID: run.run_id,
            sc.CHECK_DECIDED_DELIVERED: "reachable",
            sc.CHECK_DECIDED_DELIVERED_OUTCOME: outcome,
        }
        assert [s.span_id for s in search(jaeger, runs.service, check1, run.trace_id)] == [
            run.run_span_id
        ]
        evaluation = {
            sc.EVAL_NAME: "footprint.decided-delivered",
            sc.EVAL_SCORE_LABEL: label,
        }
        assert [s.span_id for s in search(jaeger, runs.service, evaluation, run.trace_id)] == [
            run.run_span_id
        ]
    # ... and each search finds only its own run among ours.
    not_delivered = jaeger.find(
        runs.service,
        {
            sc.CHECK_DECIDED_DELIVERED: "reachable",
            sc.CHECK_DECIDED_DELIVERED_OUTCOME: "not-delivered",
        },
    )
    assert set(not_delivered) == {runs.not_delivered.trace_id}
    signals = jaeger.find(runs.service, {sc.SIGNALS: '["decided-not-delivered"]'})
    assert set(signals) == {runs.not_delivered.trace_id}


# --- the chain and the in-process path ---------------------------------------------------------


@pytest.mark.collector
def test_agent_edge_collector_hop_backend_collector_jaeger(
    jaeger: JaegerClient, otelcol_bin: str, backend_collector: str, tmp_path: Path
) -> None:
    hop = jaeger_hop(tmp_path / "hop", backend_collector, TOKEN)
    edge_cfg = load_config(CONFIGS / "jaeger" / "edge-collector.yaml")
    edge = Collector(otelcol_bin, edge_cfg, tmp_path, "edge", env={"FOOTPRINT_TOKEN": TOKEN})
    with running(hop, edge):
        hop.start()
        edge.config["exporters"]["otlp_grpc/footprint"]["endpoint"] = hop.grpc
        edge.config_path.write_text(json.dumps(edge.config))
        edge.start()
        service = f"jaeger-chain-{uuid.uuid4().hex[:8]}"
        checked = CheckedExporter(OTLPSpanExporter(endpoint=edge.receiver("grpc"), insecure=True))
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
        provider.add_span_processor(BatchSpanProcessor(checked, schedule_delay_millis=100))
        runs = agent_runs(provider, service)
        provider.force_flush(10_000)
        provider.shutdown()
        assert not checked.failures and checked.exported >= 60 + 2 * 4, checked.failures
        try:
            assert_verdicts_in_jaeger(jaeger, runs)
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\n--- hop log:\n{hop.tail()}\n--- edge log:\n{edge.tail()}"
            ) from exc
        # The hop annotated (it did not pass the runs through untouched).
        assert hop.metric("otel_footprint_spans_annotated_total") > 0


def test_in_process_processor_straight_to_jaeger(jaeger: JaegerClient) -> None:
    service = f"jaeger-inprocess-{uuid.uuid4().hex[:8]}"
    checked = CheckedExporter(OTLPSpanExporter(endpoint=jaeger_otlp(), insecure=True))
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    processor = footprint_setup(provider, checked, grace_seconds=0.1)
    runs = agent_runs(provider, service)
    assert processor.force_flush(20_000)
    provider.shutdown()
    assert not checked.failures and checked.exported >= 60 + 2 * 4, checked.failures
    assert_verdicts_in_jaeger(jaeger, runs)


# --- docs/queries.md, live ---------------------------------------------------------------------


def doc_jaeger_queries() -> list[str]:
    """Every query line of the ```jaeger blocks of docs/queries.md (lines starting with # are notes)."""
    doc = (REPO / "docs" / "queries.md").read_text()
    blocks = re.findall(r"^```jaeger\n(.*?)^```", doc, re.M | re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def demo_spans(path: Path) -> dict[str, list[JaegerSpan]]:
    """The spans ``otel-footprint demo -o`` wrote (OTLP JSON lines), in Jaeger's shape: attribute
    values as Jaeger 2 stores and searches them (arrays as compact JSON text), events as logs."""

    def value(v: Mapping[str, Any]) -> Any:
        if "arrayValue" in v:
            return json.dumps(
                [value(x) for x in v["arrayValue"].get("values", [])],
                separators=(",", ":"),
                ensure_ascii=False,
            )
        for key in ("stringValue", "boolValue", "doubleValue"):
            if key in v:
                return v[key]
        if "intValue" in v:
            return int(v["intValue"])
        return None

    def attrs(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {a["key"]: value(a["value"]) for a in items}

    traces: dict[str, list[JaegerSpan]] = {}
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            resource = attrs(rs.get("resource", {}).get("attributes", []))
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    traces.setdefault(s["traceId"], []).append(
                        JaegerSpan(
                            trace_id=s["traceId"],
                            span_id=s["spanId"],
                            operation=s["name"],
                            tags=attrs(s.get("attributes", [])),
                            process_tags=resource,
                            logs=[attrs(e.get("attributes", [])) for e in s.get("events", [])],
                        )
                    )
    return traces


@pytest.fixture(scope="module")
def demo_in_jaeger(
    jaeger: JaegerClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[JaegerSpan]]]:
    """The five demo scenarios sent by ``otel-footprint demo --endpoint`` to Jaeger, and the spans
    it sent (from ``-o``, the same export)."""
    out = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    done = subprocess.run(
        [otel_footprint_command(), "demo", "--endpoint", f"http://{jaeger_otlp()}", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sent = demo_spans(out)
    assert len(sent) == 5
    for trace_id, spans in sent.items():
        jaeger.wait_trace(trace_id, len(spans))
    yield sent


def test_every_jaeger_query_in_the_doc_runs_live(
    jaeger: JaegerClient, demo_in_jaeger: dict[str, list[JaegerSpan]]
) -> None:
    """Each ```jaeger line of docs/queries.md, read as the Jaeger UI reads its Tags field, asked of
    the live Jaeger over the demo's five runs: Jaeger returns exactly the demo traces that have one
    span satisfying every pair (the rule the doc states for the memory store), and the queries about
    what the demo shows do find it."""
    queries = doc_jaeger_queries()
    assert len(queries) >= 40, queries
    results: list[tuple[str, int]] = []
    mismatches: list[str] = []
    for query in queries:
        tags = tags_field(query)
        found = set(jaeger.find("otel-footprint-demo", tags)) & set(demo_in_jaeger)
        expected = {t for t, spans in demo_in_jaeger.items() if matching(spans, tags)}
        results.append((query, len(found)))
        if found != expected:
            mismatches.append(f"{query}: Jaeger {sorted(found)} expected {sorted(expected)}")
    report = "\n".join(f"{n:2d} trace(s)  {q}" for q, n in results)
    print(f"\nJaeger queries of docs/queries.md against the demo's 5 runs:\n{report}")
    assert not mismatches, "\n".join(mismatches) + "\n" + report
    hits = dict(results)
    # The verdicts the demo shows are found (the doc's queries are not all vacuous).
    for query in (
        'footprint.pass.iteration=4 footprint.engagement.parked_maps=[\\"skill-map\\"]',
        'footprint.engagement.served_while_parked=[\\"zone-audit\\"]',
        "footprint.engagement.idle_calls=3 footprint.engagement.by=lexical footprint.engagement.witness=zone",
        "footprint.check.decided_delivered=unreachable",
        "footprint.check.decided_delivered=reachable footprint.check.decided_delivered.outcome=delivered",
        "footprint.check.decided_delivered.outcome=not-delivered",
        'footprint.signals=[\\"decided-not-delivered\\"]',
    ):
        assert hits.get(query, 0) >= 1, f"{query!r} found nothing:\n{report}"
    # Jaeger 2's memory store does not match the event name (the doc says so: `event=` finds nothing).
    assert all(n == 0 for q, n in results if "event=" in q), report
    assert sum(1 for _, n in results if n) >= 15, report


# --- README: See it in Jaeger in a minute ------------------------------------------------------


def readme_minute() -> str:
    readme = (REPO / "README.md").read_text()
    match = re.search(r"^## See it in Jaeger in a minute\n(.*?)(?=^## )", readme, re.M | re.S)
    assert match, "README.md has no '## See it in Jaeger in a minute' section"
    return match.group(1)


def test_readme_see_it_in_jaeger_in_a_minute(jaeger: JaegerClient) -> None:
    """Follow the README's from-source path against the running Jaeger: its ``otel-footprint demo
    --endpoint`` line run as written (in bash, with this Jaeger's env exported as
    ``scripts/jaeger.sh env`` does), the query API it says this build serves (not the UI: the
    README's quick path is the released image for that), and the search it says to type."""
    section = readme_minute()
    released, from_source = re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)
    assert "jaegertracing/jaeger:" in released
    lines = [line.split("  #", 1)[0].strip() for line in from_source.splitlines() if line.strip()]
    assert lines[0].startswith("scripts/jaeger.sh build start"), lines  # Jaeger: already running
    [demo] = [line for line in lines if line.startswith("otel-footprint demo --endpoint")]
    env = {
        **os.environ,
        "PATH": f"{Path(otel_footprint_command()).parent}:{os.environ.get('PATH', '')}",
        "OTEL_FOOTPRINT_JAEGER_OTLP_GRPC": jaeger_otlp(),
    }
    done = subprocess.run(
        ["bash", "-c", demo], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The search it gives, over the query API this build serves, finds the demo's parked passes
    # (pass 4 first).
    [search_text] = re.findall(r"^```jaeger\n(.*?)\n```", section, re.M | re.S)
    service = re.search(r"service \*\*([^*]+)\*\*", section)
    assert service, "the README section does not name the service to pick"

    def parked_iterations(traces: Mapping[str, list[JaegerSpan]]) -> set[int]:
        tags = tags_field(search_text)
        return {
            int(s.tags[sc.PASS_ITERATION])
            for spans in traces.values()
            for s in matching(spans, tags)
            if sc.PASS_ITERATION in s.tags
        }

    found = poll(
        lambda: parked_iterations(jaeger.find(service.group(1), tags_field(search_text))),
        lambda iterations: 4 in iterations,
        timeout=WAIT_S,
        what=f"the README's search {search_text!r}",
    )
    assert min(found) == 4
    with urllib.request.urlopen(f"{jaeger.url}/api/services", timeout=10) as page:
        assert page.status == 200 and b"otel-footprint-demo" in page.read()
