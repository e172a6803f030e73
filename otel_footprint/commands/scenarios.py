"""Scripted agents for the demo and the tests: no model, no network, the reference's known runs.

Each scenario drives a tiny ReAct loop (cursor, injections, tools) and records it with the recorder
(``otel_footprint.record``): the 30-call stuck turn (verify: the agent runs the kernel; shadow: it
does not), the recovery by an explicit pick, and a routed run whose decided skill is / is not
delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry._logs import LoggerProvider
from opentelemetry.trace import Tracer

from otel_footprint import record as footprint
from otel_footprint import semconv
from otel_footprint.kernel.lease import advance_engagement
from otel_footprint.kernel.park_card import PARK_CARD_ID, park_card
from otel_footprint.kernel.plan import parked_member_ids
from otel_footprint.kernel.types import (
    EngagementPass,
    EngagementPlan,
    MapEngagementRecord,
    MountedMap,
    ToolResult,
)

BASE_PROMPT = "You are the operations assistant. Answer from the tools' results."
SKILL_BODIES: Mapping[str, str] = {
    "zone-audit": "ZONE AUDIT PROCEDURE: list zones, call get_zone_info for each, compare. " * 4,
    "billing": "BILLING: look the order up, explain the charge, offer a refund when due. " * 3,
    "shipping": "SHIPPING: find the parcel, read its last scan, say when it will arrive. " * 3,
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One scripted tool call of a pass."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    result: str = "ok"
    error: bool = False


@dataclass(frozen=True, slots=True)
class Route:
    """The turn-start routing verdict the scripted agent records (``skill.turn_routed``)."""

    by: str
    to: str
    scores: tuple[tuple[str, float], ...] = ()
    witness: str | None = None


@dataclass(frozen=True, slots=True)
class Script:
    """A scripted run: per pass, the tool calls the "model" asks for (the last pass answers)."""

    run_id: str
    prompt: str
    passes: tuple[tuple[ToolCall, ...], ...]
    answer: str
    plan: EngagementPlan
    kernel: bool
    """True: the agent runs the kernel itself (verify mode); False: it does not (shadow)."""
    entry: tuple[str, str] | None = None
    """(keyword, skill): an entry rule that places the cursor on pass 1 when the prompt has it."""
    route: Route | None = None
    deliver: Callable[[str | None], str | None] | None = None
    """Which skill the agent actually injects for the cursor's skill (None: the cursor's own)."""


@dataclass(slots=True)
class _Loop:
    """The scripted agent's state between passes."""

    cursor: str | None = None
    engagement: tuple[MapEngagementRecord, ...] = ()
    served: tuple[str, ...] = ()
    last_tools: tuple[str, ...] = ()
    picks: tuple[str, ...] = ()


def run_script(
    tracer: Tracer,
    script: Script,
    *,
    emit_as: footprint.EmitAs = "span",
    logger_provider: LoggerProvider | None = None,
) -> None:
    """Emit one run of ``script`` through ``tracer`` with the recorder (a new trace per run);
    ``emit_as="log"`` writes its footprint events as log records through ``logger_provider``."""
    members = [m for mounted in script.plan.maps for m in mounted.member_ids]
    with footprint.run(
        tracer,
        emit_as=emit_as,
        logger_provider=logger_provider,
        agent="ops-assistant",
        run_id=script.run_id,
        maps=script.plan.maps,
        renewal_grace=script.plan.renewal_grace,
        enforced=script.kernel,
        user_prompt=script.prompt,
        configured={
            "skillGraph": {"routing": "classify"} if script.route else {},
            "reactMode": "dynamic",
        },
        graph={"nodes": [{"id": m} for m in members], "edges": []},
    ) as run:
        loop = _Loop()
        if script.route is not None:
            route = script.route
            run.routed(
                route.by,
                to=route.to,
                decisive=True,
                scorer="keyword" if route.scores else None,
                scores=[{"id": i, "score": s} for i, s in route.scores] or None,
                witness=route.witness,
            )
            loop.cursor = route.to
        for index, calls in enumerate(script.passes, start=1):
            _one_pass(run, script, loop, index)
            for call in calls:
                _tool(run, script, loop, call)
            loop.last_tools = tuple(c.name for c in calls) if calls else loop.last_tools
        run.answer(script.answer)


@dataclass(frozen=True, slots=True)
class _Move:
    to: str
    by: str
    source: str | None = None
    witness: str | None = None


def _move(script: Script, loop: _Loop, index: int) -> _Move | None:
    if index == 1 and script.route is not None:
        return _Move(script.route.to, script.route.by)
    if index == 1 and script.entry is not None:
        keyword, skill = script.entry
        if keyword in script.prompt.lower():
            loop.cursor = skill
            return _Move(skill, "entry", witness=keyword)
    if loop.cursor is None:
        return None
    return _Move(loop.cursor, "stay", source=loop.cursor)


def _one_pass(run: footprint.Run, script: Script, loop: _Loop, index: int) -> None:
    with run.model_call("scripted", provider="scripted") as call:
        move = _move(script, loop, index)
        active = list(dict.fromkeys(s for s in (loop.cursor, *loop.picks) if s is not None))
        parked: tuple[str, ...] = ()
        card: str | None = None
        if script.kernel:
            # Verify mode: the agent runs the kernel itself and reports its decisions.
            advance = advance_engagement(
                script.plan,
                loop.engagement,
                EngagementPass(
                    iteration=index,
                    current_node=move.to if move else None,
                    move_by=move.by if move else None,
                    witness=move.witness if move else None,
                    tool_results=tuple(ToolResult(t) for t in loop.last_tools),
                    accepted_skill_picks=loop.picks,
                    served_last_pass=loop.served,
                ),
            )
            for change in advance.changes:
                call.engagement(change)
            loop.engagement = advance.next
            parked = parked_member_ids(script.plan, loop.engagement)
            card = park_card(script.plan, loop.engagement)
        active = [a for a in active if a not in parked]
        call.evaluated(
            active,
            cursor_to=move.to if move else None,
            moved_by=move.by if move else None,
            cursor_from=move.source if move else None,
            witness=move.witness if move else None,
            witness_keyword=move.witness if move else None,
            skipped=[{"id": m, "reason": "parked"} for m in parked],
        )
        call.injected("system-prompt", "base", source_id="base", content=BASE_PROMPT)
        for skill in active:
            given = script.deliver(skill) if script.deliver else skill
            if given is not None:
                body = SKILL_BODIES.get(given, given)
                call.injected("system-prompt", "skill", source_id=given, content=body)
        if card is not None:
            call.injected("system-prompt", "steering", source_id=PARK_CARD_ID, content=card)
        call.composed("system-prompt")
        loop.served = tuple(active) + ((PARK_CARD_ID,) if card else ())
        loop.picks = ()


def _tool(run: footprint.Run, script: Script, loop: _Loop, call: ToolCall) -> None:
    with run.tool_call(call.name, args=call.arguments) as tool:
        if call.name == semconv.READ_SKILL_TOOL:
            skill = str(call.arguments.get("id", ""))
            parked = parked_member_ids(script.plan, loop.engagement) if script.kernel else ()
            tool.picked(skill)
            if skill not in parked:
                loop.cursor = skill  # an ordinary pick moves the cursor; a parked one re-engages
            loop.picks = (*loop.picks, skill)
        tool.result(call.result, error=call.error)


# ── the scenarios ─────────────────────────────────────────────────────────────────────────────

TRAP_PLAN = EngagementPlan(
    maps=(MountedMap("skill-map", ("zone-audit", "billing"), ("get_zone_info",)),),
    renewal_grace=3,
)
ROUTED_PLAN = EngagementPlan(maps=(MountedMap("skill-map", ("billing", "shipping"), ()),))
TRAP_PROMPT = "find the most recent zone redundancy run"
SCREEN = ToolCall("screen_open", {"screen": "runs"}, '[{"run": "run-41"}, {"run": "run-42"}]')


def _stuck(kernel: bool) -> Script:
    # The recorded 30-call stuck turn: a lexical guess ("zone") engages zone-audit, the model
    # never uses it, and 29 screen_open calls later it answers. The kernel parks it on call four.
    return Script(
        run_id=f"stuck-30-{'verify' if kernel else 'shadow'}",
        prompt=TRAP_PROMPT,
        passes=(*((SCREEN,) for _ in range(29)), ()),
        answer="The most recent zone redundancy run is run-42.",
        plan=TRAP_PLAN,
        kernel=kernel,
        entry=("zone", "zone-audit"),
    )


def _recovery() -> Script:
    return Script(
        run_id="recovery-explicit-pick",
        prompt=TRAP_PROMPT,
        passes=(
            (SCREEN,),
            (SCREEN,),
            (SCREEN,),
            (ToolCall("read_skill", {"id": "billing"}, "Skill 'billing' activated"),),
            (),
        ),
        answer="Run-42 billed 3 zones.",
        plan=TRAP_PLAN,
        kernel=True,
        entry=("zone", "zone-audit"),
    )


def _routed(delivered: bool) -> Script:
    return Script(
        run_id=f"routed-{'delivered' if delivered else 'not-delivered'}",
        prompt="please refund my order 1182",
        passes=(
            (
                ToolCall(
                    "lookup_order", {"id": "1182"}, '[{"order": 1182, "status": "charged twice"}]'
                ),
            ),
            (),
        ),
        answer="Order 1182 was charged twice; a refund is on its way.",
        plan=ROUTED_PLAN,
        kernel=False,
        route=Route("intent", "billing", (("billing", 0.91), ("shipping", 0.12))),
        # The broken variant composes the shipping skill where billing was decided.
        deliver=None if delivered else (lambda skill: "shipping" if skill == "billing" else skill),
    )


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named scripted run and what it shows."""

    name: str
    description: str
    script: Script


SCENARIOS: Mapping[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "stuck-verify",
            "the 30-call stuck turn; the agent runs the kernel, which parks zone-audit on call 4",
            _stuck(kernel=True),
        ),
        Scenario(
            "stuck-shadow",
            "the same turn without a kernel: what would have parked, and what kept riding",
            _stuck(kernel=False),
        ),
        Scenario(
            "recovery",
            "parked on call 4, then the model reads the billing skill: re-engaged by explicit pick",
            _recovery(),
        ),
        Scenario(
            "routed-delivered",
            "routing decided the billing skill and it was given to the model (check 1: delivered)",
            _routed(delivered=True),
        ),
        Scenario(
            "routed-not-delivered",
            "routing decided billing but the shipping skill was composed (check 1: not delivered)",
            _routed(delivered=False),
        ),
    )
}


def run_scenarios(tracer: Tracer, names: Sequence[str] | None = None) -> list[Scenario]:
    """Run the named scenarios (all by default) through ``tracer``; each run is its own trace."""
    chosen = [SCENARIOS[n] for n in names] if names else list(SCENARIOS.values())
    for scenario in chosen:
        run_script(tracer, scenario.script)
    return chosen
