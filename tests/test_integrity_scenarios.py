"""The upstream's integrity test scenarios (spec integrity-reference §4), each as a run recorded with
the real OpenTelemetry SDK and the recorder, decided by the engine from its spans."""

from __future__ import annotations

from typing import Any

import pytest
from integrity_fixtures import (
    Call,
    Script,
    Step,
    answered,
    asked,
    assistant,
    tool_def,
    trap,
    user,
    verdict_of,
)

from otel_footprint import record as footprint
from otel_footprint.account.integrity import Finding, IntegrityResult, signal_ids

FOUR = footprint.MountedMap(
    "zone-audit-map", ("zone-audit", "run-finder"), ("t1", "t2", "t3", "t4")
)


def integrity(script: Script) -> IntegrityResult:
    result = verdict_of(script).integrity
    assert result is not None
    return result


def kinds(result: IntegrityResult, kind: str) -> list[Finding]:
    return [f for f in result.findings if f.kind == kind]


def counts(result: IntegrityResult, check: str, seam: str | None = None) -> dict[str, Any]:
    row = result.row(check, seam)
    return {
        "checked": row.checked,
        "findings": row.findings,
        "notApplicable": row.not_applicable,
        "unreachable": row.unreachable,
        "state": row.state,
    }


# ── invariant-violation @compose (T1, T1b) ──────────────────────────────────────────────────


def test_compose_parked_map_with_all_four_tools_offered_is_one_finding() -> None:
    offered = ("screen_open", "t1", "t2", "t3", "t4")
    result = integrity(trap(dict.fromkeys(range(1, 7), offered), maps=(FOUR,), enforced=True))
    (finding,) = kinds(result, "invariant-violation")
    assert finding.seam == "compose"
    assert finding.iteration == 4
    assert [s.render() for s in finding.subjects] == [
        "map:zone-audit-map",
        "tool:t1",
        "tool:t2",
        "tool:t3",
        "tool:t4",
    ]
    assert "4 tools" in finding.message
    assert [w.value for w in finding.witnesses] == ["suspended"] + ["available"] * 4
    assert not finding.advisory


def test_compose_identical_compositions_file_once() -> None:
    result = integrity(trap({}, n=10, enforced=True))
    assert len(kinds(result, "invariant-violation")) == 1
    assert counts(result, "invariant-violation", "compose") == {
        "checked": 7,
        "findings": 7,
        "notApplicable": 3,
        "unreachable": 0,
        "state": "fail",
    }


def test_compose_in_shadow_mode_files_one_advisory_on_passing_calls() -> None:
    """No kernel in the agent: the same run is judged ``pass`` at every call, and what parking would
    have withheld is filed once, as an advisory."""
    result = integrity(trap({}, n=10))
    (advisory,) = kinds(result, "invariant-violation")
    assert advisory.advisory
    assert (advisory.seam, advisory.iteration) == ("compose", 4)
    assert result.state == "pass"
    assert counts(result, "invariant-violation", "compose") == {
        "checked": 7,
        "findings": 0,
        "notApplicable": 3,
        "unreachable": 0,
        "state": "pass",
    }


def test_compose_silent_when_the_tools_left_the_offered_list() -> None:
    offered = dict.fromkeys(range(4, 7), ("screen_open",))
    result = integrity(trap(offered))
    assert result.findings == ()
    assert result.row("invariant-violation", "compose").state == "pass"


def test_compose_silent_while_the_map_is_engaged() -> None:
    result = integrity(trap({}, n=3))  # parks only at pass 4
    assert result.findings == ()
    assert result.row("invariant-violation", "compose").state == "not-applicable"


def test_compose_unknown_serving_set_is_unreachable_never_pass() -> None:
    script = trap({})
    for step in script.steps:
        step.tools = None
    result = integrity(script)
    row = result.row("invariant-violation", "compose")
    assert row.state == "unreachable"
    assert "not in the record" in row.why[0]
    assert result.findings == ()


def test_compose_foreign_tool_is_silent() -> None:
    result = integrity(trap(dict.fromkeys(range(1, 7), ("screen_open", "other_tool"))))
    assert result.findings == ()


def test_compose_verify_mode_names_the_park_as_the_agents_own() -> None:
    verdict = verdict_of(trap({}, enforced=True))
    assert verdict.mode == "verify"
    assert not any(p.mismatch for p in verdict.passes)  # the agent's kernel and the replay agree
    assert verdict.integrity is not None
    (own,) = kinds(verdict.integrity, "invariant-violation")
    assert "is parked at this call" in own.message and not own.advisory


def test_compose_shadow_mode_says_what_parking_would_have_withheld() -> None:
    verdict = verdict_of(trap({}))
    assert verdict.mode == "shadow"
    assert verdict.integrity is not None
    (shadow,) = kinds(verdict.integrity, "invariant-violation")
    assert "would have parked" in shadow.message and shadow.advisory


def test_no_maps_mounted_is_a_not_applicable_row_with_its_reason() -> None:
    result = integrity(trap({}, maps=()))
    row = result.row("invariant-violation", "compose")
    assert (row.state, row.armed) == ("not-applicable", False)
    assert "no maps" in row.why[0]


# ── invariant-violation @wire (T2) ──────────────────────────────────────────────────────────


def wire_script(*manifests: list[str] | None, composed: tuple[str, ...] = ("t1", "t2")) -> Script:
    steps = [
        Step(
            tools=[tool_def(t) for t in composed],
            messages=[user("hello")],
            calls=[Call("screen_open", {}, "ok")] if i < len(manifests) - 1 else [],
            manifest=m,
        )
        for i, m in enumerate(manifests)
    ]
    return Script(steps, maps=())


def test_wire_set_equality_ignores_order_and_duplicates() -> None:
    result = integrity(wire_script(["t2", "t1", "t1"]))
    assert result.row("invariant-violation", "wire").state == "pass"


def test_wire_extra_names_are_one_finding() -> None:
    result = integrity(wire_script(["t1", "t2", "x1", "x2"], composed=("t1", "t2")))
    (finding,) = kinds(result, "invariant-violation")
    assert "reached the provider" in finding.message
    assert "(x1, x2)" in finding.message


def test_wire_dropped_name_is_one_finding() -> None:
    (finding,) = kinds(integrity(wire_script(["t1"])), "invariant-violation")
    assert "never reached the provider (t2)" in finding.message


def test_wire_both_directions_are_two_findings() -> None:
    assert len(kinds(integrity(wire_script(["t1", "ghost"])), "invariant-violation")) == 2


def test_wire_no_manifest_is_not_armed() -> None:
    result = integrity(wire_script(None))
    assert result.row("invariant-violation", "wire").state == "not-applicable"


def test_wire_empty_manifest_is_a_stated_zero() -> None:
    (finding,) = kinds(integrity(wire_script([])), "invariant-violation")
    assert "never reached" in finding.message


def test_wire_a_pass_without_a_second_view_is_unreachable() -> None:
    result = integrity(wire_script(["t1", "t2"], None))
    assert counts(result, "invariant-violation", "wire")["unreachable"] == 1
    assert result.row("invariant-violation", "wire").state == "unreachable"


def test_wire_manifest_without_the_framework_list_is_unreachable_not_unarmed() -> None:
    """The agent states what it sent, but the list it composed is not recorded: the comparison
    the manifest is there for cannot be made — unreachable, naming the missing side."""
    script = wire_script(["t1", "t2"], ["t1", "t2"])
    for step in script.steps:
        step.tools = None
    result = integrity(script)
    row = result.row("invariant-violation", "wire")
    assert (row.armed, row.state, row.unreachable) == (True, "unreachable", 2)
    assert row.why == (
        "the framework's tool list of pass 1 is not recorded",
        "the framework's tool list of pass 2 is not recorded",
    )
    assert result.state == "unreachable"


def test_wire_manifest_is_read_when_a_client_span_recorded_no_list() -> None:
    """openai-v2's client span records no tool list; the agent's manifest states what was sent:
    the comparison is made from the manifest, not given up."""
    from otel_footprint.account.integrity.invariant import check_wire
    from otel_footprint.runs.integrity_inputs import PassInputs
    from otel_footprint.runs.outputs import CallView, OfferedTool, Ref

    ref = Ref("a" * 32, "b" * 16)
    framework = CallView(
        "a" * 32, "b" * 16, "gen_ai", (OfferedTool("t1"),), ref, None, None, None, None
    )
    client = CallView("a" * 32, "c" * 16, "gen_ai", None, None, None, None, None, None)
    pass_ = PassInputs(1, framework, client, ("t1", "ghost"), ref)
    inputs = _bare_inputs(passes=(pass_,), declarations={})
    assert check_wire(inputs).findings[0].subjects[0].id == "ghost"


def test_wire_drift_across_three_calls_is_exactly_one_finding() -> None:
    drift = ["t1", "t2", "ghost_tool"]
    result = integrity(wire_script(drift, drift, drift))
    (finding,) = kinds(result, "invariant-violation")
    assert "ghost_tool" in finding.message
    assert result.row("invariant-violation", "wire").findings == 3


# ── dangling-reference (T5, T6) ─────────────────────────────────────────────────────────────

HOSTS = '[{"host":"host-alpha-01"},{"host":"host-beta-02"}]'


def eviction(*, declared: bool = True, refetch: bool = False, named: bool = True) -> Script:
    """Pass 1 lists hosts; pass 2 sees the result; pass 3's window has lost it and offers
    ``get_host`` (whose arguments come from ``list_hosts``)."""
    tools = [tool_def("list_hosts"), tool_def("get_host")]
    first = [user("audit the hosts")]
    seen = [*first, asked("call_1", "list_hosts", {}), answered("call_1", HOSTS)]
    if not named:
        seen[-1] = {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": HOSTS}],
        }
    third = [user("audit the hosts"), assistant("I listed the hosts.")]
    if refetch:
        third += [asked("call_9", "list_hosts", {}), answered("call_9", HOSTS)]
    return Script(
        [
            Step(tools=tools, messages=first, calls=[Call("list_hosts", {}, HOSTS, "call_1")]),
            Step(tools=tools, messages=seen, text="thinking"),
            Step(tools=tools, messages=third, text="done"),
        ],
        maps=(),
        declared={"get_host": ("list_hosts",)} if declared else {},
    )


def test_dangling_an_unnamable_result_in_the_frame_is_unreachable_not_a_finding() -> None:
    """Pass 3 shows a tool result no rule can name (no tool name, an id no call carries): it may
    be list_hosts fetched again, so the dropped ground cannot be called missing."""
    script = eviction()
    script.steps[2].messages = [
        *(script.steps[2].messages or ()),
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "zz", "response": "?"}]},
    ]
    result = integrity(script)
    assert kinds(result, "dangling-reference") == []
    row = result.row("dangling-reference")
    assert row.state == "unreachable"
    assert "names no tool" in row.why[0]


def test_dangling_eviction_trap_is_exactly_one_finding() -> None:
    result = integrity(eviction())
    (finding,) = kinds(result, "dangling-reference")
    assert finding.iteration == 3
    assert [s.render() for s in finding.subjects] == ["tool:get_host", "tool:list_hosts"]
    assert "calling list_hosts again" in finding.message
    assert result.row("dangling-reference").state == "fail"


def test_dangling_without_a_declaration_is_silent() -> None:
    result = integrity(eviction(declared=False))
    assert result.row("dangling-reference").state == "not-applicable"
    assert result.findings == ()


def test_dangling_refetched_ground_is_silent() -> None:
    result = integrity(eviction(refetch=True))
    assert kinds(result, "dangling-reference") == []
    assert result.row("dangling-reference").state == "pass"


def test_dangling_results_named_only_by_call_id_are_recovered() -> None:
    assert len(kinds(integrity(eviction(named=False)), "dangling-reference")) == 1


def test_dangling_nothing_dropped_is_not_applicable() -> None:
    script = eviction()
    script.steps = script.steps[:2]
    result = integrity(script)
    assert result.row("dangling-reference").state == "not-applicable"


def test_dangling_reported_compaction_without_frames() -> None:
    tools = [tool_def("list_hosts"), tool_def("get_host")]
    script = Script(
        [
            Step(tools=tools, messages=[user("go")], calls=[Call("list_hosts", {}, HOSTS, "c1")]),
            Step(tools=tools, messages=[user("go")], dropped=["list_hosts"]),
        ],
        maps=(),
        declared={"get_host": ("list_hosts",)},
    )
    assert len(kinds(integrity(script), "dangling-reference")) == 1


def test_declaration_door_refuses_blank_and_self_grounds() -> None:
    for bad in ([""], ["get_host"]):
        script = Script([Step()], maps=(), declared={"get_host": bad})
        with pytest.raises(ValueError, match="arguments_from"):
            verdict_of(script)


# ── unsupported-argument (T7, T8, T9) ───────────────────────────────────────────────────────

LOOKUP = tool_def(
    "get_host",
    {
        "type": "object",
        "properties": {"machine": {"type": "string"}, "mode": {"enum": ["strict", "loose"]}},
    },
)


def choice(
    arguments: dict[str, Any],
    *,
    messages: list[dict[str, Any]] | None = None,
    system: list[str] | None = None,
    grounds: list[tuple[str, str]] | None = None,
    repeat: int = 1,
    declared: bool = True,
) -> Script:
    frame = messages if messages is not None else [user("check the estate")]
    steps = [
        Step(
            tools=[tool_def("list_hosts"), LOOKUP],
            messages=frame,
            system=system,
            calls=[Call("get_host", arguments, "{}")],
            grounds=grounds or (),
        )
        for _ in range(repeat)
    ]
    steps.append(Step(tools=[LOOKUP], messages=frame, text="done"))
    return Script(steps, maps=(), declared={"get_host": ("list_hosts",)} if declared else {})


def test_argument_invented_value_is_a_finding_naming_nowhere() -> None:
    result = integrity(choice({"machine": "host-zeta-99"}))
    (finding,) = kinds(result, "unsupported-argument")
    assert finding.predicate == "machine"
    assert "found nowhere" in finding.message
    assert "call list_hosts again" in finding.message
    assert result.row("unsupported-argument").findings == 1


def test_argument_self_referenced_value_says_so() -> None:
    frame = [user("check the estate"), assistant("I think the host is host-zeta-99.")]
    (finding,) = kinds(
        integrity(choice({"machine": "host-zeta-99"}, messages=frame)), "unsupported-argument"
    )
    assert "text the model itself wrote earlier" in finding.message
    nowhere = kinds(integrity(choice({"machine": "host-zeta-99"})), "unsupported-argument")[0]
    assert nowhere.message != finding.message


def test_argument_nested_path_and_two_bad_arguments() -> None:
    result = integrity(choice({"filter": {"hosts": ["host-zeta-99"]}, "machine": "ghost-host"}))
    assert sorted(f.predicate or "" for f in kinds(result, "unsupported-argument")) == [
        "filter.hosts.0",
        "machine",
    ]


@pytest.mark.parametrize(
    ("arguments", "frame", "system"),
    [
        ({"machine": "abc"}, None, None),  # shorter than the fence
        ({"machine": "  ab  "}, None, None),  # trimmed first
        ({"machine": 12345678}, None, None),  # numbers are never leaves
        ({"mode": "STRICT"}, None, None),  # a declared enum member
        ({"machine": "HOST-ALPHA-01"}, [user("look at host-alpha-01")], None),  # case-insensitive
        ({"machine": "host-alpha-01"}, [user("x"), answered("c", HOSTS)], None),  # tool result
        ({"machine": "host-alpha-01"}, None, ["Default host: host-alpha-01"]),  # instructions
    ],
)
def test_argument_fences_hold(
    arguments: dict[str, Any], frame: list[dict[str, Any]] | None, system: list[str] | None
) -> None:
    result = integrity(choice(arguments, messages=frame, system=system))
    assert kinds(result, "unsupported-argument") == []
    assert result.row("unsupported-argument").state == "pass"


def test_argument_long_value_is_clipped_in_the_message() -> None:
    (finding,) = kinds(integrity(choice({"machine": "x" * 400})), "unsupported-argument")
    assert len(finding.message) < 600
    assert "…" in finding.message
    assert finding.witnesses[0].value == "x" * 400  # witnesses keep the full value


def test_argument_repeated_bad_call_is_still_one_finding() -> None:
    assert (
        len(kinds(integrity(choice({"machine": "host-zeta-99"}, repeat=3)), "unsupported-argument"))
        == 1
    )


def test_argument_undeclared_tool_is_not_applicable() -> None:
    row = integrity(choice({"machine": "host-zeta-99"}, declared=False)).row("unsupported-argument")
    assert (row.checked, row.not_applicable, row.state) == (0, 1, "not-applicable")


def test_external_ground_excuses_and_names_its_source() -> None:
    result = integrity(choice({"machine": "host-zeta-99"}, grounds=[("HOST-ZETA-99", "cmdb")]))
    assert kinds(result, "unsupported-argument") == []
    (excusal,) = result.excusals
    assert (excusal.value, excusal.source, excusal.path) == ("host-zeta-99", "cmdb", "machine")


def test_external_ground_not_used_when_the_run_served_the_value() -> None:
    frame = [user("check host-zeta-99")]
    result = integrity(
        choice({"machine": "host-zeta-99"}, messages=frame, grounds=[("host-zeta-99", "cmdb")])
    )
    assert result.excusals == ()


def test_argument_without_the_frame_is_unreachable_with_the_reason() -> None:
    script = choice({"machine": "host-zeta-99"})
    for step in script.steps:
        step.messages = None
    row = integrity(script).row("unsupported-argument")
    assert row.state == "unreachable"
    assert "not in the record" in row.why[0]


@pytest.mark.parametrize("value", ["strict", "made-up-mode"])
def test_argument_without_the_tool_schema_is_unreachable_never_a_guess(value: str) -> None:
    """The offered list records names only (no ``parameters``, as openai-v2 or a recording gives
    it): an unserved value may be a member of an enum the schema declares, so it is neither passed
    nor filed — the pass is unreachable, naming the schema."""
    script = choice({"mode": value})
    for step in script.steps:
        step.tools = [{"type": "function", "name": t["name"]} for t in step.tools or ()]
    result = integrity(script)
    row = result.row("unsupported-argument")
    assert (row.state, kinds(result, "unsupported-argument")) == ("unreachable", [])
    assert row.why[0].startswith("the schema of 'get_host' offered at pass 1 is not in the record")


def test_argument_without_any_offered_list_is_unreachable_for_an_enum_member() -> None:
    script = choice({"mode": "strict"})
    for step in script.steps:
        step.tools = None
    assert integrity(script).row("unsupported-argument").state == "unreachable"


def test_argument_served_value_passes_without_the_schema() -> None:
    """Only a value nothing served needs the enum fence: a served one passes schema or not."""
    script = choice({"machine": "host-alpha-01"}, messages=[user("look at host-alpha-01")])
    for step in script.steps:
        step.tools = None
    assert integrity(script).row("unsupported-argument").state == "pass"


def test_argument_a_tool_no_recorded_list_offers_declares_no_enum() -> None:
    """Recorded lists that do not hold the called tool: it declared nothing on this call."""
    script = choice({"machine": "host-zeta-99"})
    for step in script.steps:
        step.tools = [tool_def("list_hosts")]
    assert len(kinds(integrity(script), "unsupported-argument")) == 1


# ── empty-lookup (T12) ──────────────────────────────────────────────────────────────────────

LUNS = '[{"lun":7,"wwpn":"50:06:01:60:3b:20:19:a4"}]'


def lookup(
    result: Any = "[]",
    *,
    arguments: dict[str, Any] | None = None,
    producer: str | None = LUNS,
    notice: bool = True,
    absent: bool = False,
    declared: bool = True,
) -> Script:
    args = arguments if arguments is not None else {"wwpn": "50:06:01:60:3b:20:19:a4"}
    steps = []
    if producer is not None:
        steps.append(
            Step(
                tools=[tool_def("list_luns")],
                messages=[user("paths?")],
                calls=[Call("list_luns", {}, producer)],
            )
        )
    frame = [user("paths? the wwpn is 50:06:01:60:3b:20:19:a4")]
    steps.append(
        Step(
            tools=[tool_def("find_paths")],
            messages=frame,
            calls=[Call("find_paths", args, result, absent=absent)],
        )
    )
    steps.append(Step(tools=[tool_def("find_paths")], messages=frame, text="none"))
    return Script(
        steps,
        maps=(),
        declared={"find_paths": ("list_luns",)} if declared else {},
        notice_empty_lookups=notice,
    )


def test_empty_lookup_field_case_is_one_advisory() -> None:
    result = integrity(lookup())
    (finding,) = kinds(result, "empty-lookup")
    assert finding.advisory
    assert [s.render() for s in finding.subjects] == ["tool:find_paths", "tool:list_luns"]
    assert finding.predicate == "wwpn"
    assert len(finding.witnesses) == 3
    assert "Nothing was blocked" in finding.message
    assert "not a verdict" in finding.message
    assert result.row("empty-lookup").findings == 1
    assert result.contradictions == ()  # advisories are counted apart
    assert result.state == "pass"


def test_empty_lookup_declared_absence_is_the_same_advisory() -> None:
    (finding,) = kinds(integrity(lookup("no paths", absent=True)), "empty-lookup")
    assert "nothing matched" in finding.message


@pytest.mark.parametrize(
    ("script", "state"),
    [
        (lookup(producer='[{"lun":7,"wwpn":"other"}]'), "pass"),  # the producer lacks the value
        (lookup('[{"path":"p1"}]'), "pass"),  # a one-row result
        (lookup(producer=None), "unreachable"),  # the declared ground served nothing
        (lookup('{"rows":[]}'), "not-applicable"),  # a bespoke shape
        (lookup(notice=False), "not-applicable"),  # the dial is off
        (lookup(declared=False), "not-applicable"),  # no argumentsFrom
    ],
)
def test_empty_lookup_neutral_cases(script: Script, state: str) -> None:
    result = integrity(script)
    assert kinds(result, "empty-lookup") == []
    assert result.row("empty-lookup").state == state


def test_empty_lookup_two_argument_call_is_two_notices() -> None:
    producer = '[{"wwpn":"50:06:01:60:3b:20:19:a4","array":"array-north-1"}]'
    args = {"wwpn": "50:06:01:60:3b:20:19:a4", "array": "array-north-1"}
    assert len(kinds(integrity(lookup(arguments=args, producer=producer)), "empty-lookup")) == 2


def test_empty_lookup_invented_id_files_unsupported_argument_instead() -> None:
    result = integrity(lookup(arguments={"wwpn": "de:ad:be:ef:00:00:00:01"}))
    assert kinds(result, "empty-lookup") == []
    assert len(kinds(result, "unsupported-argument")) == 1


def test_empty_lookup_a_producer_result_missing_from_the_record_is_unreachable() -> None:
    """One producer served a value-less result, another ran with its result not recorded: the
    value may have come from the unseen one, so the call is not judged clean."""
    script = lookup(producer='[{"lun":7,"wwpn":"other"}]')
    hidden = Step(
        tools=[tool_def("list_luns")],
        messages=[user("paths?")],
        calls=[Call("list_luns", {"page": 2}, unrecorded=True)],
    )
    script.steps = [script.steps[0], hidden, *script.steps[1:]]
    row = integrity(script).row("empty-lookup")
    assert row.state == "unreachable"
    assert row.why[0].startswith("the result of list_luns (call ")


def test_empty_lookup_pausing_with_a_declared_absence_is_the_same_advisory() -> None:
    """A lookup that pauses to ask a person while declaring it found nothing (upstream 9.114)
    answered with that absence."""
    script = lookup()
    (call,) = script.steps[1].calls
    call.paused_absence = {"searched": "paths by wwpn", "matched": 0}
    (finding,) = kinds(integrity(script), "empty-lookup")
    assert "nothing matched" in finding.message


def test_empty_lookup_arguments_missing_from_the_record_are_unreachable() -> None:
    from otel_footprint.account.integrity.lookup import check_lookups
    from otel_footprint.runs.integrity_inputs import (
        Execution,
        IntegrityInputs,
        Settings,
        ToolDeclaration,
    )
    from otel_footprint.runs.outputs import Ref

    ref = Ref("t" * 32, "s" * 16)
    producer = Execution("list_luns", "c1", 1, 0, {}, False, LUNS, None, None, ref)
    consumer = Execution("find_paths", "c2", 2, 1, None, False, "[]", None, None, ref)
    inputs = IntegrityInputs(
        trace_id="t" * 32,
        run_span_id=None,
        passes=(),
        declarations={"find_paths": ToolDeclaration("find_paths", ("list_luns",), None, ref)},
        settings=Settings(notice_empty_lookups=True),
        executions=(producer, consumer),
    )
    (encounter,) = check_lookups(inputs).encounters
    assert (encounter.disposition, encounter.reason) == (
        "unreachable",
        "the arguments of call c2 are not recorded",
    )


# ── column checks (T13) ─────────────────────────────────────────────────────────────────────


def columns(rows: Any, declared: dict[str, Any], mode: str = "warn") -> IntegrityResult:
    script = Script(
        [
            Step(
                tools=[tool_def("list_luns")],
                messages=[user("luns")],
                calls=[Call("list_luns", {}, rows)],
            ),
            Step(tools=[tool_def("list_luns")], messages=[user("luns")], text="ok"),
        ],
        maps=(),
        columns={"list_luns": declared},
        check_column_types=mode,
    )
    return integrity(script)


def test_columns_under_enforce_the_finding_says_the_rows_were_refused() -> None:
    refused = "the model: it was shown a refusal in their place"
    (enforced,) = columns([{"lun": ""}], {"lun": "number"}, mode="enforce").findings
    assert enforced.message.endswith(refused + ".")
    (warned,) = columns([{"lun": ""}], {"lun": "number"}, mode="warn").findings
    assert refused not in warned.message


@pytest.mark.parametrize(
    ("mode", "state"), [("enforce", "unreachable"), ("warn", "not-applicable")]
)
def test_columns_a_record_holding_only_the_refusal_is_unreachable_under_enforce(
    mode: str, state: str
) -> None:
    """Under enforce the recorded result may be the refusal the model was served, not the tool's
    rows: those rows are not in the record. Under warn the same text is just not a rowset."""
    refusal = "Result rejected: list_luns returned rows that disagree with its columns."
    result = columns(refusal, {"lun": "number"}, mode=mode)
    assert result.findings == ()
    assert result.row("column-type-mismatch").state == state
    assert result.row("missing-column").state == state


def test_columns_empty_strings_in_a_number_column() -> None:
    result = columns([{"lun": ""}, {"lun": ""}, {"lun": 3}], {"lun": "number"})
    (finding,) = kinds(result, "column-type-mismatch")
    assert "2 of 3 rows" in finding.message
    assert result.row("missing-column").state == "pass"


def test_columns_quoted_numbers_say_string() -> None:
    (finding,) = kinds(columns([{"size": "1240"}], {"size": "number"}), "column-type-mismatch")
    assert '"1240" (string)' in finding.message


def test_columns_a_string_column_holding_a_unit_passes() -> None:
    assert columns([{"size": "0.0 GB"}], {"size": "string"}).findings == ()


def test_columns_absent_everywhere_is_only_missing_column() -> None:
    result = columns([{"a": 1}, {"a": 2}], {"lun": "number"})
    assert [f.kind for f in result.findings] == ["missing-column"]
    assert "none of the 2 rows" in result.findings[0].message


def test_columns_absent_in_some_rows_is_a_mismatch_with_the_nullable_hint() -> None:
    result = columns([{"lun": 1}, {"a": 2}], {"lun": "number"})
    (finding,) = result.findings
    assert finding.kind == "column-type-mismatch"
    assert "no such key (missing)" in finding.message
    assert "declare it nullable" in finding.message
    assert (
        columns([{"lun": 1}, {"lun": None}], {"lun": {"type": "number", "nullable": True}}).findings
        == ()
    )


@pytest.mark.parametrize(
    ("rows", "kind"),
    [
        ('[{"c": NaN}]', "number"),
        ([{"c": "true"}], "boolean"),
        ([{"c": 1}], "boolean"),
        ([{"c": "not a date"}], "date"),
        ([{"c": 1700000000}], "date"),
    ],
)
def test_columns_wrong_values_fail(rows: Any, kind: str) -> None:
    assert len(kinds(columns(rows, {"c": kind}), "column-type-mismatch")) == 1


def test_columns_unlisted_columns_are_ignored() -> None:
    assert columns([{"c": 1, "extra": "x"}], {"c": "number"}).findings == ()


@pytest.mark.parametrize("rows", [[], ["a"], {"rows": [{"c": 1}]}])
def test_columns_non_rowsets_are_not_applicable(rows: Any) -> None:
    result = columns(rows, {"c": "number"})
    assert result.row("column-type-mismatch").state == "not-applicable"
    assert result.row("missing-column").state == "not-applicable"


def test_columns_dial_off_is_not_applicable() -> None:
    assert columns([{"c": "x"}], {"c": "number"}, mode="off").row("column-type-mismatch").state == (
        "not-applicable"
    )


# ── verify mode ─────────────────────────────────────────────────────────────────────────────

REPORTED = {
    "kind": "unsupported-argument",
    "seam": "choice",
    "subjects": ["tool:get_host"],
    "predicate": "machine",
    "iteration": 1,
}


def test_verify_agreeing_findings_are_no_mismatch() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.reported = [REPORTED]
    result = integrity(script)
    assert result.verified and result.disagreements == ()


def test_verify_a_finding_the_agent_missed_is_derived_only() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.reported = [{**REPORTED, "predicate": "other"}]
    result = integrity(script)
    assert sorted(d.side for d in result.disagreements) == ["derived-only", "reported-only"]


def test_verify_only_judged_rows_are_compared() -> None:
    script = choice({"machine": "host-zeta-99"})
    for step in script.steps:
        step.messages = None  # unreachable: no side can be taken
    script.reported = [REPORTED]
    assert integrity(script).disagreements == ()


def row(check: str, seam: str, checked: int, findings: int, na: int = 0) -> dict[str, Any]:
    """One row of the agent's own ``integrity.disposition``."""
    return {
        "check": check,
        "seam": seam,
        "checked": checked,
        "findings": findings,
        "notApplicable": na,
        "unreachable": 0,
        "synthetic": 0,
    }


def test_verify_rows_that_agree_are_no_mismatch() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.disposition = [row("unsupported-argument", "choice", 1, 1, 1)]
    result = integrity(script)
    assert result.verified and result.disagreements == ()


def test_verify_a_row_the_agent_judged_clean_but_fails_here_is_a_disagreement() -> None:
    """The agent's rows say its check passed; re-derived, it fails — shown even though the agent
    reported no finding (a row is compared by its verdict, not only findings by identity)."""
    script = choice({"machine": "host-zeta-99"})
    script.disposition = [row("unsupported-argument", "choice", 1, 0, 1)]
    result = integrity(script)
    (disagreement,) = result.disagreements
    assert disagreement.side == "derived-only"
    assert disagreement.identity.startswith("unsupported-argument @choice row:")


def test_verify_a_disagreement_alone_is_named_in_the_summary() -> None:
    from otel_footprint.account.integrity import summary_sentence

    script = choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")])
    script.disposition = [row("unsupported-argument", "choice", 1, 1)]
    result = integrity(script)
    assert result.contradictions == ()
    assert "disagree on 1 point." in summary_sentence(result)


def test_verify_a_row_the_agent_failed_but_passes_here_is_reported_only() -> None:
    script = choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")])
    script.disposition = [row("unsupported-argument", "choice", 1, 1)]
    (disagreement,) = integrity(script).disagreements
    assert disagreement.side == "reported-only"


def test_verify_a_row_unreachable_here_takes_no_side() -> None:
    script = choice({"machine": "host-zeta-99"})
    for step in script.steps:
        step.messages = None
    script.disposition = [row("unsupported-argument", "choice", 1, 0)]
    assert integrity(script).disagreements == ()


def test_a_check_the_agent_ran_is_unreachable_not_unarmed_when_its_inputs_are_missing() -> None:
    """The agent's rows say its wire check met every call; nothing here gives a second view of
    the tools sent: the row says the check applies and cannot be judged, naming what is missing."""
    script = choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")])
    script.disposition = [row("invariant-violation", "wire", 2, 0)]
    wire = integrity(script).row("invariant-violation", "wire")
    assert (wire.armed, wire.state) == (True, "unreachable")
    assert wire.why[0].startswith("the agent's own disposition shows this check met 2 subject(s)")
    assert "no model call has two tool lists" in wire.why[0]


def test_a_check_the_agent_left_unarmed_stays_unarmed() -> None:
    script = choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")])
    script.disposition = [row("invariant-violation", "wire", 0, 0, 1)]
    wire = integrity(script).row("invariant-violation", "wire")
    assert (wire.armed, wire.state) == (False, "not-applicable")


# ── rows and their lifecycle (T3, T4) ───────────────────────────────────────────────────────


def test_every_row_is_present_and_unarmed_rows_say_not_applicable_once() -> None:
    result = integrity(choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")]))
    assert [(r.check, r.seam) for r in result.rows] == [
        ("invariant-violation", "wire"),
        ("invariant-violation", "compose"),
        ("dangling-reference", "compose"),
        ("unsupported-argument", "choice"),
        ("unsupported-claim", "claim"),
        ("empty-lookup", "write"),
        ("column-type-mismatch", "write"),
        ("missing-column", "write"),
        ("prior-turn-evidence", "claim"),
    ]
    for row in result.rows:
        if not row.armed:
            assert (row.checked, row.not_applicable, row.unreachable) == (0, 1, 0), row
            assert row.why
    armed = result.row("unsupported-argument")
    assert (armed.armed, armed.checked, armed.findings) == (True, 1, 0)
    assert armed.not_applicable == 1  # the answering pass made no armed call, it is not pre-noted


def test_dangling_no_grounded_tool_offered_is_not_applicable() -> None:
    script = eviction()
    script.steps[2].tools = [tool_def("list_hosts")]  # get_host is not offered at pass 3
    result = integrity(script)
    assert kinds(result, "dangling-reference") == []
    assert result.row("dangling-reference").state == "not-applicable"


def test_external_grounds_that_are_blank_excuse_nothing() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.steps[0].raw_grounds = [("", "cmdb"), ("host-zeta-99", " ")]
    result = integrity(script)
    assert result.excusals == ()
    assert len(kinds(result, "unsupported-argument")) == 1


# ── dev posture, and checks that met nothing ────────────────────────────────────────────────


def test_dev_posture_catches_every_canary_and_counts_them_apart() -> None:
    script = choice({"machine": "host-zeta-99"})
    script.posture = "dev"
    result = integrity(script)
    assert result.posture == "dev"
    assert [r.synthetic for r in result.rows] == [1] * 9
    assert len(result.findings) == 1  # canaries are never findings
    assert result.alarms == ()


def test_observe_posture_runs_no_canary() -> None:
    result = integrity(choice({"machine": "host-zeta-99"}))
    assert (result.posture, result.alarms) == ("observe", ())
    assert [r.synthetic for r in result.rows] == [0] * 9


def test_dev_posture_alarms_on_an_armed_check_that_met_no_subject() -> None:
    """The argument check is armed and the run did work (a tool ran), but no model call is in the
    record: the check met nothing. Its row is unreachable in any posture; dev posture also raises
    the alarm."""
    from otel_footprint.account.integrity import check_integrity
    from otel_footprint.runs.integrity_inputs import Execution, Settings
    from otel_footprint.runs.outputs import Ref

    ran = Execution("list_luns", "c1", 1, 0, {}, False, LUNS, None, None, Ref("a" * 32, "c" * 16))
    dev = check_integrity(_bare_inputs(executions=(ran,), settings=Settings(posture="dev")))
    assert "unsupported-argument@choice: armed, but met no subject in a run that did work" in (
        dev.alarms
    )
    observe = check_integrity(_bare_inputs(executions=(ran,)))
    assert observe.alarms == ()


def test_dev_posture_alarms_on_a_canary_not_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_footprint.account.integrity import canary
    from otel_footprint.account.integrity.tally import Tally

    monkeypatch.setitem(canary._CANARIES, ("invariant-violation", "wire"), Tally)
    canary.caught.cache_clear()
    try:
        script = choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")])
        script.posture = "dev"
        result = integrity(script)
    finally:
        monkeypatch.undo()
        canary.caught.cache_clear()
    assert "invariant-violation@wire: its canary was not caught (0 of 1)" in result.alarms
    assert result.row("invariant-violation", "wire").synthetic == 0


def _bare_inputs(**fields: Any) -> Any:
    from otel_footprint.runs.integrity_inputs import IntegrityInputs, Settings, ToolDeclaration
    from otel_footprint.runs.outputs import Ref

    ref = Ref("a" * 32, "b" * 16)
    base: dict[str, Any] = {
        "trace_id": "a" * 32,
        "run_span_id": None,
        "passes": (),
        "declarations": {"find_paths": ToolDeclaration("find_paths", ("list_luns",), None, ref)},
        "settings": Settings(notice_empty_lookups=True),
        "executions": (),
    }
    return IntegrityInputs(**{**base, **fields})


def test_an_armed_check_that_met_no_subject_in_a_run_that_did_work_is_unreachable() -> None:
    """Tool spans, but no model-call span in the record: the checks that judge model calls met
    none — unreachable, never "does not apply"."""
    from otel_footprint.account.integrity import check_integrity
    from otel_footprint.runs.integrity_inputs import Execution
    from otel_footprint.runs.outputs import Ref

    ran = Execution("list_luns", "c1", 1, 0, {}, False, LUNS, None, None, Ref("a" * 32, "c" * 16))
    result = check_integrity(_bare_inputs(executions=(ran,)))
    for check in ("unsupported-argument", "dangling-reference"):
        row = result.row(check)
        assert row.state == "unreachable", check
        assert row.why[0].startswith("it met no subject")


def test_lookup_when_which_tools_were_called_is_unknown_is_unreachable() -> None:
    from otel_footprint.account.integrity.lookup import check_lookups

    (encounter,) = check_lookups(_bare_inputs(calls_unknown=True)).encounters
    assert encounter.disposition == "unreachable"
    (known,) = check_lookups(_bare_inputs()).encounters
    assert known.disposition == "not-applicable"


# ── unsupported-claim (T10, T11) ────────────────────────────────────────────────────────────


def claim_run(
    answer: str,
    facts: list[list[dict[str, Any]]] | None = None,
    claims: tuple[tuple[str, str, str], ...] = (("paths", "lun-7", "paths"),),
) -> Script:
    """One tool call per fact batch (in order), then the typed answer."""
    batches = facts if facts is not None else [[{"entity": "lun-7", "paths": 2}]]
    steps = [
        Step(
            tools=[tool_def("count_paths")],
            messages=[user("paths?")],
            calls=[Call("count_paths", {}, "ok", facts=b)],
        )
        for b in batches
    ]
    steps.append(Step(tools=[tool_def("count_paths")], messages=[user("paths?")], text=answer))
    return Script(steps, maps=(), claims=claims, answer=answer)


def test_claim_contradicting_the_settled_fact_is_a_finding() -> None:
    result = integrity(claim_run('{"paths": 4}'))
    (finding,) = kinds(result, "unsupported-claim")
    assert not finding.advisory
    assert [s.render() for s in finding.subjects] == ["entity:lun-7"]
    assert finding.predicate == "paths"
    assert "says 4" in finding.message and "paths(lun-7) = 2" in finding.message
    assert result.row("unsupported-claim").state == "fail"
    assert "integrity.unsupported-claim" in signal_ids(result)


@pytest.mark.parametrize(
    ("answer", "state"),
    [
        ('{"paths": 2}', "pass"),  # agrees
        ('{"paths": "2"}', "pass"),  # a numeric string equal to a settled number
        ('{"other": 1}', "not-applicable"),  # the schema allowed the absence
        ("two paths", "unreachable"),  # prose is never judged
        ("[2]", "unreachable"),  # not an object
    ],
)
def test_claim_rows(answer: str, state: str) -> None:
    result = integrity(claim_run(answer))
    assert kinds(result, "unsupported-claim") == []
    assert result.row("unsupported-claim").state == state


def test_claim_of_an_uncollected_fact_is_unreachable() -> None:
    result = integrity(claim_run('{"paths": 4}', facts=[[{"entity": "lun-9", "paths": 4}]]))
    row = result.row("unsupported-claim")
    assert row.state == "unreachable"
    assert "no tool settled paths(lun-7)" in row.why[0]


def test_declining_a_verified_fact_is_an_advisory() -> None:
    result = integrity(claim_run('{"paths": null}'))
    (finding,) = kinds(result, "unsupported-claim")
    assert finding.advisory and "advisory" in finding.message
    assert result.contradictions == () and result.row("unsupported-claim").state == "pass"
    # null claimed against a settled null passes silently
    settled_null = claim_run('{"paths": null}', facts=[[{"entity": "lun-7", "paths": None}]])
    assert integrity(settled_null).findings == ()


def test_quoted_history_fires_only_when_the_superseded_value_is_claimed() -> None:
    history = [[{"entity": "lun-7", "paths": 1}], [{"entity": "lun-7", "paths": 2}]]
    assert integrity(claim_run('{"paths": 2}', facts=history)).findings == ()
    (finding,) = integrity(claim_run('{"paths": 1}', facts=history)).findings
    assert [w.value for w in finding.witnesses] == ["2", "1", "1"]  # settled, claimed, quoted


def test_two_fields_of_one_entity_are_two_identities() -> None:
    facts = [[{"entity": "lun-7", "paths": 2, "state": "degraded"}]]
    claims = (("paths", "lun-7", "paths"), ("health.state", "lun-7", "state"))
    result = integrity(
        claim_run('{"paths": 3, "health": {"state": "ok"}}', facts=facts, claims=claims)
    )
    assert sorted(f.predicate or "" for f in kinds(result, "unsupported-claim")) == [
        "paths",
        "state",
    ]
    # an advisory on one field does not swallow the other's contradiction
    mixed = integrity(
        claim_run('{"paths": null, "health": {"state": "ok"}}', facts=facts, claims=claims)
    )
    assert sorted((f.predicate, f.advisory) for f in mixed.findings) == [
        ("paths", True),
        ("state", False),
    ]


def test_described_result_declarations_are_read_alongside_semantic_ones() -> None:
    """A ``describedResult()`` declaration (camelCase keys, ``provenance.measuredAt``) settles
    facts like a ``semantic()`` envelope, and its measurement time is read."""
    script = claim_run('{"paths": 4}')
    script.steps[0].calls[0].described_at = "2026-09-26T10:00:00Z"
    (finding,) = kinds(integrity(script), "unsupported-claim")
    assert finding.witnesses[0].provenance.endswith("measured 2026-09-26T10:00:00Z")


def test_described_result_under_its_own_payload_name_is_read() -> None:
    from otel_footprint.codec import EventPointer, FootprintEvent
    from otel_footprint.runs.integrity_inputs import _facts

    pointer = EventPointer("t" * 32, "s" * 16, "footprint.tools.semantics_declared", 0)
    envelope = '{"facts":[{"entity":"lun-7","paths":2}],"provenance":{"measuredAt":"2026-01-01"}}'
    event = FootprintEvent(
        "tools.semantics_declared",
        {"toolName": "count_paths", "describedResult": envelope},
        pointer,
    )
    (fact,) = _facts([event], {}, [])
    assert (fact.entity, fact.field, fact.value, fact.measured_at) == (
        "lun-7",
        "paths",
        2,
        "2026-01-01",
    )


def test_claim_with_an_unreadable_fact_declaration_is_unreachable() -> None:
    """The ledger has a hole (a declaration cut by an attribute limit): the latest settle of the
    claimed fact may be in it, so the claim is not judged against an older row."""
    script = claim_run('{"paths": 2}')
    extra = Call("count_paths", {}, "ok")
    script.steps.insert(
        1, Step(tools=[tool_def("count_paths")], messages=[user("again")], calls=[extra])
    )
    result_ok = integrity(script)
    assert result_ok.row("unsupported-claim").state == "pass"
    script.steps[1].calls[0].cut_facts = True
    row = integrity(script).row("unsupported-claim")
    assert row.state == "unreachable"
    assert "recorded but not readable" in row.why[0]


def test_no_contract_is_not_applicable() -> None:
    row = integrity(claim_run('{"paths": 4}', claims=())).row("unsupported-claim")
    assert (row.armed, row.state) == (False, "not-applicable")


# ── prior-turn-evidence (T14, T14b) ─────────────────────────────────────────────────────────


def recency(grounding: dict[str, Any] | None, notice: bool = True) -> IntegrityResult:
    script = Script(
        [Step(tools=[tool_def("lookup")], messages=[user("and now?")], text="the same as before")],
        maps=(),
        notice_prior_turn_evidence=notice,
        grounding=grounding,
    )
    return integrity(script)


FIELD_CASE = {
    "from_this_turn": 0,
    "from_prior_turns": 3,
    "latest_prior_turn": 1,
    "current_turn": 3,
    "tool_results_this_turn": 0,
}


LOOKED_UP = {
    "fromThisTurn": 0,
    "fromPriorTurns": 3,
    "latestPriorTurn": 1,
    "currentTurn": 3,
    "toolResultsThisTurn": 0,
}


@pytest.mark.parametrize(
    "event",
    [
        ("agent.evidence_checked", {"passed": True, "lookedUp": LOOKED_UP}),
        ("evidence.looked_up", LOOKED_UP),
    ],
    ids=["evidence_checked.lookedUp", "evidence.looked_up"],
)
def test_recency_reads_the_gates_reading_wherever_the_record_carries_it(
    event: tuple[str, dict[str, Any]],
) -> None:
    script = Script(
        [Step(tools=[tool_def("lookup")], messages=[user("and now?")], text="the same")],
        maps=(),
        notice_prior_turn_evidence=True,
        gate_events=[event],
    )
    result = integrity(script)
    (finding,) = kinds(result, "prior-turn-evidence")
    assert "turn 1" in finding.message
    assert result.row("prior-turn-evidence").state == "fail"


def test_recency_field_case_is_one_advisory() -> None:
    result = recency(FIELD_CASE)
    (finding,) = kinds(result, "prior-turn-evidence")
    assert finding.advisory and finding.predicate == "grounding"
    assert [s.render() for s in finding.subjects] == ["answer:final"]
    assert "3 values" in finding.message and "turn 1" in finding.message
    assert "2 turns or more" in finding.message
    assert "called no tool and read no result" in finding.message
    assert len(finding.witnesses) == 3
    assert result.row("prior-turn-evidence").state == "fail"  # the row fired; the run did not fail
    assert result.contradictions == () and result.state == "pass"


def test_recency_a_turn_that_fetched_but_used_nothing_says_so() -> None:
    (finding,) = recency({**FIELD_CASE, "tool_results_this_turn": 2}).findings
    assert "read 2 tool results" in finding.message


@pytest.mark.parametrize(
    ("grounding", "state"),
    [
        ({**FIELD_CASE, "from_this_turn": 1}, "pass"),  # one value from this turn is enough
        ({**FIELD_CASE, "index_truncated": True}, "not-applicable"),
        ({**FIELD_CASE, "current_turn": 0}, "unreachable"),  # no user turn to measure from
        ({**FIELD_CASE, "from_prior_turns": 0}, "unreachable"),  # nothing to attribute
        (None, "unreachable"),  # the gate's reading is not in the record
    ],
)
def test_recency_rows(grounding: dict[str, Any] | None, state: str) -> None:
    result = recency(grounding)
    assert kinds(result, "prior-turn-evidence") == []
    assert result.row("prior-turn-evidence").state == state


def test_recency_dial_off_is_not_applicable() -> None:
    row = recency(FIELD_CASE, notice=False).row("prior-turn-evidence")
    assert (row.armed, row.state) == (False, "not-applicable")
