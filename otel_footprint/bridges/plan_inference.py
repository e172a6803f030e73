"""The engagement plan a recording was made under, rebuilt from its events (which never state it):
members from the graph, owned tools from the run, grace and nonParkable from the agent's own kernel."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_footprint import semconv
from otel_footprint.bridges.recording import (
    Leg,
    UpstreamEvent,
    composition_iterations,
    iteration_of,
)
from otel_footprint.kernel import (
    DEFAULT_RENEWAL_GRACE,
    PARK_CARD_ID,
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ToolResult,
    advance_engagement,
)
from otel_footprint.kernel.jsoncodec import change_to_json, plan_to_json

_UNLOCKED_TOOL = re.compile(r"unlocked tool '([^']+)'")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
# The fields that identify a kernel decision; witnesses and positions are compared by the engine.
_CHANGE_KEYS = ("kind", "mapId", "iteration", "by", "idleCalls", "reengaged", "upgraded")


@dataclass(frozen=True, slots=True)
class DerivedPlan:
    """The plan to announce in ``footprint.maps.mounted``."""

    plan: EngagementPlan
    enforced: bool
    """The agent ran the kernel itself (``map.*`` events or the park card in the recording)."""

    def payload(self) -> dict[str, Any]:
        """The upstream-style payload of ``maps.mounted`` (camelCase, for ``encode_payload``)."""
        return {**plan_to_json(self.plan), "enforced": self.enforced}


def member_ids_of(events: Sequence[UpstreamEvent]) -> tuple[str, ...]:
    """Node ids of every ``skill.graph_declared``, first-seen order."""
    members: dict[str, None] = {}
    for node in _declared(events, "nodes"):
        if isinstance(node.get("id"), str) and node["id"]:
            members.setdefault(node["id"], None)
    return tuple(members)


def _declared(events: Sequence[UpstreamEvent], key: str) -> Iterator[Mapping[str, Any]]:
    """The objects in the ``key`` list (``nodes``, ``edges``) of every ``skill.graph_declared``."""
    for event in events:
        if event.type != semconv.T_GRAPH_DECLARED:
            continue
        items = event.payload.get(key)
        if isinstance(items, list):
            yield from (item for item in items if isinstance(item, Mapping))


def _unlocked_tool_name(payload: Mapping[str, Any]) -> str | None:
    reason = payload.get("reason")
    if isinstance(reason, str):
        found = _UNLOCKED_TOOL.search(reason)
        if found:
            return found.group(1)
    # The row's content is the tool schema line "<name>: <description>".
    for key in ("rawContent", "contentSummary"):
        text = payload.get(key)
        if isinstance(text, str) and ":" in text:
            head = text.split(":", 1)[0].strip()
            if _TOOL_NAME.match(head):
                return head
    return None


def owned_tool_names(events: Sequence[UpstreamEvent], members: Sequence[str]) -> tuple[str, ...]:
    """Tools the run attached to members, deduplicated in first-seen order.

    Sources: ``context.evaluated.routing[].tools`` of rows whose ``injectionId`` is a member, and
    tools-slot ``context.injected`` rows with ``source: skill`` and a member ``sourceId``. The
    events never list owned tools up front, so a member that was never active contributes none.
    """
    member_set = frozenset(members)
    tools: dict[str, None] = {}
    for event in events:
        if event.type == semconv.T_CONTEXT_EVALUATED:
            routing = event.payload.get("routing")
            if not isinstance(routing, list):
                continue
            for row in routing:
                if not isinstance(row, Mapping) or row.get("injectionId") not in member_set:
                    continue
                names = row.get("tools")
                if isinstance(names, list):
                    for name in names:
                        if isinstance(name, str) and name:
                            tools.setdefault(name, None)
        elif event.type == semconv.T_CONTEXT_INJECTED:
            payload = event.payload
            if (
                payload.get("slot") == "tools"
                and payload.get("source") == "skill"
                and payload.get("sourceId") in member_set
            ):
                name = _unlocked_tool_name(payload)
                if name is not None:
                    tools.setdefault(name, None)
    return tuple(tools)


def is_enforced(events: Sequence[UpstreamEvent]) -> bool:
    """The agent applied the kernel itself: a ``map.*`` event or the park card is in the recording."""
    for event in events:
        if event.type in semconv.MAP_CHANGE_KINDS:
            return True
        if (
            event.type == semconv.T_CONTEXT_INJECTED
            and event.payload.get("sourceId") == PARK_CARD_ID
        ):
            return True
    return False


def _parked_idle_calls(events: Sequence[UpstreamEvent]) -> int | None:
    for event in events:
        if event.type == semconv.T_MAP_PARKED:
            idle = event.int_field("idleCalls")
            if idle is not None and idle >= 1:
                return idle
    return None


# ── replay ───────────────────────────────────────────────────────────────────────────────────


@dataclass(slots=True)
class _Call:
    name: str
    args: Mapping[str, Any]
    landed: bool = False
    refused: bool = False


@dataclass(slots=True)
class _Iteration:
    active_ids: tuple[str, ...] = ()
    cursor_to: str | None = None
    calls: list[_Call] = field(default_factory=list)
    park_card_rode: bool = False


@dataclass(frozen=True, slots=True)
class _RecordedPass:
    """What the replay needs of one recorded pass, built once and replayed under each candidate."""

    pass_: EngagementPass
    reported: tuple[tuple[Any, ...], ...]


def _chains(legs: Sequence[Leg]) -> Iterator[list[UpstreamEvent]]:
    """Events of each engagement lifetime: a run plus the legs that resume it (state carries
    across a resume, not across runs or turns)."""
    chain: list[UpstreamEvent] = []
    for leg in legs:
        if not leg.resumed and chain:
            yield chain
            chain = []
        chain.extend(leg.events)
    if chain:
        yield chain


def _hops(events: Sequence[UpstreamEvent]) -> dict[str, set[str]]:
    hops: dict[str, set[str]] = {}
    for edge in _declared(events, "edges"):
        target = edge.get("to")
        if isinstance(edge.get("from"), str) and isinstance(target, str):
            hops.setdefault(edge["from"], set()).add(target)
    return hops


def _key_of(change: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(change.get(key) for key in _CHANGE_KEYS)


def _recorded_passes(chain: Sequence[UpstreamEvent]) -> list[_RecordedPass]:
    """Kernel inputs of every pass of one chain (spec §2.2), with the agent's own decisions."""
    reader = _ChainReader(_hops(chain), composition_iterations(chain))
    for event in chain:
        reader.read(event)
    return reader.passes


@dataclass(slots=True)
class _ChainReader:
    """Reads one chain's events in order: the tool calls and park-card rows of each iteration, the
    agent's reported changes, and a recorded pass at each evaluation."""

    hops: Mapping[str, set[str]]
    stage_iteration: Mapping[tuple[str | None, str], int]
    iterations: dict[int, _Iteration] = field(default_factory=dict)
    reported: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)
    open_calls: dict[str, _Call] = field(default_factory=dict)
    current: _Call | None = None
    current_iteration: int = 0
    passes: list[_RecordedPass] = field(default_factory=list)

    def read(self, event: UpstreamEvent) -> None:
        kind = event.type
        if kind in semconv.MAP_CHANGE_KINDS:
            self._reported_change(event)
        elif kind in (semconv.T_ITERATION_START, semconv.T_LLM_START):
            number = iteration_of(event)
            if number is not None:
                self.current_iteration = number
        elif kind == semconv.T_TOOL_START:
            self._tool_start(event)
        elif kind == semconv.T_TOOL_END:
            self._tool_end(event)
        elif kind in (semconv.T_SKILL_REJECTED, semconv.T_PERMISSION_CHECK):
            if self.current is not None and _refuses_a_pick(event):
                self.current.refused = True
        elif kind == semconv.T_CONTEXT_INJECTED and event.payload.get("sourceId") == PARK_CARD_ID:
            self._park_card_row(event)
        elif kind == semconv.T_CONTEXT_EVALUATED:
            number = event.int_field("iteration")
            if number is not None:
                self.passes.append(
                    _pass_of(event, number, self.iterations, self.hops, self.reported)
                )

    def _reported_change(self, event: UpstreamEvent) -> None:
        iteration = event.int_field("iteration")
        if iteration is not None:
            payload = {"kind": semconv.MAP_CHANGE_KINDS[event.type], **event.payload}
            self.reported.setdefault(iteration, []).append(_key_of(payload))

    def _tool_start(self, event: UpstreamEvent) -> None:
        name = event.str_field("toolName") or ""
        args = event.payload.get("args")
        self.current = _Call(name=name, args=args if isinstance(args, Mapping) else {})
        self.iterations.setdefault(self.current_iteration, _Iteration()).calls.append(self.current)
        call_id = event.str_field("toolCallId")
        if call_id is not None:
            self.open_calls[call_id] = self.current

    def _tool_end(self, event: UpstreamEvent) -> None:
        call_id = event.str_field("toolCallId")
        call = self.open_calls.pop(call_id, None) if call_id is not None else self.current
        if call is not None:
            call.landed = True
        self.current = None

    def _park_card_row(self, event: UpstreamEvent) -> None:
        stage = event.stage_id
        number = self.stage_iteration.get((event.run_id, stage)) if stage is not None else None
        if number is not None:
            self.iterations.setdefault(number, _Iteration()).park_card_rode = True


def _refuses_a_pick(event: UpstreamEvent) -> bool:
    """A rejection, or a permission check refusing a skill read (on the open tool call)."""
    return event.type == semconv.T_SKILL_REJECTED or (
        event.payload.get("capability") == semconv.CAPABILITY_SKILL_READ
        and event.payload.get("result") in semconv.PERMISSION_REFUSING_RESULTS
    )


def _pass_of(
    event: UpstreamEvent,
    number: int,
    iterations: dict[int, _Iteration],
    hops: Mapping[str, set[str]],
    reported: Mapping[int, list[tuple[Any, ...]]],
) -> _RecordedPass:
    this = iterations.setdefault(number, _Iteration())
    active = event.payload.get("activeIds")
    this.active_ids = (
        tuple(a for a in active if isinstance(a, str)) if isinstance(active, list) else ()
    )
    move = event.payload.get("cursorMove")
    move = move if isinstance(move, Mapping) else {}
    to = move.get("to") if isinstance(move.get("to"), str) else None
    this.cursor_to = to
    by = move.get("by") if isinstance(move.get("by"), str) else None
    witness_obj = move.get("witness")
    witness = witness_obj.get("text") if isinstance(witness_obj, Mapping) else None
    previous = iterations.get(number - 1, _Iteration())
    landed = [call for call in previous.calls if call.landed]
    accepted: dict[str, None] = {}
    pending: str | None = None
    for call in landed:
        pick = call.args.get("id")
        if call.name != semconv.READ_SKILL_TOOL or call.refused or not isinstance(pick, str):
            continue
        accepted.setdefault(pick, None)
        if previous.cursor_to is not None and pick in hops.get(previous.cursor_to, set()):
            pending = pick
    served = list(previous.active_ids)
    if previous.park_card_rode:
        served.append(PARK_CARD_ID)
    return _RecordedPass(
        pass_=EngagementPass(
            iteration=number,
            current_node=to,
            move_by=by,
            witness=witness if isinstance(witness, str) else None,
            tool_results=tuple(ToolResult(call.name) for call in landed),
            pending_skill_pick=pending,
            accepted_skill_picks=tuple(accepted),
            served_last_pass=tuple(served),
        ),
        reported=tuple(reported.get(number, ())),
    )


def _replays(plan: EngagementPlan, chains: Sequence[Sequence[_RecordedPass]]) -> bool:
    """Whether our kernel under ``plan`` makes exactly the recorded ``map.*`` decisions."""
    for passes in chains:
        state: tuple[MapEngagementRecord, ...] = ()
        for recorded in passes:
            advance = advance_engagement(plan, state, recorded.pass_)
            state = advance.next
            derived = tuple(_key_of(change_to_json(change)) for change in advance.changes)
            if derived != recorded.reported:
                return False
    return True


def derive_plan(
    events: Sequence[UpstreamEvent],
    legs: Sequence[Leg],
    renewal_grace: int | None = None,
    non_parkable: bool | None = None,
) -> DerivedPlan | None:
    """The recording's plan, or None when no skill graph is declared (nothing to mount).

    Grace: ``renewal_grace`` when given; else the ``idleCalls`` of the first ``map.parked`` (the
    kernel parks exactly when the idle count reaches the grace); else 3. ``nonParkable``: the
    option when given; else, in verify mode, true only if the recording's own decisions replay
    with it and not without it (a map that idled past the grace and never parked).
    """
    members = member_ids_of(events)
    if not members:
        return None
    tools = owned_tool_names(events, members)
    enforced = is_enforced(events)
    parked_idle = _parked_idle_calls(events)
    if renewal_grace is not None:
        grace = renewal_grace
    elif parked_idle is not None:
        grace = parked_idle
    else:
        grace = DEFAULT_RENEWAL_GRACE

    def plan_with(flag: bool | None) -> EngagementPlan:
        mounted = MountedMap(semconv.SKILL_MAP_ID, members, tools, flag)
        return EngagementPlan(maps=(mounted,), renewal_grace=grace)

    if non_parkable is not None:
        return DerivedPlan(plan_with(non_parkable), enforced)
    plain = plan_with(None)
    if not enforced:
        return DerivedPlan(plain, enforced)
    chains = [_recorded_passes(chain) for chain in _chains(legs)]
    mandatory = plan_with(True)
    if not _replays(plain, chains) and _replays(mandatory, chains):
        return DerivedPlan(mandatory, enforced)
    return DerivedPlan(plain, enforced)
