"""collector-config/: every file parses, pipelines reference defined components, hops line up.

The chain in each scenario is edge Collector -> otel-footprint -> backend Collector -> backend; the
checks follow the ports and endpoints along it, load each otel-footprint file with the hop's own
config loader, and check the TraceQL queries only name attributes otel-footprint writes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_footprint import semconv
from otel_footprint.service import config as hop_config

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "collector-config"
SCENARIOS = {
    "jaeger": "jaeger:4317",
    "tempo": "tempo:4317",
    "phoenix": "phoenix:4317",
    "loadbalancing": "tempo:4317",
}
ENV = {"FOOTPRINT_TOKEN": "t0ken", "FOOTPRINT_INSTANCE": "1", "XDG_STATE_HOME": "/tmp/state"}

KNOWN_COMPONENTS = {
    "receivers": {"otlp"},
    "processors": {"batch", "memory_limiter", "resource"},
    "exporters": {"otlp", "otlphttp", "loadbalancing", "debug"},
    "extensions": {"health_check"},
}
SIGNALS = {"traces", "logs", "metrics"}


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path} is not a mapping"
    return data


def _collector(scenario: str, which: str) -> dict[str, Any]:
    return _load(CONFIGS / scenario / f"{which}-collector.yaml")


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def _host(endpoint: str) -> str:
    return endpoint.split("://", 1)[-1].rsplit(":", 1)[0]


def test_every_scenario_has_its_three_files() -> None:
    for scenario in SCENARIOS:
        for name in ("edge-collector.yaml", "otel-footprint.yaml", "backend-collector.yaml"):
            assert (CONFIGS / scenario / name).is_file(), f"{scenario}/{name} is missing"


@pytest.mark.parametrize(
    "path", sorted(CONFIGS.glob("*/*-collector.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_collector_files_are_well_formed(path: Path) -> None:
    cfg = _load(path)
    assert set(cfg) <= {
        "receivers",
        "processors",
        "exporters",
        "extensions",
        "connectors",
        "service",
    }
    for section, known in KNOWN_COMPONENTS.items():
        for component in cfg.get(section) or {}:
            kind = component.split("/", 1)[0]
            assert kind in known, f"{path.name}: unknown {section[:-1]} type {kind!r}"
    service = cfg["service"]
    for ext in service.get("extensions", []):
        assert ext in (cfg.get("extensions") or {}), f"{path.name}: extension {ext} not defined"
    pipelines = service["pipelines"]
    assert pipelines
    for name, pipeline in pipelines.items():
        assert name.split("/", 1)[0] in SIGNALS, f"{path.name}: bad pipeline name {name}"
        assert set(pipeline) <= {"receivers", "processors", "exporters"}
        for role in ("receivers", "processors", "exporters"):
            for ref in pipeline.get(role, []):
                assert ref in (cfg.get(role) or {}), (
                    f"{path.name}: pipeline {name} uses undefined {ref}"
                )
        assert pipeline.get("receivers") and pipeline.get("exporters")
    for receiver in (cfg.get("receivers") or {}).values():
        for proto in (receiver.get("protocols") or {}).values():
            _port(proto["endpoint"])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_hops_line_up(scenario: str) -> None:
    edge = _collector(scenario, "edge")
    backend = _collector(scenario, "backend")
    hop = hop_config.load(CONFIGS / scenario / "otel-footprint.yaml", {}, ENV)
    hop_grpc = hop.receivers.grpc.endpoint.port

    # edge -> otel-footprint: every target of the traces exporter is an otel-footprint gRPC port.
    (exporter_name,) = edge["service"]["pipelines"]["traces"]["exporters"]
    exporter = edge["exporters"][exporter_name]
    if exporter_name.startswith("loadbalancing"):
        assert exporter["routing_key"] == "traceID"
        targets = exporter["resolver"]["static"]["hostnames"]
        assert len(targets) >= 2
        otlp = exporter["protocol"]["otlp"]
    else:
        targets = [exporter["endpoint"]]
        otlp = exporter
    for target in targets:
        assert _host(target).startswith("otel-footprint"), target
        assert _port(target) == hop_grpc, (
            f"{target} does not reach otel-footprint's gRPC port {hop_grpc}"
        )
    # Footprint events may travel as log records: they must reach the same otel-footprint.
    assert edge["service"]["pipelines"]["logs"]["exporters"] == [exporter_name]
    # The hop listens beyond loopback, so it checks a token; the edge must send it.
    assert hop.receivers.bearer_token == ENV["FOOTPRINT_TOKEN"]
    assert otlp["headers"]["authorization"] == "Bearer ${env:FOOTPRINT_TOKEN}"

    # otel-footprint -> backend Collector.
    backend_grpc = backend["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert hop.exporter.protocol == "grpc"
    assert _host(hop.exporter.traces_target) == "collector-backend"
    assert _port(hop.exporter.traces_target) == _port(backend_grpc)
    assert hop.exporter.logs_target is None  # trace backends: logs are joined, not forwarded
    assert _port(hop.service.telemetry_endpoint.__str__()) != hop_grpc

    # backend Collector -> the backend itself.
    (backend_exporter,) = backend["service"]["pipelines"]["traces"]["exporters"]
    assert backend["exporters"][backend_exporter]["endpoint"] == SCENARIOS[scenario]

    if scenario == "loadbalancing":
        store = hop.processing.run_store
        assert store.kind == "redis" and store.url == "redis://redis:6379/0"
        assert "1" in str(hop.service.data_dir)  # each instance its own data directory


def test_every_traceql_query_names_what_otel_footprint_writes() -> None:
    known_attrs = set(semconv.all_names().values())
    queries = [
        line
        for line in (CONFIGS / "tempo" / "verdicts.traceql").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(queries) >= 15
    for query in queries:
        assert query.startswith("{") and query.endswith("}"), query
        for scope, name in re.findall(r"\b(span|event)\.([a-z_][a-z0-9_.]*)", query):
            assert name in known_attrs, f"{query}: {scope}.{name} is not a name otel-footprint uses"
        for event in re.findall(r'event:name = "([^"]+)"', query):
            assert event in known_attrs, f"{query}: unknown event {event}"


def test_deploy_doc_covers_every_configuration() -> None:
    doc = (ROOT / "docs" / "deploy.md").read_text()
    for path in sorted(CONFIGS.glob("*/*")):
        rel = path.relative_to(ROOT).as_posix()
        assert rel in doc, f"docs/deploy.md does not mention {rel}"
    # The TraceQL in the doc is the same as in the file.
    for line in (CONFIGS / "tempo" / "verdicts.traceql").read_text().splitlines():
        if line.startswith("{"):
            assert line in doc, f"docs/deploy.md lacks the query {line}"
