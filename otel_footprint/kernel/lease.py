"""The lease machine: ``advance_engagement`` moves every mounted map's engagement by one pass.

A pure reducer (spec §1.5–1.7): a tentative engagement is renewed only by concrete evidence and
is parked after ``renewal_grace`` qualifying idle passes; parking never moves the cursor.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_footprint.kernel.evidence import renewal_evidence_of, strongest_evidence
from otel_footprint.kernel.ladder import is_tentative, strength_of_move, stronger_of
from otel_footprint.kernel.types import (
    EngagedChange,
    EngagementAdvance,
    EngagementChange,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ParkedChange,
    Standing,
    Strength,
)

# A new position (member, strength of the move that brought the cursor there, arrival iteration),
# or ``None`` when the pass leaves the prior position standing.
_Position = tuple[str, Strength, int]


def advance_engagement(
    plan: EngagementPlan,
    prior: Sequence[MapEngagementRecord] | None,
    pass_: EngagementPass,
) -> EngagementAdvance:
    """Advance every map of ``plan`` by one pass.

    ``prior`` is the previous state (``None`` or empty for none). Records of maps that are not in
    the plan are dropped; when ``prior`` holds two records for one map the later one is used, as
    in the reference. The result lists records, suppressed ids and changes in plan order, and a
    park decided on this pass already suppresses this pass.
    """
    prior_by_map = {record.map_id: record for record in prior} if prior else {}
    records: list[MapEngagementRecord] = []
    changes: list[EngagementChange] = []
    parked_injection_ids: list[str] = []
    parked_tool_names: list[str] = []
    for mounted in plan.maps:
        record = _advance_one(
            mounted, prior_by_map.get(mounted.id), pass_, plan.renewal_grace, changes
        )
        if record is None:
            continue
        records.append(record)
        if record.standing == "parked":
            parked_injection_ids.extend(mounted.member_ids)
            parked_tool_names.extend(mounted.tool_names)
    return EngagementAdvance(
        tuple(records), tuple(parked_injection_ids), tuple(parked_tool_names), tuple(changes)
    )


def _advance_one(
    mounted: MountedMap,
    prior: MapEngagementRecord | None,
    pass_: EngagementPass,
    renewal_grace: int,
    changes: list[EngagementChange],
) -> MapEngagementRecord | None:
    """One map's next record (law A, B or C of spec §1.6), appending its change if it makes one."""
    strongest = strongest_evidence(renewal_evidence_of(mounted, pass_))
    if prior is None:
        return _found(mounted, pass_, strongest, changes)
    if prior.standing == "parked":
        return _recover(mounted, prior, pass_, strongest, changes)
    return _advance_engaged(mounted, prior, pass_, strongest, renewal_grace, changes)


def _move_strength(pass_: EngagementPass) -> Strength:
    # An absent clause founds and positions ``assumed``: a cause nobody stated must never inherit
    # the strength of a known one.
    return "assumed" if pass_.move_by is None else strength_of_move(pass_.move_by)


def _found(
    mounted: MountedMap,
    pass_: EngagementPass,
    strongest: Strength | None,
    changes: list[EngagementChange],
) -> MapEngagementRecord | None:
    """Law A: a map earns its first record when the cursor lands on a member or evidence names it."""
    node = pass_.current_node
    cursor_in_map = node is not None and node in mounted.member_ids
    if not cursor_in_map and strongest is None:
        return None
    by = strongest if strongest is not None else _move_strength(pass_)
    iteration = pass_.iteration
    # Position is recorded apart from engagement from the first pass, so neither can later be read
    # off the other. A map founded while the cursor is outside it has no position at all.
    at = node if cursor_in_map else None
    record = MapEngagementRecord(
        map_id=mounted.id,
        standing="engaged",
        by=by,
        since=iteration,
        founded_by=by,
        founded_at=iteration,
        idle=0,
        founded_on=at,
        at=at,
        at_by=None if at is None else _move_strength(pass_),
        at_since=None if at is None else iteration,
        witness=pass_.witness,
    )
    changes.append(
        EngagedChange(map_id=mounted.id, iteration=iteration, by=by, witness=pass_.witness)
    )
    return record


def _position_of(
    mounted: MountedMap, prior: MapEngagementRecord, pass_: EngagementPass
) -> _Position | None:
    """Spec §1.7: the cursor's new position in this map, or ``None`` when the prior one stands.

    A cursor outside the map or unknown keeps the prior position (unknown is not moved), and the
    same member keeps its original arrival facts (``at_by``/``at_since`` are never restated).
    """
    node = pass_.current_node
    if node is None or node not in mounted.member_ids or node == prior.at:
        return None
    return (node, _move_strength(pass_), pass_.iteration)


def _recover(
    mounted: MountedMap,
    prior: MapEngagementRecord,
    pass_: EngagementPass,
    strongest: Strength | None,
    changes: list[EngagementChange],
) -> MapEngagementRecord:
    """Law B: only explicit or structural evidence re-engages a parked map; anything else is ignored."""
    if strongest != "explicit" and strongest != "structural":
        # Tentative evidence never recovers a park, and a parked map's idle count is frozen.
        return prior
    position = _position_of(mounted, prior, pass_)
    at, at_by, at_since = (prior.at, prior.at_by, prior.at_since) if position is None else position
    changes.append(
        EngagedChange(
            map_id=mounted.id,
            iteration=pass_.iteration,
            by=strongest,
            witness=pass_.witness,
            reengaged=True,
        )
    )
    # The founding trio survives park and recovery; the prior witness does not (the reference
    # takes the recovering pass's witness, or none).
    return MapEngagementRecord(
        map_id=mounted.id,
        standing="engaged",
        by=strongest,
        since=pass_.iteration,
        founded_by=prior.founded_by,
        founded_at=prior.founded_at,
        idle=0,
        founded_on=prior.founded_on,
        at=at,
        at_by=at_by,
        at_since=at_since,
        witness=pass_.witness,
    )


def _advance_engaged(
    mounted: MountedMap,
    prior: MapEngagementRecord,
    pass_: EngagementPass,
    strongest: Strength | None,
    renewal_grace: int,
    changes: list[EngagementChange],
) -> MapEngagementRecord:
    """Law C: tenant change, renewal or upgrade, or the idle count (and possibly a park)."""
    iteration = pass_.iteration
    position = _position_of(mounted, prior, pass_)
    if position is not None:
        # C1, tenant change: eligibility is re-derived from the new member's own evidence. This may
        # lower ``by`` because the subject changed, not because time passed.
        at, at_by, at_since = position
        by = stronger_of(at_by, "assumed" if strongest is None else strongest)
        changes.append(
            EngagedChange(
                map_id=mounted.id,
                iteration=iteration,
                by=by,
                witness=pass_.witness,
                tenant_changed=True,
                at=at,
                founded_by=prior.founded_by,
            )
        )
        return _replace(prior, by=by, idle=0, at=at, at_by=at_by, at_since=at_since)

    if strongest is not None:
        by = stronger_of(prior.by, strongest)
        if by == prior.by:
            # C2, renewal without upgrade: evidence of equal or lower strength still resets idle,
            # silently. An unchanged record is returned as the very same object.
            return prior if prior.idle == 0 else _replace(prior, by=prior.by, idle=0)
        # C2, upgrade: ``by`` rises, ``since`` and the founding trio stay.
        changes.append(
            EngagedChange(
                map_id=mounted.id,
                iteration=iteration,
                by=by,
                witness=prior.witness,
                upgraded=True,
                founded_by=prior.founded_by,
            )
        )
        return _replace(prior, by=by, idle=0)

    # C3, no evidence. Idle counts only if the contribution was served last pass and the turn went
    # elsewhere (some tool was called; an owned one would have been evidence). A pass with no tool
    # calls is the model thinking, and an unserved contribution cannot have been ignored.
    members = mounted.member_ids
    served = any(served_id in members for served_id in pass_.served_last_pass)
    if not served or not pass_.tool_results:
        return prior
    idle = prior.idle + 1
    if is_tentative(prior.by) and idle >= renewal_grace and mounted.non_parkable is not True:
        changes.append(
            ParkedChange(
                map_id=mounted.id,
                iteration=iteration,
                by=prior.by,
                idle_calls=idle,
                witness=prior.witness,
            )
        )
        return _replace(prior, by=prior.by, idle=idle, standing="parked", since=iteration)
    # A non-parkable or non-tentative map keeps counting; its position is not refreshed here.
    return _replace(prior, by=prior.by, idle=idle)


def _replace(
    prior: MapEngagementRecord,
    *,
    by: Strength,
    idle: int,
    standing: Standing | None = None,
    since: int | None = None,
    at: str | None = None,
    at_by: Strength | None = None,
    at_since: int | None = None,
) -> MapEngagementRecord:
    """``prior`` with new eligibility and idle, and optionally a new standing or position.

    Spelled out rather than ``dataclasses.replace`` because this runs on every pass of every map.
    """
    return MapEngagementRecord(
        map_id=prior.map_id,
        standing=prior.standing if standing is None else standing,
        by=by,
        since=prior.since if since is None else since,
        founded_by=prior.founded_by,
        founded_at=prior.founded_at,
        idle=idle,
        founded_on=prior.founded_on,
        at=prior.at if at is None else at,
        at_by=prior.at_by if at_by is None else at_by,
        at_since=prior.at_since if at_since is None else at_since,
        witness=prior.witness,
    )
