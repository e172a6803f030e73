"""Property: the kernel's laws hold for generated plans, passes and states (hypothesis)."""

from __future__ import annotations

import json
from itertools import chain

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_footprint.kernel import (
    LADDER,
    EngagedChange,
    EngagementAdvance,
    EngagementChange,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ParkedChange,
    ToolResult,
    advance_engagement,
    is_tentative,
    park_card,
    parked_member_ids,
    renewal_evidence_of,
    strongest_evidence,
)
from otel_footprint.kernel.jsoncodec import (
    change_from_json,
    change_to_json,
    pass_from_json,
    pass_to_json,
    plan_from_json,
    plan_to_json,
    record_from_json,
    record_to_json,
)
from otel_footprint.kernel.types import Standing

LAWS = settings(max_examples=100, deadline=None)
RUN_LAWS = settings(max_examples=50, deadline=None)
"""Laws over whole runs draw a dozen passes per example, so they get fewer examples."""

MEMBERS = ("a", "b", "c", "d", "e")
OWNED = ("t1", "t2", "t3")
FOREIGN = ("x", "y")
CLAUSES = (
    *(None, "model-pick", "route", "tool-proposal", "continuity", "intent", "decider"),
    *("entry", "stay", "none", "", "Route", "handoff"),
)
MAP_IDS = ("m0", "m1", "m2")

strengths = st.sampled_from(LADDER)
texts = st.sampled_from(("zone", "", "bill", "ünïcode — ·"))
optional_texts = st.none() | texts


@st.composite
def mounted_maps(draw: st.DrawFn, map_id: str, non_parkable: bool | None = None) -> MountedMap:
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=3, unique=True))
    tools = draw(st.lists(st.sampled_from(OWNED), max_size=2, unique=True))
    flag = draw(st.sampled_from((None, False, True))) if non_parkable is None else non_parkable
    return MountedMap(map_id, tuple(members), tuple(tools), flag)


@st.composite
def plans(draw: st.DrawFn, non_parkable: bool | None = None) -> EngagementPlan:
    count = draw(st.integers(1, 3))
    maps = tuple(draw(mounted_maps(map_id, non_parkable)) for map_id in MAP_IDS[:count])
    return EngagementPlan(maps, draw(st.integers(1, 5)))


@st.composite
def passes(draw: st.DrawFn, iteration: int | None = None, quiet: bool = False) -> EngagementPass:
    """A pass; a ``quiet`` one calls no tool, picks nothing and has no cursor inside any map."""
    nodes = (None, "elsewhere") if quiet else (None, "elsewhere", *MEMBERS)
    return EngagementPass(
        iteration=draw(st.integers(1, 40)) if iteration is None else iteration,
        current_node=draw(st.sampled_from(nodes)),
        move_by=draw(st.sampled_from(CLAUSES)),
        witness=draw(optional_texts),
        tool_results=()
        if quiet
        else tuple(
            ToolResult(name)
            for name in draw(st.lists(st.sampled_from(OWNED + FOREIGN + FOREIGN), max_size=3))
        ),
        pending_skill_pick=None if quiet else draw(st.none() | st.sampled_from(MEMBERS)),
        accepted_skill_picks=()
        if quiet
        else tuple(draw(st.lists(st.sampled_from(MEMBERS), max_size=2))),
        served_last_pass=tuple(
            draw(st.lists(st.sampled_from((*MEMBERS, "house-rules")), max_size=3))
        ),
    )


@st.composite
def idle_passes(draw: st.DrawFn, iteration: int) -> EngagementPass:
    """A pass that gives no map evidence but counts idle: the model called something else.

    The cursor is unknown or outside every map, so the prior position stands (a cursor seen on a
    different member would be a tenant change, which resets idle).
    """
    return EngagementPass(
        iteration=iteration,
        current_node=draw(st.sampled_from((None, "elsewhere"))),
        move_by=draw(st.sampled_from((None, "stay", "none"))),
        witness=draw(optional_texts),
        tool_results=tuple(
            ToolResult(name) for name in draw(st.lists(st.sampled_from(FOREIGN), min_size=1))
        ),
        served_last_pass=(*MEMBERS, "house-rules"),
    )


@st.composite
def guess_passes(draw: st.DrawFn, iteration: int, members: tuple[str, ...]) -> EngagementPass:
    """A pass whose only news is a guess: the cursor lands on a member by a tentative clause."""
    return EngagementPass(
        iteration=iteration,
        current_node=draw(st.sampled_from(members)),
        move_by=draw(st.sampled_from((None, "entry", "intent", "decider", "stay"))),
        witness=draw(optional_texts),
        tool_results=tuple(ToolResult(name) for name in draw(st.lists(st.sampled_from(FOREIGN)))),
        served_last_pass=(*MEMBERS, "house-rules"),
    )


@st.composite
def runs(
    draw: st.DrawFn, non_parkable: bool | None = None
) -> tuple[EngagementPlan, list[EngagementPass]]:
    """A plan and a run of passes over it, weighted so that guesses, idle runs, parks and
    recoveries are all common (uniformly random passes almost always carry strong evidence)."""
    plan = draw(plans(non_parkable))
    members = tuple(dict.fromkeys(chain(*(m.member_ids for m in plan.maps))))
    first = draw(st.sampled_from(("guess", "guess", "any")))
    rest = st.sampled_from(("idle", "idle", "idle", "guess", "any"))
    kinds = [first, *draw(st.lists(rest, min_size=3, max_size=13))]
    sequence = []
    for iteration, kind in enumerate(kinds, start=1):
        if kind == "idle":
            sequence.append(draw(idle_passes(iteration)))
        elif kind == "guess":
            sequence.append(draw(guess_passes(iteration, members)))
        else:
            sequence.append(draw(passes(iteration=iteration)))
    return plan, sequence


@st.composite
def records(
    draw: st.DrawFn, map_id: str | None = None, standing: Standing | None = None
) -> MapEngagementRecord:
    positioned = draw(st.booleans())
    return MapEngagementRecord(
        map_id=draw(st.sampled_from(MAP_IDS)) if map_id is None else map_id,
        standing=draw(st.sampled_from(("engaged", "parked"))) if standing is None else standing,
        by=draw(strengths),
        since=draw(st.integers(1, 40)),
        founded_by=draw(strengths),
        founded_at=draw(st.integers(1, 40)),
        idle=draw(st.integers(0, 6)),
        founded_on=draw(st.none() | st.sampled_from(MEMBERS)),
        at=draw(st.sampled_from(MEMBERS)) if positioned else None,
        at_by=draw(strengths) if positioned else None,
        at_since=draw(st.integers(1, 40)) if positioned else None,
        witness=draw(optional_texts),
    )


@st.composite
def changes(draw: st.DrawFn) -> EngagementChange:
    map_id = draw(st.sampled_from(MAP_IDS))
    iteration = draw(st.integers(1, 40))
    by = draw(strengths)
    witness = draw(optional_texts)
    flavour = draw(st.sampled_from(("founded", "reengaged", "upgraded", "tenant", "parked")))
    if flavour == "parked":
        return ParkedChange(map_id, iteration, by, draw(st.integers(1, 6)), witness=witness)
    if flavour == "founded":
        return EngagedChange(map_id, iteration, by, witness=witness)
    if flavour == "reengaged":
        return EngagedChange(map_id, iteration, by, witness=witness, reengaged=True)
    if flavour == "upgraded":
        return EngagedChange(
            map_id, iteration, by, witness=witness, upgraded=True, founded_by=draw(strengths)
        )
    return EngagedChange(
        map_id,
        iteration,
        by,
        witness=witness,
        tenant_changed=True,
        at=draw(st.sampled_from(MEMBERS)),
        founded_by=draw(strengths),
    )


def replay(plan: EngagementPlan, sequence: list[EngagementPass]) -> list[EngagementAdvance]:
    state: tuple[MapEngagementRecord, ...] | None = None
    out = []
    for pass_ in sequence:
        advance = advance_engagement(plan, state, pass_)
        out.append(advance)
        state = advance.next
    return out


def by_map(records_: tuple[MapEngagementRecord, ...]) -> dict[str, MapEngagementRecord]:
    return {record.map_id: record for record in records_}


@RUN_LAWS
@given(runs())
def test_founding_trio_never_changes_once_written(
    run: tuple[EngagementPlan, list[EngagementPass]],
) -> None:
    plan, sequence = run
    trio: dict[str, tuple[object, ...]] = {}
    for advance in replay(plan, sequence):
        for record in advance.next:
            written = (record.founded_by, record.founded_at, record.founded_on)
            assert trio.setdefault(record.map_id, written) == written


@RUN_LAWS
@given(runs())
def test_since_moves_only_when_the_standing_does(
    run: tuple[EngagementPlan, list[EngagementPass]],
) -> None:
    plan, sequence = run
    state: dict[str, MapEngagementRecord] = {}
    for advance in replay(plan, sequence):
        standing_changes = {
            c.map_id for c in advance.changes if isinstance(c, ParkedChange) or c.reengaged
        }
        for record in advance.next:
            prior = state.get(record.map_id)
            if prior is not None and prior.since != record.since:
                assert record.map_id in standing_changes
        state = by_map(advance.next)


@RUN_LAWS
@given(runs())
def test_exactly_the_parked_maps_members_and_tools_are_suppressed(
    run: tuple[EngagementPlan, list[EngagementPass]],
) -> None:
    plan, sequence = run
    for advance in replay(plan, sequence):
        parked = {r.map_id for r in advance.next if r.standing == "parked"}
        parked_maps = [m for m in plan.maps if m.id in parked]
        assert advance.parked_injection_ids == tuple(chain(*(m.member_ids for m in parked_maps)))
        assert advance.parked_tool_names == tuple(chain(*(m.tool_names for m in parked_maps)))
        assert parked_member_ids(plan, advance.next) == tuple(
            dict.fromkeys(advance.parked_injection_ids)
        )
        assert (park_card(plan, advance.next) is None) == (not parked)


@RUN_LAWS
@given(runs(non_parkable=True))
def test_a_non_parkable_map_never_parks_but_keeps_counting_idle(
    run: tuple[EngagementPlan, list[EngagementPass]],
) -> None:
    plan, sequence = run
    state: dict[str, MapEngagementRecord] = {}
    for pass_ in sequence:
        advance = advance_engagement(plan, tuple(state.values()), pass_)
        after = by_map(advance.next)
        assert all(record.standing == "engaged" for record in advance.next)
        assert not any(isinstance(change, ParkedChange) for change in advance.changes)
        for mounted in plan.maps:
            prior = state.get(mounted.id)
            if prior is None:
                continue
            quiet = strongest_evidence(renewal_evidence_of(mounted, pass_)) is None
            node = pass_.current_node
            moved = node is not None and node in mounted.member_ids and node != prior.at
            served = any(i in mounted.member_ids for i in pass_.served_last_pass)
            if quiet and not moved and served and pass_.tool_results:
                assert after[mounted.id].idle == prior.idle + 1
        state = after


@LAWS
@given(plans(), records(map_id="m0", standing="parked"), passes())
def test_tentative_evidence_never_recovers_a_park(
    plan: EngagementPlan, parked: MapEngagementRecord, pass_: EngagementPass
) -> None:
    advance = advance_engagement(plan, (parked,), pass_)
    after = by_map(advance.next)["m0"]
    strongest = strongest_evidence(renewal_evidence_of(plan.maps[0], pass_))
    m0_changes = [c for c in advance.changes if c.map_id == "m0"]
    if strongest is None or is_tentative(strongest):
        assert after is parked
        assert m0_changes == []
    else:
        assert (after.standing, after.by, after.idle) == ("engaged", strongest, 0)
        assert m0_changes == [EngagedChange("m0", pass_.iteration, strongest, pass_.witness, True)]


@RUN_LAWS
@given(runs())
def test_output_order_follows_plan_order(
    run: tuple[EngagementPlan, list[EngagementPass]],
) -> None:
    plan, sequence = run
    order = [m.id for m in plan.maps]
    for advance in replay(plan, sequence):
        record_ids = [r.map_id for r in advance.next]
        change_ids = [c.map_id for c in advance.changes]
        assert record_ids == [i for i in order if i in record_ids]
        assert change_ids == [i for i in order if i in change_ids]  # also: one change per map


@RUN_LAWS
@given(runs(), st.data())
def test_a_quiet_pass_emits_no_change(
    run: tuple[EngagementPlan, list[EngagementPass]], data: st.DataObject
) -> None:
    plan, sequence = run
    state = replay(plan, sequence)[-1].next
    quiet = data.draw(passes(iteration=len(sequence) + 1, quiet=True))
    advance = advance_engagement(plan, state, quiet)
    assert advance.changes == ()
    assert len(advance.next) == len(state)
    assert all(new is old for new, old in zip(advance.next, state, strict=True))


@LAWS
@given(plans())
def test_plan_json_round_trip_is_identity(plan: EngagementPlan) -> None:
    encoded = plan_to_json(plan)
    assert plan_from_json(json.loads(json.dumps(encoded))) == plan
    assert plan_to_json(plan_from_json(encoded)) == encoded


@LAWS
@given(passes())
def test_pass_json_round_trip_is_identity(pass_: EngagementPass) -> None:
    encoded = pass_to_json(pass_)
    assert pass_from_json(json.loads(json.dumps(encoded))) == pass_
    assert pass_to_json(pass_from_json(encoded)) == encoded


@LAWS
@given(records())
def test_record_json_round_trip_is_identity(record: MapEngagementRecord) -> None:
    encoded = record_to_json(record)
    assert record_from_json(json.loads(json.dumps(encoded))) == record
    assert record_to_json(record_from_json(encoded)) == encoded


@LAWS
@given(changes())
def test_change_json_round_trip_is_identity(change: EngagementChange) -> None:
    encoded = change_to_json(change)
    assert change_from_json(json.loads(json.dumps(encoded))) == change
    assert change_to_json(change_from_json(encoded)) == encoded
