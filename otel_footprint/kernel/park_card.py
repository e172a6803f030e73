"""The park card: the only kernel text a model reads, telling it which maps are parked and how back.

Exact text of spec §1.9 (agentfootprint 9.62.0); served under the reserved injection id below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from otel_footprint.kernel.types import EngagementPlan, MapEngagementRecord, MountedMap

PARK_CARD_ID: Final = "agentfootprint:map-status"
"""The reserved injection id the card rides under (flavor ``steering``, system-prompt slot)."""

_HEADER: Final = "Map status (the framework is telling you this; it is not part of the task):"


def _reason_of(record: MapEngagementRecord) -> str:
    # States the one thing the model can act on, not the idle arithmetic it cannot.
    if record.by == "assumed":
        return "nothing on this turn explains why it is loaded"
    return "no recent evidence that it is the right map for this turn"


def park_card(plan: EngagementPlan, engagement: Sequence[MapEngagementRecord] | None) -> str | None:
    """The card for every parked record whose map is in ``plan`` (in record order), else ``None``.

    ``None`` means nothing is added to the prompt at all, which keeps the unparked path
    byte-identical.
    """
    if not engagement:
        return None
    by_id: dict[str, MountedMap] = {mounted.id: mounted for mounted in plan.maps}
    lines: list[str] = []
    for record in engagement:
        if record.standing != "parked":
            continue
        mounted = by_id.get(record.map_id)
        if mounted is None:
            continue
        cursor = "(unknown)" if record.at is None else record.at
        lines.append(
            f"  - {mounted.id} — cursor: {cursor} (unchanged) · engagement: PARKED · "
            f"reason: {_reason_of(record)} · re-engage: available"
        )
        lines.append(
            "    Its instructions and its tools are not being sent right now. To bring them back, "
            f"call read_skill for any of: {', '.join(mounted.member_ids)}. That is allowed even "
            "for the skill the cursor is already on — it changes ENGAGEMENT (whether this map is "
            "sent to you), not POSITION (where the cursor is). If this map is not what this turn "
            "needs, ignore this and carry on."
        )
    if not lines:
        return None
    return "\n".join([_HEADER, *lines])
