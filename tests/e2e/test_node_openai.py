"""A TypeScript agent on the ``openai`` npm client, instrumented by each real JavaScript instrumentation
in turn and recorded with ``@otel-footprint/recorder``, against a fake OpenAI-compatible server on
loopback, through ``otel-footprint serve`` into Phoenix: the verdicts Phoenix shows are the ones of the
Python agent doing the same work with the Python recorder (compared here, pass by pass)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_support import HopProcess

from otel_footprint import record as footprint
from otel_footprint import semconv as sc
from otel_footprint.codec import EventPointer, decode_event

from .conftest import NODE_PROJECT
from .fake_openai import TOOL_RESULT, FakeOpenAI, fake_openai
from .footprint_e2e import E2E_TIMEOUT_S, start_hop
from .otlp_sink import OtlpSink, ReceivedSpan, event_pairs
from .phoenix_api import PhoenixClient, PhoenixSpan
from .sdk_export import exporting_provider, make_exporter

pytestmark = pytest.mark.e2e

PASSES = 6
AGENT = NODE_PROJECT / "openai_agent.mjs"
AGENTS_SDK_AGENT = NODE_PROJECT / "agents_sdk_agent.mjs"
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
)
PASS_VERDICT = (
    sc.ENG_ENGAGED_MAPS,
    sc.ENG_PARKED_MAPS,
    sc.ENG_PARKED_INJECTION_IDS,
    sc.ENG_PARKED_TOOL_NAMES,
    sc.ENG_SERVED_WHILE_PARKED,
    sc.ENG_SERVED_CHARS_WHILE_PARKED,
    sc.ENG_MISMATCH,
)


def scenario() -> dict[str, Any]:
    """The agents' scenario, read from tests/node/scenario.mjs (one source for both languages)."""
    done = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            "const { SCENARIO } = await import('./scenario.mjs');"
            "process.stdout.write(JSON.stringify(SCENARIO));",
        ],
        cwd=NODE_PROJECT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def python_agent(tracer: Any, run_id: str, server: FakeOpenAI, s: dict[str, Any]) -> int:
    """The same work on the Python recorder (its own model-call spans), against the same server."""
    import urllib.request

    def create(messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = json.dumps({"model": f"scripted-{PASSES}", "messages": messages}).encode()
        request = urllib.request.Request(
            f"{server.base_url}/chat/completions",
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
            with run.model_call(f"scripted-{PASSES}") as call:
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
                    tool.result(TOOL_RESULT)
                messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": "ok"})


def verdicts(phoenix: PhoenixClient, project: str, run_id: str, spans: int) -> dict[str, Any]:
    """What Phoenix shows of one run: the run span's verdicts and each pass's, by iteration."""
    everything = phoenix.wait_for_spans(project, count=spans, timeout=E2E_TIMEOUT_S)
    assert len(everything) == spans, [s.name for s in everything]
    [run] = [s for s in everything if s.attributes.get(sc.RUN_ID) == run_id]

    def is_pass(span: PhoenixSpan) -> bool:
        operation = span.attributes.get(sc.GEN_AI_OPERATION_NAME)
        return sc.PASS_ITERATION in span.attributes and operation != sc.OP_EXECUTE_TOOL

    passes = [s for s in everything if is_pass(s)]
    by_iteration = {p.attributes[sc.PASS_ITERATION]: p for p in passes}
    assert len(by_iteration) == len(passes), "two spans carry one pass number"
    return {
        "parents": sorted({p.parent_id == run.span_id for p in passes}),
        "run": {name: run.attributes.get(name) for name in RUN_VERDICT},
        "evaluations": {
            e.attributes[sc.EVAL_NAME]: e.attributes[sc.EVAL_SCORE_LABEL]
            for e in run.events_named(sc.EV_EVALUATION_RESULT)
        },
        "lines": sorted(
            e.attributes.get(sc.LINE_TEXT) for e in run.events_named(sc.EV_ACCOUNT_LINE)
        ),
        "passes": {
            iteration: {
                **{name: span.attributes.get(name) for name in PASS_VERDICT},
                "changes": [
                    (e.name, e.attributes.get(sc.CH_MAP_ID), e.attributes.get(sc.CH_BY))
                    for e in span.events
                    if e.name in (sc.EV_ENGAGEMENT_ENGAGED, sc.EV_ENGAGEMENT_PARKED)
                ],
            }
            for iteration, span in sorted(by_iteration.items())
        },
    }


@pytest.fixture(scope="module")
def openai_agent() -> Path:
    """tests/node/openai_agent.mjs; skips when the npm packages (or the built package) are missing."""
    if not (NODE_PROJECT / "node_modules" / "openai").is_dir():
        pytest.skip("tests/node/node_modules is missing: run scripts/node-install.sh")
    if not (NODE_PROJECT / "node_modules" / "@otel-footprint" / "recorder" / "dist").is_dir():
        pytest.skip("js/otel-footprint is not built: run scripts/node-install.sh")
    return AGENT


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with fake_openai() as running:
        yield running


@pytest.fixture(scope="module")
def hop(phoenix: PhoenixClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    """One ``otel-footprint serve`` for the module, forwarding OTLP/HTTP to Phoenix."""
    data_dir = tmp_path_factory.mktemp("hop-openai") / "data"
    process = start_hop(data_dir, phoenix.otlp_http_traces_url, forward_protocol="http/protobuf")
    try:
        yield process
    finally:
        code = process.terminate(timeout=30)
        assert code == 0, f"serve exited {code} on SIGTERM; stderr:\n{process.stderr()[-3000:]}"


@pytest.fixture(scope="module")
def python_verdicts(
    phoenix: PhoenixClient, hop: HopProcess, server: FakeOpenAI, openai_agent: Path
) -> dict[str, Any]:
    """The Python agent's run through the same hop: the verdicts to match."""
    project = f"e2e-openai-python-{uuid.uuid4().hex[:8]}"
    run_id = f"py-openai-{uuid.uuid4().hex[:12]}"
    exporter = make_exporter(
        "http/protobuf", http_url=f"http://{hop.http}/v1/traces", grpc_endpoint=None
    )
    with exporting_provider(exporter, project, min_spans=2 * PASSES) as provider:
        passes = python_agent(provider.get_tracer("python-agent"), run_id, server, scenario())
    assert passes == PASSES
    return verdicts(phoenix, project, run_id, spans=1 + PASSES + (PASSES - 1))


@pytest.mark.parametrize(
    ("instrumentation", "style"),
    [
        ("otel", "next"),
        ("openinference", "next"),
        ("traceloop", "next"),
        ("otel", "helper"),
        ("none", "helper"),
    ],
)
def test_typescript_agent_gets_the_python_agents_verdicts(
    phoenix: PhoenixClient,
    hop: HopProcess,
    server: FakeOpenAI,
    openai_agent: Path,
    python_verdicts: dict[str, Any],
    project_name: str,
    instrumentation: str,
    style: str,
) -> None:
    run_id = f"ts-openai-{instrumentation}-{uuid.uuid4().hex[:12]}"
    done = subprocess.run(
        [
            "node",
            str(openai_agent),
            f"--base-url={server.base_url}",
            f"--instrumentation={instrumentation}",
            f"--style={style}",
            f"--endpoint=http://{hop.http}",
            f"--passes={PASSES}",
            f"--run-id={run_id}",
            f"--project={project_name}",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, f"openai_agent.mjs exited {done.returncode}: {done.stderr[-3000:]}"
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # One model-call span per call (the instrumentation's, or the recorder's own without one).
    assert (summary["modelCalls"], summary["toolCalls"], summary["passes"]) == (PASSES, 5, PASSES)
    assert summary["spans"] == summary["exported"] == 1 + PASSES + (PASSES - 1)
    assert summary["attached"] == (0 if instrumentation == "none" else PASSES)
    assert summary["unattached"] == 0

    got = verdicts(phoenix, project_name, run_id, spans=summary["spans"])
    assert got == python_verdicts
    assert got["parents"] == [True]  # each pass span is the client span, right under the run
    # And they are the stuck turn's: engaged on pass 1, parked on the fourth call, riding on after.
    assert got["run"][sc.RUN_MODE] == sc.MODE_SHADOW and got["run"][sc.RUN_COMPLETE] is True
    assert got["passes"][1]["changes"] == [(sc.EV_ENGAGEMENT_ENGAGED, "skill-map", "lexical")]
    assert got["passes"][4]["changes"] == [(sc.EV_ENGAGEMENT_PARKED, "skill-map", "lexical")]
    assert [got["passes"][i][sc.ENG_SERVED_WHILE_PARKED] for i in range(1, PASSES + 1)] == [
        [],
        [],
        [],
        ["zone-audit"],
        ["zone-audit"],
        ["zone-audit"],
    ]


# --- the OpenAI Agents SDK (@openai/agents) traced by its OpenInference instrumentation -----------


def run_agents_sdk_agent(server: FakeOpenAI, endpoint: str, run_id: str, *extra: str) -> Any:
    done = subprocess.run(
        [
            "node",
            str(AGENTS_SDK_AGENT),
            f"--base-url={server.base_url}",
            f"--endpoint={endpoint}",
            f"--passes={PASSES}",
            f"--run-id={run_id}",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, (
        f"agents_sdk_agent.mjs exited {done.returncode}: {done.stderr[-3000:]}"
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_agents_sdk_passes_land_on_the_sdks_llm_spans(openai_agent: Path) -> None:
    """No Phoenix needed: the spans as they leave the agent (a local OTLP receiver)."""
    with fake_openai() as server, OtlpSink() as sink:
        summary = run_agents_sdk_agent(server, sink.http_endpoint, "agents-sdk-run")
        spans = sink.wait_for_spans(summary["spans"], timeout=10)
        requests = len(server.requests)
    assert (summary["passes"], summary["toolCalls"], summary["attached"]) == (PASSES, 5, PASSES)
    assert summary["unattached"] == 0 and requests == PASSES

    def kind(span: ReceivedSpan) -> Any:
        return span.attributes.get(sc.OPENINFERENCE_SPAN_KIND)

    llm = [s for s in spans if kind(s) == sc.OI_KIND_LLM]
    # One model-call span per request the SDK made (the recorder made none), each one pass.
    assert len(llm) == requests
    assert sorted(s.attributes[sc.PASS_ITERATION] for s in llm) == list(range(1, PASSES + 1))
    assert not [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT]
    [run] = [s for s in spans if s.attributes.get(sc.RUN_ID) == "agents-sdk-run"]
    assert {s.trace_id for s in spans} == {run.trace_id}
    for span in llm:
        iteration = span.attributes[sc.PASS_ITERATION]
        decoded = [
            decode_event(
                e.name, event_pairs(e), EventPointer(span.trace_id, span.span_id, e.name, i)
            )
            for i, e in enumerate(span.span.events)
        ]
        types = [d.type for d in decoded if d is not None]
        assert types[0] == sc.T_CONTEXT_EVALUATED and types.count(sc.T_SLOT_COMPOSED) == 2
        [evaluated] = [d for d in decoded if d is not None and d.type == sc.T_CONTEXT_EVALUATED]
        assert evaluated.payload["iteration"] == iteration
        assert evaluated.payload["cursorMove"]["by"] == ("entry" if iteration == 1 else "stay")


@pytest.mark.xfail(
    not hasattr(sc, "T_RECORD_PROBLEM"),
    strict=True,
    reason="needs issue 10's run grouping (the SDK's OpenInference AGENT/CHAIN spans stay inside "
    "the recorder's run; on main they become runs of their own and take the passes); that branch "
    "also adds semconv.T_RECORD_PROBLEM, which is what this condition looks for",
)
def test_agents_sdk_agent_gets_the_python_agents_verdicts(
    phoenix: PhoenixClient,
    hop: HopProcess,
    server: FakeOpenAI,
    openai_agent: Path,
    python_verdicts: dict[str, Any],
    project_name: str,
) -> None:
    run_id = f"ts-agents-sdk-{uuid.uuid4().hex[:12]}"
    summary = run_agents_sdk_agent(
        server, f"http://{hop.http}", run_id, f"--project={project_name}"
    )
    got = verdicts(phoenix, project_name, run_id, spans=summary["spans"])
    got.pop("parents")  # the SDK's LLM spans sit under its turn spans
    expected = dict(python_verdicts)
    expected.pop("parents")
    assert got == expected
