"""Shadow mode's roll-up: per mounted map, what kept riding after the kernel would have parked it.

Reads the pass verdicts the replay produced (``served_while_parked`` and its characters per id) and
the plan (which map each id belongs to); the account turns the result into its signal and summary
(``account/riding.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_footprint import semconv
from otel_footprint.account.model import Pointer
from otel_footprint.account.riding import SHOWN_POINTERS, RodeWhileParked
from otel_footprint.engine.verdict import PassVerdict
from otel_footprint.kernel.types import EngagementPlan


def rode_while_parked(
    passes: Sequence[PassVerdict], plan: EngagementPlan
) -> tuple[RodeWhileParked, ...]:
    """Per map (plan order), the ids that rode while it was parked, their passes and characters."""
    owner = {member: m.id for m in plan.maps for member in m.member_ids}
    ids: dict[str, dict[str, int]] = {}
    iterations: dict[str, list[int]] = {}
    pointers: dict[str, list[Pointer]] = {}
    for verdict in passes:
        if not verdict.served_while_parked:
            continue
        chars = dict(verdict.served_chars_by_id)
        touched: set[str] = set()
        for injection in verdict.served_while_parked:
            fallback = verdict.parked_maps[0] if verdict.parked_maps else "?"
            map_id = owner.get(injection, fallback)
            per_id = ids.setdefault(map_id, {})
            per_id[injection] = per_id.get(injection, 0) + chars.get(injection, 0)
            touched.add(map_id)
        for map_id in touched:
            iterations.setdefault(map_id, []).append(verdict.iteration)
            shown = pointers.setdefault(map_id, [])
            if verdict.span_id is not None and len(shown) < SHOWN_POINTERS:
                shown.append(
                    Pointer(
                        verdict.trace_id,
                        verdict.span_id,
                        attribute=semconv.ENG_SERVED_WHILE_PARKED,
                    )
                )
    order = [m.id for m in plan.maps] + sorted(set(ids) - {m.id for m in plan.maps})
    return tuple(
        RodeWhileParked(
            map_id=map_id,
            ids=tuple(ids[map_id]),
            passes=len(iterations[map_id]),
            chars=sum(ids[map_id].values()),
            first_iteration=min(iterations[map_id]),
            last_iteration=max(iterations[map_id]),
            chars_by_id=tuple(ids[map_id].items()),
            pointers=tuple(pointers.get(map_id, ())),
        )
        for map_id in order
        if map_id in ids
    )
