"""Unit: the upstream reducer cases of spec §6.1–6.3 as named tests, plan checks and the park card."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from otel_footprint.kernel import (
    PARK_CARD_ID,
    EngagedChange,
    EngagementAdvance,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ParkedChange,
    PlanError,
    ToolResult,
    advance_engagement,
    engagement_plan,
    is_tentative,
    park_card,
    parked_member_ids,
    renewal_evidence_of,
    strength_of_move,
    strongest_evidence,
    validate_plan,
)
from otel_footprint.kernel.jsoncodec import JsonShapeError, plan_from_json, record_from_json

MAP = MountedMap("skill-map", ("zone-audit", "billing"), ("get_zone_info",))
PLAN = EngagementPlan((MAP,), 3)
MAP3 = MountedMap("skill-map", ("audit", "billing", "refunds"), ("get_zone_info",))
PLAN3 = EngagementPlan((MAP3,), 3)
FOREIGN = ("screen_open",)


def mk_pass(
    iteration: int,
    node: str | None = None,
    move: str | None = None,
    *,
    witness: str | None = None,
    tools: Sequence[str] = (),
    pending: str | None = None,
    picks: Sequence[str] = (),
    served: Sequence[str] | None = None,
    plan: EngagementPlan = PLAN,
) -> EngagementPass:
    """A pass in the notation of spec §6: served defaults to the (first) map's members."""
    return EngagementPass(
        iteration=iteration,
        current_node=node,
        move_by=move,
        witness=witness,
        tool_results=tuple(ToolResult(t) for t in tools),
        pending_skill_pick=pending,
        accepted_skill_picks=tuple(picks),
        served_last_pass=plan.maps[0].member_ids if served is None else tuple(served),
    )


def run(
    plan: EngagementPlan,
    passes: Sequence[EngagementPass],
    prior: tuple[MapEngagementRecord, ...] | None = None,
) -> list[EngagementAdvance]:
    """Feed each pass's ``next`` into the following pass, as the engine does within one run."""
    out: list[EngagementAdvance] = []
    state = prior
    for pass_ in passes:
        advance = advance_engagement(plan, state, pass_)
        out.append(advance)
        state = advance.next
    return out


def only(advance: EngagementAdvance) -> MapEngagementRecord:
    assert len(advance.next) == 1
    return advance.next[0]


def f1_record() -> MapEngagementRecord:
    return MapEngagementRecord(
        map_id="skill-map",
        standing="engaged",
        by="lexical",
        since=1,
        founded_by="lexical",
        founded_at=1,
        idle=0,
        founded_on="zone-audit",
        at="zone-audit",
        at_by="lexical",
        at_since=1,
        witness="zone",
    )


PARKED = MapEngagementRecord(
    map_id="skill-map",
    standing="parked",
    by="lexical",
    since=4,
    founded_by="lexical",
    founded_at=1,
    idle=3,
    founded_on="zone-audit",
    at="zone-audit",
    at_by="lexical",
    at_since=1,
    witness="zone",
)


# ── §6.1 test/maps/engagement.test.ts ─────────────────────────────────────────────────────────


def test_u1_strength_of_move_table_and_tentative() -> None:
    table = {
        "model-pick": "explicit",
        "route": "structural",
        "tool-proposal": "structural",
        "continuity": "structural",
        "intent": "semantic",
        "decider": "semantic",
        "entry": "lexical",
        "stay": "assumed",
        "none": "assumed",
        "something-new": "structural",
        "": "structural",
        "Route": "structural",
    }
    assert {clause: strength_of_move(clause) for clause in table} == table
    assert is_tentative("lexical") is True
    assert is_tentative("assumed") is True
    assert is_tentative("semantic") is True
    assert is_tentative("structural") is False
    assert is_tentative("explicit") is False


def test_u2_evidence_kinds_and_strongest() -> None:
    pass_ = mk_pass(
        2, "zone-audit", "stay", tools=["get_zone_info", "screen_open"], pending="billing"
    )
    evidence = renewal_evidence_of(MAP, pass_)
    assert {e.kind for e in evidence} == {"explicit-pick", "owned-tool-called"}
    assert strongest_evidence(evidence) == "explicit"


def test_u3_foreign_tool_and_stay_is_no_evidence() -> None:
    evidence = renewal_evidence_of(MAP, mk_pass(2, "zone-audit", "stay", tools=["x"]))
    assert evidence == ()
    assert strongest_evidence(evidence) is None


def test_f1_entry_founds_a_lexical_engagement() -> None:
    advance = advance_engagement(PLAN, None, mk_pass(1, "zone-audit", "entry", witness="zone"))
    assert advance.next == (f1_record(),)
    assert advance.changes == (EngagedChange("skill-map", 1, "lexical", witness="zone"),)
    assert advance.parked_injection_ids == ()
    assert advance.parked_tool_names == ()


def test_f2_thinking_counts_nothing_then_three_foreign_passes_park() -> None:
    steps = run(
        PLAN,
        [
            mk_pass(1, "zone-audit", "entry", witness="zone"),
            mk_pass(2, "zone-audit", "stay"),
            mk_pass(3, "zone-audit", "stay", tools=FOREIGN),
            mk_pass(4, "zone-audit", "stay", tools=FOREIGN),
            mk_pass(5, "zone-audit", "stay", tools=FOREIGN),
        ],
    )
    assert only(steps[1]).idle == 0
    assert steps[1].next[0] is steps[0].next[0]  # a pass with no tool calls changes nothing
    assert steps[2].changes == () and steps[3].changes == ()
    assert only(steps[4]).standing == "parked"
    assert steps[4].parked_injection_ids == ("zone-audit", "billing")
    assert steps[4].parked_tool_names == ("get_zone_info",)
    assert steps[4].changes == (ParkedChange("skill-map", 5, "lexical", 3, witness="zone"),)


def test_f3_own_tool_upgrades_and_resets_idle() -> None:
    steps = run(
        PLAN,
        [
            mk_pass(1, "zone-audit", "entry", witness="zone"),
            mk_pass(2, "zone-audit", "stay", tools=FOREIGN),
            mk_pass(3, "zone-audit", "stay", tools=["get_zone_info"]),
        ],
    )
    assert only(steps[1]).idle == 1
    record = only(steps[2])
    assert (record.idle, record.by, record.since) == (0, "structural", 1)
    assert steps[2].changes == (
        EngagedChange(
            "skill-map", 3, "structural", witness="zone", upgraded=True, founded_by="lexical"
        ),
    )


def test_f4_parked_stays_parked_on_a_foreign_pass() -> None:
    advance = advance_engagement(PLAN, (PARKED,), mk_pass(5, "zone-audit", "stay", tools=FOREIGN))
    assert advance.next[0] is PARKED
    assert advance.parked_injection_ids == ("zone-audit", "billing")
    assert advance.changes == ()


def test_f5_model_pick_reengages_a_parked_map() -> None:
    advance = advance_engagement(
        PLAN, (PARKED,), mk_pass(6, "billing", "model-pick", pending="billing")
    )
    record = only(advance)
    assert (record.standing, record.by, record.idle, record.since) == ("engaged", "explicit", 0, 6)
    assert (record.at, record.at_by, record.at_since) == ("billing", "explicit", 6)
    assert record.witness is None  # the prior witness is not carried over
    assert advance.parked_injection_ids == ()
    assert advance.changes == (EngagedChange("skill-map", 6, "explicit", reengaged=True),)


def test_r1_non_parkable_map_keeps_counting_and_never_parks() -> None:
    plan = EngagementPlan((MountedMap(MAP.id, MAP.member_ids, MAP.tool_names, True),), 3)
    passes = [mk_pass(1, "zone-audit", "entry", witness="zone")]
    passes += [mk_pass(i, "zone-audit", "stay", tools=FOREIGN) for i in range(2, 7)]
    steps = run(plan, passes)
    record = only(steps[-1])
    assert (record.standing, record.idle, record.by) == ("engaged", 5, "lexical")
    assert all(not step.changes for step in steps[1:])


def test_r2_explicit_engagement_stands() -> None:
    passes = [mk_pass(1, "billing", "model-pick")]
    passes += [mk_pass(i, "billing", "stay", tools=FOREIGN) for i in range(2, 8)]
    record = only(run(PLAN, passes)[-1])
    assert (record.standing, record.by, record.idle) == ("engaged", "explicit", 6)


def test_r3_nothing_founds_nothing() -> None:
    advance = advance_engagement(PLAN, None, mk_pass(1))
    assert advance == EngagementAdvance((), (), (), ())


# ── §6.2 test/maps/provenance-and-turns.test.ts ───────────────────────────────────────────────


def p3(
    iteration: int,
    node: str | None = None,
    move: str | None = None,
    *,
    witness: str | None = None,
    tools: Sequence[str] = (),
    picks: Sequence[str] = (),
) -> EngagementPass:
    """A pass over the three-member map of spec §6.2."""
    return mk_pass(iteration, node, move, witness=witness, tools=tools, picks=picks, plan=PLAN3)


def test_p1_founding_records_provenance_and_position() -> None:
    record = only(advance_engagement(PLAN3, None, p3(3, "audit", "model-pick")))
    assert (record.founded_by, record.founded_at, record.founded_on) == ("explicit", 3, "audit")
    assert (record.at, record.at_by, record.at_since, record.by) == (
        "audit",
        "explicit",
        3,
        "explicit",
    )


def test_p2_staying_keeps_the_arrival_iteration() -> None:
    steps = run(
        PLAN3, [p3(1, "audit", "model-pick"), p3(2, "audit", "stay"), p3(3, "audit", "stay")]
    )
    record = only(steps[-1])
    assert (record.at, record.at_since) == ("audit", 1)


def test_p3_route_to_another_member_is_a_tenant_change() -> None:
    steps = run(PLAN3, [p3(1, "audit", "model-pick"), p3(2, "billing", "route")])
    record = only(steps[-1])
    assert (record.at, record.at_by, record.at_since, record.by) == (
        "billing",
        "structural",
        2,
        "structural",
    )
    assert (record.founded_by, record.founded_at, record.founded_on) == ("explicit", 1, "audit")
    assert steps[-1].changes == (
        EngagedChange(
            "skill-map", 2, "structural", tenant_changed=True, at="billing", founded_by="explicit"
        ),
    )


def test_p4_tenant_change_to_a_guess_can_park() -> None:
    passes = [p3(1, "audit", "model-pick"), p3(2, "refunds", "entry", witness="refund")]
    passes += [p3(i, "refunds", "stay", tools=FOREIGN) for i in (3, 4, 5)]
    steps = run(PLAN3, passes)
    assert only(steps[1]).by == "lexical"
    assert is_tentative(only(steps[1]).by)
    assert only(steps[3]).standing == "engaged"
    record = only(steps[4])
    assert record.standing == "parked"
    assert (record.founded_by, record.founded_on) == ("explicit", "audit")


def test_p5_founding_trio_survives_upgrade_tenant_change_park_and_recovery() -> None:
    passes = [
        p3(1, "audit", "entry", witness="zone"),
        p3(2, "audit", "stay", tools=["get_zone_info"]),
        p3(3, "billing", "entry", witness="bill"),
    ]
    passes += [p3(i, "billing", "stay", tools=FOREIGN) for i in (4, 5, 6)]
    passes += [p3(7, "billing", "model-pick", picks=["billing"])]
    steps = run(PLAN3, passes)
    after2 = only(steps[1])
    assert (after2.by, after2.founded_by, after2.founded_at) == ("structural", "lexical", 1)
    assert steps[1].changes == (
        EngagedChange(
            "skill-map", 2, "structural", witness="zone", upgraded=True, founded_by="lexical"
        ),
    )
    assert only(steps[5]).standing == "parked"
    after7 = only(steps[6])
    assert after7.standing == "engaged"
    assert (after7.founded_by, after7.founded_at, after7.founded_on) == ("lexical", 1, "audit")


def test_t1_a_carried_cursor_on_a_new_turn_founds_assumed() -> None:
    turn1 = only(advance_engagement(PLAN3, None, p3(1, "audit", "model-pick")))
    assert turn1.by == "explicit"
    record = only(advance_engagement(PLAN3, None, p3(1, "audit", "stay")))
    assert record.by == "assumed"
    assert is_tentative(record.by)
    assert record.founded_at == 1


def test_t2_an_assumed_engagement_parks_honestly() -> None:
    passes = [p3(1, "audit", "stay")] + [p3(i, "audit", "stay", tools=FOREIGN) for i in (2, 3, 4)]
    steps = run(PLAN3, passes)
    assert only(steps[3]).standing == "parked"
    assert steps[3].changes == (ParkedChange("skill-map", 4, "assumed", 3),)


def test_t3_an_explicit_pick_on_a_new_turn_founds_explicit() -> None:
    record = only(
        advance_engagement(PLAN3, None, p3(1, "refunds", "model-pick", picks=["refunds"]))
    )
    assert (record.by, record.founded_at, record.founded_on) == ("explicit", 1, "refunds")


# ── §6.3 the 30-call stuck turn ───────────────────────────────────────────────────────────────


def test_stuck_30_parks_on_call_four_and_stays_parked() -> None:
    state: tuple[MapEngagementRecord, ...] | None = None
    rows = []
    for iteration in range(1, 31):
        if iteration == 1:
            pass_ = mk_pass(1, "zone-audit", "entry", witness="zone", served=())
        else:
            parked = state is not None and state[0].standing == "parked"
            served = () if parked else MAP.member_ids
            pass_ = mk_pass(iteration, "zone-audit", "stay", tools=FOREIGN, served=served)
        advance = advance_engagement(PLAN, state, pass_)
        state = advance.next
        rows.append(advance)
    expected_rows = {1: ("engaged", 0), 2: ("engaged", 1), 3: ("engaged", 2), 4: ("parked", 3)}
    for iteration, (standing, idle) in expected_rows.items():
        record = only(rows[iteration - 1])
        assert (record.standing, record.idle) == (standing, idle), iteration
    assert rows[0].changes == (EngagedChange("skill-map", 1, "lexical", witness="zone"),)
    assert rows[1].changes == () and rows[2].changes == ()
    assert rows[3].changes == (ParkedChange("skill-map", 4, "lexical", 3, witness="zone"),)
    for iteration in range(1, 4):
        assert rows[iteration - 1].parked_injection_ids == ()
        assert rows[iteration - 1].parked_tool_names == ()
    for iteration in range(4, 31):
        advance = rows[iteration - 1]
        assert (only(advance).standing, only(advance).idle) == ("parked", 3), iteration
        assert advance.parked_injection_ids == ("zone-audit", "billing")
        assert advance.parked_tool_names == ("get_zone_info",)
        if iteration > 4:
            assert advance.changes == ()
            assert advance.next[0] is rows[iteration - 2].next[0]


# ── §6.3 extra cases ──────────────────────────────────────────────────────────────────────────


def engaged_lexical() -> tuple[MapEngagementRecord, ...]:
    return advance_engagement(PLAN, None, mk_pass(1, "zone-audit", "entry", witness="zone")).next


def test_extra_not_served_counts_no_idle() -> None:
    prior = engaged_lexical()
    advance = advance_engagement(
        PLAN, prior, mk_pass(2, "zone-audit", "stay", tools=FOREIGN, served=())
    )
    assert advance.next[0] is prior[0]
    assert advance.changes == ()


def test_extra_parked_ignores_a_lexical_entry() -> None:
    advance = advance_engagement(PLAN, (PARKED,), mk_pass(5, "billing", "entry", witness="bill"))
    assert advance.next[0] is PARKED
    assert advance.changes == ()


def test_extra_parked_recovers_on_its_own_tool_keeping_position() -> None:
    advance = advance_engagement(
        PLAN, (PARKED,), mk_pass(5, "zone-audit", "stay", tools=["get_zone_info"])
    )
    record = only(advance)
    assert (record.standing, record.by, record.since) == ("engaged", "structural", 5)
    assert (record.at_by, record.at_since, record.witness) == ("lexical", 1, None)
    assert advance.changes == (EngagedChange("skill-map", 5, "structural", reengaged=True),)


def test_extra_parked_recovers_on_a_route_and_moves_position() -> None:
    advance = advance_engagement(PLAN, (PARKED,), mk_pass(5, "billing", "route"))
    record = only(advance)
    assert (record.standing, record.by) == ("engaged", "structural")
    assert (record.at, record.at_by, record.at_since) == ("billing", "structural", 5)
    assert advance.changes == (EngagedChange("skill-map", 5, "structural", reengaged=True),)


def test_extra_parked_member_ids() -> None:
    assert parked_member_ids(PLAN, (PARKED,)) == ("zone-audit", "billing")
    assert parked_member_ids(PLAN, None) == ()
    assert parked_member_ids(PLAN, engaged_lexical()) == ()


def test_extra_pick_founds_without_position_then_entering_is_a_tenant_change() -> None:
    first = advance_engagement(PLAN, None, mk_pass(2, "elsewhere", "route", picks=["billing"]))
    record = only(first)
    assert (record.by, record.since, record.founded_on, record.at) == ("explicit", 2, None, None)
    assert (record.at_by, record.at_since) == (None, None)
    assert first.changes == (EngagedChange("skill-map", 2, "explicit"),)
    second = advance_engagement(PLAN, first.next, mk_pass(3, "billing", "model-pick"))
    record = only(second)
    assert (record.at, record.at_by, record.at_since, record.by) == (
        "billing",
        "explicit",
        3,
        "explicit",
    )
    assert second.changes == (
        EngagedChange(
            "skill-map", 3, "explicit", tenant_changed=True, at="billing", founded_by="explicit"
        ),
    )


def test_extra_absent_clause_founds_assumed() -> None:
    record = only(advance_engagement(PLAN, None, mk_pass(1, "billing")))
    assert (record.by, record.founded_by, record.at_by) == ("assumed", "assumed", "assumed")


def test_extra_pick_upgrades_semantic_then_same_pick_returns_same_object() -> None:
    founded = advance_engagement(PLAN, None, mk_pass(1, "zone-audit", "intent")).next
    upgraded = advance_engagement(
        PLAN, founded, mk_pass(2, "zone-audit", "stay", picks=["zone-audit"])
    )
    record = only(upgraded)
    assert (record.by, record.since) == ("explicit", 1)
    assert upgraded.changes == (
        EngagedChange("skill-map", 2, "explicit", upgraded=True, founded_by="semantic"),
    )
    again = advance_engagement(
        PLAN, upgraded.next, mk_pass(3, "zone-audit", "stay", picks=["zone-audit"])
    )
    assert again.changes == ()
    assert again.next[0] is upgraded.next[0]
    assert again.next[0].idle == 0


def test_extra_repeated_entry_renews_silently() -> None:
    steps = run(
        PLAN,
        [
            mk_pass(1, "zone-audit", "entry", witness="zone"),
            mk_pass(2, "zone-audit", "stay", tools=FOREIGN),
            mk_pass(3, "zone-audit", "entry", tools=FOREIGN),
        ],
    )
    assert only(steps[1]).idle == 1
    record = only(steps[2])
    assert (record.idle, record.by) == (0, "lexical")
    assert steps[2].changes == ()


def test_extra_grace_one_parks_on_the_first_idle_pass_without_witness() -> None:
    plan = EngagementPlan((MAP,), 1)
    steps = run(
        plan, [mk_pass(1, "zone-audit", "entry"), mk_pass(2, "zone-audit", "stay", tools=FOREIGN)]
    )
    assert steps[1].changes == (ParkedChange("skill-map", 2, "lexical", 1),)


def test_extra_tenant_change_keeps_record_witness_change_has_none() -> None:
    founded = advance_engagement(PLAN, None, mk_pass(1, "zone-audit", "entry", witness="zone")).next
    advance = advance_engagement(PLAN, founded, mk_pass(2, "billing", "route"))
    record = only(advance)
    assert (record.by, record.at, record.at_by, record.at_since) == (
        "structural",
        "billing",
        "structural",
        2,
    )
    assert record.witness == "zone"
    assert advance.changes == (
        EngagedChange(
            "skill-map", 2, "structural", tenant_changed=True, at="billing", founded_by="lexical"
        ),
    )


def test_extra_two_maps_only_the_active_one_has_a_record() -> None:
    other = MountedMap("screen-map", ("home", "settings"), ("open_screen",))
    plan = EngagementPlan((MAP, other), 3)
    advance = advance_engagement(plan, None, mk_pass(1, "zone-audit", "entry"))
    assert [record.map_id for record in advance.next] == ["skill-map"]


def test_extra_evidence_counts_each_owned_call() -> None:
    evidence = renewal_evidence_of(
        MAP, mk_pass(2, "zone-audit", "stay", tools=["get_zone_info"] * 2)
    )
    assert [e.kind for e in evidence] == ["owned-tool-called", "owned-tool-called"]


def test_extra_a_move_outside_the_map_is_no_evidence() -> None:
    assert renewal_evidence_of(MAP, mk_pass(2, "elsewhere", "route")) == ()


def test_extra_empty_clause_is_a_present_structural_move() -> None:
    evidence = renewal_evidence_of(MAP, mk_pass(2, "billing", ""))
    assert [(e.kind, strongest_evidence(evidence)) for e in evidence] == [
        ("cursor-moved", "structural")
    ]


def test_extra_empty_prior_behaves_like_none_and_foreign_records_drop() -> None:
    pass_ = mk_pass(1, "zone-audit", "entry", witness="zone")
    assert advance_engagement(PLAN, (), pass_) == advance_engagement(PLAN, None, pass_)
    stranger = MapEngagementRecord("not-mounted", "parked", "lexical", 1, "lexical", 1, 3)
    advance = advance_engagement(PLAN, (stranger,), pass_)
    assert [record.map_id for record in advance.next] == ["skill-map"]


# ── plan validation ──────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("grace", [0, -1, True, False, 2.0, "3", None])
def test_plan_rejects_a_grace_that_is_not_a_positive_integer(grace: object) -> None:
    with pytest.raises(PlanError, match=r"renewalGrace must be an integer >= 1, got "):
        engagement_plan([MAP], grace)  # type: ignore[arg-type]


def test_plan_accepts_a_valid_plan_and_defaults_grace_to_three() -> None:
    plan = engagement_plan([MAP])
    assert plan == PLAN
    assert validate_plan(PLAN) is PLAN


def test_plan_rejects_duplicate_map_ids() -> None:
    with pytest.raises(PlanError, match=r"map 'skill-map' is mounted twice"):
        engagement_plan([MAP, MAP3])


def test_plan_rejects_a_map_without_members() -> None:
    with pytest.raises(PlanError, match=r"map 'empty' has no members"):
        engagement_plan([MountedMap("empty", ())])


def test_plan_rejects_no_maps() -> None:
    with pytest.raises(PlanError, match="nothing is mounted"):
        engagement_plan([])


def test_plan_rejects_lists_and_non_strings() -> None:
    with pytest.raises(PlanError, match=r"memberIds must be a tuple of strings, got list"):
        engagement_plan([MountedMap("m", ["a"])])  # type: ignore[arg-type]
    with pytest.raises(PlanError, match=r"toolNames must hold strings only, got 3"):
        engagement_plan([MountedMap("m", ("a",), (3,))])  # type: ignore[arg-type]
    with pytest.raises(PlanError, match=r"nonParkable must be a bool when given, got 1"):
        engagement_plan([MountedMap("m", ("a",), (), 1)])  # type: ignore[arg-type]


def test_plan_from_json_names_the_bad_path() -> None:
    one_map = [{"id": "m", "memberIds": ["a"], "toolNames": []}]
    with pytest.raises(JsonShapeError, match=r"^plan: renewalGrace must be an integer >= 1, got 0"):
        plan_from_json({"maps": one_map, "renewalGrace": 0})
    with pytest.raises(JsonShapeError, match=r"^plan\.renewalGrace: expected an integer, got true"):
        plan_from_json({"maps": one_map, "renewalGrace": True})
    with pytest.raises(JsonShapeError, match=r"^plan: missing required key 'renewalGrace'"):
        plan_from_json({"maps": one_map})
    with pytest.raises(
        JsonShapeError, match=r"^plan\.maps\[0\]\.memberIds\[1\]: expected a string, got null"
    ):
        plan_from_json(
            {"maps": [{"id": "m", "memberIds": ["a", None], "toolNames": []}], "renewalGrace": 3}
        )
    with pytest.raises(JsonShapeError, match=r"^plan\.maps\[0\]: unknown key 'nonparkable'"):
        plan_from_json(
            {
                "maps": [{"id": "m", "memberIds": ["a"], "toolNames": [], "nonparkable": True}],
                "renewalGrace": 3,
            }
        )


def test_record_from_json_rejects_null_and_bad_strength() -> None:
    base = {
        "mapId": "m",
        "standing": "engaged",
        "by": "lexical",
        "since": 1,
        "foundedBy": "lexical",
        "foundedAt": 1,
        "idle": 0,
    }
    with pytest.raises(JsonShapeError, match=r"^record\.witness: expected a string, got null"):
        record_from_json({**base, "witness": None})
    with pytest.raises(JsonShapeError, match=r"^record\.by: expected one of explicit, "):
        record_from_json({**base, "by": "Lexical"})
    with pytest.raises(JsonShapeError, match=r"^record\.idle: expected an integer, got true"):
        record_from_json({**base, "idle": True})


# ── park card ────────────────────────────────────────────────────────────────────────────────

CARD_21 = (
    "Map status (the framework is telling you this; it is not part of the task):\n"
    "  - skill-map \u2014 cursor: zone-audit (unchanged) \u00b7 engagement: PARKED \u00b7 reason: no recent"
    " evidence that it is the right map for this turn \u00b7 re-engage: available\n"
    "    Its instructions and its tools are not being sent right now. To bring them back, call"
    " read_skill for any of: zone-audit, run-finder. That is allowed even for the skill the cursor"
    " is already on \u2014 it changes ENGAGEMENT (whether this map is sent to you), not POSITION"
    " (where the cursor is). If this map is not what this turn needs, ignore this and carry on."
)


def test_park_card_exact_text_of_example_21() -> None:
    plan = EngagementPlan(
        (MountedMap("skill-map", ("zone-audit", "run-finder"), ("get_zone_info",)),), 3
    )
    card = park_card(plan, (PARKED,))
    assert card == CARD_21
    assert len(card) == 593  # observed upstream for the example-21 map
    assert PARK_CARD_ID == "agentfootprint:map-status"


def test_park_card_unknown_cursor_and_assumed_reason() -> None:
    record = MapEngagementRecord("skill-map", "parked", "assumed", 4, "assumed", 1, 3)
    card = park_card(PLAN, (record,))
    assert card is not None
    assert card.splitlines()[1] == (
        "  - skill-map \u2014 cursor: (unknown) (unchanged) \u00b7 engagement: PARKED \u00b7 reason:"
        " nothing on this turn explains why it is loaded \u00b7 re-engage: available"
    )
    assert "call read_skill for any of: zone-audit, billing. That" in card


def test_park_card_is_none_when_nothing_is_parked() -> None:
    assert park_card(PLAN, None) is None
    assert park_card(PLAN, ()) is None
    assert park_card(PLAN, engaged_lexical()) is None
    stranger = MapEngagementRecord("not-mounted", "parked", "lexical", 1, "lexical", 1, 3)
    assert park_card(PLAN, (stranger,)) is None


def test_park_card_lists_parked_records_in_record_order() -> None:
    other = MountedMap("screen-map", ("home",), ())
    plan = EngagementPlan((MAP, other), 3)
    other_parked = MapEngagementRecord(
        "screen-map", "parked", "semantic", 2, "semantic", 1, 3, at="home"
    )
    card = park_card(plan, (other_parked, PARKED))
    assert card is not None
    lines = card.splitlines()
    assert len(lines) == 5
    assert lines[1].startswith("  - screen-map \u2014 cursor: home (unchanged)")
    assert lines[3].startswith("  - skill-map \u2014 cursor: zone-audit (unchanged)")
