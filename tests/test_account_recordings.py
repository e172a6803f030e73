"""Integration: the account over the real upstream recordings (tests/data/reference/recordings), pointers resolved."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from _shared import RECORDINGS
from account_fixtures import RecordedLeg, recording_legs

from otel_footprint import semconv
from otel_footprint.account import (
    AccountResult,
    CarriedVerdict,
    Pointer,
    account_for,
    verdict_to_carry,
)
from otel_footprint.codec import FootprintEvent, camel_case

pytestmark = pytest.mark.skipif(not RECORDINGS.is_dir(), reason="shared recordings not present")


def legs(name: str) -> tuple[RecordedLeg, ...]:
    return recording_legs(RECORDINGS / f"{name}.ndjson")


def resolve(pointer: Pointer, events: list[FootprintEvent]) -> Any:
    """The value a pointer names, read back from the decoded events (KeyError if it does not)."""
    event = next(
        e
        for e in events
        if (e.pointer.trace_id, e.pointer.span_id, e.pointer.event_name, e.pointer.event_index)
        == (pointer.trace_id, pointer.span_id, pointer.event_name, pointer.event_index)
    )
    if pointer.attribute is None:
        return event.payload
    assert pointer.attribute.startswith(semconv.PREFIX)
    value: Any = event.payload[camel_case(pointer.attribute[len(semconv.PREFIX) :])]
    for part in (pointer.json_path or "").split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def every_pointer(account: AccountResult) -> list[Pointer]:
    found = [p for line in account.lines for p in line.pointers]
    found += [p for check in account.checks for p in check.pointers]
    found += [p for signal in account.signals for p in signal.pointers]
    return found


def assert_pointers_resolve(account: AccountResult, *leg_list: RecordedLeg) -> None:
    events = [e for leg in leg_list for e in leg.events]
    spans = {(c.trace_id, c.span_id) for leg in leg_list for c in leg.tool_calls}
    for pointer in every_pointer(account):
        if pointer.event_name is None:  # a span attribute: the tool span must exist
            assert (pointer.trace_id, pointer.span_id) in spans
        else:
            resolve(pointer, events)
        assert len(pointer.trace_id) == 32 and len(pointer.span_id) == 16


def test_routed_delivered_is_reachable_and_delivered() -> None:
    (leg,) = legs("routed-delivered")
    account = account_for(leg.account_input())
    check = account.check("decided-delivered")
    assert (check.state, check.outcome, check.label) == ("reachable", "delivered", "pass")
    assert [line.template_id for line in account.row("understood")] == [
        "understood.intent",
        "understood.scores",
        "understood.delivered",
        "understood.confidence.none",
    ]
    assert (
        account.row("understood")[0].text == "The billing skill was chosen by the library's router."
    )
    assert account.signals == ()
    assert account.summary.template_id == "summary.none"
    to = next(p for p in check.pointers if p.attribute == "footprint.to")
    assert resolve(to, list(leg.events)) == "billing"
    assert_pointers_resolve(account, leg)


def test_pause_resume_leg_1_is_reachable_and_delivered_but_unfinished() -> None:
    first, _ = legs("pause-resume")
    account = account_for(first.account_input())
    assert account.check("decided-delivered").outcome == "delivered"
    assert account.summary.template_id == "summary.unfinished"
    # The paused call has no span in this leg; the pause names it.
    assert [line.template_id for line in account.row("checked")] == ["checked.paused"]
    assert_pointers_resolve(account, first)


def test_pause_resume_leg_2_alone_cannot_tell() -> None:
    _, second = legs("pause-resume")
    inp = second.account_input()
    assert inp.resumed and inp.held is None
    account = account_for(inp)
    assert account.row("understood")[0].template_id == "understood.resumed"
    assert account.check("decided-delivered").state == "unreachable"
    assert account.summary.template_id == "summary.resumed"


def test_pause_resume_leg_2_reads_the_verdict_carried_from_leg_1() -> None:
    first, second = legs("pause-resume")
    carried = verdict_to_carry(first.account_input())
    assert carried is not None
    stored = carried.to_json().encode()  # what the run store keeps between legs
    account = account_for(second.account_input(carried=CarriedVerdict.from_json(stored)))
    check = account.check("decided-delivered")
    assert (check.state, check.outcome) == ("reachable", "delivered")
    intent = account.row("understood")[0]
    assert intent.text == "The billing skill was chosen by the library's router."
    assert [c.text for c in intent.chips] == ["before the pause: read from the run's earlier leg"]
    # Verdict pointers lead into leg 1's trace; the delivered row is leg 2's own.
    assert {p.trace_id for p in intent.pointers} == {first.trace_id}
    assert first.trace_id != second.trace_id
    assert {p.trace_id for p in check.pointers} == {first.trace_id, second.trace_id}
    assert account.row("asked")[0].template_id == "asked.carried"
    assert "wrong.beforePause.carried" in [line.template_id for line in account.lines]
    assert account.summary.appended == ("summary.resumed.carried",)
    assert account.routing is not None and account.routing.before_pause == "carried"
    assert_pointers_resolve(account, first, second)


@pytest.mark.parametrize("name", ["park-trap", "own-tool", "no-kernel"])
def test_kernel_only_recordings_have_no_routing(name: str) -> None:
    (leg,) = legs(name)
    account = account_for(leg.account_input())
    understood = account.row("understood")
    # No verdict: the row is the one line (the confidence line needs a verdict to qualify).
    assert [line.template_id for line in understood] == ["understood.notRecorded"]
    assert understood[0].text == "The record does not say how the question was routed."
    check = account.check("decided-delivered")
    assert check.state == "unreachable"
    assert check.sentence == (
        "Whether the chosen skill reached the model cannot be shown: the routing is missing from this record."
    )
    assert account.summary.template_id == "summary.none.partial"
    assert_pointers_resolve(account, leg)


def _rewrite_skill_rows(leg: RecordedLeg, to: str) -> list[FootprintEvent]:
    out = []
    for event in leg.events:
        if event.type == "context.injected" and event.payload.get("source") == "skill":
            event = dataclasses.replace(event, payload={**event.payload, "sourceId": to})
        out.append(event)
    return out


def test_routed_delivered_rewritten_is_not_delivered_until_a_composition_goes_missing() -> None:
    (leg,) = legs("routed-delivered")
    events = _rewrite_skill_rows(leg, "shipping")
    account = account_for(leg.account_input(events=events))
    assert account.check("decided-delivered").outcome == "not-delivered"
    assert account.row("understood")[2].text == (
        "The model never received the billing skill; it got the shipping skill in its place."
    )
    assert [s.signal_id for s in account.signals] == ["decided-not-delivered"]
    assert_pointers_resolve(account, leg)

    # Drop iteration 2's system-prompt composition: the proof of absence is gone.
    dropped = [
        e
        for e in events
        if not (
            e.type == "context.slot_composed"
            and e.payload.get("slot") == "system-prompt"
            and e.payload.get("iteration") == 2
        )
    ]
    assert len(dropped) == len(events) - 1
    account = account_for(leg.account_input(events=dropped))
    assert account.check("decided-delivered").state == "unreachable"
    assert account.signals == ()
    assert "understood.delivery.unknown" in [line.template_id for line in account.lines]
