"""Times one engagement reducer step (``advance_engagement``) with 1 and 3 mounted maps.

A plain script: ``python benchmarks/bench_kernel.py [--passes N] [--repeats R]``; prints the best
of R runs as microseconds per pass. Each timed run replays one realistic cycle of passes (found,
idle, park, stay parked, re-engage, tenant change) over and over, feeding each ``next`` forward.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from otel_footprint.kernel import (
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ToolResult,
    advance_engagement,
    engagement_plan,
)

SKILLS = MountedMap(
    "skill-map", ("zone-audit", "billing", "refunds", "run-finder"), ("get_zone_info", "list_zones")
)
SCREENS = MountedMap("screen-map", ("home", "settings", "reports"), ("open_screen",))
POLICY = MountedMap("policy-map", ("house-rules",), (), non_parkable=True)
SERVED = (*SKILLS.member_ids, *SCREENS.member_ids, "house-rules")
FOREIGN = (ToolResult("screen_open"), ToolResult("search_docs"))


def cycle() -> list[EngagementPass]:
    """Ten passes of one turn: an entry guess, idle calls until it parks, a pick, a route."""
    passes = [EngagementPass(1, "zone-audit", "entry", "zone", served_last_pass=("house-rules",))]
    passes += [
        EngagementPass(i, "zone-audit", "stay", tool_results=FOREIGN, served_last_pass=SERVED)
        for i in range(2, 7)
    ]
    passes.append(EngagementPass(7, "zone-audit", "stay", accepted_skill_picks=("zone-audit",)))
    passes.append(
        EngagementPass(8, "billing", "route", tool_results=(ToolResult("get_zone_info"),))
    )
    passes.append(EngagementPass(9, "home", "model-pick", pending_skill_pick="home"))
    passes.append(
        EngagementPass(10, "refunds", "intent", tool_results=FOREIGN, served_last_pass=SERVED)
    )
    return passes


def time_plan(plan: EngagementPlan, passes: int, repeats: int) -> float:
    """Best-of-``repeats`` microseconds per ``advance_engagement`` call over ``passes`` calls."""
    turn = cycle()
    best = float("inf")
    for _ in range(repeats):
        state: Sequence[MapEngagementRecord] | None = None
        start = time.perf_counter()
        for index in range(passes):
            pass_ = turn[index % len(turn)]
            # A new turn starts with no engagement state, as the engine does between runs.
            state = advance_engagement(plan, None if pass_.iteration == 1 else state, pass_).next
        best = min(best, time.perf_counter() - start)
    return best / passes * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--passes", type=int, default=100_000, help="reducer steps per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs; the best one is reported")
    args = parser.parse_args(argv)
    for label, plan in (
        ("1 map ", engagement_plan([SKILLS])),
        ("3 maps", engagement_plan([SKILLS, SCREENS, POLICY])),
    ):
        micros = time_plan(plan, args.passes, args.repeats)
        print(f"{label}: {micros:6.2f} µs per pass ({args.passes} passes, best of {args.repeats})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
