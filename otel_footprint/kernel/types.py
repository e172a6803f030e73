"""The engagement kernel's vocabulary: immutable, typed data and nothing else.

A *map* (today the skill map) owns its cursor; the *kernel* owns whether that map's contribution
rides the next model call. Everything here is plain immutable data (the per-pass records are
``Record`` classes: immutable by ``mypy --strict``, see kernel/record.py) so that a run's state can be
stored, compared and replayed. An absent optional field is ``None`` and is distinct from ``""``
(the reference treats ``moveBy: ""`` and ``witness: ""`` as present values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from otel_footprint.codec import checked_after_built
from otel_footprint.kernel.record import Record

Strength: TypeAlias = Literal["explicit", "structural", "semantic", "lexical", "assumed"]
"""The evidence ladder, strongest first. ``semantic``, ``lexical`` and ``assumed`` are tentative."""

Standing: TypeAlias = Literal["engaged", "parked"]


@checked_after_built
@dataclass(frozen=True, slots=True)
class MountedMap:
    """The build-time card of one managed map: what parking suppresses and which tools renew it."""

    id: str
    member_ids: tuple[str, ...]
    tool_names: tuple[str, ...] = ()
    non_parkable: bool | None = None
    """``None`` keeps the reference's distinction between an absent key and ``false``."""


@checked_after_built
@dataclass(frozen=True, slots=True)
class EngagementPlan:
    """What the kernel was mounted with; the same for every pass of a run."""

    maps: tuple[MountedMap, ...]
    renewal_grace: int = 3


class ToolResult(Record):
    """One call of the previous dispatched tool batch; the kernel reads only the name."""

    __slots__ = ("tool_name",)
    tool_name: Final[str]

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    def _values(self) -> tuple[Any, ...]:
        return (self.tool_name,)


class EngagementPass(Record):
    """The kernel's input for one model call (one ReAct iteration)."""

    __slots__ = (
        "accepted_skill_picks",
        "current_node",
        "iteration",
        "move_by",
        "pending_skill_pick",
        "served_last_pass",
        "tool_results",
        "witness",
    )
    iteration: Final[int]
    current_node: Final[str | None]
    move_by: Final[str | None]
    witness: Final[str | None]
    tool_results: Final[tuple[ToolResult, ...]]
    pending_skill_pick: Final[str | None]
    accepted_skill_picks: Final[tuple[str, ...]]
    served_last_pass: Final[tuple[str, ...]]

    def __init__(
        self,
        iteration: int,
        current_node: str | None = None,
        move_by: str | None = None,
        witness: str | None = None,
        tool_results: tuple[ToolResult, ...] = (),
        pending_skill_pick: str | None = None,
        accepted_skill_picks: tuple[str, ...] = (),
        served_last_pass: tuple[str, ...] = (),
    ) -> None:
        self.iteration = iteration
        self.current_node = current_node
        self.move_by = move_by
        self.witness = witness
        self.tool_results = tool_results
        self.pending_skill_pick = pending_skill_pick
        self.accepted_skill_picks = accepted_skill_picks
        self.served_last_pass = served_last_pass

    def _values(self) -> tuple[Any, ...]:
        return (
            self.iteration,
            self.current_node,
            self.move_by,
            self.witness,
            self.tool_results,
            self.pending_skill_pick,
            self.accepted_skill_picks,
            self.served_last_pass,
        )


class MapEngagementRecord(Record):
    """One managed map's state: provenance (founded*), position (at*), and eligibility (by)."""

    __slots__ = (
        "at",
        "at_by",
        "at_since",
        "by",
        "founded_at",
        "founded_by",
        "founded_on",
        "idle",
        "map_id",
        "since",
        "standing",
        "witness",
    )
    map_id: Final[str]
    standing: Final[Standing]
    by: Final[Strength]
    since: Final[int]
    founded_by: Final[Strength]
    founded_at: Final[int]
    idle: Final[int]
    founded_on: Final[str | None]
    at: Final[str | None]
    at_by: Final[Strength | None]
    at_since: Final[int | None]
    witness: Final[str | None]

    def __init__(
        self,
        map_id: str,
        standing: Standing,
        by: Strength,
        since: int,
        founded_by: Strength,
        founded_at: int,
        idle: int = 0,
        founded_on: str | None = None,
        at: str | None = None,
        at_by: Strength | None = None,
        at_since: int | None = None,
        witness: str | None = None,
    ) -> None:
        self.map_id = map_id
        self.standing = standing
        self.by = by
        self.since = since
        self.founded_by = founded_by
        self.founded_at = founded_at
        self.idle = idle
        self.founded_on = founded_on
        self.at = at
        self.at_by = at_by
        self.at_since = at_since
        self.witness = witness

    def _values(self) -> tuple[Any, ...]:
        return (
            self.map_id,
            self.standing,
            self.by,
            self.since,
            self.founded_by,
            self.founded_at,
            self.idle,
            self.founded_on,
            self.at,
            self.at_by,
            self.at_since,
            self.witness,
        )


class EngagedChange(Record):
    """A map was founded, re-engaged, upgraded or changed tenant on this pass."""

    __slots__ = (
        "at",
        "by",
        "founded_by",
        "iteration",
        "map_id",
        "reengaged",
        "tenant_changed",
        "upgraded",
        "witness",
    )
    kind: Final = "engaged"
    map_id: Final[str]
    iteration: Final[int]
    by: Final[Strength]
    witness: Final[str | None]
    reengaged: Final[bool]
    upgraded: Final[bool]
    tenant_changed: Final[bool]
    at: Final[str | None]
    founded_by: Final[Strength | None]

    def __init__(
        self,
        map_id: str,
        iteration: int,
        by: Strength,
        witness: str | None = None,
        reengaged: bool = False,
        upgraded: bool = False,
        tenant_changed: bool = False,
        at: str | None = None,
        founded_by: Strength | None = None,
    ) -> None:
        self.map_id = map_id
        self.iteration = iteration
        self.by = by
        self.witness = witness
        self.reengaged = reengaged
        self.upgraded = upgraded
        self.tenant_changed = tenant_changed
        self.at = at
        self.founded_by = founded_by

    def _values(self) -> tuple[Any, ...]:
        return (
            self.map_id,
            self.iteration,
            self.by,
            self.witness,
            self.reengaged,
            self.upgraded,
            self.tenant_changed,
            self.at,
            self.founded_by,
        )


class ParkedChange(Record):
    """A tentative engagement ran out of grace and was parked on this pass."""

    __slots__ = ("by", "idle_calls", "iteration", "map_id", "witness")
    kind: Final = "parked"
    map_id: Final[str]
    iteration: Final[int]
    by: Final[Strength]
    idle_calls: Final[int]
    witness: Final[str | None]

    def __init__(
        self,
        map_id: str,
        iteration: int,
        by: Strength,
        idle_calls: int,
        witness: str | None = None,
    ) -> None:
        self.map_id = map_id
        self.iteration = iteration
        self.by = by
        self.idle_calls = idle_calls
        self.witness = witness

    def _values(self) -> tuple[Any, ...]:
        return (self.map_id, self.iteration, self.by, self.idle_calls, self.witness)


EngagementChange: TypeAlias = EngagedChange | ParkedChange


class EngagementAdvance(Record):
    """The result of one reducer step."""

    __slots__ = ("changes", "next", "parked_injection_ids", "parked_tool_names")
    next: Final[tuple[MapEngagementRecord, ...]]
    parked_injection_ids: Final[tuple[str, ...]]
    parked_tool_names: Final[tuple[str, ...]]
    changes: Final[tuple[EngagementChange, ...]]

    def __init__(
        self,
        next: tuple[MapEngagementRecord, ...],
        parked_injection_ids: tuple[str, ...],
        parked_tool_names: tuple[str, ...],
        changes: tuple[EngagementChange, ...],
    ) -> None:
        self.next = next
        self.parked_injection_ids = parked_injection_ids
        self.parked_tool_names = parked_tool_names
        self.changes = changes

    def _values(self) -> tuple[Any, ...]:
        return (self.next, self.parked_injection_ids, self.parked_tool_names, self.changes)
