"""The Node.js agent (tests/node/agent.mjs, official OpenTelemetry JS SDK) into ``otel-footprint serve``
(a subprocess forwarding OTLP/HTTP to Phoenix): its run is annotated exactly like the Python one."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_support import HopProcess

from otel_footprint import semconv as sc

from .footprint_e2e import PASSES, assert_stuck_turn_in_phoenix, start_hop
from .phoenix_api import PhoenixClient

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hop(phoenix: PhoenixClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    """One ``otel-footprint serve`` for the module, forwarding OTLP/HTTP to Phoenix's /v1/traces."""
    data_dir = tmp_path_factory.mktemp("hop-http") / "data"
    process = start_hop(data_dir, phoenix.otlp_http_traces_url, forward_protocol="http/protobuf")
    with process.stopped_cleanly():
        yield process


def run_node_agent(agent: Path, *args: str) -> dict[str, Any]:
    """Run agent.mjs to completion (bounded); its last stdout line is a JSON summary."""
    done = subprocess.run(
        ["node", str(agent), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"agent.mjs exited {done.returncode}: {done.stderr[-2000:]}"
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_node_agent_through_the_hop_is_annotated_in_phoenix(
    phoenix: PhoenixClient,
    hop: HopProcess,
    node_agent: Path,
    project_name: str,
    protocol: str,
) -> None:
    run_id = f"node-stuck-{uuid.uuid4().hex[:12]}"
    endpoint = f"http://{hop.grpc}" if protocol == "grpc" else f"http://{hop.http}"
    summary = run_node_agent(
        node_agent,
        f"--endpoint={endpoint}",
        f"--protocol={protocol}",
        f"--passes={PASSES}",
        f"--run-id={run_id}",
        f"--project={project_name}",
    )
    assert summary["spans"] == summary["exported"] == 1 + PASSES + (PASSES - 1)

    assert_stuck_turn_in_phoenix(
        phoenix,
        project_name,
        run_id=run_id,
        trace_id=summary["traceId"],
        run_span_id=summary["runSpanId"],
    )
    # Nothing was lost on the way: every span the agent exported is in Phoenix, tool spans included.
    spans = phoenix.wait_for_spans(project_name, count=summary["spans"])
    assert len(spans) == summary["spans"]
    tools = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL]
    assert sorted(t.attributes[sc.PASS_ITERATION] for t in tools) == list(range(1, PASSES))
