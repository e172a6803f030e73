"""How integrity results are written: run- and pass-span attributes, one finding event per finding
with its evidence pointers, one ``gen_ai.evaluation.result`` per row, signals and summary tone
(advisories never failures), ``explain`` text / json / html and Phoenix annotations."""

from __future__ import annotations

from typing import Any

from integrity_fixtures import Script, decide, run_script, trap, verdict_of
from test_integrity_scenarios import choice, lookup

from otel_footprint import semconv
from otel_footprint.account.integrity import combined_tone
from otel_footprint.annotate.form import SpanNote, annotations_for
from otel_footprint.annotate.phoenix import phoenix_annotations_for
from otel_footprint.annotate.sdk import annotated_copy
from otel_footprint.commands.explain import render_run_text, verdict_to_json
from otel_footprint.commands.explain_html import render_html
from otel_footprint.engine.verdict import RunVerdict


def notes(script: Script) -> tuple[RunVerdict, dict[str, SpanNote]]:
    verdict = verdict_of(script)
    return verdict, annotations_for(verdict)


def run_attrs(verdict: RunVerdict, all_notes: dict[str, SpanNote]) -> dict[str, Any]:
    assert verdict.run_span_id is not None
    return all_notes[verdict.run_span_id].attribute_map()


def evaluations(verdict: RunVerdict, all_notes: dict[str, SpanNote]) -> dict[str, dict[str, Any]]:
    assert verdict.run_span_id is not None
    out = {}
    for event in all_notes[verdict.run_span_id].events:
        attrs = dict(event.attributes)
        if event.name == semconv.EV_EVALUATION_RESULT and str(attrs[semconv.EVAL_NAME]).startswith(
            "footprint.integrity."
        ):
            out[str(attrs[semconv.EVAL_NAME])] = attrs
    return out


def test_a_contradiction_is_written_on_the_run_and_the_pass_span() -> None:
    verdict, all_notes = notes(trap({}, enforced=True))  # the agent's own kernel parked the map
    assert verdict.mode == "verify"
    attrs = run_attrs(verdict, all_notes)
    assert attrs[semconv.INTEGRITY_STATE] == "fail"
    assert attrs[semconv.INTEGRITY_FINDINGS] == 1
    assert attrs[semconv.INTEGRITY_ADVISORIES] == 0
    assert attrs[semconv.INTEGRITY_KINDS] == ("invariant-violation",)
    assert attrs["footprint.integrity.row.invariant_violation.compose"] == "fail"
    assert attrs["footprint.integrity.row.invariant_violation.wire"] == "not-applicable"
    assert "integrity.invariant-violation" in attrs[semconv.SIGNALS]
    assert attrs[semconv.SUMMARY_TONE] == "bad"
    assert attrs[semconv.INTEGRITY_SUMMARY].startswith("Integrity: 1 contradiction found")

    found = evaluations(verdict, all_notes)
    assert set(found) == {"footprint.integrity.invariant-violation@compose"}  # the armed rows
    compose = found["footprint.integrity.invariant-violation@compose"]
    assert compose[semconv.EVAL_SCORE_LABEL] == "fail"
    assert "still on the list offered" in compose[semconv.EVAL_EXPLANATION]
    assert attrs[semconv.ROW_UNSUPPORTED_CLAIM_CLAIM] == "not-applicable"  # unarmed: attribute only

    pass4 = verdict.passes[3].span_id
    assert pass4 is not None
    note = all_notes[pass4]
    assert note.attribute_map()[semconv.INTEGRITY_FINDINGS] == 1
    states = [
        all_notes[p.span_id].attribute_map().get(semconv.INTEGRITY_STATE)
        for p in verdict.passes
        if p.span_id
    ]
    assert states == ["not-applicable"] * 3 + ["fail"] * 3  # pass 5 and 6 offer it again
    (event,) = [e for e in note.events if e.name == semconv.EV_INTEGRITY_FINDING]
    attrs = dict(event.attributes)
    assert attrs[semconv.IF_KIND] == "invariant-violation"
    assert attrs[semconv.IF_SEAM] == "compose"
    assert attrs[semconv.IF_SUBJECTS] == ("map:skill-map", "tool:get_zone_info")
    assert attrs[semconv.IF_ITERATION] == 4
    (pointer,) = attrs[semconv.IF_EVIDENCE]
    assert pointer == f"{verdict.trace_id}/{pass4}@gen_ai.tool.definitions"


def test_what_a_shadow_park_would_have_withheld_is_an_advisory_not_a_contradiction() -> None:
    """No kernel in the agent: it promised no park, so the replayed park meeting the map's tool on
    the offered list is a cost worth a look, never a failure of the run."""
    verdict, all_notes = notes(trap({}))
    assert verdict.mode == "shadow"
    attrs = run_attrs(verdict, all_notes)
    assert attrs[semconv.INTEGRITY_STATE] == "pass"
    assert attrs[semconv.INTEGRITY_FINDINGS] == 0
    assert attrs[semconv.INTEGRITY_ADVISORIES] == 1
    assert attrs["footprint.integrity.row.invariant_violation.compose"] == "pass"
    assert not any(s.startswith("integrity.") for s in attrs[semconv.SIGNALS])
    assert attrs[semconv.SUMMARY_TONE] != "bad"
    assert verdict.integrity is not None
    assert combined_tone("ok", verdict.integrity) == "warn"
    assert attrs[semconv.INTEGRITY_SUMMARY] == (
        "Integrity: nothing contradicted; 1 advisory note worth a look."
    )
    row = evaluations(verdict, all_notes)["footprint.integrity.invariant-violation@compose"]
    assert row[semconv.EVAL_SCORE_LABEL] == "pass"
    assert "would have parked" in row[semconv.EVAL_EXPLANATION]
    assert "advisory" in row[semconv.EVAL_EXPLANATION]
    pass4 = verdict.passes[3].span_id
    assert pass4 is not None
    note = all_notes[pass4].attribute_map()
    assert (note[semconv.INTEGRITY_FINDINGS], note[semconv.INTEGRITY_ADVISORIES]) == (0, 1)
    (event,) = [e for e in all_notes[pass4].events if e.name == semconv.EV_INTEGRITY_FINDING]
    assert dict(event.attributes)[semconv.IF_ADVISORY] is True
    assert "would have parked" in str(dict(event.attributes)[semconv.IF_MESSAGE])


def test_explain_calls_a_shadow_park_worth_a_look() -> None:
    verdict = verdict_of(trap({}))
    body = verdict_to_json(verdict)
    assert body["integrity"]["state"] == "pass"
    (finding,) = body["integrity"]["findings"]
    assert finding["advisory"] is True
    assert "integrity.invariant-violation" not in body["signals"]
    assert body["summary"]["tone"] != "bad"
    text = render_run_text(verdict, account=True)
    assert "something went wrong" not in text.splitlines()[0]
    assert "  Integrity: Nothing contradicted; 1 note worth a look." in text
    assert "    - worth a look on call 4: The engagement kernel would have parked" in text
    page = render_html([verdict])
    assert "data-integrity='invariant-violation@compose' data-outcome='pass'" in page


def test_an_argument_finding_points_at_the_message_and_the_call() -> None:
    verdict, all_notes = notes(choice({"machine": "host-zeta-99"}))
    pass1 = verdict.integrity.pass_spans[1] if verdict.integrity else ""
    (event,) = [e for e in all_notes[pass1].events if e.name == semconv.EV_INTEGRITY_FINDING]
    evidence = dict(event.attributes)[semconv.IF_EVIDENCE]
    assert evidence == (
        f"{verdict.trace_id}/{pass1}@gen_ai.output.messages/0",
        f"{verdict.trace_id}/{pass1}@gen_ai.input.messages",
    )


def test_advisories_are_never_failures() -> None:
    verdict, all_notes = notes(lookup())
    attrs = run_attrs(verdict, all_notes)
    assert attrs[semconv.INTEGRITY_FINDINGS] == 0
    assert attrs[semconv.INTEGRITY_ADVISORIES] == 1
    assert attrs[semconv.INTEGRITY_STATE] == "pass"
    assert not any(s.startswith("integrity.") for s in attrs[semconv.SIGNALS])
    # The account itself finds this empty result wanting; the advisory adds nothing to that.
    assert verdict.account is not None and verdict.integrity is not None
    assert attrs[semconv.SUMMARY_TONE] == verdict.account.summary.tone
    assert combined_tone("ok", verdict.integrity) == "warn"
    assert combined_tone("bad", verdict.integrity) == "bad"
    row = evaluations(verdict, all_notes)["footprint.integrity.empty-lookup@write"]
    assert row[semconv.EVAL_SCORE_LABEL] == "pass"
    assert "advisory" in row[semconv.EVAL_EXPLANATION]


def test_a_run_without_captured_content_is_unreachable_with_the_reason_never_a_pass() -> None:
    script = trap({})
    for step in script.steps:
        step.tools = None
        step.messages = None
        step.output = False
    verdict, all_notes = notes(script)
    attrs = run_attrs(verdict, all_notes)
    assert attrs[semconv.INTEGRITY_STATE] == "unreachable"
    assert attrs[semconv.INTEGRITY_UNREACHABLE] == ("invariant-violation@compose",)
    assert attrs[semconv.INTEGRITY_FINDINGS] == 0
    row = evaluations(verdict, all_notes)["footprint.integrity.invariant-violation@compose"]
    assert row[semconv.EVAL_SCORE_LABEL] == "unknown"
    assert row[semconv.EVAL_EXPLANATION].startswith(
        "Could not be judged: the tools offered at pass 4"
    )
    assert "could not be judged" in attrs[semconv.INTEGRITY_SUMMARY]


def test_a_run_with_nothing_armed_gets_one_attribute() -> None:
    verdict, all_notes = notes(trap({}, maps=()))
    attrs = run_attrs(verdict, all_notes)
    assert attrs[semconv.INTEGRITY_STATE] == "not-applicable"
    assert not any(k.startswith("footprint.integrity.row.") for k in attrs)
    assert evaluations(verdict, all_notes) == {}


def test_verify_disagreements_are_marked() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.reported = [
        {
            "kind": "unsupported-argument",
            "seam": "choice",
            "subjects": ["tool:get_host"],
            "predicate": "x",
        }
    ]
    verdict, all_notes = notes(script)
    attrs = run_attrs(verdict, all_notes)
    assert attrs[semconv.INTEGRITY_MISMATCH] is True
    assert verdict.run_span_id is not None
    mismatches = [
        e for e in all_notes[verdict.run_span_id].events if e.name == semconv.EV_INTEGRITY_MISMATCH
    ]
    assert len(mismatches) == 2
    assert attrs[semconv.SUMMARY_TONE] == "bad"


def test_explain_has_an_integrity_section_in_every_format() -> None:
    verdict = verdict_of(trap({}, enforced=True))
    body = verdict_to_json(verdict)
    assert body["integrity"]["state"] == "fail"
    (finding,) = body["integrity"]["findings"]
    assert finding["kind"] == "invariant-violation"
    assert finding["evidence"]
    assert "integrity.invariant-violation" in body["signals"]
    assert body["summary"]["tone"] == "bad"
    text = render_run_text(verdict, account=True)
    assert "— something went wrong: " in text.splitlines()[0]
    assert "  Integrity: 1 contradiction found: a parked map's tools still offered" in text
    assert "    - a parked map's tools still offered to the model: FOUND (call " in text
    page = render_html([verdict])
    assert "<h3>Integrity: what the model was offered and what it acted on</h3>" in page
    assert "data-integrity='invariant-violation@compose' data-outcome='fail'" in page


def test_phoenix_annotations_carry_the_rows_and_their_state() -> None:
    spans = run_script(trap({}, enforced=True))
    verdict = decide(spans)
    all_notes = annotations_for(verdict)
    annotated = [
        annotated_copy(s, all_notes[format(s.context.span_id, "016x")])
        if format(s.context.span_id, "016x") in all_notes
        else s
        for s in spans
    ]
    found = {a["name"]: a for a in phoenix_annotations_for(annotated)}
    compose = found["footprint.integrity.invariant-violation@compose"]
    assert compose["result"]["label"] == "fail"
    assert compose["result"]["score"] == 0.0
    assert compose["metadata"]["state"] == "fail"
    assert "footprint.integrity.invariant-violation@wire" not in found  # unarmed: no event


def test_row_names_are_defined_once_and_agree() -> None:
    from otel_footprint.account.integrity import ROWS

    assert tuple(ROWS) == semconv.INTEGRITY_ROWS
    # ROWS is semconv's tuple typed for the checks: every name must be a value of its type.
    from typing import get_args

    from otel_footprint.account.integrity.model import Kind, Seam

    assert {c for c, _ in ROWS} <= set(get_args(Kind))
    assert {s for _, s in ROWS} <= set(get_args(Seam))
    constants = {v for k, v in semconv.all_names().items() if k.startswith("ROW_")}
    assert constants == {semconv.integrity_row_attribute(c, s) for c, s in ROWS}
    assert len(semconv.INTEGRITY_EVALUATION_NAMES) == len(ROWS)


def test_a_reported_finding_has_the_identity_of_the_same_derived_one() -> None:
    from otel_footprint.account.integrity import Finding, Subject
    from otel_footprint.account.integrity.verify import _identity

    derived = Finding(
        "invariant-violation",
        "compose",
        (Subject("tool", "t1"), Subject("map", "m")),
        "message",
        predicate=None,
        iteration=4,
    )
    # The upstream files the compose finding at @write: the same seam here.
    assert _identity(
        "invariant-violation", "write", [Subject("map", "m"), Subject("tool", "t1")], None
    ) == (derived.identity)
