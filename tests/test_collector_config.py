"""collector-config/: every file parses, pipelines reference defined components, hops line up.

The chain in each scenario is edge Collector -> otel-footprint -> backend Collector -> backend; the
checks follow the ports and endpoints along it, load each otel-footprint file with the hop's own
config loader, and check the TraceQL queries only name attributes otel-footprint writes.
"""

from __future__ import annotations

import os
import re
import subprocess
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
    "load_balancing": "tempo:4317",
}
ENV = {"FOOTPRINT_TOKEN": "t0ken", "FOOTPRINT_INSTANCE": "1", "XDG_STATE_HOME": "/tmp/state"}

KNOWN_COMPONENTS = {
    "receivers": {"otlp"},
    "processors": {"batch", "memory_limiter", "resource"},
    # The Collector's current names: `otlp_grpc`, `otlp_http`, `load_balancing` (the old `otlp`,
    # `otlphttp`, `loadbalancing` are deprecated aliases and are not used here).
    "exporters": {"otlp_grpc", "otlp_http", "load_balancing", "debug", "file", "prometheus"},
    "extensions": {"health_check"},
    "connectors": {"span_metrics"},
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
                # A connector is an exporter of one pipeline and a receiver of another.
                connector = role != "processors" and ref in (cfg.get("connectors") or {})
                assert ref in (cfg.get(role) or {}) or connector, (
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
    hop_grpc = hop.receivers.protocols.grpc.endpoint.port

    # edge -> otel-footprint: every target of the traces exporter is an otel-footprint gRPC port.
    (exporter_name,) = edge["service"]["pipelines"]["traces"]["exporters"]
    exporter = edge["exporters"][exporter_name]
    if exporter_name.startswith("load_balancing"):
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
    assert hop.token == ENV["FOOTPRINT_TOKEN"]
    assert otlp["headers"]["authorization"] == "Bearer ${env:FOOTPRINT_TOKEN}"

    # otel-footprint -> backend Collector.
    backend_grpc = backend["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert hop.exporter.protocol == "grpc"
    assert _host(hop.exporter.traces_target) == "collector-backend"
    assert _port(hop.exporter.traces_target) == _port(backend_grpc)
    assert hop.exporter.logs_target is None  # trace backends: logs are joined, not forwarded
    assert _port(hop.service.telemetry.endpoint.__str__()) != hop_grpc

    # backend Collector -> the backend itself.
    (backend_exporter,) = backend["service"]["pipelines"]["traces"]["exporters"]
    assert backend["exporters"][backend_exporter]["endpoint"] == SCENARIOS[scenario]

    if scenario == "load_balancing":
        store = hop.processing.run_store
        assert store.kind == "redis" and store.url == "redis://redis:6379/0"
        assert "1" in str(hop.data_dir)  # each instance its own data directory


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


# --- the real Collector (built by scripts/otelcol.sh from the Go module proxy) -------------------

OTELCOL = ROOT / "scripts" / "otelcol"
REQUIRED = {
    "receivers": {"otlp"},
    "processors": {"batch", "memory_limiter", "resource"},
    "exporters": {"otlp_grpc", "otlp_http", "load_balancing", "file", "debug", "prometheus"},
    "extensions": {"health_check"},
    "connectors": {"span_metrics"},
}


def _otelcol_bin() -> str:
    binary = os.environ.get("OTEL_FOOTPRINT_OTELCOL_BIN")
    if not binary:
        pytest.skip(
            "OTEL_FOOTPRINT_OTELCOL_BIN is not set: build and start the Collector with "
            "`scripts/otelcol.sh build start` and export .otelcol/env (see docs/e2e.md)"
        )
    return binary


def _on_this_machine(cfg: dict[str, Any]) -> dict[str, Any]:
    """The file with the hop's (and the backend's) endpoints filled in: every exporter target that
    names a host of the deployment (otel-footprint-N, jaeger, tempo, phoenix) points at loopback."""

    def local(endpoint: str) -> str:
        return f"127.0.0.1:{_port(endpoint)}"

    for exporter in (cfg.get("exporters") or {}).values():
        if "endpoint" in exporter:
            exporter["endpoint"] = local(exporter["endpoint"])
        static = ((exporter.get("resolver") or {}).get("static")) or {}
        if "hostnames" in static:
            static["hostnames"] = [local(h) for h in static["hostnames"]]
    return cfg


@pytest.mark.collector
def test_the_collector_has_every_component_the_configs_need() -> None:
    done = subprocess.run(
        [_otelcol_bin(), "components"], capture_output=True, text=True, timeout=60, check=True
    )
    listed = yaml.safe_load(done.stdout)
    for kind, names in REQUIRED.items():
        have = {c["name"] for c in listed.get(kind) or []}
        assert names <= have, f"{kind}: missing {names - have} in {sorted(have)}"
    assert listed["buildinfo"]["command"] == "otelcol-footprint"


@pytest.mark.collector
@pytest.mark.parametrize(
    "path", sorted(CONFIGS.glob("*/*-collector.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_every_collector_file_is_accepted_by_the_real_collector(path: Path, tmp_path: Path) -> None:
    filled = tmp_path / path.name
    filled.write_text(yaml.safe_dump(_on_this_machine(_load(path)), sort_keys=False))
    done = subprocess.run(
        [_otelcol_bin(), "validate", "--config", str(filled)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **ENV},
    )
    assert done.returncode == 0, f"{path}: {done.stderr[-3000:]}"


@pytest.mark.collector
def test_the_collector_refuses_what_it_does_not_have(tmp_path: Path) -> None:
    """The control: `validate` really reads the file (a component this distribution lacks, and a
    misspelt key of the load_balancing exporter, are both refused)."""
    edge = _on_this_machine(_load(CONFIGS / "load_balancing" / "edge-collector.yaml"))
    unknown = {**edge, "processors": {**edge["processors"], "tail_sampling": {}}}
    unknown["service"]["pipelines"]["traces"]["processors"] = ["memory_limiter", "tail_sampling"]
    typo = _on_this_machine(_load(CONFIGS / "load_balancing" / "edge-collector.yaml"))
    typo["exporters"]["load_balancing"]["routing_keys"] = "traceID"
    for name, cfg, expected in (
        ("unknown", unknown, "tail_sampling"),
        ("typo", typo, "routing_keys"),
    ):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        done = subprocess.run(
            [_otelcol_bin(), "validate", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, **ENV},
        )
        assert done.returncode != 0 and expected in done.stderr, (name, done.stderr[-2000:])


def test_the_collector_build_pins_one_release() -> None:
    """Every module of the OCB manifest is at one Collector release, and go.mod requires exactly
    those versions (the Go sources were generated from the manifest)."""
    manifest = _load(OTELCOL / "builder-config.yaml")
    gomod = (OTELCOL / "go.mod").read_text()
    pinned: dict[str, str] = {}
    for section in (
        "receivers",
        "processors",
        "exporters",
        "connectors",
        "extensions",
        "providers",
    ):
        for entry in manifest[section]:
            module, version = entry["gomod"].split()
            pinned[module] = version
            assert re.search(rf"^\s*{re.escape(module)} {re.escape(version)}$", gomod, re.M), (
                f"go.mod does not require {module} {version}"
            )
    core = {v for m, v in pinned.items() if m.startswith("go.opentelemetry.io/collector/")}
    contrib = {v for m, v in pinned.items() if "opentelemetry-collector-contrib" in m}
    assert core <= {"v0.161.0", "v1.67.0"} and contrib == {"v0.161.0"}, (core, contrib)
    # Every core / contrib module in the resolved build list is at that release too.
    for module, version in re.findall(
        r"^\s*((?:go\.opentelemetry\.io/collector|github\.com/open-telemetry/opentelemetry-collector-contrib)\S*) (v\S+)",
        gomod,
        re.M,
    ):
        assert version in {"v0.161.0", "v1.67.0"}, f"{module} {version}"
