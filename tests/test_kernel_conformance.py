"""Conformance: the reducer replays every upstream reference pass, and the replayer reports well.

Reads the reference vectors in ``tests/data/reference/conformance`` (``OTEL_FOOTPRINT_SHARED`` may
point at another copy).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from _shared import VECTORS

from otel_footprint.commands.conformance import (
    json_diff,
    replay_engagement,
    run_conformance_engagement,
)
from otel_footprint.commands.errors import CommandError
from otel_footprint.kernel import advance_engagement, parked_member_ids
from otel_footprint.kernel.jsoncodec import (
    advance_to_json,
    change_from_json,
    change_to_json,
    engagement_from_json,
    pass_from_json,
    pass_to_json,
    plan_from_json,
    plan_to_json,
    record_from_json,
    record_to_json,
)
from otel_footprint.kernel.types import MapEngagementRecord

PUBLIC_PASSES = 3053
PUBLIC_SCENARIOS = 228


needs_vectors = pytest.mark.skipif(
    not VECTORS.is_file(),
    reason=f"reference vectors not found at {VECTORS} (they ship in tests/data/reference)",
)


def _lines() -> list[str]:
    return VECTORS.read_text(encoding="utf-8").splitlines()


def _scenario(name: str) -> dict[str, object]:
    for line in _lines():
        scenario = json.loads(line)
        if scenario["name"] == name:
            return dict(scenario)
    raise AssertionError(f"scenario {name} not in the vectors")


def _run(path: Path) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = run_conformance_engagement(str(path), out)
    return code, out.getvalue().splitlines()


@needs_vectors
def test_every_public_pass_replays() -> None:
    report = replay_engagement(_lines())
    assert report.findings == ()
    assert (report.passed, report.failed, report.scenarios) == (PUBLIC_PASSES, 0, PUBLIC_SCENARIOS)
    assert report.ok


@needs_vectors
def test_cli_entry_prints_the_summary_and_exits_zero() -> None:
    code, lines = _run(VECTORS)
    assert code == 0
    assert lines == [f"{PUBLIC_PASSES} passed, 0 failed"]


@needs_vectors
def test_the_chain_replays_from_our_own_output() -> None:
    # Feeding our own ``next`` forward (except at a stored turn boundary) reproduces every stored
    # prior and every expected output: one mistake would otherwise spread, and show here.
    for line in _lines():
        scenario = json.loads(line)
        plan = plan_from_json(scenario["plan"])
        state: tuple[MapEngagementRecord, ...] | None = None
        for index, step in enumerate(scenario["steps"]):
            if index == 0 or step["prior"] is None:
                state = engagement_from_json(step["prior"])
            else:
                assert [record_to_json(r) for r in state or ()] == step["prior"], scenario["name"]
            advance = advance_engagement(plan, state, pass_from_json(step["pass"]))
            got = advance_to_json(advance)
            for key in ("next", "parkedInjectionIds", "parkedToolNames", "changes"):
                assert got[key] == step[key], (scenario["name"], index, key)
            assert list(parked_member_ids(plan, advance.next)) == step["parkedMemberIds"]
            state = advance.next


@needs_vectors
def test_every_public_value_round_trips_through_the_codec() -> None:
    counts = {"plan": 0, "pass": 0, "record": 0, "change": 0}
    for line in _lines():
        scenario = json.loads(line)
        assert plan_to_json(plan_from_json(scenario["plan"])) == scenario["plan"]
        counts["plan"] += 1
        for step in scenario["steps"]:
            assert pass_to_json(pass_from_json(step["pass"])) == step["pass"]
            counts["pass"] += 1
            for record in [*step["next"], *(step["prior"] or [])]:
                assert record_to_json(record_from_json(record)) == record
                counts["record"] += 1
            for change in step["changes"]:
                assert change_to_json(change_from_json(change)) == change
                counts["change"] += 1
    assert counts["pass"] == PUBLIC_PASSES
    assert min(counts.values()) > 0


@needs_vectors
def test_a_corrupted_expected_value_fails_with_a_readable_diff(tmp_path: Path) -> None:
    scenario = _scenario("found-by-move-entry")
    steps = scenario["steps"]
    assert isinstance(steps, list)
    steps[2]["next"][0]["idle"] = 7
    del steps[3]["changes"][0]["witness"]
    path = tmp_path / "corrupt.jsonl"
    path.write_text(json.dumps(scenario) + "\n", encoding="utf-8")
    code, lines = _run(path)
    assert code == 1
    assert lines == [
        "MISMATCH found-by-move-entry step 2 (line 1)",
        "  next[0].idle: expected 7, got 2",
        "MISMATCH found-by-move-entry step 3 (line 1)",
        '  changes[0].witness: expected <absent>, got "zone"',
        f"{len(steps) - 2} passed, 2 failed",
    ]


@needs_vectors
def test_a_missing_change_and_a_type_change_are_both_mismatches(tmp_path: Path) -> None:
    scenario = _scenario("found-by-move-entry")
    steps = scenario["steps"]
    assert isinstance(steps, list)
    steps[0]["changes"] = []
    steps[1]["next"][0]["idle"] = True  # JSON true is not 1
    path = tmp_path / "corrupt.jsonl"
    path.write_text(json.dumps(scenario) + "\n", encoding="utf-8")
    report = replay_engagement(path.read_text(encoding="utf-8").splitlines())
    assert report.failed == 2
    first, second = report.findings
    assert (first.scenario, first.step, first.kind) == ("found-by-move-entry", 0, "mismatch")
    assert first.details[0] == "changes: expected 0 item(s), got 1"
    assert first.details[1].startswith('changes[0]: expected <absent>, got {"kind":"engaged"')
    assert second.details == ("next[0].idle: expected true, got 1",)


@needs_vectors
def test_an_unreadable_line_is_reported_with_its_number(tmp_path: Path) -> None:
    good = _lines()[0]
    good_steps = len(json.loads(good)["steps"])
    path = tmp_path / "broken.jsonl"
    path.write_bytes(
        (good + "\n{not json\n\n").encode() + b'{"name": "\xff"}\n' + (good + "\n").encode()
    )
    code, lines = _run(path)
    assert code == 1
    assert lines[0].startswith("UNREADABLE line 2")
    assert "not valid JSON" in lines[1]
    assert lines[2:4] == ["UNREADABLE line 4", "  not valid UTF-8"]
    assert lines[-1] == f"{2 * good_steps} passed, 2 failed"


def test_a_malformed_step_names_scenario_step_and_path() -> None:
    scenario = {
        "name": "bad-step",
        "plan": {"maps": [{"id": "m", "memberIds": ["a"], "toolNames": []}], "renewalGrace": 3},
        "steps": [
            {
                "pass": {
                    "iteration": "1",
                    "toolResults": [],
                    "acceptedSkillPicks": [],
                    "servedLastPass": [],
                },
                "prior": None,
                "next": [],
                "parkedInjectionIds": [],
                "parkedToolNames": [],
                "changes": [],
            },
            {"pass": {}, "prior": None},
        ],
    }
    report = replay_engagement([json.dumps(scenario)])
    assert report.failed == 2
    assert [f.render() for f in report.findings] == [
        "UNREADABLE bad-step step 0 (line 1)\n"
        "  steps[0]: pass.iteration: expected an integer, got '1'",
        "UNREADABLE bad-step step 1 (line 1)\n  steps[1]: missing required key 'next'",
    ]


def test_a_bad_plan_fails_every_step_of_its_scenario() -> None:
    scenario = {"name": "bad-plan", "plan": {"maps": [], "renewalGrace": 3}, "steps": [{}, {}, {}]}
    report = replay_engagement([json.dumps(scenario)])
    assert (report.passed, report.failed) == (0, 3)
    assert report.findings[0].details == (
        "plan: nothing is mounted that the kernel could manage: the plan has no maps",
    )


def test_stdin_is_read_for_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = {
        "name": "stdin",
        "plan": {"maps": [{"id": "m", "memberIds": ["a"], "toolNames": []}], "renewalGrace": 3},
        "steps": [
            {
                "pass": {
                    "iteration": 1,
                    "currentNode": "a",
                    "moveBy": "entry",
                    "toolResults": [],
                    "acceptedSkillPicks": [],
                    "servedLastPass": [],
                },
                "prior": [],
                "next": [
                    {
                        "mapId": "m",
                        "standing": "engaged",
                        "by": "lexical",
                        "since": 1,
                        "foundedBy": "lexical",
                        "foundedAt": 1,
                        "foundedOn": "a",
                        "at": "a",
                        "atBy": "lexical",
                        "atSince": 1,
                        "idle": 0,
                    }
                ],
                "parkedInjectionIds": [],
                "parkedToolNames": [],
                "changes": [{"kind": "engaged", "mapId": "m", "iteration": 1, "by": "lexical"}],
                "parkedMemberIds": [],
            }
        ],
    }
    data = (json.dumps(scenario) + "\n").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    out = io.StringIO()
    assert run_conformance_engagement("-", out) == 0
    assert out.getvalue() == "1 passed, 0 failed\n"


def test_missing_and_empty_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CommandError, match=f"cannot read {tmp_path / 'absent.jsonl'}"):
        _run(tmp_path / "absent.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(
        CommandError, match=r"no scenarios in it \(nothing but blank lines\)"
    ) as caught:
        _run(empty)
    assert caught.value.status == 2
    empty.write_bytes(b"")
    with pytest.raises(CommandError, match=r"no scenarios in it \(it is empty\)"):
        _run(empty)
    assert capsys.readouterr().out == ""


def test_a_file_of_no_vectors_is_one_error_and_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Garbage, JSON of another shape, a lone ``null``: bad input (exit 2), not 16 UNREADABLEs."""
    cases = {
        b"\x00\xff\xfe garbage\n" * 16: "line 1: binary data, not UTF-8 text (and 15 more",
        b'{"resourceSpans": []}\n': "line 1: 'steps' must be a list",
        b"null\n": "line 1: a scenario must be a JSON object",
        b"# vectors\nplain text\n": "line 1: not valid JSON",
    }
    for data, says in cases.items():
        path = tmp_path / "not-vectors.jsonl"
        path.write_bytes(data)
        with pytest.raises(CommandError, match="not engagement vectors") as caught:
            _run(path)
        assert caught.value.status == 2
        assert says in str(caught.value), str(caught.value)
        assert "expected one JSON scenario per line" in str(caught.value)
    assert capsys.readouterr().out == ""


def test_json_diff_key_presence_order_and_types() -> None:
    assert json_diff({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, "x") == []
    assert json_diff({"a": ""}, {}, "x") == ['x.a: expected "", got <absent>']
    assert json_diff([1, 2], [2, 1], "x") == ["x[0]: expected 1, got 2", "x[1]: expected 2, got 1"]
    assert json_diff({"a": 1}, {"a": True}, "x") == ["x.a: expected 1, got true"]
    assert json_diff({"a": None}, {"a": []}, "x") == ["x.a: expected null, got []"]
