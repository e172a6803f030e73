"""The TypeScript agents of tests/node (``openai_agent.mjs``, ``agents_sdk_agent.mjs``) and the Python
agent doing the same work, for the end-to-end tests that compare their verdicts in a backend
(tests/e2e/test_node_openai.py: Phoenix; tests/e2e/test_node_jaeger.py: Jaeger).

All of them run against ``tests/fake_openai.py`` on loopback, scripted by :func:`scripted`: the model
``scripted-<n>`` calls ``screen_open`` ``n - 1`` times, then answers. What a backend shows of a run is
read into :class:`SeenSpan` (one shape for Phoenix's and Jaeger's spans), and :func:`verdicts_of`
takes the run's verdicts and each pass's out of it: one rule for both backends.

Like is compared with like: every agent sends the scenario's tools with each model call, and the
Python agent states them (``Run.frame``) exactly when the instrumentation under test records them
(:func:`records_offered_tools`), so both runs give the integrity checks the same inputs.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Script

from otel_footprint import record as footprint
from otel_footprint import semconv as sc

from .conftest import NODE_PROJECT
from .otel_stack import JaegerSpan
from .phoenix_api import PhoenixSpan

PASSES = 6
MODEL = f"scripted-{PASSES}"
"""The model the agents ask for (openai_agent.mjs and agents_sdk_agent.mjs name it this way)."""
FINAL_ANSWER = "The most recent zone redundancy run is run-42."
AGENT = NODE_PROJECT / "openai_agent.mjs"
AGENTS_SDK_AGENT = NODE_PROJECT / "agents_sdk_agent.mjs"
SPANS = 1 + PASSES + (PASSES - 1)
"""A run's spans: the run span, one model call per pass, one tool call per pass but the last."""
RUN_VERDICT = (
    sc.RUN_MODE,
    sc.RUN_PASSES,
    sc.RUN_COMPLETE,
    sc.RUN_RESUMED,
    sc.RUN_PARKED_MAPS,
    sc.RUN_REASONS,
    sc.RUN_SERVED_CHARS_WHILE_PARKED,
    sc.CHECK_DECIDED_DELIVERED,
    sc.CHECK_DECIDED_DELIVERED_OUTCOME,
    sc.CHECK_EXISTENCE,
    sc.CHECK_EMPTY_RESULTS,
    sc.SIGNALS,
    sc.SUMMARY,
    sc.SUMMARY_TONE,
    sc.INTEGRITY_STATE,
    sc.INTEGRITY_FINDINGS,
    sc.INTEGRITY_ADVISORIES,
    sc.INTEGRITY_KINDS,
    sc.INTEGRITY_UNREACHABLE,
    sc.INTEGRITY_SUMMARY,
    sc.INTEGRITY_MISMATCH,
    *(sc.integrity_row_attribute(check, seam) for check, seam in sc.INTEGRITY_ROWS),
)
PASS_VERDICT = (
    sc.ENG_ENGAGED_MAPS,
    sc.ENG_PARKED_MAPS,
    sc.ENG_PARKED_INJECTION_IDS,
    sc.ENG_PARKED_TOOL_NAMES,
    sc.ENG_SERVED_WHILE_PARKED,
    sc.ENG_SERVED_CHARS_WHILE_PARKED,
    sc.ENG_MISMATCH,
    sc.INTEGRITY_STATE,
    sc.INTEGRITY_FINDINGS,
    sc.INTEGRITY_ADVISORIES,
    sc.INTEGRITY_KINDS,
)
FINDING = (sc.IF_KIND, sc.IF_SEAM, sc.IF_SUBJECTS, sc.IF_ITERATION, sc.IF_ADVISORY, sc.IF_MESSAGE)
"""What a pass's integrity finding says (its evidence points at the run's own span ids: left out)."""
COMPOSE = sc.integrity_evaluation_name("invariant-violation", "compose")
OFFERED_TOOLS_RECORDED_BY = frozenset({"openinference", "traceloop"})
"""The JavaScript instrumentations that record the tools a model call offers on its span
(OpenInference ``llm.tools.*``, OpenLLMetry ``llm.request.functions.*``). ``otel``
(@opentelemetry/instrumentation-openai) records none, nor does the recorder's own span (``none``)."""


def records_offered_tools(instrumentation: str) -> bool:
    """Whether openai_agent.mjs under ``instrumentation`` records the offered tools: then the
    Python agent must state them too (``python_agent(..., offered_tools=True)``)."""
    return instrumentation in OFFERED_TOOLS_RECORDED_BY


@functools.cache
def scenario() -> dict[str, Any]:
    """The agents' scenario, read from tests/node/scenario.mjs (one source for both languages),
    with ``requestTools``: the tools each model call offers, in the chat request's shape."""
    done = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            "const { SCENARIO, requestTools } = await import('./scenario.mjs');"
            "process.stdout.write(JSON.stringify({ ...SCENARIO, requestTools: requestTools() }));",
        ],
        cwd=NODE_PROJECT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def script(passes: int = PASSES) -> Script:
    """The fake server's replies to model ``scripted-<passes>``: ``passes - 1`` calls of the
    scenario's first tool (``screen_open``, ids ``c1``, ``c2``, ...), then the final answer."""
    tool = scenario()["toolRows"][0][0]
    calls: list[dict[str, Any]] = [
        {"tool_calls": [{"id": f"c{k}", "name": tool, "arguments": {"screen": "runs"}}]}
        for k in range(1, passes)
    ]
    return {f"scripted-{passes}": [*calls, {"content": FINAL_ANSWER}]}


def scripted(server: FakeOpenAI) -> FakeOpenAI:
    """``server`` ready for one agent run: the requests forgotten, a fresh :func:`script`."""
    server.reset()
    server.set_script(script())
    return server


def require_node_packages() -> Path:
    """tests/node/openai_agent.mjs; skips when the npm packages (or the built package) are missing."""
    if not (NODE_PROJECT / "node_modules" / "openai").is_dir():
        pytest.skip("tests/node/node_modules is missing: run scripts/node-install.sh")
    if not (NODE_PROJECT / "node_modules" / "@otel-footprint" / "recorder" / "dist").is_dir():
        pytest.skip("js/otel-footprint is not built: run scripts/node-install.sh")
    return AGENT


# --- the agents --------------------------------------------------------------------------------


def python_agent(
    tracer: Any,
    run_id: str,
    server: FakeOpenAI,
    s: dict[str, Any],
    *,
    offered_tools: bool = False,
) -> int:
    """The same work on the Python recorder (its own model-call spans), against the same server.
    Each call offers the scenario's tools, as openai_agent.mjs's do; ``offered_tools``: the agent
    states them on its model-call span (``Run.frame``), as the instrumentations of
    :data:`OFFERED_TOOLS_RECORDED_BY` record them on theirs."""
    tools: list[dict[str, Any]] = s["requestTools"]

    def create(messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = json.dumps({"model": MODEL, "messages": messages, "tools": tools}).encode()
        request = urllib.request.Request(
            f"{server.url}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            reply: dict[str, Any] = json.loads(response.read())
        return reply

    skill = s["skill"]
    messages: list[dict[str, Any]] = [{"role": "user", "content": s["userPrompt"]}]
    with footprint.run(
        tracer,
        agent=s["agent"],
        run_id=run_id,
        maps=[footprint.MountedMap("skill-map", tuple(s["members"]), (s["zoneTool"],))],
        renewal_grace=3,
        enforced=False,
        user_prompt=s["userPrompt"],
        graph=s["graph"],
    ) as run:
        while True:
            with run.model_call(MODEL) as call:
                if call.iteration == 1:
                    call.evaluated(
                        [skill],
                        cursor_to=skill,
                        moved_by="entry",
                        witness="zone",
                        witness_keyword="zone",
                    )
                else:
                    call.evaluated([skill], cursor_to=skill, cursor_from=skill, moved_by="stay")
                call.injected("system-prompt", "base", content=s["basePrompt"])
                call.injected("system-prompt", "skill", source_id=skill, content=s["skillBody"])
                call.composed("system-prompt")
                for name, description in s["toolRows"]:
                    call.injected("tools", "registry", source_id=name, content=description)
                call.injected(
                    "tools", "skill", source_id=skill, content=f"{s['zoneTool']}: zone audit data"
                )
                call.composed("tools")
                if offered_tools:
                    run.frame(call, tools=tools)
                message = create(messages)["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                run.answer(message["content"])
                return run.iteration
            for tool_call in message["tool_calls"]:
                function = tool_call["function"]
                with run.tool_call(
                    function["name"],
                    args=json.loads(function["arguments"]),
                    call_id=tool_call["id"],
                ) as tool:
                    tool.result(s["toolResult"])
                messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": "ok"})


def _node(agent: Path, args: Sequence[str], env: Mapping[str, str] | None) -> Any:
    """Run a Node.js agent to completion (bounded); its last stdout line is a JSON summary."""
    done = subprocess.run(
        ["node", str(agent), *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, f"{agent.name} exited {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_openai_agent(
    server: FakeOpenAI,
    endpoint: str,
    run_id: str,
    instrumentation: str,
    style: str,
    *extra: str,
    env: Mapping[str, str] | None = None,
) -> Any:
    """openai_agent.mjs under ``instrumentation`` exporting to ``endpoint`` (OTLP/HTTP base URL;
    ``env`` adds to its environment, e.g. ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``): its summary, after
    checking that it made and exported the scenario's spans and attached every pass."""
    summary = _node(
        AGENT,
        [
            f"--base-url={scripted(server).url}",
            f"--instrumentation={instrumentation}",
            f"--style={style}",
            f"--endpoint={endpoint}",
            f"--passes={PASSES}",
            f"--run-id={run_id}",
            *extra,
        ],
        env,
    )
    # One model-call span per call (the instrumentation's, or the recorder's own without one).
    assert (summary["modelCalls"], summary["toolCalls"], summary["passes"]) == (PASSES, 5, PASSES)
    assert summary["spans"] == summary["exported"] == SPANS
    assert summary["attached"] == (0 if instrumentation == "none" else PASSES)
    assert summary["unattached"] == 0
    return summary


def run_agents_sdk_agent(
    server: FakeOpenAI,
    endpoint: str,
    run_id: str,
    *extra: str,
    env: Mapping[str, str] | None = None,
) -> Any:
    """agents_sdk_agent.mjs (the OpenAI Agents SDK traced by OpenInference) exporting to
    ``endpoint``: its summary."""
    return _node(
        AGENTS_SDK_AGENT,
        [
            f"--base-url={scripted(server).url}",
            f"--endpoint={endpoint}",
            f"--passes={PASSES}",
            f"--run-id={run_id}",
            *extra,
        ],
        env,
    )


# --- what a backend shows of a run -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeenSpan:
    """A span as a backend shows it: its ids, its attributes, its events (name, attributes) in order.
    Values are the backend's own (Jaeger keeps arrays as JSON text, Phoenix as lists)."""

    span_id: str
    parent_id: str | None
    attributes: Mapping[str, Any]
    events: tuple[tuple[str, Mapping[str, Any]], ...]

    def events_named(self, name: str) -> list[Mapping[str, Any]]:
        return [attributes for event, attributes in self.events if event == name]


def from_phoenix(span: PhoenixSpan) -> SeenSpan:
    return SeenSpan(
        span.span_id,
        span.parent_id,
        span.attributes,
        tuple((e.name, e.attributes) for e in span.events),
    )


def from_jaeger(span: JaegerSpan) -> SeenSpan:
    """Jaeger shows a span event as a log whose ``event`` field is the event's name."""
    return SeenSpan(
        span.span_id,
        span.parent_id,
        span.tags,
        tuple((str(log.get("event")), log) for log in span.logs),
    )


def passes_by_iteration(spans: Iterable[SeenSpan]) -> dict[int, SeenSpan]:
    """The pass spans (model calls carrying a pass number; tool calls carry one too) by pass."""

    def is_pass(span: SeenSpan) -> bool:
        operation = span.attributes.get(sc.GEN_AI_OPERATION_NAME)
        return sc.PASS_ITERATION in span.attributes and operation != sc.OP_EXECUTE_TOOL

    passes = [s for s in spans if is_pass(s)]
    by_iteration = {int(p.attributes[sc.PASS_ITERATION]): p for p in passes}
    assert len(by_iteration) == len(passes), "two spans carry one pass number"
    return by_iteration


def verdicts_of(spans: Sequence[SeenSpan], run_id: str) -> dict[str, Any]:
    """The run span's verdicts and each pass's, by iteration, as the backend shows them."""
    [run] = [s for s in spans if s.attributes.get(sc.RUN_ID) == run_id]
    by_iteration = passes_by_iteration(spans)
    return {
        "parents": sorted({p.parent_id == run.span_id for p in by_iteration.values()}),
        "run": {name: run.attributes.get(name) for name in RUN_VERDICT},
        "evaluations": {
            e[sc.EVAL_NAME]: e[sc.EVAL_SCORE_LABEL]
            for e in run.events_named(sc.EV_EVALUATION_RESULT)
        },
        "lines": sorted(e.get(sc.LINE_TEXT) for e in run.events_named(sc.EV_ACCOUNT_LINE)),
        "passes": {
            iteration: {
                **{name: span.attributes.get(name) for name in PASS_VERDICT},
                "changes": [
                    (name, e.get(sc.CH_MAP_ID), e.get(sc.CH_BY))
                    for name, e in span.events
                    if name in (sc.EV_ENGAGEMENT_ENGAGED, sc.EV_ENGAGEMENT_PARKED)
                ],
                "findings": [
                    tuple(e.get(field) for field in FINDING)
                    for e in span.events_named(sc.EV_INTEGRITY_FINDING)
                ],
            }
            for iteration, span in sorted(by_iteration.items())
        },
    }


def _listed(value: Any) -> Any:
    """An array attribute as a list, whether the backend kept it a list or JSON text (Jaeger)."""
    return json.loads(value) if isinstance(value, str) and value.startswith("[") else value


def assert_stuck_turn(got: Mapping[str, Any], *, offered_tools: bool) -> None:
    """The verdicts are the stuck turn's: shadow mode, complete; engaged on pass 1, parked on the
    fourth call, zone-audit riding on after. With the offered tools recorded, the parked map's
    ``get_zone_info`` still offered on pass 4 is what parking would have withheld: the agent runs
    no kernel, so it is an advisory (filed once) on a passing compose row, never a contradiction;
    without them the row is unknown."""
    assert got["run"][sc.RUN_MODE] == sc.MODE_SHADOW and got["run"][sc.RUN_COMPLETE] is True
    assert got["passes"][1]["changes"] == [(sc.EV_ENGAGEMENT_ENGAGED, "skill-map", "lexical")]
    assert got["passes"][4]["changes"] == [(sc.EV_ENGAGEMENT_PARKED, "skill-map", "lexical")]
    assert [
        _listed(got["passes"][i][sc.ENG_SERVED_WHILE_PARKED]) for i in range(1, PASSES + 1)
    ] == [
        [],
        [],
        [],
        ["zone-audit"],
        ["zone-audit"],
        ["zone-audit"],
    ]
    compose = got["evaluations"][COMPOSE]
    if not offered_tools:
        assert compose == "unknown"
        assert got["run"][sc.ROW_INVARIANT_VIOLATION_COMPOSE] == "unreachable"
        return
    assert compose == "pass" and got["run"][sc.ROW_INVARIANT_VIOLATION_COMPOSE] == "pass"
    assert "integrity.invariant-violation" not in _listed(got["run"][sc.SIGNALS])
    assert got["run"][sc.SUMMARY_TONE] != "bad"
    findings = {i: p["findings"] for i, p in got["passes"].items() if p["findings"]}
    assert list(findings) == [4], findings
    [(kind, seam, subjects, iteration, advisory, *_)] = findings[4]
    assert (kind, seam, int(iteration)) == ("invariant-violation", "compose", 4)
    assert str(advisory).lower() == "true"
    assert _listed(subjects) == ["map:skill-map", "tool:get_zone_info"]
