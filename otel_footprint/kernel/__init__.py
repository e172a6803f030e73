"""The engagement kernel: a pure lease machine that parks a map engaged on a guess.

Public API re-exported from the one-job modules of this package; no I/O, no clock.
"""

from otel_footprint.kernel.evidence import (
    CursorMoved,
    ExplicitPick,
    MemberActivated,
    OwnedToolCalled,
    RenewalEvidence,
    renewal_evidence_of,
    strength_of_evidence,
    strongest_evidence,
)
from otel_footprint.kernel.ladder import (
    LADDER,
    is_tentative,
    rank,
    strength_of_move,
    stronger_of,
    strongest_of,
)
from otel_footprint.kernel.lease import advance_engagement
from otel_footprint.kernel.park_card import PARK_CARD_ID, park_card
from otel_footprint.kernel.plan import (
    DEFAULT_RENEWAL_GRACE,
    PlanError,
    engagement_plan,
    parked_member_ids,
    validate_plan,
)
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
    ToolResult,
)

__all__ = [
    "DEFAULT_RENEWAL_GRACE",
    "LADDER",
    "PARK_CARD_ID",
    "CursorMoved",
    "EngagedChange",
    "EngagementAdvance",
    "EngagementChange",
    "EngagementPass",
    "EngagementPlan",
    "ExplicitPick",
    "MapEngagementRecord",
    "MemberActivated",
    "MountedMap",
    "OwnedToolCalled",
    "ParkedChange",
    "PlanError",
    "RenewalEvidence",
    "Standing",
    "Strength",
    "ToolResult",
    "advance_engagement",
    "engagement_plan",
    "is_tentative",
    "park_card",
    "parked_member_ids",
    "rank",
    "renewal_evidence_of",
    "strength_of_evidence",
    "strength_of_move",
    "stronger_of",
    "strongest_evidence",
    "strongest_of",
    "validate_plan",
]
