"""Functional: the reference's account cases (§6.5) as event sequences — A, D, E, F, H1–H5, R1–R3."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from account_fixtures import LegBuilder

from otel_footprint import semconv
from otel_footprint.account import (
    AccountInput,
    Declarations,
    account_for,
    account_json_size,
)
from otel_footprint.account.model import Line

SUPPORT_NODES = [
    {"id": "billing", "kind": "skill", "label": "billing"},
    {"id": "shipping", "kind": "skill", "label": "shipping"},
    {"id": "other", "kind": "skill", "label": "other"},
]
GRAPH = {"routing": "assist", "continuity": "turn", "scorer": "keyword"}


def ids(lines: Sequence[Line]) -> list[str]:
    return [line.template_id for line in lines]


def texts(lines: Sequence[Line]) -> list[str]:
    return [line.text for line in lines]


def start(
    leg: LegBuilder, *, graph: dict[str, Any] | None = GRAPH, prompt: str | None = None
) -> None:
    configured: dict[str, Any] = {"agentId": "agent", "reactMode": "dynamic"}
    if graph is not None:
        configured["skillGraph"] = graph
    leg.event("agent.run_configured", configured)
    if graph is not None:
        leg.event("skill.graph_declared", {"nodes": SUPPORT_NODES, "edges": []})
    if prompt is not None:
        leg.event("agent.turn_start", {"turnIndex": 0, "userPrompt": prompt})


def finish(leg: LegBuilder, answer: str = "done") -> None:
    leg.event("agent.turn_end", {"turnIndex": 0, "finalContent": answer})


# ── A: the fixture (intent verdict, app scores 1 vs 0, delivered, appDecides) ────────────────

A_DECLARATIONS = Declarations.of(
    app_decides=True, skill_labels={"array-inventory": "array estate report"}
)


def fixture_a(extra: Sequence[tuple[str, dict[str, Any]]] = ()) -> AccountInput:
    leg = LegBuilder("fixture-a")
    start(leg, prompt="how big is the array estate?")
    leg.event(
        "skill.turn_routed",
        {
            "by": "intent",
            "to": "array-inventory",
            "scorer": "keyword",
            "decisive": True,
            "scores": [
                {"id": "array-inventory", "score": 1, "relevance": 0.9},
                {"id": "volume-report", "score": 0, "relevance": 0.1},
                {"id": "other", "score": 0, "relevance": 0.1},
            ],
            "policy": {"nearTieMargin": 0.15, "menuSize": 3},
        },
    )
    for event_type, payload in extra:
        leg.event(event_type, payload)
    leg.system_prompt(1, ["array-inventory"])
    finish(leg)
    return leg.build(declarations=A_DECLARATIONS)


def test_a_fixture_intent_scores_delivered() -> None:
    account = account_for(fixture_a())
    row = account.row("understood")
    assert ids(row) == [
        "understood.intent",
        "understood.scores.allOthers",
        "understood.delivered",
        "understood.confidence.none",
        "understood.app.notRecorded",
    ]
    assert texts(row)[:3] == [
        "The array estate report skill (array-inventory) was chosen by the library's router.",
        "It ranked first in the app's scores: 1, with 0 for each other skill.",
        "The model had the skill in front of it when it answered.",
    ]
    assert [line.source for line in row] == ["library", "app", "library", "library", "app"]
    assert [c.text for c in row[2].chips] == ["decided and delivered"]
    assert row[2].chips[0].tone == "ok"
    check = account.check("decided-delivered")
    assert (check.state, check.outcome, check.label) == ("reachable", "delivered", "pass")
    assert account.signals == ()
    assert account.routing is not None and account.routing.scores is not None
    assert account.routing.scores.all_others_equal is True
    assert account.summary.template_id == "summary.none"


def test_a_pointers_name_the_verdict_event_and_the_delivered_row() -> None:
    account = account_for(fixture_a())
    intent, scores, delivered = account.row("understood")[:3]
    assert {p.attribute for p in intent.pointers} == {"footprint.by", "footprint.to"}
    assert all(p.event_name == semconv.EV_TURN_ROUTED for p in intent.pointers)
    assert [(p.attribute, p.json_path) for p in scores.pointers] == [
        ("footprint.scores", "/0/score"),
        ("footprint.scores", "/1/score"),
    ]
    assert [(p.event_name, p.attribute) for p in delivered.pointers] == [
        (semconv.EV_TURN_ROUTED, "footprint.to"),
        (semconv.EV_CONTEXT_INJECTED, "footprint.source_id"),
    ]


# ── D: entry rule with witness; synthetic not-delivered; unreachable ─────────────────────────


def fixture_d(
    *,
    delivered: Sequence[str] = ("vip",),
    count: int | None = None,
    rejected: bool = False,
    passes: int = 1,
) -> LegBuilder:
    leg = LegBuilder("fixture-d")
    start(leg, prompt="I am a VIP customer")
    leg.event(
        "skill.turn_routed",
        {
            "by": "entry",
            "to": "vip",
            "witness": {"text": "VIP", "keyword": "vip"},
            "policy": {"nearTieMargin": 0.15, "menuSize": 3},
        },
    )
    if rejected:
        leg.event(
            "skill.rejected",
            {"requestedId": "vip", "allowed": ["billing"], "iteration": 1},
            span=leg.tool_span("r1"),
        )
    for i in range(1, passes + 1):
        leg.system_prompt(i, delivered, count=count)
    finish(leg)
    return leg


def test_d_real_rule_witness_delivered() -> None:
    account = account_for(fixture_d().build())
    assert texts(account.row("understood"))[:2] == [
        "The vip skill was chosen by the library's router after an app rule matched the words “VIP”.",
        "The model had the skill in front of it when it answered.",
    ]
    witness_line = account.row("understood")[0]
    assert witness_line.source == "library"  # the weaker of library (verdict) and person (words)
    assert ("footprint.witness", "/text") in {
        (p.attribute, p.json_path) for p in witness_line.pointers
    }
    assert account.signals == ()


def test_d_synthetic_not_delivered_is_a_bad_signal() -> None:
    account = account_for(fixture_d(delivered=["billing"], rejected=True).build())
    row = account.row("understood")
    assert ids(row) == [
        "understood.rule.witness",
        "understood.rejected",
        "understood.notDelivered.other",
        "understood.confidence.none",
    ]
    assert row[1].text == "The skill graph blocked the vip skill from opening."
    assert (
        row[2].text
        == "The model never received the vip skill; it got the billing skill in its place."
    )
    assert [c.text for c in row[2].chips] == ["decided, not delivered"]
    assert [(s.signal_id, s.tone) for s in account.signals] == [("decided-not-delivered", "bad")]
    assert account.summary.sentence == (
        "The vip skill was chosen for this question, yet the model never received it."
    )
    assert account.summary.tone == "bad"
    check = account.check("decided-delivered")
    assert (check.state, check.outcome, check.label) == ("reachable", "not-delivered", "fail")
    # The proof of absence: every system-prompt composition is pointed at.
    assert any(p.event_name == semconv.EV_SLOT_COMPOSED for p in row[2].pointers)


def test_d_unreachable_when_skill_rows_are_missing() -> None:
    # The breakdown says one skill row; none is recorded: absence cannot be claimed.
    account = account_for(fixture_d(delivered=[], count=1).build())
    assert account.signals == ()
    assert [c.check_id for c in account.checks if c.state == "unreachable"] == ["decided-delivered"]
    assert "understood.delivery.unknown" in ids(account.row("understood"))
    wrong = account.row("anything-wrong")
    assert "unreachable.delivery" in ids(wrong)


@pytest.mark.parametrize("remove", ["slot_composed", "injected"])
def test_removing_one_composition_row_turns_not_delivered_into_unreachable(remove: str) -> None:
    leg = fixture_d(delivered=["billing"], passes=2)
    assert account_for(leg.build()).check("decided-delivered").outcome == "not-delivered"
    victim = next(
        e
        for e in reversed(leg.events)
        if e.type == f"context.{remove}"
        and e.payload.get("slot") == "system-prompt"
        and (remove == "slot_composed" or e.payload.get("source") == "skill")
    )
    leg.events.remove(victim)
    account = account_for(leg.build(answering_iteration=2))
    check = account.check("decided-delivered")
    assert (check.state, check.outcome) == ("unreachable", None)
    assert account.signals == ()
    assert "understood.notDelivered.other" not in ids(account.lines)


def test_not_delivered_needs_every_iteration_up_to_the_answer() -> None:
    leg = fixture_d(delivered=["billing"], passes=2)
    # The answering pass is 3 but no composition of iteration 3 is recorded.
    assert (
        account_for(leg.build(answering_iteration=3)).check("decided-delivered").state
        == "unreachable"
    )
    assert (
        account_for(leg.build(answering_iteration=2)).check("decided-delivered").state
        == "reachable"
    )


# ── E: nothing configured; unfinished ────────────────────────────────────────────────────────


def test_e_nothing_applies() -> None:
    leg = LegBuilder("fixture-e")
    start(leg, graph=None, prompt="hi")
    leg.system_prompt(1)
    finish(leg, "hello")
    account = account_for(leg.build())
    assert ids(account.row("understood")) == ["understood.notConfigured"]
    assert ids(account.row("checked")) == ["checked.noCalls"]
    assert ids(account.row("not-checked")) == ["notChecked.noCalls"]
    assert ids(account.row("found")) == ["found.noCalls"]
    assert ids(account.row("how-sure")) == ["howSure.standing.none", "howSure.evidence.off"]
    assert ids(account.row("anything-wrong")) == ["wrong.notApplicable"]
    assert [c.state for c in account.checks] == ["not-applicable"] * 3
    assert account.summary.template_id == "summary.none.notApplicable"
    assert account.summary.tone == "unknown"


def test_e_unfinished() -> None:
    leg = LegBuilder("fixture-e-unfinished")
    start(leg, graph=None, prompt="hi")
    leg.system_prompt(1)
    account = account_for(leg.build())
    assert (account.summary.template_id, account.summary.sentence, account.summary.tone) == (
        "summary.unfinished",
        "The record does not show this run reaching its end.",
        "unknown",
    )


# ── F: a resumed leg of an app that does not route ───────────────────────────────────────────


def test_f_resumed_without_graph() -> None:
    leg = LegBuilder("fixture-f")
    held = {"userMessage": "how many volumes last year?"}
    leg.event(
        "pause.resume",
        {
            "resumeInput": {"input": "2025"},
            "state": held,
            "pausedWith": {**held, "history": [{"role": "user", "content": "…"}]},
        },
    )
    start(leg, graph=None)
    leg.system_prompt(2)
    leg.tool("volume_count", "412", iteration=1)
    finish(leg, "412 volumes.")
    inp = leg.build()
    assert inp.resumed
    account = account_for(inp)
    assert texts(account.row("asked")) == [
        "This answer picked up after a pause. The message the run kept: “how many volumes last year?”"
    ]
    asked = account.row("asked")[0]
    assert [(p.attribute, p.json_path) for p in asked.pointers] == [
        ("footprint.state", "/userMessage")
    ]
    assert ids(account.row("understood")) == ["understood.notConfigured"]
    assert "wrong.beforePause" in ids(account.row("anything-wrong"))
    assert account.summary.template_id == "summary.resumed"
    assert account.summary.sentence == (
        "This answer picked up after a pause; what came before the pause is missing from this record."
    )


# ── H: held verdicts on resumed legs ─────────────────────────────────────────────────────────

H_SCORES = [
    {"id": "billing", "score": 0.7071067811865475, "relevance": 0.46},
    {"id": "shipping", "score": 0.2886751345948129, "relevance": 0.31},
    {"id": "other", "score": 0, "relevance": 0.23},
]


def held_leg(
    route: dict[str, Any] | None, *, delivered: str = "billing", strip: bool = False
) -> LegBuilder:
    state: dict[str, Any] = {"userMessage": "please refund my order"}
    if route is not None and not strip:
        state |= {"turnRoute": route, "entryScores": H_SCORES, "entryScorer": "keyword"}
    leg = LegBuilder("held")
    leg.event(
        "pause.resume",
        {
            "resumeInput": {"input": "approved"},
            "state": state,
            "pausedWith": {**state, "history": [{"role": "user", "content": "x"}]},
        },
    )
    start(leg)
    leg.system_prompt(2, [delivered])
    leg.tool("issue_refund", "approved", iteration=1)
    finish(leg)
    return leg


def test_h1_held_intent_verdict() -> None:
    account = account_for(held_leg({"by": "intent", "to": "billing"}).build())
    row = account.row("understood")
    assert row[0].text == "The billing skill was chosen by the library's router."
    assert [c.text for c in row[0].chips] == ["before the pause: read from the state the run kept"]
    assert (row[0].pointers[0].attribute, row[0].pointers[0].json_path) == (
        "footprint.state",
        "/turnRoute/by",
    )
    assert row[0].pointers[0].event_name == semconv.EV_PAUSE_RESUME
    assert account.routing is not None and account.routing.verdict is not None
    verdict = account.routing.verdict
    assert (verdict.by, verdict.to, verdict.scorer, verdict.decisive, verdict.origin) == (
        "intent",
        "billing",
        "keyword",
        None,
        "held",
    )
    assert account.check("decided-delivered").state == "reachable"
    assert "The model had the skill in front of it when it answered." in texts(row)
    assert "unreachable.decided" not in ids(account.lines)
    assert account.routing.before_pause == "held"
    assert account.summary.appended == ("summary.resumed.held",)


def test_h2_held_menu_verdict() -> None:
    route = {"by": "menu", "offered": ["billing", "shipping"]}
    account = account_for(held_leg(route).build())
    row = account.row("understood")
    assert row[0].text == "No routing rule settled it; the model was given 2 skills to pick from."
    assert "The model went on to open the billing skill." in texts(row)
    every = ids(account.lines)
    assert "understood.resumed" not in every
    assert "wrong.beforePause.held" not in every
    assert "wrong.beforePause.held.events" in every
    assert "unreachable.decided" not in every
    assert account.check("decided-delivered").state == "not-applicable"


def test_h3_stripped_state_is_not_a_verdict() -> None:
    account = account_for(held_leg({"by": "intent", "to": "billing"}, strip=True).build())
    assert texts(account.row("understood"))[0] == (
        "The question was routed before the pause; that part is missing from this record."
    )
    assert account.check("decided-delivered").state == "unreachable"
    every = ids(account.lines)
    assert "unreachable.decided" in every
    assert "wrong.beforePause.held" in every


def test_h3_disagreeing_states_are_not_a_verdict() -> None:
    leg = held_leg({"by": "intent", "to": "billing"})
    resume = leg.events[0]
    payload = dict(resume.payload)
    payload["pausedWith"] = {**payload["pausedWith"], "turnRoute": {"by": "intent", "to": "other"}}
    leg.events[0] = type(resume)(resume.type, payload, resume.pointer)
    account = account_for(leg.build())
    assert ids(account.row("understood"))[0] == "understood.resumed"


def test_h4_never_paused_run_reads_the_event() -> None:
    leg = LegBuilder("h4")
    start(leg, prompt="please refund my order")
    leg.event(
        "skill.turn_routed",
        {
            "by": "intent",
            "to": "billing",
            "decisive": True,
            "scorer": "keyword",
            "scores": H_SCORES,
        },
    )
    leg.system_prompt(1, ["billing"])
    finish(leg)
    account = account_for(leg.build())
    row = account.row("understood")
    assert row[0].text == "The billing skill was chosen by the library's router."
    assert row[0].chips == ()
    assert account.routing is not None and account.routing.verdict is not None
    assert account.routing.verdict.decisive is True
    assert row[1].text == (
        "It ranked first in the app's scores: 0.7071067811865475, ahead of 0.2886751345948129 for the runner-up, the shipping skill."
    )


def test_h5_take_3_menu_paused_tool_with_coverage() -> None:
    route = {"by": "menu", "offered": ["billing", "shipping"]}
    leg = held_leg(route)
    leg.events.pop()  # re-finish after the coverage tool
    leg.tool(
        "find_volumes",
        '{"rows":[{"id":"v1"}]}',
        iteration=2,
        events=[
            (
                "tools.coverage_declared",
                {
                    "toolName": "find_volumes",
                    "toolCallId": "call-2",
                    "iteration": 2,
                    "checked": [{"what": "volumes of last year"}],
                    "notChecked": [{"what": "archived volumes", "kind": "scope"}],
                    "cannotCover": [],
                },
            )
        ],
    )
    finish(leg)
    account = account_for(leg.build(declarations=Declarations.of(rows_at={"find_volumes": "rows"})))
    assert account.row("understood")[0].text == (
        "No routing rule settled it; the model was given 2 skills to pick from."
    )
    assert not any(line.template_id.startswith("unreachable.") for line in account.lines)
    assert [c.check_id for c in account.checks if c.state == "reachable"] == [
        "existence",
        "empty-results",
    ]
    assert account.check("decided-delivered").state == "not-applicable"
    assert account.summary.tone == "ok"
    assert account.summary.sentence == (
        "This report found nothing in the record. This answer picked up after a pause; this record has the state the run kept from then, not the events of that part."
    )


# ── R: refusals ──────────────────────────────────────────────────────────────────────────────


def permission(result: str) -> tuple[str, dict[str, Any]]:
    return (
        "permission.check",
        {
            "capability": "skill_read",
            "actor": "model",
            "target": "skill:array-inventory",
            "result": result,
            "policyRuleId": "skills.r1",
        },
    )


def test_r1_gate_open_is_not_a_refusal() -> None:
    account = account_for(fixture_a([permission("gate_open")]))
    assert not any(i.startswith("understood.refused") for i in ids(account.lines))
    assert account.routing is not None and account.routing.refusals == ()


@pytest.mark.parametrize("result", ["deny", "halt"])
def test_r1_deny_and_halt_refuse(result: str) -> None:
    account = account_for(fixture_a([permission(result)]))
    refused = [
        line for line in account.row("understood") if line.template_id == "understood.refused"
    ]
    assert texts(refused) == [
        "A check called skills.r1 blocked the array estate report skill (array-inventory) from opening."
    ]
    assert account.routing is not None and len(account.routing.refusals) == 1
    assert refused[0].pointers[0].attribute == "footprint.target"


def test_r2_three_thousand_rejections_of_other_ids_are_bounded() -> None:
    rejections = [
        ("skill.rejected", {"requestedId": f"other-{i}-" + "x" * 400, "iteration": 1})
        for i in range(3000)
    ]
    account = account_for(fixture_a(rejections))
    assert account.routing is not None
    assert len(account.routing.refusals) == 12
    assert account.routing.refusals_omitted == 2988
    assert all(len(r.requested_id) <= 200 for r in account.routing.refusals)
    assert account_json_size(account) <= 128 * 1024
    assert account.check("decided-delivered").outcome == "delivered"


def test_r3_three_thousand_rejections_of_the_decided_skill_make_two_lines() -> None:
    rejections = [("skill.rejected", {"requestedId": "array-inventory", "iteration": 1})] * 3000
    account = account_for(fixture_a(rejections))
    row = account.row("understood")
    refusals = [
        line for line in row if line.template_id.startswith(("understood.rej", "understood.ref"))
    ]
    assert texts(refusals) == [
        "The skill graph blocked the array estate report skill (array-inventory) from opening.",
        "…plus 2999 more refusals for the same skill, not shown.",
    ]
    assert len(row) < 10
    assert all(len(line.pointers) <= 12 for line in account.lines)
    assert account_json_size(account) <= 128 * 1024
