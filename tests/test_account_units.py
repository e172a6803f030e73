"""Unit: templates, carried-verdict JSON, declarations, the delivery proof, checks 2–3 and bounds."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from _shared import SHARED, SPEC
from account_fixtures import LegBuilder

from otel_footprint.account import (
    CarriedVerdict,
    CarriedVerdictError,
    Declarations,
    Pointer,
    RoutingVerdict,
    Score,
    account_for,
    account_to_dict,
    delivery_complete,
    routing_verdict_of,
    verdict_to_carry,
)
from otel_footprint.account.checks import calls_of
from otel_footprint.account.integrity.texts import TEXTS as INTEGRITY_TEXTS
from otel_footprint.account.pointers import json_path
from otel_footprint.account.templates import (
    CHIPS,
    TEMPLATES,
    FillError,
    fill,
    number_text,
    placeholders,
    weakest,
)
from otel_footprint.account.view import LegView, leg_view


def routed_leg(
    route: dict[str, Any] | None = None,
    *,
    delivered: tuple[str, ...] = ("billing",),
    graph: bool = True,
    answered: bool = True,
) -> LegBuilder:
    leg = LegBuilder("unit")
    leg.event(
        "agent.run_configured", {"agentId": "a", "skillGraph": {}} if graph else {"agentId": "a"}
    )
    leg.event("agent.turn_start", {"turnIndex": 0, "userPrompt": "please refund my order"})
    if route is not None:
        leg.event("skill.turn_routed", route)
    leg.system_prompt(1, delivered)
    if answered:
        leg.event("agent.turn_end", {"turnIndex": 0})
    return leg


def understood_ids(leg: LegBuilder, **kwargs: Any) -> list[str]:
    return [line.template_id for line in account_for(leg.build(**kwargs)).row("understood")]


# ── templates ────────────────────────────────────────────────────────────────────────────────


def test_every_template_fills_with_its_own_placeholders() -> None:
    for template_id in TEMPLATES:
        values = {name: f"<{name}>" for name in placeholders(template_id)}
        text = fill(template_id, values)
        assert not re.search(r"\{[A-Za-z]+\}", text), template_id
    with pytest.raises(FillError, match="no value for"):
        fill("understood.intent", {})


INTEGRITY_SPEC = SHARED / "spec" / "integrity-reference.md"
QUOTE_FRAGMENT = 32
"""A run of this many characters shared with a reference's text counts as copied wording."""


def _copied(texts: dict[str, str], reference: str) -> list[tuple[str, str]]:
    """(id, fragment) of every text that shares a placeholder-free run of QUOTE_FRAGMENT or more
    characters with ``reference`` (whitespace-normalised)."""
    reference = re.sub(r"\s+", " ", reference)
    found = []
    for text_id, text in texts.items():
        for fragment in re.split(r"\{[A-Za-z]+\}", text):
            fragment = re.sub(r"\s+", " ", fragment).strip()
            for start in range(max(len(fragment) - QUOTE_FRAGMENT + 1, 0)):
                window = fragment[start : start + QUOTE_FRAGMENT]
                if window in reference:
                    found.append((text_id, window))
                    break
    return found


@pytest.mark.skipif(not SPEC.is_file(), reason="reference not present")
def test_no_template_reproduces_a_reference_sentence() -> None:
    reference = SPEC.read_text(encoding="utf-8")
    texts = {t.id: t.text for t in TEMPLATES.values()}
    texts.update({c.id: c.text for c in CHIPS.values()})
    assert _copied(texts, reference) == []
    assert not any(t.quoted for t in TEMPLATES.values())


@pytest.mark.skipif(not INTEGRITY_SPEC.is_file(), reason="reference not present")
def test_no_integrity_text_reproduces_a_reference_sentence() -> None:
    reference = INTEGRITY_SPEC.read_text(encoding="utf-8")
    assert _copied(dict(INTEGRITY_TEXTS), reference) == []


def test_the_copy_detector_can_fail() -> None:
    reference = "The library's routing picked the billing skill because a rule matched."
    assert _copied({"x": "The library's routing picked the {skill}."}, reference) != []


def test_fill_is_not_recursive() -> None:
    text = fill("understood.rule.witness", {"skill": "{witness} skill", "witness": "VIP"})
    assert text.startswith("The {witness} skill was chosen by the library's router")


def test_a_skill_id_that_looks_like_a_placeholder_stays_literal() -> None:
    leg = routed_leg({"by": "intent", "to": "{witness}"}, delivered=("{witness}",))
    line = account_for(leg.build()).row("understood")[0]
    assert line.text == "The {witness} skill was chosen by the library's router."


def test_vouchers_order_and_numbers() -> None:
    assert weakest(["person", "library"]) == "library"
    assert weakest(["library", "tool:x"]) == "tool:x"
    assert weakest(["tool:x", "model", "person"]) == "model"
    assert weakest(["model", "app"]) == "app"
    assert [number_text(v) for v in (1, 1.0, 0, 0.5, 0.7071067811865475)] == [
        "1",
        "1",
        "0",
        "0.5",
        "0.7071067811865475",
    ]


def test_json_path_escapes_rfc_6901() -> None:
    assert json_path("a/b", "c~d", 0) == "/a~1b/c~0d/0"
    assert json_path() is None


# ── verdict lines ────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("route", "first"),
    [
        ({"by": "continuity", "from": "billing", "to": "billing"}, "understood.continuity"),
        (
            {"by": "decider", "to": "billing", "decider": {"provider": "p", "model": "m-1"}},
            "understood.decider",
        ),
        ({"by": "decider", "to": "billing"}, "understood.decider.noModel"),
        ({"by": "entry", "to": "billing"}, "understood.rule"),
        ({"by": "menu", "offered": []}, "understood.menu.bare"),
        ({"by": "none"}, "understood.none"),
        ({"by": "intent"}, "understood.none"),  # a library decision without `to` decides nothing
    ],
)
def test_verdict_line_per_by(route: dict[str, Any], first: str) -> None:
    account = account_for(routed_leg(route).build())
    assert account.row("understood")[0].template_id == first
    applies = first not in ("understood.menu.bare", "understood.none")
    assert (account.check("decided-delivered").state != "not-applicable") == applies


def test_decider_line_names_the_model_and_is_model_vouched() -> None:
    route = {"by": "decider", "to": "billing", "decider": {"provider": "p", "model": "m-1"}}
    line = account_for(routed_leg(route).build()).row("understood")[0]
    assert line.text == "A dedicated routing model (m-1) chose the billing skill."
    assert line.source == "model"


def test_graph_title_wins_over_the_declared_label() -> None:
    leg = LegBuilder("titles")
    leg.event("agent.run_configured", {"skillGraph": {}})
    leg.event("skill.graph_declared", {"nodes": [{"id": "billing", "title": "Billing desk"}]})
    leg.event("skill.turn_routed", {"by": "intent", "to": "billing"})
    leg.system_prompt(1, ["billing"])
    leg.event("agent.turn_end", {})
    labels = Declarations.of(skill_labels={"billing": "refunds"})
    line = account_for(leg.build(declarations=labels)).row("understood")[0]
    assert line.text == "The Billing desk skill (billing) was chosen by the library's router."


def test_scores_line_needs_the_pick_on_top() -> None:
    scores = [{"id": "shipping", "score": 0.9}, {"id": "billing", "score": 0.1}]
    ids = understood_ids(routed_leg({"by": "intent", "to": "billing", "scores": scores}))
    assert "understood.scores" not in ids and "understood.scores.allOthers" not in ids


def test_unreadable_by_is_counted_and_never_read_as_none() -> None:
    account = account_for(routed_leg({"by": 7, "to": "billing"}).build())
    assert account.row("understood")[0].template_id == "understood.notRecorded"
    assert account.unread == 1


def test_carried_verdict_is_used_on_resumed_legs_only() -> None:
    carried = verdict_to_carry(routed_leg({"by": "intent", "to": "billing"}).build())
    assert carried is not None
    fresh = routed_leg(None)
    assert routing_verdict_of(fresh.build(carried=carried)) is None
    resumed = routed_leg(None)
    resumed.event("pause.resume", {"resumeInput": {"input": "ok"}})
    verdict = routing_verdict_of(resumed.build(carried=carried))
    assert verdict is not None and verdict.origin == "carried" and verdict.to == "billing"


def test_an_events_verdict_wins_over_a_carried_one() -> None:
    carried = verdict_to_carry(routed_leg({"by": "intent", "to": "shipping"}).build())
    leg = routed_leg({"by": "intent", "to": "billing"})
    leg.event("pause.resume", {})
    verdict = routing_verdict_of(leg.build(carried=carried))
    assert verdict is not None and (verdict.origin, verdict.to) == ("event", "billing")


# ── carried verdict JSON ─────────────────────────────────────────────────────────────────────


def test_carried_verdict_round_trips() -> None:
    where = Pointer("a" * 32, "b" * 16, "footprint.skill.turn_routed", 3, "footprint.to")
    verdict = RoutingVerdict(
        by="entry",
        origin="held",
        to="vip",
        from_="billing",
        decisive=True,
        scorer="keyword",
        witness="VIP",
        offered=2,
        decider_model="m",
        top=Score("vip", 1.0),
        next=Score(None, 0),
        others_equal=True,
        pointers=(("by", where), ("to", Pointer("c" * 32, "d" * 16, attribute="x"))),
    )
    carried = CarriedVerdict(verdict, "hello", where)
    assert CarriedVerdict.from_json(carried.to_json()) == carried
    assert CarriedVerdict.from_json(carried.to_json().encode()) == carried
    assert carried.trace_id == "a" * 32
    assert CarriedVerdict.from_json(CarriedVerdict(RoutingVerdict("none", "event")).to_json()) == (
        CarriedVerdict(RoutingVerdict("none", "event"))
    )


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("not json", "not JSON"),
        ('{"kind":"other","shape":1}', "$:"),
        (
            '{"kind":"otel-footprint/carried-verdict","shape":1,"verdict":{"origin":"event"}}',
            "$.verdict.by",
        ),
        (
            '{"kind":"otel-footprint/carried-verdict","shape":1,"verdict":{"by":"x","origin":"event","offered":true}}',
            "$.verdict.offered",
        ),
        (
            '{"kind":"otel-footprint/carried-verdict","shape":1,"verdict":{"by":"x","origin":"guess"}}',
            "$.verdict.origin",
        ),
        (
            '{"kind":"otel-footprint/carried-verdict","shape":1,"verdict":{"by":"x","origin":"event",'
            '"pointers":{"by":{"traceId":1}}}}',
            "$.verdict.pointers.by.traceId",
        ),
    ],
)
def test_carried_verdict_rejects_bad_json_naming_the_path(text: str, path: str) -> None:
    with pytest.raises(CarriedVerdictError, match=re.escape(path)):
        CarriedVerdict.from_json(text)


def test_no_verdict_carries_nothing_and_overlong_ids_are_not_carried() -> None:
    assert verdict_to_carry(routed_leg(None).build()) is None
    assert verdict_to_carry(routed_leg({"by": "intent", "to": "x" * 2001}).build()) is None


def test_declarations_from_mapping() -> None:
    declarations = Declarations.from_mapping(
        {
            "routing": {"appDecides": True},
            "skills": {"vip": {"label": "VIP desk"}, "other": {}},
            "tools": {"find": {"rowsAt": "rows"}},
        }
    )
    assert declarations.app_decides
    assert declarations.label_of("vip") == "VIP desk" and declarations.label_of("other") is None
    assert declarations.rows_at_of("find") == "rows"
    with pytest.raises(ValueError, match=r"tools\.find\.rowsAt"):
        Declarations.from_mapping({"tools": {"find": {"rowsAt": 3}}})
    with pytest.raises(ValueError, match="routing"):
        Declarations.from_mapping({"routing": []})


# ── the delivery proof ───────────────────────────────────────────────────────────────────────


def test_delivery_complete_rules() -> None:
    leg = LegBuilder("proof")
    leg.system_prompt(1, ["a"])
    leg.system_prompt(2)  # no skill key: zero rows expected
    view = LegView(leg.events)
    assert delivery_complete(view, 2)
    assert not delivery_complete(view, None)
    assert not delivery_complete(view, 0)
    assert not delivery_complete(view, 3)  # iteration 3 has no composition
    assert not delivery_complete(view, 10**12)  # and a huge N costs nothing


def test_delivery_complete_needs_a_readable_breakdown_and_composition_ids() -> None:
    for breakdown in (None, "x", {"skill": {"count": "1"}}, {"skill": 1}):
        leg = LegBuilder("broken")
        leg.event(
            "context.slot_composed",
            {"slot": "system-prompt", "iteration": 1, "sourceBreakdown": breakdown},
            composition_id="c1",
        )
        assert not delivery_complete(LegView(leg.events), 1), breakdown
    leg = LegBuilder("no-id")
    leg.event(
        "context.slot_composed",
        {"slot": "system-prompt", "iteration": 1, "sourceBreakdown": {"base": {"count": 1}}},
    )
    assert not delivery_complete(LegView(leg.events), 1)


def test_the_last_composition_of_an_iteration_counts() -> None:
    leg = LegBuilder("recompose")
    leg.system_prompt(1, ["a"], count=2, composition_id="first")  # incomplete
    leg.system_prompt(1, ["a"], composition_id="second")  # recomposed, complete
    assert delivery_complete(LegView(leg.events), 1)


# ── check 2: existence ───────────────────────────────────────────────────────────────────────


def coverage(call_id: str, name: str | None = "find", **lists: Any) -> tuple[str, dict[str, Any]]:
    payload: dict[str, Any] = {"toolCallId": call_id, "iteration": 1, **lists}
    if name is not None:
        payload["toolName"] = name
    return ("tools.coverage_declared", payload)


def tools_leg(
    *calls: tuple[str | None, str | None, list[tuple[str, dict[str, Any]]]],
) -> LegBuilder:
    leg = routed_leg(None, graph=False, answered=False)
    for i, (name, result, events) in enumerate(calls, 1):
        leg.tool(name, result, call_id=f"c{i}", events=events)
    leg.event("agent.turn_end", {})
    return leg


def test_existence_item_is_a_warn_signal_vouched_by_the_tool() -> None:
    items = [
        {
            "what": "whether the volume exists",
            "short": "that the volume exists",
            "kind": "existence",
        }
    ]
    account = account_for(tools_leg(("find", "[1]", [coverage("c1", notChecked=items)])).build())
    check = account.check("existence")
    assert (check.state, check.label) == ("reachable", "fail")
    assert [(s.signal_id, s.tone) for s in account.signals] == [("existence-not-checked", "warn")]
    line = next(x for x in account.row("anything-wrong") if x.template_id.startswith("signal."))
    assert line.text == "find reports not having checked that the volume exists."
    assert line.source == "tool:find"
    assert line.pointers[0].json_path == "/0"
    assert account.summary.tone == "warn"


def test_cannot_cover_and_full_variants() -> None:
    items = [{"what": "archived volumes", "kind": "existence"}]
    account = account_for(tools_leg(("find", "[1]", [coverage("c1", cannotCover=items)])).build())
    assert (
        account.signals[0].sentence == "find reports being unable ever to check archived volumes."
    )


def test_existence_unreachable_without_kinds_and_it_sticks() -> None:
    kindless = [{"what": "archived volumes"}]
    kinded = [{"what": "x", "kind": "scope"}]
    leg = tools_leg(
        ("find", "[1]", [coverage("c1", notChecked=kinded)]),
        ("find", "[1]", [coverage("c2", notChecked=kindless)]),
    )
    account = account_for(leg.build())
    check = account.check("existence")
    assert check.state == "unreachable"
    assert check.sentence == (
        "Whether find checked that the requested thing exists cannot be shown: the items it left unchecked carry no kind."
    )


def test_existence_unreachable_for_an_unnamed_call() -> None:
    items = [{"what": "x", "kind": "existence"}]
    account = account_for(
        tools_leg((None, "[1]", [coverage("c1", name=None, notChecked=items)])).build()
    )
    assert account.check("existence").state == "unreachable"
    assert "unreachable.unnamed" in [line.template_id for line in account.lines]


def test_a_kind_on_a_checked_item_is_ignored() -> None:
    checked = [{"what": "x", "kind": "existence"}]
    account = account_for(tools_leg(("find", "[1]", [coverage("c1", checked=checked)])).build())
    assert account.check("existence").state == "not-applicable"


# ── check 3: empty results ───────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("result", "rows_at", "state", "signal"),
    [
        ("[]", None, "reachable", True),
        ("[1, 2]", None, "reachable", False),
        ('{"rows": []}', "rows", "reachable", True),
        ('{"rows": [1]}', "rows", "reachable", False),
        ('{"rows": []}', None, "unreachable", False),
        ('{"items": []}', "rows", "unreachable", False),
        ("no rows today", None, "reachable", False),
        ("[not json", None, "reachable", False),
        (None, None, "unreachable", False),
    ],
)
def test_empty_results(result: str | None, rows_at: str | None, state: str, signal: bool) -> None:
    declarations = Declarations.of(rows_at={"find": rows_at} if rows_at else None)
    account = account_for(tools_leg(("find", result, [])).build(declarations=declarations))
    assert account.check("empty-results").state == state
    assert [s.signal_id for s in account.signals] == (["undeclared-empty-used"] if signal else [])
    if signal:
        assert account.signals[0].sentence == (
            "In this answer, find came back empty without saying what it had searched."
        )
        assert account.signals[0].pointers[0].attribute == "gen_ai.tool.call.result"
        assert account.signals[0].pointers[0].event_name is None


def test_calls_known_only_from_coverage_events_keep_the_legs_order() -> None:
    """Both coverage event types, interleaved, for calls whose spans are in another leg: the
    calls are listed in the leg's order (the index is walked as a whole only when both are in)."""
    leg = tools_leg()
    names = ["first", "second", "third", "fourth"]
    for i, name in enumerate(names):
        kind = "tools.absent" if i % 2 else "tools.coverage_declared"
        leg.event(kind, {"toolCallId": f"x{i}", "toolName": name, "iteration": 1, "checked": []})
    inp = leg.build()
    calls, _ = calls_of(inp, leg_view(inp))
    assert [c.name for c in calls] == names


def test_declared_absence_is_not_an_undeclared_empty() -> None:
    absent = (
        "tools.absent",
        {"toolCallId": "c1", "toolName": "find", "iteration": 1, "checked": []},
    )
    account = account_for(tools_leg(("find", "[]", [absent])).build())
    assert account.signals == ()
    assert "found.absent" in [line.template_id for line in account.lines]
    # The tool's own status ``absent`` declares it too.
    status_leg = tools_leg(("find", "[]", []))
    status_leg.tool_calls[0] = status_leg.tool_calls[0]._replace(status="absent")
    assert account_for(status_leg.build()).signals == ()
    assert account_for(tools_leg(("find", "[]", [])).build()).signals != ()


def test_failed_and_refused_calls_are_counted_and_not_judged() -> None:
    leg = routed_leg(None, graph=False, answered=False)
    leg.tool("find", None, call_id="c1", error=True)
    leg.tool(
        "find",
        "[]",
        call_id="c2",
        events=[
            ("permission.check", {"capability": "tool_call", "target": "find", "result": "deny"})
        ],
    )
    leg.tool(
        "read_skill",
        "ok",
        call_id="c3",
        events=[
            (
                "permission.check",
                {"capability": "skill_read", "target": "skill:vip", "result": "deny"},
            )
        ],
    )
    leg.event("agent.turn_end", {})
    account = account_for(leg.build())
    wrong = next(x for x in account.row("anything-wrong") if x.template_id == "wrong.errors")
    assert wrong.text == (
        "2 tool calls had trouble: 1 failed, 1 blocked by a rule, 0 turned down by a person, 0 never ran."
    )
    assert account.signals == ()  # the refused call's "[]" is not judged
    assert [line.template_id for line in account.row("checked")] == [
        "checked.failed",
        "checked.refused",
        "checked.undeclared",
    ]


# ── summaries and bounds ─────────────────────────────────────────────────────────────────────


def test_summary_nothing_run() -> None:
    leg = tools_leg(("find", None, []))  # check 3 unreachable; 1 and 2 do not apply
    account = account_for(leg.build())
    assert (account.summary.template_id, account.summary.tone) == (
        "summary.none.nothingRun",
        "unknown",
    )
    assert "wrong.unreachable.all" in [line.template_id for line in account.lines]


def test_signals_are_bounded_and_the_rest_counted() -> None:
    items = [
        {"what": f"thing {i}", "short": f"thing {i}", "kind": "existence"} for i in range(3000)
    ]
    account = account_for(tools_leg(("find", "[1]", [coverage("c1", notChecked=items)])).build())
    assert len(account.signals) == 12
    wrong = account.row("anything-wrong")
    assert sum(1 for line in wrong if line.template_id.startswith("signal.")) == 3
    assert wrong[-1].text == "…plus 2997 more, not shown."
    assert len(json.dumps(account_to_dict(account))) <= 128 * 1024
    bullets = [line for line in account.row("not-checked") if line.item]
    assert len(bullets) <= 12


def test_pointers_per_line_are_capped_at_twelve() -> None:
    leg = LegBuilder("many-passes")
    leg.event("agent.run_configured", {"skillGraph": {}})
    leg.event("skill.turn_routed", {"by": "intent", "to": "vip"})
    for i in range(1, 31):
        leg.system_prompt(i, ["billing"])
    leg.event("agent.turn_end", {})
    account = account_for(leg.build())
    assert account.check("decided-delivered").outcome == "not-delivered"
    assert max(len(line.pointers) for line in account.lines) == 12
    assert all(len(c.pointers) <= 12 for c in account.checks)


def test_a_long_question_is_cut_within_the_long_text_budget() -> None:
    leg = LegBuilder("long")
    leg.event("agent.turn_start", {"userPrompt": "x" * 50_000})
    leg.event("agent.turn_end", {})
    line = account_for(leg.build()).row("asked")[0]
    assert len(line.text) <= 2_000 + 2 and line.text.endswith("…”")
