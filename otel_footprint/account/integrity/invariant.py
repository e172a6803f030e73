"""``invariant-violation``: two channels that cannot both be right about one model call.

At **compose**: a map the kernel parks at a pass still has tools on that pass's offered list. In
shadow mode (no kernel in the agent) nothing was promised, so nothing is contradicted: the same
finding is an **advisory** saying what parking would have withheld, and the pass is judged ``pass``.
At the **wire**: the framework's composed tool list and the client instrumentation's request (or a
``footprint.wire.manifest``) disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

from otel_footprint.account.integrity.common import names, tools_missing
from otel_footprint.account.integrity.model import Finding, ParkState, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import IntegrityInputs, PassInputs
from otel_footprint.runs.outputs import Ref


def check_compose(
    inputs: IntegrityInputs, park: Mapping[int, ParkState] | None, *, shadow: bool
) -> Tally:
    """Parked maps' tools still offered, pass by pass (``park`` None: no plan, unarmed).
    ``shadow``: the agent applies no kernel, so a park it never made cannot be contradicted; what
    parking would have withheld is filed as an advisory (a cost worth a look) on a ``pass``."""
    if park is None:
        return unarmed("no-maps")
    tally = Tally()
    filed_before: set[tuple[str, tuple[str, ...]]] = set()
    for pass_ in inputs.passes:
        it = pass_.iteration
        state = park.get(it)
        if state is None or not state.decided:
            tally.note("unreachable", it, "kernel-unreplayed")
            continue
        if not any(state.held_out.values()):
            tally.note("not-applicable", it, "nothing-held")
            continue
        offered, ref = pass_.tools()
        if offered is None:
            tally.note("unreachable", it, *tools_missing(pass_))
            continue
        held = {m: tools for m, tools in state.held_out.items() if tools}
        offered_names = {t.name for t in offered}
        filed: list[Finding] = []
        repeated = False
        for map_id, owned in held.items():
            still = [t for t in owned if t in offered_names]
            if not still:
                continue
            key = (map_id, tuple(sorted(still)))
            if key in filed_before:
                # The same defect again (a parked map stays parked): the first filing stands;
                # building its sentence and witnesses again would only be dropped by the dedup.
                repeated = True
                continue
            filed_before.add(key)
            park_witness = Witness(
                Subject("map", map_id),
                "availability",
                "suspended",
                f"engagement kernel: '{map_id}' parked at pass {it}",
            )
            served = tuple(
                Witness(
                    Subject("map", map_id),
                    "availability",
                    "available",
                    f"offered list: '{t}' offered, owned by '{map_id}'",
                    ref,
                )
                for t in still
            )
            filed.append(
                Finding(
                    "invariant-violation",
                    "compose",
                    (Subject("map", map_id), *(Subject("tool", t) for t in still)),
                    say(
                        "compose.shadow" if shadow else "compose.parked",
                        map=map_id,
                        n=len(still),
                        tools=names(still),
                    ),
                    (park_witness, *served),
                    iteration=it,
                    advisory=shadow,
                )
            )
        if shadow:
            tally.findings.extend(filed)
            tally.note("pass", it)
        elif repeated and not filed:
            tally.note("fail", it)
        else:
            tally.judged(filed, it)
    return tally


def _wire_finding(
    direction: str, offending: list[str], it: int, composed_ref: Ref | None, wire_ref: Ref | None
) -> Finding:
    present = direction == "added"
    witnesses = tuple(
        w
        for t in offending
        for w in (
            Witness(
                Subject("tool", t),
                "on-wire",
                "absent" if present else "present",
                "framework: composed list",
                composed_ref,
            ),
            Witness(
                Subject("tool", t),
                "on-wire",
                "present" if present else "absent",
                "client: request sent",
                wire_ref,
            ),
        )
    )
    return Finding(
        "invariant-violation",
        "wire",
        tuple(Subject("tool", t) for t in offending),
        say(f"wire.{direction}", n=len(offending), tools=names(offending)),
        witnesses,
        iteration=it,
    )


def _wire_side(pass_: PassInputs) -> tuple[list[str] | None, Ref | None, str | None]:
    """(names sent, where read, why unknown): the client span's tool list, else the manifest."""
    if pass_.client is not None and pass_.client.tools is not None:
        return [t.name for t in pass_.client.tools], pass_.client.tools_ref, None
    if pass_.wire_manifest is not None:  # also when a client span recorded no list of its own
        return list(pass_.wire_manifest), pass_.wire_ref, None
    if pass_.client is not None:
        return None, None, "client-unlisted"
    return None, None, "no-second-view"


def check_wire(inputs: IntegrityInputs) -> Tally:
    """The composed tool list against the request actually sent, for each call seen twice.
    Order and duplicates do not matter; an empty list sent is a stated zero. Armed when the agent
    states what it sent (``footprint.wire.manifest``: the comparison is what it is for), or once
    some call of the run has both lists; a call of such a run missing either side is unreachable,
    naming the side."""
    stated = any(p.wire_manifest is not None for p in inputs.passes)
    if not stated and not any(
        p.framework.tools is not None and p.client is not None and p.client.tools is not None
        for p in inputs.passes
    ):  # (without a manifest, only a client span's list is a second view)
        return unarmed("one-view")
    tally = Tally()
    for pass_ in inputs.passes:
        it = pass_.iteration
        wire, wire_ref, why = _wire_side(pass_)
        if wire is None:
            tally.note("unreachable", it, why)
            continue
        composed = pass_.framework.tools
        if composed is None:
            tally.note("unreachable", it, "composed-unrecorded")
            continue
        composed_names = [t.name for t in composed]
        added = [t for t in dict.fromkeys(wire) if t not in set(composed_names)]
        dropped = [t for t in dict.fromkeys(composed_names) if t not in set(wire)]
        composed_ref = pass_.framework.tools_ref
        filed = []
        if added:
            filed.append(_wire_finding("added", added, it, composed_ref, wire_ref))
        if dropped:
            filed.append(_wire_finding("dropped", dropped, it, composed_ref, wire_ref))
        tally.judged(filed, it)
    return tally
