"""Unit: the neutral annotation form — names, types, limits and witness privacy of annotations_for."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_footprint import semconv as sc
from otel_footprint.account.model import (
    AccountResult,
    CheckResult,
    Chip,
    Line,
    Pointer,
    Signal,
    Summary,
)
from otel_footprint.annotate.form import (
    AnnotateOptions,
    NoteEvent,
    SpanNote,
    WitnessPolicy,
    _Shaper,
    annotations_for,
    clip,
    hash_witness,
    merge_notes,
    unannotated_notes,
)
from otel_footprint.engine.verdict import PassVerdict, RunVerdict
from otel_footprint.kernel.types import EngagedChange, MapEngagementRecord, ParkedChange
from otel_footprint.runs.model import Reason

TRACE = "0af7651916cd43dd8448eb211c80319c"
RUN_SPAN = "00000000000000aa"
TOOL_SPAN = "00000000000000bb"
MEMBERS = ("zone-audit", "billing")


def pass_span(i: int) -> str:
    return f"{i:016x}"


def _pass(i: int, mode: str) -> PassVerdict:
    parked = i >= 4
    changes: tuple[EngagedChange | ParkedChange, ...] = ()
    if i == 1:
        changes = (EngagedChange("skill-map", 1, "lexical", witness="zone"),)
    if i == 4:
        changes = (ParkedChange("skill-map", 4, "lexical", 3, witness="zone"),)
    return PassVerdict(
        iteration=i,
        trace_id=TRACE,
        span_id=pass_span(i),
        engaged_maps=() if parked else ("skill-map",),
        parked_maps=("skill-map",) if parked else (),
        parked_injection_ids=MEMBERS if parked else (),
        parked_tool_names=("get_zone_info",) if parked else (),
        served_while_parked=("zone-audit",) if parked and mode == "shadow" else (),
        served_chars_while_parked=400 if parked and mode == "shadow" else 0,
        changes=changes,
    )


def _account(
    summary: str = "This report found nothing in the record.",
) -> AccountResult:
    routed = Pointer(TRACE, RUN_SPAN, sc.EV_TURN_ROUTED, 0, sc.F_TO)
    composed = Pointer(TRACE, pass_span(1), sc.EV_SLOT_COMPOSED, 0, sc.F_SOURCE_BREAKDOWN, "/skill")
    tool = Pointer(TRACE, TOOL_SPAN)
    return AccountResult(
        lines=(
            Line(
                "understood",
                "understood.rule.witness",
                "The zone-audit skill was chosen by the library's router after an app rule matched the words “zone”.",
                "recorded",
                "person",
                pointers=(routed,),
            ),
            Line(
                "understood",
                "understood.notDelivered",
                "The model never received the zone-audit skill.",
                "recorded",
                "library",
                pointers=(composed, tool),
                chips=(Chip("decided-not-delivered", "decided, not delivered", "bad"),),
            ),
        ),
        checks=(
            CheckResult(
                "decided-delivered",
                "reachable",
                "not-delivered",
                "The zone-audit skill was chosen for this question, yet the model never received it.",
                (routed, composed),
                "fail",
            ),
            CheckResult("existence", "not-applicable"),
            CheckResult("empty-results", "reachable", label="pass", pointers=(tool,)),
        ),
        signals=(Signal("decided-not-delivered", "decided-delivered", "bad", "…", (composed,)),),
        summary=Summary("signal", summary, "bad"),
    )


def verdict(mode: str = "shadow", **kw: object) -> RunVerdict:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "trace_id": TRACE,
        "run_span_id": RUN_SPAN,
        "mode": mode,
        "complete": True,
        "passes": tuple(_pass(i, mode) for i in range(1, 7)),
        "engagement": (
            MapEngagementRecord(
                "skill-map", "parked", "lexical", 4, "lexical", 1, 3, witness="zone"
            ),
        ),
        "account": _account(),
    }
    fields.update(kw)
    return RunVerdict(**fields)  # type: ignore[arg-type]


def attrs(note: SpanNote) -> dict[str, object]:
    return note.attribute_map()


def test_pass_spans_carry_engagement_state_and_change_events() -> None:
    notes = annotations_for(verdict("shadow"))
    fourth = notes[pass_span(4)]
    a = attrs(fourth)
    assert a[sc.PASS_ITERATION] == 4 and type(a[sc.PASS_ITERATION]) is int
    assert a[sc.ENG_PARKED_MAPS] == ("skill-map",)
    assert a[sc.ENG_ENGAGED_MAPS] == ()
    assert a[sc.ENG_PARKED_INJECTION_IDS] == MEMBERS
    assert a[sc.ENG_PARKED_TOOL_NAMES] == ("get_zone_info",)
    assert a[sc.ENG_SERVED_WHILE_PARKED] == ("zone-audit",)
    assert a[sc.ENG_SERVED_CHARS_WHILE_PARKED] == 400
    assert sc.ENG_MISMATCH not in a  # shadow mode has nothing to compare
    (event,) = fourth.events
    assert event.name == sc.EV_ENGAGEMENT_PARKED and event.anchor == "start"
    ev = dict(event.attributes)
    assert ev == {
        sc.CH_MAP_ID: "skill-map",
        sc.CH_ITERATION: 4,
        sc.CH_BY: "lexical",
        sc.CH_IDLE_CALLS: 3,
        sc.CH_WITNESS: "zone",
    }
    first = dict(notes[pass_span(1)].events[0].attributes)
    assert first[sc.CH_REENGAGED] is False and first[sc.CH_UPGRADED] is False
    assert notes[pass_span(2)].events == ()
    # every pass after the park lists what rode while parked (shadow)
    for i in (4, 5, 6):
        assert attrs(notes[pass_span(i)])[sc.ENG_SERVED_WHILE_PARKED] == ("zone-audit",)


def test_verify_mode_writes_mismatch_flag_and_event() -> None:
    base = verdict("verify")
    passes = list(base.passes)
    reported = (ParkedChange("skill-map", 3, "lexical", 2),)
    # PassVerdict is a Record: built again from its values (``reported`` and ``mismatch`` are the
    # 11th and 12th), which the compiled class has as well.
    values = list(passes[3]._values())
    values[10:12] = [reported, True]
    passes[3] = PassVerdict(*values)
    notes = annotations_for(dataclasses.replace(base, passes=tuple(passes)))
    assert attrs(notes[pass_span(3)])[sc.ENG_MISMATCH] is False
    fourth = notes[pass_span(4)]
    assert attrs(fourth)[sc.ENG_MISMATCH] is True
    assert attrs(fourth)[sc.ENG_SERVED_WHILE_PARKED] == ()
    mismatch = next(e for e in fourth.events if e.name == sc.EV_ENGAGEMENT_MISMATCH)
    ev = dict(mismatch.attributes)
    assert ev[sc.MISMATCH_REPORTED] == ("parked skill-map at 3 by lexical after 2 idle calls",)
    assert ev[sc.MISMATCH_DERIVED] == ("parked skill-map at 4 by lexical after 3 idle calls",)


def test_run_span_rollups_checks_and_evaluation_events() -> None:
    note = annotations_for(verdict())[RUN_SPAN]
    a = attrs(note)
    assert a[sc.RUN_ID] == "run-1"
    assert a[sc.RUN_PASSES] == 6 and type(a[sc.RUN_PASSES]) is int
    assert a[sc.RUN_PARKED_MAPS] == ("skill-map",)
    assert a[sc.RUN_COMPLETE] is True
    assert a[sc.RUN_MODE] == "shadow"
    assert a[sc.RUN_SERVED_CHARS_WHILE_PARKED] == 1200
    assert a[sc.CHECK_DECIDED_DELIVERED] == "reachable"
    assert a[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "not-delivered"
    assert a[sc.CHECK_EXISTENCE] == "not-applicable"
    assert a[sc.CHECK_EMPTY_RESULTS] == "reachable"
    assert a[sc.SIGNALS] == ("decided-not-delivered",)
    assert a[sc.SUMMARY_TONE] == "bad"
    evaluations = [dict(e.attributes) for e in note.events if e.name == sc.EV_EVALUATION_RESULT]
    assert [e[sc.EVAL_NAME] for e in evaluations] == [
        "footprint.decided-delivered",
        "footprint.existence",
        "footprint.empty-results",
    ]
    assert [e[sc.EVAL_SCORE_LABEL] for e in evaluations] == ["fail", "unknown", "pass"]
    assert evaluations[0][sc.EVAL_EXPLANATION].startswith("The zone-audit skill was chosen")
    assert sc.EVAL_EXPLANATION not in evaluations[1]


def test_account_lines_become_events_with_template_pointers_and_chips() -> None:
    note = annotations_for(verdict())[RUN_SPAN]
    lines = [dict(e.attributes) for e in note.events if e.name == sc.EV_ACCOUNT_LINE]
    assert [line[sc.LINE_TEMPLATE] for line in lines] == [
        "understood.rule.witness",
        "understood.notDelivered",
    ]
    assert lines[1][sc.LINE_ROW] == "understood" and lines[1][sc.LINE_STATUS] == "recorded"
    assert lines[1][sc.LINE_POINTERS] == (
        f"{TRACE}/{pass_span(1)}#{sc.EV_SLOT_COMPOSED}[0]@{sc.F_SOURCE_BREAKDOWN}/skill",
        f"{TRACE}/{TOOL_SPAN}",
    )
    assert lines[1][sc.LINE_CHIPS] == ("decided-not-delivered: decided, not delivered",)
    assert annotations_for(verdict(), AnnotateOptions(include_lines=False))[RUN_SPAN].events[
        -1
    ].name == (sc.EV_EVALUATION_RESULT)


def test_evidence_links_are_deduplicated_name_their_claims_and_skip_the_run_span() -> None:
    note = annotations_for(verdict())[RUN_SPAN]
    links = {(link.trace_id, link.span_id): dict(link.attributes) for link in note.links}
    assert len(links) == len(note.links) == 2  # pass 1 and the tool span; never the run span
    assert (TRACE, RUN_SPAN) not in links
    assert links[(TRACE, pass_span(1))][sc.LINK_EVIDENCE] == (
        "decided-delivered",
        "decided-not-delivered",
        "understood.notDelivered",
    )
    assert links[(TRACE, TOOL_SPAN)][sc.LINK_EVIDENCE] == (
        "empty-results",
        "understood.notDelivered",
    )


def test_long_values_are_clipped_under_256_and_counts_stay_ints() -> None:
    long_summary = "word " * 200
    v = verdict(account=_account(summary=long_summary), run_id="r" * 400)
    a = attrs(annotations_for(v)[RUN_SPAN])
    assert len(a[sc.SUMMARY]) == 255 and a[sc.SUMMARY].endswith("…")  # type: ignore[union-attr]
    assert len(a[sc.RUN_ID]) == 255  # type: ignore[arg-type]
    for note in annotations_for(v).values():
        for key, value in note.attributes:
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                assert not isinstance(item, str) or len(item) < 256, key


def test_event_link_and_list_caps_are_counted_not_silent() -> None:
    options = AnnotateOptions(max_events_per_span=2, max_links=1, max_list_items=1)
    note = annotations_for(verdict(), options)[RUN_SPAN]
    assert len(note.events) == 2
    a = attrs(note)
    assert a[sc.ANNOTATION_DROPPED_EVENTS] == 3  # 3 evaluations + 2 lines, 2 kept
    assert a[sc.ANNOTATION_DROPPED_LINKS] == 1
    assert len(note.links) == 1
    fourth = attrs(annotations_for(verdict(), options)[pass_span(4)])
    assert fourth[sc.ENG_PARKED_INJECTION_IDS] == ("zone-audit",)


def test_attribute_cap_bounds_the_total() -> None:
    note = annotations_for(verdict(), AnnotateOptions(max_attributes_per_span=5))[RUN_SPAN]
    assert len(note.attributes) == 5


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("keep", "zone"), ("hash", hash_witness("zone")), ("drop", None)],
)
def test_witness_policy(policy: str, expected: str | None) -> None:
    notes = annotations_for(verdict(), AnnotateOptions(witness=policy))  # type: ignore[arg-type]
    parked = dict(notes[pass_span(4)].events[0].attributes)
    assert parked.get(sc.CH_WITNESS) == expected
    line = dict(notes[RUN_SPAN].events[3].attributes)[sc.LINE_TEXT]
    assert isinstance(line, str)
    if policy == "keep":
        assert "“zone”" in line
    else:
        assert "zone”" not in line
        assert (hash_witness("zone") in line) == (policy == "hash")


def test_hash_witness_shape() -> None:
    hashed = hash_witness("zone")
    assert hashed.startswith("sha256:") and len(hashed) == len("sha256:") + 16
    assert hashed == hash_witness("zone") != hash_witness("Zone")


def test_no_plan_writes_only_the_iteration_and_reasons_on_named_spans() -> None:
    v = verdict(
        mode=None,
        account=None,
        complete=False,
        reasons=(
            Reason("no-plan", "no maps.mounted"),
            Reason("bad-attribute", "garbage", span_id=pass_span(2)),
        ),
    )
    notes = annotations_for(v)
    assert attrs(notes[pass_span(1)]) == {sc.PASS_ITERATION: 1}
    assert attrs(notes[pass_span(2)])[sc.RUN_REASONS] == ("bad-attribute",)
    run = attrs(notes[RUN_SPAN])
    assert run[sc.RUN_COMPLETE] is False and sc.RUN_MODE not in run
    assert run[sc.RUN_REASONS] == ("no-plan", "bad-attribute")
    assert notes[RUN_SPAN].events == () and notes[RUN_SPAN].links == ()


def test_unannotated_notes_for_span_ids() -> None:
    notes = unannotated_notes(
        [RUN_SPAN, pass_span(1)], Reason("overflow", "too many runs"), run_span_id=RUN_SPAN
    )
    assert attrs(notes[pass_span(1)]) == {sc.RUN_REASONS: ("overflow",)}
    assert attrs(notes[RUN_SPAN]) == {sc.RUN_REASONS: ("overflow",), sc.RUN_COMPLETE: False}
    kept = unannotated_notes([RUN_SPAN], Reason("x", "y"), run_span_id=RUN_SPAN, complete=None)
    assert sc.RUN_COMPLETE not in attrs(kept[RUN_SPAN])


def test_merge_notes_unions_reasons_and_appends_events() -> None:
    a = {"s": SpanNote(((sc.RUN_REASONS, ("a",)), ("k", 1)), (NoteEvent("e1"),))}
    b = {"s": SpanNote(((sc.RUN_REASONS, ("b", "a")), ("k", 2)), (NoteEvent("e2"),))}
    merged = merge_notes(a, b)["s"]
    assert attrs(merged) == {sc.RUN_REASONS: ("a", "b"), "k": 2}
    assert [e.name for e in merged.events] == ["e1", "e2"]


@pytest.mark.parametrize(
    "kwargs", [{"witness": "blur"}, {"max_value_chars": 0}, {"max_links": True}]
)
def test_bad_options_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must"):
        AnnotateOptions(**kwargs)  # type: ignore[arg-type]


def test_findings_are_counted_on_the_run_span_and_told_in_events() -> None:
    sentence = "Turn 2 founded skill-map as structural by continuity; turn 1 had only guessed it."
    note = annotations_for(verdict(findings=(sentence,)))[RUN_SPAN]
    assert attrs(note)[sc.RUN_FINDINGS] == 1
    texts = [
        dict(e.attributes)[sc.FINDING_TEXT] for e in note.events if e.name == sc.EV_RUN_FINDING
    ]
    assert texts == [sentence]
    plain = annotations_for(verdict())[RUN_SPAN]
    assert sc.RUN_FINDINGS not in attrs(plain)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.sampled_from(["", "a", "ab", "zone", "a zone", "ünï", "x" * 9]), max_size=8),
    limit=st.integers(min_value=1, max_value=6),
    count=st.integers(min_value=1, max_value=5),
    policy=st.sampled_from(["keep", "hash", "drop"]),
    kind=st.sampled_from([tuple, list, iter]),
)
def test_a_string_list_is_cut_scrubbed_and_clipped_whatever_it_arrives_as(
    items: list[str], limit: int, count: int, policy: WitnessPolicy, kind: Any
) -> None:
    options = AnnotateOptions(witness=policy, max_value_chars=limit, max_list_items=count)
    shaper = _Shaper(options, ("zone",))
    expected = tuple(clip(shaper.scrub(item), limit) for item in items[:count])
    assert shaper.strings(kind(items)) == expected
