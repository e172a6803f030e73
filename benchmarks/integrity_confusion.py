"""The integrity checks' confusion table over the project's own scenarios.

Each case is one scripted run from the integrity tests (``tests/integrity_fixtures.py``, the
builders of ``tests/test_integrity_scenarios.py``), recorded with the real OpenTelemetry SDK and
the recorder and decided by the engine, labelled with what the row of the check under test must
say: ``fire`` (a finding), ``clean`` (judged, nothing found) or ``unreachable`` (an input the rule
needs is not in the record). With ``--instrumented`` the agent of ``tests/integrity_agent.py`` also
runs on the real ``openai`` client under openai-v2, OpenInference and OpenLLMetry (content capture
on and off) against the fake OpenAI server, each run in its own interpreter. The shared agentfootprint
recordings are imported too: their compose row, and verify mode against the agent's own
disposition rows (a disagreement counts as wrong).

Per check it prints: fired (fire, and it fired), missed (fire, but judged clean), unreachable (the
row could not be judged), clean (clean, and judged clean), false+ (it fired where nothing is wrong)
and wrong (any other state than the label: unreachable where the evidence was all there, or a
judgement where it was not). A case labelled ``fire?`` accepts unreachable too (the instrumentation
may or may not record the input with content capture off).

    .venv/bin/python benchmarks/integrity_confusion.py [--instrumented] [--verbose]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from integrity_fixtures import Call, Script, Step, tool_def, trap, user, verdict_of  # noqa: E402
from test_integrity_scenarios import (  # noqa: E402
    FIELD_CASE,
    LUNS,
    choice,
    claim_run,
    eviction,
    lookup,
    wire_script,
)

from otel_footprint.account.integrity import IntegrityResult  # noqa: E402

Label = str  # fire | fire? | clean | unreachable


States = dict[tuple[str, str], str]
"""Every row's state, by (check, seam)."""


@dataclass(frozen=True)
class Case:
    name: str
    check: tuple[str, str]
    expect: Label
    build: Callable[[], States]


def states_of(result: IntegrityResult) -> States:
    return {(r.check, r.seam): r.state for r in result.rows}


def scripted(script: Script | Callable[[], Script]) -> Callable[[], States]:
    def run() -> States:
        built = script() if callable(script) else copy.deepcopy(script)
        result = verdict_of(built).integrity
        assert result is not None
        return states_of(result)

    return run


def blind(script: Script, *, tools: bool = False, messages: bool = False) -> Script:
    """The same run with content capture off for the offered list and/or the frames."""
    for step in script.steps:
        if tools:
            step.tools = None
        if messages:
            step.messages = None
            step.output = False
    return script


def schemaless(script: Script) -> Script:
    """The offered list recorded as names only (no ``parameters``)."""
    for step in script.steps:
        step.tools = [{"type": "function", "name": t["name"]} for t in step.tools or ()]
    return script


def columns_script(rows: Any, declared: dict[str, Any], *, unrecorded: bool = False) -> Script:
    return Script(
        [
            Step(
                tools=[tool_def("list_luns")],
                messages=[user("luns")],
                calls=[Call("list_luns", {}, rows, unrecorded=unrecorded)],
            ),
            Step(tools=[tool_def("list_luns")], messages=[user("luns")], text="ok"),
        ],
        maps=(),
        columns={"list_luns": declared},
        check_column_types="warn",
    )


def recency_script(grounding: dict[str, Any] | None) -> Script:
    return Script(
        [Step(tools=[tool_def("lookup")], messages=[user("and now?")], text="the same")],
        maps=(),
        notice_prior_turn_evidence=True,
        grounding=grounding,
    )


def _with_hidden_producer() -> Script:
    script = lookup(producer='[{"lun":7,"wwpn":"other"}]')
    hidden = Step(
        tools=[tool_def("list_luns")],
        messages=[user("paths?")],
        calls=[Call("list_luns", {"page": 2}, unrecorded=True)],
    )
    script.steps = [script.steps[0], hidden, *script.steps[1:]]
    return script


def _unnamable_result() -> Script:
    script = eviction()
    unnamed = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "zz", "response": "?"}],
    }
    script.steps[2].messages = [*(script.steps[2].messages or ()), unnamed]
    return script


def _paused_absence() -> Script:
    script = lookup()
    script.steps[1].calls[0].paused_absence = {"searched": "paths", "matched": 0}
    return script


WIRE = ("invariant-violation", "wire")
COMPOSE = ("invariant-violation", "compose")
DANGLING = ("dangling-reference", "compose")
ARGUMENT = ("unsupported-argument", "choice")
CLAIM = ("unsupported-claim", "claim")
LOOKUP = ("empty-lookup", "write")
MISMATCH = ("column-type-mismatch", "write")
MISSING = ("missing-column", "write")
RECENCY = ("prior-turn-evidence", "claim")
BAD = '{"machine": "host-zeta-99"}'


def scripted_cases() -> Iterator[Case]:
    def case(name: str, check: tuple[str, str], expect: Label, build: Any) -> Case:
        return Case(name, check, expect, scripted(build))

    all_offered = ("screen_open", "get_zone_info")
    yield case("manifest agrees", WIRE, "clean", wire_script(["t2", "t1"]))
    yield case("manifest adds a tool", WIRE, "fire", wire_script(["t1", "t2", "x1"]))
    yield case("manifest drops a tool", WIRE, "fire", wire_script(["t1"]))
    yield case("empty manifest", WIRE, "fire", wire_script([]))
    yield case(
        "manifest, no framework list", WIRE, "unreachable", blind(wire_script(["t1"]), tools=True)
    )
    yield case("manifest on one pass of two", WIRE, "unreachable", wire_script(["t1", "t2"], None))
    yield case(
        "parked map's tool offered",
        COMPOSE,
        "fire",
        trap(dict.fromkeys(range(7), all_offered), enforced=True),
    )
    yield case(
        "parked map's tool offered, no kernel in the agent (an advisory)",
        COMPOSE,
        "clean",
        trap(dict.fromkeys(range(7), all_offered)),
    )
    yield case(
        "parked map's tool withheld",
        COMPOSE,
        "clean",
        trap(dict.fromkeys(range(4, 7), ("screen_open",))),
    )
    yield case("offered list not captured", COMPOSE, "unreachable", blind(trap({}), tools=True))
    yield case("eviction trap", DANGLING, "fire", eviction())
    yield case("ground fetched again", DANGLING, "clean", eviction(refetch=True))
    yield case(
        "fetched again, result unnamed", DANGLING, "clean", eviction(refetch=True, named=False)
    )
    yield case("a result no rule can name", DANGLING, "unreachable", _unnamable_result)
    yield case("frames not captured", DANGLING, "unreachable", blind(eviction(), messages=True))
    yield case("offered list not captured", DANGLING, "unreachable", blind(eviction(), tools=True))
    yield case("invented value", ARGUMENT, "fire", choice({"machine": "host-zeta-99"}))
    yield case(
        "value from the model's own prose",
        ARGUMENT,
        "fire",
        choice(
            {"machine": "host-zeta-99"},
            messages=[
                user("x"),
                {"role": "assistant", "parts": [{"type": "text", "content": "host-zeta-99?"}]},
            ],
        ),
    )
    yield case(
        "value the user gave",
        ARGUMENT,
        "clean",
        choice({"machine": "host-alpha-01"}, messages=[user("host-alpha-01")]),
    )
    yield case(
        "value from the instructions",
        ARGUMENT,
        "clean",
        choice({"machine": "host-alpha-01"}, system=["Default: host-alpha-01"]),
    )
    yield case("enum member, schema recorded", ARGUMENT, "clean", choice({"mode": "strict"}))
    yield case(
        "enum member, names only", ARGUMENT, "unreachable", schemaless(choice({"mode": "strict"}))
    )
    yield case(
        "invented value, names only",
        ARGUMENT,
        "unreachable",
        schemaless(choice({"machine": "host-zeta-99"})),
    )
    yield case(
        "enum member, no offered list",
        ARGUMENT,
        "unreachable",
        blind(choice({"mode": "strict"}), tools=True),
    )
    yield case(
        "app-vouched value",
        ARGUMENT,
        "clean",
        choice({"machine": "host-zeta-99"}, grounds=[("host-zeta-99", "cmdb")]),
    )
    yield case(
        "frames not captured",
        ARGUMENT,
        "unreachable",
        blind(choice({"machine": "host-zeta-99"}), messages=True),
    )
    yield case("answer contradicts the fact", CLAIM, "fire", claim_run('{"paths": 4}'))
    yield case("answer agrees", CLAIM, "clean", claim_run('{"paths": 2}'))
    yield case("numeric string agrees", CLAIM, "clean", claim_run('{"paths": "2"}'))
    yield case("prose answer", CLAIM, "unreachable", claim_run("two paths"))
    yield case(
        "fact never settled",
        CLAIM,
        "unreachable",
        claim_run('{"paths": 4}', facts=[[{"entity": "lun-9", "paths": 4}]]),
    )
    yield case("lookup on a produced id, empty", LOOKUP, "fire", lookup())
    yield case("declared absence", LOOKUP, "fire", lookup("no paths", absent=True))
    yield case("paused with a declared absence", LOOKUP, "fire", _paused_absence)
    yield case(
        "producer lacks the value", LOOKUP, "clean", lookup(producer='[{"lun":7,"wwpn":"other"}]')
    )
    yield case("one row came back", LOOKUP, "clean", lookup('[{"path":"p1"}]'))
    yield case("no producer result", LOOKUP, "unreachable", lookup(producer=None))
    yield case("a producer result not recorded", LOOKUP, "unreachable", _with_hidden_producer)
    yield case(
        "empty string in a number column",
        MISMATCH,
        "fire",
        columns_script([{"lun": ""}, {"lun": 3}], {"lun": "number"}),
    )
    yield case("typed rows", MISMATCH, "clean", columns_script([{"lun": 1}], {"lun": "number"}))
    yield case(
        "result not recorded",
        MISMATCH,
        "unreachable",
        columns_script(LUNS, {"lun": "number"}, unrecorded=True),
    )
    yield case("column in no row", MISSING, "fire", columns_script([{"a": 1}], {"lun": "number"}))
    yield case("column present", MISSING, "clean", columns_script([{"lun": 1}], {"lun": "number"}))
    yield case(
        "result not recorded",
        MISSING,
        "unreachable",
        columns_script(LUNS, {"lun": "number"}, unrecorded=True),
    )
    yield case("answer drawn from earlier turns", RECENCY, "fire", recency_script(FIELD_CASE))
    yield case(
        "a value from this turn",
        RECENCY,
        "clean",
        recency_script({**FIELD_CASE, "from_this_turn": 1}),
    )
    yield case("gate's reading not recorded", RECENCY, "unreachable", recency_script(None))
    yield case(
        "no user turn", RECENCY, "unreachable", recency_script({**FIELD_CASE, "current_turn": 0})
    )


def instrumented_cases(folder: Path) -> Iterator[Case]:
    """The agent of tests/integrity_agent.py on the real client under each instrumentation."""
    from fake_openai import FakeOpenAI
    from integrity_agent import MODEL, SCENARIOS, run_agent

    from otel_footprint import semconv
    from otel_footprint.runs.spans import key_values_to_pairs

    def build(
        flavor: str, scenario: str, content: bool, stated: bool = True
    ) -> Callable[[], States]:
        def run() -> States:
            with FakeOpenAI({MODEL: SCENARIOS[scenario]}) as server:
                request = run_agent(
                    flavor, scenario, server.url, content=content, folder=folder, state_tools=stated
                )
            # What the in-process processor wrote on the run span: one attribute per row.
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attrs = dict(key_values_to_pairs(span.attributes))
                        if semconv.INTEGRITY_SUMMARY in attrs:
                            return {
                                (check, seam): str(
                                    attrs.get(
                                        semconv.integrity_row_attribute(check, seam),
                                        "not-applicable",
                                    )
                                )
                                for check, seam in semconv.INTEGRITY_ROWS
                            }
            raise AssertionError(f"{flavor} {scenario}: no annotated run span")

        return run

    for flavor in ("genai", "openinference", "openllmetry"):
        for content in (True, False):
            tag = f"{flavor}, content {'on' if content else 'off'}"
            yield Case(
                f"{tag}: parked",
                COMPOSE,
                "fire" if content else "fire?",
                build(flavor, "parked", content),
            )
            yield Case(
                f"{tag}: invented",
                ARGUMENT,
                "fire" if content else "unreachable",
                build(flavor, "invented", content),
            )
            yield Case(
                f"{tag}: grounded",
                ARGUMENT,
                "clean" if content else "unreachable",
                build(flavor, "grounded", content),
            )
            yield Case(
                f"{tag}: enum member",
                ARGUMENT,
                "clean" if content else "unreachable",
                build(flavor, "enum", content),
            )
    # openai-v2 records no tool list; here the agent does not state its own either.
    tag = "genai, content on, no tool list"
    yield Case(f"{tag}: enum member", ARGUMENT, "unreachable", build("genai", "enum", True, False))
    yield Case(f"{tag}: invented", ARGUMENT, "unreachable", build("genai", "invented", True, False))
    yield Case(f"{tag}: grounded", ARGUMENT, "clean", build("genai", "grounded", True, False))
    yield Case(f"{tag}: parked", COMPOSE, "unreachable", build("genai", "parked", True, False))


RECORDINGS = TESTS / "data" / "reference" / "recordings"


def recording_cases() -> Iterator[Case]:
    """The upstream's own recordings, imported: the compose row read from the offered lists the
    recording carries. park-trap (the agent's kernel parks at pass 4 and its disposition says
    compose checked 3, found 0) is clean; so is no-kernel (no kernel in the agent: shadow; what
    parking would have withheld is an advisory, and the agent's disposition also says 0)."""
    from otel_footprint.bridges.agentfootprint import recording_to_requests
    from otel_footprint.commands.explain import Loaded, explain_requests

    def build(stem: str) -> Callable[[], States]:
        def run() -> States:
            lines = (RECORDINGS / f"{stem}.ndjson").read_text(encoding="utf-8").splitlines()
            (verdict,) = explain_requests(Loaded(traces=recording_to_requests(lines), logs=[]))
            result = verdict.integrity
            assert result is not None
            states = states_of(result)
            # Verify mode against the agent's own disposition rows: a disagreement is wrong.
            states[("verify", "rows")] = "fail" if result.disagreements else "pass"
            return states

        return run

    yield Case("park-trap (agent: checked 3, found 0)", COMPOSE, "clean", build("park-trap"))
    yield Case(
        "no-kernel (shadow; agent: checked 3, found 0)", COMPOSE, "clean", build("no-kernel")
    )
    for stem in ("park-trap", "no-kernel", "own-tool", "routed-delivered"):
        yield Case(
            f"{stem}: agrees with the agent's rows", ("verify", "rows"), "clean", build(stem)
        )


def classify(expect: Label, state: str) -> str:
    if state == "fail":
        return "fired" if expect in ("fire", "fire?") else "false+"
    if state == "unreachable":
        return "unreachable" if expect in ("unreachable", "fire?") else "wrong"
    if state == "pass":
        if expect == "clean":
            return "clean"
        return "missed" if expect in ("fire", "fire?") else "wrong"
    return "wrong"  # not-applicable where the case arms the check


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--instrumented", action="store_true", help="also the real instrumentations"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per case")
    args = parser.parse_args()
    cases = [*scripted_cases(), *recording_cases()]
    with tempfile.TemporaryDirectory() as tmp:
        if args.instrumented:
            cases += list(instrumented_cases(Path(tmp)))
        columns = ("fired", "missed", "unreachable", "clean", "false+", "wrong")
        table: dict[str, dict[str, int]] = {}
        bad: list[str] = []
        for case in cases:
            states = case.build()
            state = states[case.check]
            outcome = classify(case.expect, state)
            name = f"{case.check[0]}@{case.check[1]}"
            counts = table.setdefault(name, dict.fromkeys(columns, 0))
            counts[outcome] += 1
            if args.verbose:
                print(f"  {outcome:<11} {name:<32} {case.name} ({state})")
            if outcome in ("missed", "false+", "wrong"):
                bad.append(f"{outcome}: {name}: {case.name} (the row says {state})")
            # Every row of the run is looked at, not only the one under test: a row that fires
            # where the case plants nothing for it is a false positive too.
            for (check, seam), other in states.items():
                if (
                    other == "fail"
                    and (check, seam) != case.check
                    and "verify"
                    not in (
                        check,
                        case.check[0],
                    )
                ):
                    bad.append(f"false+ elsewhere: {check}@{seam} in {case.name!r}")
    width = max(len(n) for n in table) + 2
    print(f"{'check':<{width}}{'cases':>6}" + "".join(f"{c:>12}" for c in columns))
    total = dict.fromkeys(columns, 0)
    for name, counts in table.items():
        n = sum(counts.values())
        print(f"{name:<{width}}{n:>6}" + "".join(f"{counts[c]:>12}" for c in columns))
        for c in columns:
            total[c] += counts[c]
    print(
        f"{'total':<{width}}{sum(total.values()):>6}" + "".join(f"{total[c]:>12}" for c in columns)
    )
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
