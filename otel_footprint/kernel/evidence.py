"""The renewal feed: the typed evidence one pass gives one map, in the reference's order.

Joins the previous batch's tool calls, the cursor move and the model's accepted picks to the map
that owns them. Nothing here guesses; an empty result is a fact the lease counts, not an error.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

from otel_footprint.kernel.ladder import NON_MOVES, strength_of_move, strongest_of
from otel_footprint.kernel.record import Record
from otel_footprint.kernel.types import EngagementPass, MountedMap, Strength


class OwnedToolCalled(Record):
    """One call, in the previous batch, of a tool this map contributes."""

    __slots__ = ("tool_name",)
    kind: Final = "owned-tool-called"
    tool_name: Final[str]

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name

    def _values(self) -> tuple[Any, ...]:
        return (self.tool_name,)


class CursorMoved(Record):
    """The cursor moved onto one of this map's members by the clause ``by``."""

    __slots__ = ("by",)
    kind: Final = "cursor-moved"
    by: Final[str]

    def __init__(self, by: str) -> None:
        self.by = by

    def _values(self) -> tuple[Any, ...]:
        return (self.by,)


class ExplicitPick(Record):
    """The gate accepted a ``read_skill`` hop onto one of this map's members last iteration."""

    __slots__ = ("skill_id",)
    kind: Final = "explicit-pick"
    skill_id: Final[str]

    def __init__(self, skill_id: str) -> None:
        self.skill_id = skill_id

    def _values(self) -> tuple[Any, ...]:
        return (self.skill_id,)


class MemberActivated(Record):
    """A ``read_skill`` pick of one of this map's members was accepted on the previous pass."""

    __slots__ = ("skill_id",)
    kind: Final = "member-activated"
    skill_id: Final[str]

    def __init__(self, skill_id: str) -> None:
        self.skill_id = skill_id

    def _values(self) -> tuple[Any, ...]:
        return (self.skill_id,)


RenewalEvidence: TypeAlias = OwnedToolCalled | CursorMoved | ExplicitPick | MemberActivated


def renewal_evidence_of(mounted: MountedMap, pass_: EngagementPass) -> tuple[RenewalEvidence, ...]:
    """All renewal evidence ``mounted`` earned on ``pass_``, in the reference's order.

    Owned tool calls first (one per call, duplicates kept), then the cursor move, then the
    pending hop pick, then every accepted pick.
    """
    members = mounted.member_ids
    owned = mounted.tool_names
    evidence: list[RenewalEvidence] = [
        OwnedToolCalled(result.tool_name)
        for result in pass_.tool_results
        if result.tool_name in owned
    ]
    move_by = pass_.move_by
    # A "stay" or "none" is not a move, and a move that lands outside the map says nothing
    # about it. Presence is tested, not truthiness: ``moveBy: ""`` is a (structural) clause.
    if (
        move_by is not None
        and move_by not in NON_MOVES
        and pass_.current_node is not None
        and pass_.current_node in members
    ):
        evidence.append(CursorMoved(move_by))
    if pass_.pending_skill_pick is not None and pass_.pending_skill_pick in members:
        evidence.append(ExplicitPick(pass_.pending_skill_pick))
    evidence.extend(MemberActivated(pick) for pick in pass_.accepted_skill_picks if pick in members)
    return tuple(evidence)


def strength_of_evidence(evidence: RenewalEvidence) -> Strength:
    """The rung one piece of evidence stands on."""
    if isinstance(evidence, ExplicitPick | MemberActivated):
        return "explicit"
    if isinstance(evidence, OwnedToolCalled):
        return "structural"
    return strength_of_move(evidence.by)


def strongest_evidence(evidence: tuple[RenewalEvidence, ...]) -> Strength | None:
    """The strongest rung across one pass's evidence, ``None`` when there is none."""
    return strongest_of(strength_of_evidence(item) for item in evidence)
