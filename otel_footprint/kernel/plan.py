"""Building and checking an ``EngagementPlan``, and the one question the engine asks the kernel.

The reducer itself accepts any plan, as the reference does; these checks are the builder's
(spec §1.10) and run where plans enter the program: construction, configuration, JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from otel_footprint.kernel.types import EngagementPlan, MapEngagementRecord, MountedMap

DEFAULT_RENEWAL_GRACE = 3
"""The reference's default grace: the recorded 30-call stuck turn parks on call four."""


class PlanError(ValueError):
    """A plan the kernel cannot be mounted with."""


def engagement_plan(
    maps: Iterable[MountedMap], renewal_grace: int = DEFAULT_RENEWAL_GRACE
) -> EngagementPlan:
    """A checked plan; raises ``PlanError`` saying what is wrong."""
    return validate_plan(EngagementPlan(maps=tuple(maps), renewal_grace=renewal_grace))


def validate_plan(plan: EngagementPlan) -> EngagementPlan:
    """Return ``plan`` unchanged if it is well formed, else raise ``PlanError``.

    Rules: ``renewal_grace`` is an integer >= 1 (a bool is not an integer here), at least one map
    is mounted, map ids are unique strings, each map has at least one member, and ids, members
    and tool names are strings held in tuples.
    """
    grace: object = plan.renewal_grace
    if isinstance(grace, bool) or not isinstance(grace, int) or grace < 1:
        raise PlanError(f"renewalGrace must be an integer >= 1, got {grace!r}")
    if not isinstance(plan.maps, tuple):
        raise PlanError(f"maps must be a tuple of MountedMap, got {type(plan.maps).__name__}")
    if not plan.maps:
        raise PlanError("nothing is mounted that the kernel could manage: the plan has no maps")
    seen: set[str] = set()
    for index, mounted in enumerate(plan.maps):
        where = f"maps[{index}]"
        if not isinstance(mounted, MountedMap):
            raise PlanError(f"{where} must be a MountedMap, got {type(mounted).__name__}")
        if not isinstance(mounted.id, str):
            raise PlanError(f"{where}.id must be a string, got {mounted.id!r}")
        where = f"map {mounted.id!r}"
        if mounted.id in seen:
            raise PlanError(f"{where} is mounted twice: map ids must be unique")
        seen.add(mounted.id)
        _check_strings(mounted.member_ids, f"{where}: memberIds")
        if not mounted.member_ids:
            raise PlanError(f"{where} has no members: memberIds must not be empty")
        _check_strings(mounted.tool_names, f"{where}: toolNames")
        if mounted.non_parkable is not None and not isinstance(mounted.non_parkable, bool):
            raise PlanError(
                f"{where}: nonParkable must be a bool when given, got {mounted.non_parkable!r}"
            )
    return plan


def _check_strings(values: object, where: str) -> None:
    if not isinstance(values, tuple):
        raise PlanError(f"{where} must be a tuple of strings, got {type(values).__name__}")
    for value in values:
        if not isinstance(value, str):
            raise PlanError(f"{where} must hold strings only, got {value!r}")


def parked_member_ids(
    plan: EngagementPlan, engagement: Sequence[MapEngagementRecord] | None
) -> tuple[str, ...]:
    """Every member id of every map parked in ``engagement``: de-duplicated, in plan order.

    The ``read_skill`` gate uses it to tell a re-engagement pick (of a parked member) from a
    cursor move. Records of maps outside the plan contribute nothing.
    """
    if not engagement:
        return ()
    parked = {record.map_id for record in engagement if record.standing == "parked"}
    # A dict keeps first-seen order, which is the reference's insertion-ordered set.
    ids: dict[str, None] = {}
    for mounted in plan.maps:
        if mounted.id in parked:
            ids.update(dict.fromkeys(mounted.member_ids))
    return tuple(ids)
