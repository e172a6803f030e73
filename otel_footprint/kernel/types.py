"""The engagement kernel's vocabulary: frozen, typed data and nothing else.

A *map* (today the skill map) owns its cursor; the *kernel* owns whether that map's contribution
rides the next model call. Everything here is plain immutable data so that a run's state can be
stored, compared and replayed. An absent optional field is ``None`` and is distinct from ``""``
(the reference treats ``moveBy: ""`` and ``witness: ""`` as present values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from otel_footprint.codec import checked_after_built, quick_init

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


@quick_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """One call of the previous dispatched tool batch; the kernel reads only the name."""

    tool_name: str


@quick_init
@dataclass(frozen=True, slots=True)
class EngagementPass:
    """The kernel's input for one model call (one ReAct iteration)."""

    iteration: int
    current_node: str | None = None
    move_by: str | None = None
    witness: str | None = None
    tool_results: tuple[ToolResult, ...] = ()
    pending_skill_pick: str | None = None
    accepted_skill_picks: tuple[str, ...] = ()
    served_last_pass: tuple[str, ...] = ()


@quick_init
@dataclass(frozen=True, slots=True)
class MapEngagementRecord:
    """One managed map's state: provenance (founded*), position (at*), and eligibility (by)."""

    map_id: str
    standing: Standing
    by: Strength
    since: int
    founded_by: Strength
    founded_at: int
    idle: int = 0
    founded_on: str | None = None
    at: str | None = None
    at_by: Strength | None = None
    at_since: int | None = None
    witness: str | None = None


@dataclass(frozen=True, slots=True)
class EngagedChange:
    """A map was founded, re-engaged, upgraded or changed tenant on this pass."""

    map_id: str
    iteration: int
    by: Strength
    witness: str | None = None
    reengaged: bool = False
    upgraded: bool = False
    tenant_changed: bool = False
    at: str | None = None
    founded_by: Strength | None = None
    kind: Literal["engaged"] = field(default="engaged", init=False)


@dataclass(frozen=True, slots=True)
class ParkedChange:
    """A tentative engagement ran out of grace and was parked on this pass."""

    map_id: str
    iteration: int
    by: Strength
    idle_calls: int
    witness: str | None = None
    kind: Literal["parked"] = field(default="parked", init=False)


EngagementChange: TypeAlias = EngagedChange | ParkedChange


@quick_init
@dataclass(frozen=True, slots=True)
class EngagementAdvance:
    """The result of one reducer step."""

    next: tuple[MapEngagementRecord, ...]
    parked_injection_ids: tuple[str, ...]
    parked_tool_names: tuple[str, ...]
    changes: tuple[EngagementChange, ...]
