"""Integrity over the upstream's own recordings (agentfootprint NDJSON, imported): the evidence the
recording carries is read — the tools each call was offered (``stream.llm_start``) and the agent's
own disposition rows (``integrity.disposition``) — and the rows agree with what the agent said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _shared import RECORDINGS

from otel_footprint.account.integrity import IntegrityResult
from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.commands.explain import Loaded, explain_requests


def _integrity(stem: str) -> list[IntegrityResult]:
    path = RECORDINGS / f"{stem}.ndjson"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    requests = recording_to_requests(path.read_text(encoding="utf-8").splitlines())
    results = [v.integrity for v in explain_requests(Loaded(traces=requests, logs=[]))]
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def _disposition(stem: str) -> dict[tuple[str, str], dict[str, int]]:
    path: Path = RECORDINGS / f"{stem}.ndjson"
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "agentfootprint.integrity.disposition":
            for row in event["payload"]["rows"]:
                rows[(row["check"], row["seam"])] = row
    return rows


def test_park_trap_compose_reads_the_offered_tools_and_agrees_with_the_agent() -> None:
    (result,) = _integrity("park-trap")
    row = result.row("invariant-violation", "compose")
    theirs = _disposition("park-trap")[("invariant-violation", "compose")]
    assert row.state == "pass"
    assert (
        (row.checked, row.findings, row.not_applicable, row.unreachable)
        == (
            theirs["checked"],
            theirs["findings"],
            theirs["notApplicable"],
            theirs["unreachable"],
        )
        == (3, 0, 3, 0)
    )
    assert result.findings == ()


def test_no_kernel_compose_is_judged_from_the_recording() -> None:
    """No kernel in the agent (shadow): the replayed park at pass 4 meets ``get_zone_info`` still
    on the list the recording says was offered — what parking would have withheld. The agent
    promised no park, so nothing is contradicted: an advisory on a passing row, which agrees with
    the agent's own disposition (no compose finding)."""
    (result,) = _integrity("no-kernel")
    row = result.row("invariant-violation", "compose")
    theirs = _disposition("no-kernel")[("invariant-violation", "compose")]
    assert (row.state, row.unreachable) == ("pass", 0)
    assert row.checked == 3
    assert row.findings == theirs["findings"] == 0
    assert result.state != "fail"
    assert (len(result.contradictions), len(result.advisories)) == (0, 1)
    (advisory,) = result.findings
    assert advisory.advisory
    assert (advisory.kind, advisory.seam, advisory.iteration) == (
        "invariant-violation",
        "compose",
        4,
    )
    assert [s.render() for s in advisory.subjects] == ["map:skill-map", "tool:get_zone_info"]


@pytest.mark.parametrize("stem", ["park-trap", "no-kernel", "own-tool", "routed-delivered"])
def test_recordings_are_verified_against_the_agents_rows(stem: str) -> None:
    """The agent's disposition rows are read: compared where both sides judged (no disagreement on
    these recordings), and the wire check the agent ran — whose sent list the recording does not
    carry — is unreachable here, never "does not apply"."""
    (result,) = _integrity(stem)
    assert result.verified
    assert result.disagreements == ()
    wire = result.row("invariant-violation", "wire")
    assert (wire.armed, wire.state) == (True, "unreachable")
