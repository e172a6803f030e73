"""The fidelity hazards of porting the integrity checks to JSON traces (spec §5.4), each decided
(docs/design.md, "Integrity: fidelity over JSON traces") and pinned here."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from integrity_fixtures import answered, asked, trap, user, verdict_of
from test_integrity_scenarios import choice, columns, integrity, kinds, lookup

from otel_footprint.account.integrity.columns import parses_as_date
from otel_footprint.account.integrity.common import (
    checked_leaves,
    clip,
    compact_json,
    js_keys,
    string_leaves,
    utf16_len,
)

# ── string length: UTF-16 code units, as the upstream counts ────────────────────────────────


def test_lengths_are_counted_in_utf16_units() -> None:
    assert utf16_len("abcd") == 4
    assert utf16_len("𝟘𝟙") == 4  # two astral characters are four units
    assert [p for p, _ in checked_leaves({"a": "𝟘𝟙", "b": "ab𝟘", "c": "abc", "d": "é€ab"})] == [
        "a",
        "b",
        "d",
    ]


def test_an_astral_value_at_the_fence_is_judged() -> None:
    assert len(kinds(integrity(choice({"machine": "𝟘𝟙"})), "unsupported-argument")) == 1
    assert kinds(integrity(choice({"machine": "ab"})), "unsupported-argument") == []


@given(st.text(min_size=0, max_size=200))
def test_clip_never_exceeds_80_units_nor_splits_a_pair(text: str) -> None:
    out = clip(text)
    assert utf16_len(out) <= 80
    out.encode("utf-8")  # a lone surrogate would raise here
    assert out == text or out.endswith("…")


# ── key order: JavaScript's (integer-like keys first, ascending) ────────────────────────────


def test_leaves_walk_objects_in_javascript_key_order() -> None:
    value = {"b": "bbbb", "10": "tenx", "2": "twox", "a": {"1": "one1", "z": "zzzz"}}
    assert js_keys(value) == ["2", "10", "b", "a"]
    assert [p for p, _ in string_leaves(value)] == ["2", "10", "b", "a.1", "a.z"]


def test_finding_order_follows_leaf_order() -> None:
    result = integrity(choice({"zeta": "ghost-zeta", "7": "ghost-seven"}))
    assert [f.predicate for f in kinds(result, "unsupported-argument")] == ["7", "zeta"]


def test_messages_render_values_as_compact_json() -> None:
    assert compact_json({"a": [1, "é"]}) == '{"a":[1,"é"]}'


# ── JSON losing NaN, undefined and Date ─────────────────────────────────────────────────────


def test_a_python_nan_is_judged_as_the_number_nan() -> None:
    (finding,) = columns('[{"c": NaN}]', {"c": "number"}).findings
    assert "(the number NaN)" in finding.message


def test_a_javascript_nan_arrives_as_null_and_reads_as_no_value() -> None:
    (finding,) = columns([{"c": None}], {"c": "number"}).findings
    assert "null (null)" in finding.message
    assert "declare it nullable" in finding.message


def test_an_undefined_key_is_an_absent_key() -> None:
    # JSON.stringify drops an undefined value with its key: only "no such key" can be seen.
    (finding,) = columns([{"c": 1}, {}], {"c": "number"}).findings
    assert "no such key (missing)" in finding.message
    assert [f.kind for f in columns([{}, {}], {"c": "number"}).findings] == ["missing-column"]


@pytest.mark.parametrize(
    "text",
    [
        "2024",
        "2024-05-01",
        "2024-05-01T10:00:00Z",
        "2024-05-01T10:00:00.123+02:00",
        "Tue, 1 Dec 2026 10:00:00 +0000",
    ],
)
def test_dates_that_parse(text: str) -> None:
    assert parses_as_date(text)
    assert columns([{"d": text}], {"d": "date"}).findings == ()


@pytest.mark.parametrize("text", ["yesterday", "2024-13-45", "", "12/31"])
def test_dates_that_do_not_parse(text: str) -> None:
    assert not parses_as_date(text)
    (finding,) = columns([{"d": text}], {"d": "date"}).findings
    assert "does not parse as a date" in finding.message


# ── raw vs served results ───────────────────────────────────────────────────────────────────


def test_the_consumer_is_judged_by_the_raw_shape_the_agent_states() -> None:
    # The model was served prose; the tool's own return was an empty rowset.
    script = lookup("No paths were found for that WWPN.")
    script.steps[1].calls[0].shape = ("rowset", 0)
    assert len(kinds(integrity(script), "empty-lookup")) == 1
    assert integrity(lookup("No paths were found.")).row("empty-lookup").state == "not-applicable"


def test_producers_are_read_as_served_to_the_model() -> None:
    # The recorded (raw) producer result lacks the value; the served tool message carries it.
    served = '{"luns":[{"wwpn":"50:06:01:60:3b:20:19:a4"}]} (shown to the model)'
    script = lookup(producer='{"luns":"see page 2"}')
    producer_call = script.steps[0].calls[0]
    producer_call.call_id = "call_luns"
    script.steps[1].messages = [
        user("paths?"),
        asked("call_luns", "list_luns", {}),
        answered("call_luns", served),
    ]
    assert len(kinds(integrity(script), "empty-lookup")) == 1


# ── capped attributes ───────────────────────────────────────────────────────────────────────


def test_a_cut_frame_is_unreachable_never_grounding() -> None:
    script = choice({"machine": "host-zeta-99"})
    for step in script.steps:
        step.messages = None
        step.raw_messages = '[{"role":"user","parts":[{"type":"text","content":"host-zeta-99 and mo'
    verdict = verdict_of(script)
    result = verdict.integrity
    assert result is not None
    row = result.row("unsupported-argument")
    assert row.state == "unreachable"
    assert "recorded but not readable (gen_ai.input.messages" in row.why[0]
    assert result.findings == ()


def test_capped_summaries_never_ground_a_value() -> None:
    # context.injected carries an 80-character summary of the body; the body is not recorded,
    # so a value seen only there is not served.
    script = choice({"machine": "host-zeta-99"})
    script.steps[0].injected = [("estate", "Known hosts: host-zeta-99")]
    assert len(kinds(integrity(script), "unsupported-argument")) == 1


def test_tool_definitions_cut_mid_json_are_not_an_empty_list() -> None:
    script = trap({})
    for step in script.steps:
        step.tools = None
        step.raw_tools = '[{"type":"function","name":"screen_open"},{"type":"function","na'
    result = integrity(script)
    row = result.row("invariant-violation", "compose")
    assert row.state == "unreachable"  # read as "no tools offered" it would have passed
    assert "recorded but not readable (gen_ai.tool.definitions" in row.why[0]
    assert result.findings == ()


def test_an_unreadable_input_is_named_on_the_run() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.steps[0].messages = None
    script.steps[0].raw_messages = '[{"role":"user","parts":[{"type":"text","content":"cut'
    verdict = verdict_of(script)
    problems = [r.message for r in verdict.reasons if r.code == "integrity-input"]
    assert len(problems) == 1 and "gen_ai.input.messages is not readable" in problems[0]
