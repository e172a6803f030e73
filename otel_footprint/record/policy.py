"""The live engagement policy: the processor's kernel, run by the recorder as the agent goes.

A run opened with ``policy=True`` (enforce mode) keeps the kernel's state from what the agent
already states — each pass's cursor move and what rode it, the tool calls of each pass and their
picks — and answers, before each model call, what to leave out: the parked maps, their members'
injection ids and their tool names (:class:`Decision`). The translation of those facts into a
kernel Pass is the processor's own (:func:`otel_footprint.runs.passes.kernel_pass_of`, with
:func:`latest_batch` and ``PassFacts.served``), and the step is the kernel's
:func:`advance_engagement`: one implementation, so the trace's replay re-derives every decision.

The agent stays in charge of its prompt: it asks, then leaves out what it chooses; the recorder
writes the decisions the agent applied as ``map.engaged`` / ``map.parked`` (a park the agent
ignored — it served a parked member anyway — is not written, so the processor's verify mode shows
the difference at that call), and counts the characters left out (:class:`Savings`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_footprint import semconv
from otel_footprint.codec import EventPointer, FootprintEvent
from otel_footprint.kernel import (
    EngagedChange,
    EngagementChange,
    EngagementPlan,
    MapEngagementRecord,
    ParkedChange,
    advance_engagement,
)
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.runs.outputs import loads, output_tool_calls
from otel_footprint.runs.passes import (
    CONVERSATION_SOURCES,
    Batch,
    PassFacts,
    Pick,
    kernel_pass_of,
    latest_batch,
    picks_of,
)
from otel_footprint.runs.spans import SdkSpanView


@dataclass(frozen=True, slots=True)
class Decision:
    """What the kernel says about one model call: what to leave out of it."""

    iteration: int
    parked_maps: tuple[str, ...]
    parked_injection_ids: tuple[str, ...]
    parked_tool_names: tuple[str, ...]
    changes: tuple[EngagementChange, ...]
    """The kernel's changes on this pass (the recorder writes the ones the agent applied)."""

    def keeps(self, injection_id: str) -> bool:
        """False when ``injection_id`` belongs to a parked map (leave it out of this call)."""
        return injection_id not in self.parked_injection_ids

    def keeps_tool(self, name: str) -> bool:
        """False when the tool ``name`` belongs to a parked map (do not offer it on this call)."""
        return name not in self.parked_tool_names


def tool_name_of(definition: Mapping[str, Any]) -> str | None:
    """The name of a tool definition in the OpenAI (``{type, function: {name}}``) or flat
    (``{name}``) shape; None when it has none."""
    function = definition.get("function")
    name = function.get("name") if isinstance(function, Mapping) else definition.get("name")
    return name if isinstance(name, str) else None


def definition_chars(definition: Mapping[str, Any]) -> int:
    """The characters a tool definition takes in a request body (its compact JSON)."""
    return len(json.dumps(definition, ensure_ascii=False, separators=(",", ":")))


@dataclass(slots=True)
class Savings:
    """What the agent left out on the policy's word, measured as it left it out."""

    chars: int = 0
    """Characters of injections and tool definitions left out of model calls."""
    predicted_chars: int = 0
    """Of those, the parked maps' injections: what shadow mode's riding finding counts."""
    passes: set[int] = field(default_factory=set)
    """The model calls something was left out of."""

    def left_out(self, iteration: int, chars: int, *, injection: bool) -> None:
        self.chars += chars
        if injection:
            self.predicted_chars += chars
        self.passes.add(iteration)


@dataclass(slots=True)
class PassState:
    """What the agent stated about one pass, as the policy reads it."""

    iteration: int
    current_node: str | None = None
    move_by: str | None = None
    witness: str | None = None
    active_ids: tuple[str, ...] = ()
    served_ids: set[str] = field(default_factory=set)
    """Ids of everything injected on the pass (a parked member here means the park was ignored)."""
    injected_ids: list[str] = field(default_factory=list)
    """Ids of the non-conversation rows injected on the pass, first-injected order (the park
    card aside): what it served when the agent asked :meth:`plan` but stated no evaluation."""
    left_out: dict[str, int] = field(default_factory=dict)
    """Characters of the injections ``keep()`` said to leave out, counted when the pass closes
    unless the pass injected them after all."""
    card_rode: bool = False
    span: object | None = None
    output_calls: Sequence[tuple[str, Any]] | None = None
    """The tool calls its ended span recorded in its output, read once (None: not read yet)."""
    decision: Decision | None = None
    records: tuple[MapEngagementRecord, ...] = ()
    """The kernel's state after this pass."""
    written: bool = False


@dataclass(slots=True)
class StatedCall:
    """One tool call stated with ``run.tool_call``: the kernel reads its name and picks."""

    iteration: int
    name: str
    arguments: Any
    events: list[FootprintEvent] = field(default_factory=list)
    """The gate's events on the call (``skill.picked``, ``skill.rejected``, ``permission.check``)."""
    failed: bool = False

    def noted(self, event_type: str, payload: Mapping[str, Any]) -> None:
        """One gate event written on the call's span, as the processor will read it back."""
        pointer = EventPointer("", "", semconv.event_name_of(event_type), len(self.events))
        self.events.append(FootprintEvent(event_type, payload, pointer))

    def picks(self) -> tuple[Pick, ...]:
        """The call's accepted picks, by the processor's own rule (:func:`picks_of`)."""
        return picks_of(self.name, self.arguments, self.failed, self.events, False)


class LivePolicy:
    """The kernel's state for one run leg, advanced once per model call, in order."""

    def __init__(self, plan: EngagementPlan, edges: frozenset[tuple[str, str]] | None) -> None:
        self.plan = plan
        self._edges = edges
        self._state: tuple[MapEngagementRecord, ...] | None = None
        self._passes: list[PassState] = []
        self._calls: list[StatedCall] = []
        self.savings = Savings()

    def pass_state(self, iteration: int) -> PassState:
        """The state of pass ``iteration`` (made on first use)."""
        for state in reversed(self._passes):
            if state.iteration == iteration:
                return state
        state = PassState(iteration)
        self._passes.append(state)
        return state

    def tool_called(self, call: StatedCall) -> None:
        self._calls.append(call)

    def decide(self, state: PassState) -> Decision:
        """Advance the kernel by pass ``state`` (once; later asks get the same answer)."""
        if state.decision is not None:
            return state.decision
        earlier = [p for p in self._passes if p.iteration < state.iteration]
        previous = max(earlier, key=lambda p: p.iteration) if earlier else None
        served = (
            PassFacts(
                previous.iteration,
                None,
                None,
                active_ids=previous.active_ids,
                card_rode=previous.card_rode,
            ).served
            if previous is not None
            else ()
        )
        facts = PassFacts(
            state.iteration,
            None,
            None,
            current_node=state.current_node,
            move_by=state.move_by,
            witness=state.witness,
        )
        batch = latest_batch(self._batches(earlier), state.iteration)
        advance = advance_engagement(
            self.plan, self._state, kernel_pass_of(facts, batch, served, self._edges)
        )
        self._state = state.records = advance.next
        parked = tuple(r.map_id for r in advance.next if r.standing == "parked")
        state.decision = Decision(
            state.iteration,
            parked,
            advance.parked_injection_ids,
            advance.parked_tool_names,
            advance.changes,
        )
        return state.decision

    def applied(self, state: PassState) -> tuple[EngagementChange, ...]:
        """What the agent did on the pass, as engagement changes: the kernel's changes, except
        that a map the agent served although the policy parked it was not parked by the agent —
        its park, decided on this call, is not written; parked earlier, the agent re-engaged it
        on its own (an ``engaged`` change the kernel did not make). Either way the processor's
        verify mode finds the difference at this call."""
        decision = state.decision
        if decision is None:
            return ()
        served = set(state.active_ids) | state.served_ids
        ignored = {
            m.id
            for m in self.plan.maps
            if m.id in decision.parked_maps and served & set(m.member_ids)
        }
        changes = [
            c for c in decision.changes if not (isinstance(c, ParkedChange) and c.map_id in ignored)
        ]
        parked_now = {c.map_id for c in decision.changes if isinstance(c, ParkedChange)}
        for record in state.records:
            if record.map_id in ignored - parked_now:
                changes.append(
                    EngagedChange(record.map_id, state.iteration, record.by, reengaged=True)
                )
        return tuple(changes)

    def count_left_out(self, state: PassState) -> None:
        """Count the injections the closing pass left out (not those it injected after all)."""
        for injection_id, chars in state.left_out.items():
            if injection_id not in state.served_ids:
                self.savings.left_out(state.iteration, chars, injection=True)
        state.left_out.clear()

    def _batches(self, passes: Iterable[PassState]) -> dict[int, Batch]:
        """The dispatched batches of the passes before this one: tool calls stated on the run
        first, else the tool calls the pass span recorded in its output (as the processor)."""
        cursor_of = {p.iteration: p.current_node for p in self._passes}
        names: dict[int, list[str]] = {}
        picks: dict[int, list[Pick]] = {}
        for call in self._calls:
            names.setdefault(call.iteration, []).append(call.name)
            picks.setdefault(call.iteration, []).extend(call.picks())
        for state in passes:
            if state.iteration in names:
                continue
            calls = state.output_calls
            if calls is None:
                calls = state.output_calls = _output_calls(state.span)
            for name, arguments in calls or ():
                names.setdefault(state.iteration, []).append(name)
                picks.setdefault(state.iteration, []).extend(
                    picks_of(name, arguments, False, (), False)
                )
        return {
            it: Batch(it, tuple(names[it]), tuple(picks.get(it, ())), cursor_of.get(it))
            for it in names
        }


def _output_calls(span: object | None) -> Sequence[tuple[str, Any]] | None:
    """(name, arguments) of the tool calls an ended SDK pass span recorded in its output; None
    while the span has not ended (read again next time)."""
    if not isinstance(span, ReadableSpan):
        return ()
    if span.end_time is None:
        return None
    found = output_tool_calls(SdkSpanView(span)) or ()
    return [(call.name, loads(call.arguments_text)[0]) for call in found]


def rode_card(injection_id: str | None) -> bool:
    """True when an injected row is the park card (it rides into the next pass's served set)."""
    return injection_id == PARK_CARD_ID


def note_injected(state: PassState, source: str, source_id: str | None) -> None:
    """What one injected row tells the policy: served, the park card, a contribution served."""
    if source_id is None:
        return
    state.served_ids.add(source_id)
    state.card_rode = state.card_rode or rode_card(source_id)
    if (
        source not in CONVERSATION_SOURCES
        and not rode_card(source_id)
        and source_id not in state.injected_ids
    ):
        state.injected_ids.append(source_id)


class PassPolicy:
    """One pass's side of the policy: what :class:`~otel_footprint.record.ModelCall` delegates to
    in a ``policy=True`` run (the TypeScript recorder's ``PassPolicy`` is the same)."""

    def __init__(self, live: LivePolicy, state: PassState) -> None:
        self._live = live
        self.state = state
        self._planned_move: dict[str, Any] | None = None
        self._evaluations: list[dict[str, Any]] = []

    @property
    def decision(self) -> Decision | None:
        return self.state.decision

    def plan(self, move: dict[str, Any] | None) -> Decision:
        if self.state.decision is not None and move is not None and move != self._planned_move:
            raise ValueError(
                "plan() asked with another cursor move than this pass was decided on "
                "(by an earlier plan() or evaluated())"
            )
        return self._decide(move)

    def evaluated(self, move: dict[str, Any] | None, payload: dict[str, Any]) -> None:
        """An evaluation of the pass: decided on its move (or the planned one); written when the
        pass closes, because what it served is known only once it is composed."""
        if self.state.decision is not None:
            if move is None:
                move = self._planned_move  # the move plan() was asked with
            elif move != self._planned_move:
                raise ValueError(
                    "evaluated() states another cursor move than plan() was asked with: "
                    "the record would not be what the kernel decided on"
                )
        self._decide(move)
        self._evaluations.append({**payload, "cursorMove": move})

    def injected(self, source: str, source_id: str | None) -> None:
        note_injected(self.state, source, source_id)

    def keep(self, injection_id: str, chars: int) -> bool:
        if self._asked().keeps(injection_id):
            return True
        self.state.left_out[injection_id] = chars  # counted when the pass closes
        return False

    def tools(self, definitions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        decision = self._asked()
        kept: list[Mapping[str, Any]] = []
        for definition in definitions:
            name = tool_name_of(definition)
            if name is None or decision.keeps_tool(name):
                kept.append(definition)
            else:
                chars = definition_chars(definition)
                self._live.savings.left_out(self.state.iteration, chars, injection=False)
        return kept

    def close(
        self,
        write_evaluation: Callable[[dict[str, Any]], None],
        write_change: Callable[[EngagementChange], None],
    ) -> None:
        """When the pass closes (once): its evaluations, final, then the changes the agent
        applied, and what it left out counted."""
        state = self.state
        if state.written:
            return
        if state.decision is None:
            self._decide(None)  # every pass advances the kernel, as the processor's replay does
        elif not self._evaluations:
            # Asked with plan() and no evaluation stated: the pass served what it injected.
            self._evaluations.append(
                {
                    "iteration": state.iteration,
                    "activeIds": list(state.injected_ids),
                    "skippedDetails": [],
                    "cursorMove": self._planned_move,
                }
            )
        state.written = True
        decision = state.decision
        assert decision is not None
        for payload in self._evaluations:
            # A parked member the pass did not inject was left out: not served, skipped as parked
            # (as the upstream records it); one it injected was served, policy or not.
            listed = payload["activeIds"]
            active = [i for i in listed if decision.keeps(i) or i in state.served_ids]
            payload["skippedDetails"] = [
                *payload["skippedDetails"],
                *({"id": i, "reason": "parked"} for i in listed if i not in active),
            ]
            state.active_ids = tuple(active)
            payload["activeIds"] = active
            write_evaluation(payload)
        self._evaluations.clear()
        self._live.count_left_out(state)
        for change in self._live.applied(state):
            write_change(change)

    def _asked(self) -> Decision:
        decision = self.state.decision
        if decision is None:
            raise ValueError("ask the policy first: call plan() on this pass before keep()/tools()")
        return decision

    def _decide(self, move: dict[str, Any] | None) -> Decision:
        state = self.state
        if state.decision is None:
            self._planned_move = move
            if move is not None:
                state.current_node = move.get("to")
                state.move_by = move.get("by")
                witness = move.get("witness")
                state.witness = witness.get("text") if isinstance(witness, Mapping) else None
            self._live.decide(state)
        assert state.decision is not None
        return state.decision
