"""Every shared recording through ``otel-footprint import agentfootprint`` into ``otel-footprint serve``
(a subprocess forwarding OTLP/gRPC to Phoenix): Phoenix holds the verdicts ``explain`` gives."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from _shared import recordings
from test_service_support import HopProcess

from otel_footprint import semconv as sc

from .footprint_e2e import (
    E2E_TIMEOUT_S,
    all_of,
    attrs_of,
    eq,
    exactly,
    in_trace,
    otel_footprint_cli,
    start_hop,
)
from .phoenix_api import PhoenixClient, PhoenixSpan, gql_contains, gql_ref

pytestmark = pytest.mark.e2e

SALT = uuid.uuid4().hex[:12]
"""Mixed into the importer's ids: every test session sends traces Phoenix has never seen (it
keeps the first copy of a span id), so a rerun against the same Phoenix checks what it sent."""

RECORDINGS = recordings()
# Both of the hop's receivers get importer traffic: recordings alternate between gRPC and HTTP.
PROTOCOLS = (("grpc", "grpc"), ("http/protobuf", "http"))
CASES = [
    pytest.param(path, PROTOCOLS[index % 2][0], id=f"{path.stem}-{PROTOCOLS[index % 2][1]}")
    for index, path in enumerate(RECORDINGS)
]

RUN_ATTRIBUTES = (
    sc.RUN_ID,
    sc.RUN_MODE,
    sc.RUN_PASSES,
    sc.RUN_COMPLETE,
    sc.RUN_RESUMED,
    sc.RUN_REASONS,
    sc.CHECK_DECIDED_DELIVERED,
    sc.CHECK_DECIDED_DELIVERED_OUTCOME,
    sc.CHECK_EXISTENCE,
    sc.CHECK_EMPTY_RESULTS,
    sc.SIGNALS,
    sc.SUMMARY_TONE,
)
PASS_ATTRIBUTES = (
    sc.PASS_ITERATION,
    sc.ENG_ENGAGED_MAPS,
    sc.ENG_PARKED_MAPS,
    sc.ENG_SERVED_WHILE_PARKED,
    sc.ENG_PARKED_INJECTION_IDS,
    sc.ENG_PARKED_TOOL_NAMES,
)
CHANGE_EVENTS = {sc.EV_ENGAGEMENT_ENGAGED: "engaged", sc.EV_ENGAGEMENT_PARKED: "parked"}


@pytest.fixture(scope="module")
def hop(phoenix: PhoenixClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    """One ``otel-footprint serve`` for the module, forwarding OTLP/gRPC to Phoenix."""
    if phoenix.grpc_endpoint is None:
        pytest.fail("OTEL_FOOTPRINT_PHOENIX_GRPC is not set: the hop has no gRPC target")
    data_dir = tmp_path_factory.mktemp("hop-grpc") / "data"
    process = start_hop(data_dir, f"http://{phoenix.grpc_endpoint}", forward_protocol="grpc")
    with process.stopped_cleanly():
        yield process


def explain(recording: Path) -> list[dict[str, Any]]:
    """The runs of ``otel-footprint explain RECORDING --format json`` (the expected verdicts)."""
    done = otel_footprint_cli("explain", str(recording), "--format", "json")
    assert done.returncode == 0, f"explain exited {done.returncode}: {done.stderr[-2000:]}"
    runs: list[dict[str, Any]] = json.loads(done.stdout)["runs"]
    assert runs, f"explain found no run in {recording.name}"
    return runs


def expected_run(run: Mapping[str, Any]) -> dict[str, Any]:
    """The run-span attributes the annotation contract derives from one explain run."""
    checks: Mapping[str, Any] = run["checks"]
    has_account = bool(checks)
    codes = list(dict.fromkeys(r["code"] for r in run["reasons"]))
    expected: dict[str, Any] = {
        sc.RUN_ID: run["runId"],
        sc.RUN_MODE: run["mode"],
        sc.RUN_PASSES: len(run["passes"]),
        sc.RUN_COMPLETE: run["complete"],
        sc.RUN_RESUMED: run["resumed"],
        sc.RUN_REASONS: codes or None,
        sc.SIGNALS: list(run["signals"]) if has_account else None,
        sc.SUMMARY_TONE: run["summary"]["tone"] if has_account else None,
        sc.CHECK_DECIDED_DELIVERED_OUTCOME: None,
    }
    for check_id, attribute in sc.CHECK_ATTRIBUTE.items():
        expected[attribute] = checks[check_id]["status"] if check_id in checks else None
    check1 = checks.get("decided-delivered", {})
    if check1.get("status") == "reachable":
        # The contract writes the outcome only when check 1 is reachable.
        expected[sc.CHECK_DECIDED_DELIVERED_OUTCOME] = check1.get("outcome")
    return expected


def expected_pass(run: Mapping[str, Any], pass_: Mapping[str, Any]) -> dict[str, Any]:
    """The pass-span attributes for one explain pass (none of the engagement ones without a mode)."""
    annotated = run["mode"] is not None
    return {
        sc.PASS_ITERATION: pass_["iteration"],
        sc.ENG_ENGAGED_MAPS: pass_["engagedMaps"] if annotated else None,
        sc.ENG_PARKED_MAPS: pass_["parkedMaps"] if annotated else None,
        sc.ENG_SERVED_WHILE_PARKED: pass_["servedWhileParked"] if annotated else None,
        sc.ENG_PARKED_INJECTION_IDS: pass_["parkedInjectionIds"] if annotated else None,
        sc.ENG_PARKED_TOOL_NAMES: pass_["parkedToolNames"] if annotated else None,
    }


def change_events(span: PhoenixSpan) -> list[tuple[str, str, int, str, int | None]]:
    """The span's engagement change events as (kind, map, iteration, by, idle calls)."""
    return [
        (
            CHANGE_EVENTS[e.name],
            e.attributes[sc.CH_MAP_ID],
            e.attributes[sc.CH_ITERATION],
            e.attributes[sc.CH_BY],
            e.attributes.get(sc.CH_IDLE_CALLS),
        )
        for e in span.events
        if e.name in CHANGE_EVENTS
    ]


def expected_changes(pass_: Mapping[str, Any]) -> list[tuple[str, str, int, str, int | None]]:
    return [
        (c["kind"], c["mapId"], c["iteration"], c["by"], c.get("idleCalls"))
        for c in pass_["changes"]
    ]


def run_condition(run: Mapping[str, Any]) -> str:
    """A server-side filter that finds exactly this run span by its verdict, or nothing."""
    expected = expected_run(run)
    parts = [eq(sc.RUN_ID, run["runId"]), in_trace(run["traceId"])]
    parts.append(eq(sc.RUN_PASSES, expected[sc.RUN_PASSES]))
    parts.append(eq(sc.RUN_COMPLETE, expected[sc.RUN_COMPLETE]))
    parts.append(eq(sc.RUN_RESUMED, expected[sc.RUN_RESUMED]))
    for name in (sc.RUN_MODE, sc.CHECK_DECIDED_DELIVERED):
        value = expected[name]
        parts.append(eq(name, value) if value is not None else f"{gql_ref(name)} is None")
    outcome = expected[sc.CHECK_DECIDED_DELIVERED_OUTCOME]
    if outcome is not None:
        parts.append(
            eq(sc.CHECK_DECIDED_DELIVERED_OUTCOME, outcome, leaf_sibling=sc.CHECK_DECIDED_DELIVERED)
        )
    return all_of(*parts)


def checks_names(checks: Mapping[str, Any]) -> set[str]:
    """The evaluation names of the account's checks explain lists."""
    return {sc.evaluation_name(check_id) for check_id in checks}


@pytest.mark.parametrize(("recording", "protocol"), CASES)
def test_recording_verdicts_in_phoenix_match_explain(
    phoenix: PhoenixClient, hop: HopProcess, recording: Path, protocol: str, tmp_path: Path
) -> None:
    # One Phoenix project per recording, and ids of this session's own (see SALT).
    project = f"{recording.stem}-{SALT}"
    import_args = (
        "import",
        "agentfootprint",
        str(recording),
        "--resource-attribute",
        f"{sc.OI_PROJECT_NAME}={project}",
        "--id-salt",
        SALT,
    )
    # The expected verdicts: explain over exactly the traces the hop will receive.
    traces = tmp_path / f"{recording.stem}.jsonl"
    done = otel_footprint_cli(*import_args, "-o", str(traces))
    assert done.returncode == 0, f"import exited {done.returncode}: {done.stderr[-2000:]}"
    runs = explain(traces)
    endpoint = hop.grpc if protocol == "grpc" else f"http://{hop.http}"
    done = otel_footprint_cli(*import_args, "--endpoint", endpoint, "--protocol", protocol)
    assert done.returncode == 0, f"import exited {done.returncode}: {done.stderr[-2000:]}"

    for run in runs:
        trace_id, run_span_id = run["traceId"], run["runSpanId"]
        where = f"{recording.name} run {run['runId']} trace {trace_id}"
        # Wait for the whole leg (run span + passes) before reading anything of it.
        [span] = phoenix.wait_for_spans_where(
            project, all_of(eq(sc.RUN_ID, run["runId"]), in_trace(trace_id)), timeout=E2E_TIMEOUT_S
        )
        assert span.span_id == run_span_id, where
        assert attrs_of(span, RUN_ATTRIBUTES) == expected_run(run), where
        # The same verdict, as a server-side filter with explain's values: exactly this span.
        assert phoenix.span_ids_where(project, run_condition(run)) == [run_span_id], where
        checks = run["checks"]
        if checks:
            labels = {
                e.attributes[sc.EVAL_NAME]: e.attributes[sc.EVAL_SCORE_LABEL]
                for e in span.events_named(sc.EV_EVALUATION_RESULT)
            }
            integrity = {
                sc.integrity_evaluation_name(r["check"], r["seam"])
                for r in run.get("integrity", {}).get("rows", [])
                if r["armed"]
            }
            assert {k: v for k, v in labels.items() if k not in integrity} == {
                sc.evaluation_name(check_id): c["label"] for check_id, c in checks.items()
            }, where
            assert set(labels) - checks_names(checks) == integrity, where

        chats = exactly(
            phoenix,
            project,
            all_of(in_trace(trace_id), eq(sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT)),
            len(run["passes"]),
            timeout=E2E_TIMEOUT_S,
        )
        by_id = {c.span_id: c for c in chats}
        assert set(by_id) == {p["spanId"] for p in run["passes"]}, where
        for pass_ in run["passes"]:
            chat = by_id[pass_["spanId"]]
            at = f"{where} pass {pass_['iteration']}"
            assert chat.parent_id == run_span_id, at
            assert attrs_of(chat, PASS_ATTRIBUTES) == expected_pass(run, pass_), at
            if run["mode"] is not None:
                assert change_events(chat) == expected_changes(pass_), at
        # Parked maps per pass, server side: exact membership finds exactly explain's passes.
        parked_ids = sorted({m for p in run["passes"] for m in p["parkedMaps"]})
        for map_id in parked_ids:
            found = phoenix.span_ids_where(
                project, all_of(in_trace(trace_id), gql_contains(sc.ENG_PARKED_MAPS, map_id))
            )
            assert sorted(found) == sorted(
                p["spanId"] for p in run["passes"] if map_id in p["parkedMaps"]
            ), f"{where}: passes with {map_id} parked"
