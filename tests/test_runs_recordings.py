"""Functional: every real upstream recording, through the importer and ``explain``, gives back the
upstream's own engagement decisions (map.engaged / map.parked) and final records, leg by leg.

Generic over the recordings directories: a recording added later is tested without code changes.
"""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from _shared import RECORDINGS as SHARED
from _shared import recordings

from otel_footprint.commands.cli import main

# The README names a second folder for recordings held back from development; read it if present.
RECORDINGS = recordings()
pytestmark = pytest.mark.skipif(not RECORDINGS, reason="no recordings on this machine")


def _expect(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.with_suffix(".expect.json").read_text())
    return data


@cache
def _explain_json(path: Path) -> dict[str, Any]:
    out = io.StringIO()
    assert main(["explain", str(path), "--format", "json"], out) == 0
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def _expected_change(event: dict[str, Any]) -> dict[str, Any]:
    kind = event["type"].removeprefix("map.")
    change: dict[str, Any] = {
        "kind": kind,
        "mapId": event["mapId"],
        "iteration": event["iteration"],
        "by": event["by"],
    }
    if kind == "parked":
        change["idleCalls"] = event["idleCalls"]
    change.update(event.get("flags", {}))
    return change


def _kernel_was_on(expect: dict[str, Any]) -> bool:
    return all(leg["snapshot"].get("mapEngagementKeyPresent", True) for leg in expect["legs"])


def _legs_and_runs(path: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    expect = _expect(path)
    runs = _explain_json(path)["runs"]
    assert len(runs) == len(expect["legs"]), "one explained run per recorded leg"
    return list(zip(expect["legs"], runs, strict=True))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_changes_are_the_upstreams_own_per_leg(path: Path) -> None:
    expect = _expect(path)
    for leg, run in _legs_and_runs(path):
        assert run["reasons"] == [], run["reasons"]
        assert run["complete"] is True
        derived = [c for p in run["passes"] for c in p["changes"]]
        if not _kernel_was_on(expect):
            assert run["mode"] == "shadow"
            continue
        assert run["mode"] == "verify"
        leg_runs = set(leg["runIds"])
        upstream = [_expected_change(e) for e in expect["mapEvents"] if e["runId"] in leg_runs]
        assert derived == upstream
        assert not any(p["mismatch"] for p in run["passes"])


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_final_records_are_the_snapshots(path: Path) -> None:
    expect = _expect(path)
    if not _kernel_was_on(expect):
        pytest.skip("no kernel upstream: the snapshot holds no engagement to compare")
    for leg, run in _legs_and_runs(path):
        assert run["engagement"] == leg["snapshot"]["mapEngagement"]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_passes_are_the_recorded_iterations_and_what_rode(path: Path) -> None:
    expect = _expect(path)
    evaluated = {}
    for row in expect["evaluatedPerIteration"]:
        evaluated[(row["runId"], row["iteration"])] = row
    for leg, run in _legs_and_runs(path):
        rows = [v for (rid, _), v in evaluated.items() if rid in leg["runIds"]]
        assert [p["iteration"] for p in run["passes"]] == [r["iteration"] for r in rows]
        for p, row in zip(run["passes"], rows, strict=True):
            assert p["spanId"], "every pass is written on its model-call span"
            assert [i for i in p["rode"] if i != "agentfootprint:map-status"] == row["activeIds"]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_shadow_lists_exactly_the_parked_ids_that_rode(path: Path) -> None:
    for _, run in _legs_and_runs(path):
        for p in run["passes"]:
            if run["mode"] != "shadow":
                assert p["servedWhileParked"] == []
                continue
            parked = set(p["parkedInjectionIds"])
            assert p["servedWhileParked"] == [i for i in p["rode"] if i in parked]
            assert (p["servedCharsWhileParked"] > 0) == bool(p["servedWhileParked"])


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_resumed_legs_continue_the_earlier_leg(path: Path) -> None:
    for leg, run in _legs_and_runs(path):
        assert run["resumed"] is (leg["kind"] == "resume")


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_text_and_html_forms_render(path: Path) -> None:
    for form in ("text", "html"):
        out = io.StringIO()
        assert main(["explain", str(path), "--format", form], out) == 0
        assert out.getvalue().strip()
    text = io.StringIO()
    main(["explain", str(path)], text)
    for run in _explain_json(path)["runs"]:
        assert f"Run {run['runId']}" in text.getvalue()


def test_no_kernel_shadow_parks_where_park_trap_parked() -> None:
    trap = _expect(SHARED / "park-trap.ndjson")
    parked_at = next(e["iteration"] for e in trap["mapEvents"] if e["type"] == "map.parked")
    (run,) = _explain_json(SHARED / "no-kernel.ndjson")["runs"]
    assert run["mode"] == "shadow"
    parks = [c for p in run["passes"] for c in p["changes"] if c["kind"] == "parked"]
    assert [c["iteration"] for c in parks] == [parked_at]
    assert parks[0] == _expected_change(
        next(e for e in trap["mapEvents"] if e["type"] == "map.parked")
    )
    riding = {p["iteration"]: p["servedWhileParked"] for p in run["passes"]}
    no_kernel = _expect(SHARED / "no-kernel.ndjson")
    for row in no_kernel["evaluatedPerIteration"]:
        expected = row["activeIds"] if row["iteration"] >= parked_at else []
        assert riding[row["iteration"]] == expected
    # What riding cost: the zone-audit procedure (and its tool schema) on every parked pass.
    assert all(p["servedCharsWhileParked"] > 0 for p in run["passes"][parked_at - 1 :])
    # The shadow kernel ends where the real kernel ended.
    assert run["engagement"] == trap["legs"][0]["snapshot"]["mapEngagement"]


def test_pause_resume_leg_two_upgrades_leg_ones_engagement() -> None:
    first, second = _explain_json(SHARED / "pause-resume.ndjson")["runs"]
    assert first["runId"] == second["runId"], "a resumed leg keeps the run id"
    assert first["traceId"] != second["traceId"]
    assert second["resumed"] is True
    (change,) = [c for p in second["passes"] for c in p["changes"]]
    assert change == {
        "kind": "engaged",
        "mapId": "skill-map",
        "iteration": 2,
        "by": "structural",
        "upgraded": True,
        "foundedBy": "semantic",
    }
    # Founded in leg 1, so the record's provenance is leg 1's.
    assert second["engagement"][0]["foundedAt"] == 1


def test_resumed_leg_alone_says_its_earlier_leg_is_missing(tmp_path: Path) -> None:
    path = SHARED / "pause-resume.ndjson"
    expect = _expect(path)
    lines = path.read_text().splitlines()
    leg2 = expect["legs"][1]
    only = tmp_path / "leg2.ndjson"
    only.write_text("\n".join(lines[leg2["firstLine"] : leg2["lastLine"] + 1]) + "\n")
    out = io.StringIO()
    assert main(["explain", str(only), "--format", "json"], out) == 0
    (run,) = json.loads(out.getvalue())["runs"]
    assert run["resumed"] is True
    assert [r["code"] for r in run["reasons"]] == ["no-prior-leg"]
    assert run["complete"] is False
    assert run["passes"] == []


def test_contract_keys_are_present() -> None:
    for path in RECORDINGS:
        for run in _explain_json(path)["runs"]:
            assert {"runId", "mode", "passes", "engagement", "checks", "signals", "summary"} <= set(
                run
            )
            assert set(run["summary"]) == {"sentence", "tone"}
            for p in run["passes"]:
                assert {
                    "iteration",
                    "spanId",
                    "engagedMaps",
                    "parkedMaps",
                    "servedWhileParked",
                    "changes",
                } <= set(p)
            if run["checks"]:
                check = run["checks"]["decided-delivered"]
                assert check["status"] in ("reachable", "unreachable", "not-applicable")
                assert isinstance(check["pointers"], list)


DECIDING = frozenset({"entry", "intent", "continuity", "decider"})


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_check_one_is_filled_from_the_account(path: Path) -> None:
    # Integration of the engine with the account: the routing decided on the leg (or carried from
    # the earlier leg of the same run) against what the mock provider really received.
    expect = _expect(path)
    delivered_on_wire = {
        s for call in expect["wireObserved"] for s in call["skillBodiesInSystemPrompt"]
    }
    verdict: dict[str, Any] | None = None
    for leg, run in _legs_and_runs(path):
        if not run["checks"]:
            pytest.skip("the account module is not installed")
        routed = [r for r in expect["turnRouted"] if r["runId"] in leg["runIds"]]
        if routed:
            verdict = routed[0]
        elif leg["kind"] != "resume":
            verdict = None
        check = run["checks"]["decided-delivered"]
        if verdict is None:
            assert check["status"] == "unreachable"
        elif verdict["by"] in DECIDING and "to" in verdict:
            assert check["status"] == "reachable"
            expected = "delivered" if verdict["to"] in delivered_on_wire else "not-delivered"
            assert check["outcome"] == expected
            assert check["pointers"], "a reachable check cites its evidence"
        else:
            assert check["status"] == "not-applicable"
