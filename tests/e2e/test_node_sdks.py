"""Node agents on the SDKs they run, recorded with ``@otel-footprint/recorder`` against the fake
OpenAI-compatible server and exported over real OTLP to a receiver started here; the product's own
reconstruction (what ``serve`` runs) decides them.

- The Vercel AI SDK (tests/node/ai_sdk_agent.mjs: ``ai`` 6, ``generateText`` with
  ``experimental_telemetry``, the ``footprintSteps`` adapter): each pass lands on the SDK's own
  ``ai.generateText.doGenerate`` span (no span of the recorder's own, no extra run), decided as the
  same agent on the plain recorder (openai_agent.mjs without an instrumentation); with its telemetry
  off, the run says at each step's end that the step's pass found no span. The integrity tests'
  auditor on it (ai_sdk_integrity.mjs) has its invented id found.
- ``@openai/agents`` + OpenInference and ``openai`` + OpenInference JS: the same, on their LLM spans.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from otel_footprint import semconv as sc
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView

from .footprint_e2e import start_hop
from .node_agents import NODE_PROJECT, PASSES, _node, require_node_packages, scripted
from .otlp_sink import OtlpSink, ReceivedSpan

pytestmark = pytest.mark.e2e

AI_SDK_AGENT = NODE_PROJECT / "ai_sdk_agent.mjs"


@pytest.fixture(scope="module")
def ai_sdk_agent() -> Path:
    require_node_packages()
    if not (NODE_PROJECT / "node_modules" / "ai").is_dir():
        pytest.skip("the ai package is not installed in tests/node: run scripts/node-install.sh")
    return AI_SDK_AGENT


def run_to_sink(server: FakeOpenAI, agent: Path, *args: str) -> tuple[Any, list[ReceivedSpan]]:
    """Run ``agent`` against ``server`` exporting to a fresh receiver: its summary and its spans."""
    with OtlpSink() as sink:
        summary = _node(
            agent,
            [
                f"--base-url={scripted(server).url}",
                f"--endpoint={sink.http_endpoint}",
                f"--passes={PASSES}",
                *args,
            ],
            None,
        )
        spans = sink.wait_for_spans(summary["spans"], timeout=10)
    assert len(spans) == summary["spans"] == summary["exported"]
    return summary, spans


def digest(verdict: RunVerdict) -> dict[str, Any]:
    """What must match between two agents doing the same work: the engagement decisions pass by
    pass (the integrity checks: :func:`same_where_known`)."""
    return {
        "mode": verdict.mode,
        "reasons": verdict.reasons,
        "passes": [
            (
                v.iteration,
                v.engaged_maps,
                v.parked_maps,
                v.served_while_parked,
                [type(c).__name__ for c in v.changes],
            )
            for v in verdict.passes
        ],
    }


def rows(verdict: RunVerdict) -> dict[tuple[str, str], str]:
    """Each integrity row's state, by (check, seam)."""
    found = () if verdict.integrity is None else verdict.integrity.rows
    return {(str(r.check), str(r.seam)): r.state for r in found}


def same_where_known(sdk: RunVerdict, plain: RunVerdict) -> None:
    """Every check the plain recorder's run could make comes out the same on the SDK's spans (which
    may say more: the offered tools, which the plain agent does not state)."""
    known = {key: state for key, state in rows(plain).items() if state in ("pass", "fail")}
    assert {key: rows(sdk).get(key) for key in known} == known


def decided(spans: list[ReceivedSpan]) -> RunVerdict:
    [leg] = group_runs([OtlpSpanView(s.span) for s in spans])
    return decide_run(leg, None, EngineOptions())


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


@pytest.mark.parametrize(
    ("args", "run_span", "pass_span"),
    [
        ((), "ai.generateText", "ai.generateText.doGenerate"),
        (("--stream",), "ai.streamText", "ai.streamText.doStream"),
    ],
    ids=["generateText", "streamText"],
)
def test_passes_land_on_the_sdk_spans_and_decide_as_the_plain_recorder(
    server: FakeOpenAI, ai_sdk_agent: Path, args: tuple[str, ...], run_span: str, pass_span: str
) -> None:
    summary, spans = run_to_sink(server, ai_sdk_agent, "--run-id=ai-sdk-e2e", *args)
    assert (summary["passes"], summary["attached"], summary["unattached"]) == (PASSES, PASSES, 0)
    assert summary["steps"] == [[k, 0] for k in range(1, PASSES + 1)]
    assert summary["toolCalls"] == PASSES - 1

    names = sorted(s.name for s in spans)
    # The run span, the SDK's own spans, and nothing else: no model-call span of the recorder's own.
    assert names == sorted(
        [f"{sc.OP_INVOKE_AGENT} openai-agent", run_span]
        + [pass_span] * PASSES
        + ["ai.toolCall"] * (PASSES - 1)
    )
    passes = [s for s in spans if sc.PASS_ITERATION in s.attributes]
    assert {s.name for s in passes} == {pass_span}
    assert sorted(s.attributes[sc.PASS_ITERATION] for s in passes) == list(range(1, PASSES + 1))

    verdict = decided(spans)
    assert [v.span_id for v in verdict.passes] == [
        s.span_id for s in sorted(passes, key=lambda s: s.attributes[sc.PASS_ITERATION])
    ]
    plain_summary, plain_spans = run_to_sink(
        server,
        NODE_PROJECT / "openai_agent.mjs",
        "--instrumentation=none",
        "--style=helper",
        "--run-id=plain-e2e",
    )
    assert plain_summary["passes"] == PASSES
    plain = decided(plain_spans)
    assert digest(verdict) == digest(plain)
    same_where_known(verdict, plain)
    changes = [(v.iteration, type(c).__name__) for v in verdict.passes for c in v.changes]
    assert changes == [(1, "EngagedChange"), (4, "ParkedChange")]


def test_without_telemetry_each_step_says_at_once_that_its_pass_found_no_span(
    server: FakeOpenAI, ai_sdk_agent: Path
) -> None:
    summary, spans = run_to_sink(server, ai_sdk_agent, "--telemetry=off", "--run-id=ai-sdk-off")
    # Seen from inside the run, at each step's end: a new pass each step, each one given up.
    assert summary["steps"] == [[k, k] for k in range(1, PASSES + 1)]
    assert (summary["passes"], summary["unattached"], summary["attached"]) == (PASSES, PASSES, 0)
    [run] = spans
    problems = [e for e in run.span.events if e.name == sc.EV_RECORD_PROBLEM]
    assert len(problems) == PASSES


@pytest.mark.parametrize(
    ("scenario", "check", "seam", "state"),
    [
        ("invented", "unsupported-argument", "choice", "fail"),
        ("grounded", "unsupported-argument", "choice", "pass"),
        # The Node auditor runs no kernel of its own (shadow mode): what parking would have
        # withheld is an advisory on a judged call, never a contradiction (issue 25).
        ("parked", "invariant-violation", "compose", "pass"),
    ],
)
def test_the_integrity_checks_read_the_sdk_spans(
    ai_sdk_agent: Path, scenario: str, check: str, seam: str, state: str
) -> None:
    """The auditor of the integrity tests on the AI SDK (tests/integrity_agent.py's scenarios and
    outcomes): the id it invents is found from the frame and the tool calls the SDK's spans record,
    the grounded run passes, and the parked map's tool left on the offered list is found (an
    advisory in shadow mode)."""
    from integrity_agent import MODEL, SCENARIOS

    with FakeOpenAI({MODEL: SCENARIOS[scenario]}) as server, OtlpSink() as sink:
        summary = _node(
            NODE_PROJECT / "ai_sdk_integrity.mjs",
            [f"--base-url={server.url}", f"--endpoint={sink.http_endpoint}"],
            None,
        )
        spans = sink.wait_for_spans(summary["spans"], timeout=10)
    assert (summary["passes"], summary["attached"]) == (len(SCENARIOS[scenario]),) * 2
    integrity = decided(spans).integrity
    assert integrity is not None
    assert integrity.row(check, seam).state == state  # type: ignore[arg-type]
    if scenario == "invented":
        [finding] = integrity.findings
        assert "host-zeta-99" in str(finding)
    if scenario == "parked":
        assert integrity.contradictions == ()
        [advisory] = integrity.advisories
        assert (advisory.kind, advisory.seam) == (check, seam)


@pytest.mark.parametrize(
    ("agent", "args", "pass_span"),
    [
        ("agents_sdk_agent.mjs", (), "generation"),
        ("openai_agent.mjs", ("--instrumentation=openinference",), "OpenAI Chat Completions"),
    ],
)
def test_the_other_sdks_decide_as_the_plain_recorder_on_their_own_spans(
    server: FakeOpenAI, ai_sdk_agent: Path, agent: str, args: tuple[str, ...], pass_span: str
) -> None:
    """The same agent on ``@openai/agents`` + OpenInference and on ``openai`` + OpenInference JS:
    one run, each pass on the SDK's own LLM span, the plain recorder's decisions."""
    summary, spans = run_to_sink(server, NODE_PROJECT / agent, *args, "--run-id=sdk-e2e")
    assert (summary["passes"], summary["attached"], summary["unattached"]) == (PASSES, PASSES, 0)
    passes = [s for s in spans if sc.PASS_ITERATION in s.attributes and s.name == pass_span]
    assert sorted(s.attributes[sc.PASS_ITERATION] for s in passes) == list(range(1, PASSES + 1))
    assert not [s for s in spans if s.name.startswith(f"{sc.OP_CHAT} ")]  # no span of our own
    _, plain_spans = run_to_sink(
        server,
        NODE_PROJECT / "openai_agent.mjs",
        "--instrumentation=none",
        "--style=helper",
        "--run-id=plain-e2e",
    )
    verdict, plain = decided(spans), decided(plain_spans)
    assert digest(verdict) == digest(plain)
    same_where_known(verdict, plain)


def _annotated(sink: OtlpSink, summary: Any) -> list[ReceivedSpan]:
    """The run's spans as the hop forwarded them, once its run span carries the verdicts."""
    deadline = time.monotonic() + 20
    while True:
        spans = [s for s in sink.spans() if s.trace_id == summary["traceId"]]
        if len(spans) >= summary["spans"] and any(sc.RUN_MODE in s.attributes for s in spans):
            return spans
        assert time.monotonic() < deadline, f"{len(spans)} span(s), no verdict"
        time.sleep(0.1)


def _verdicts(spans: list[ReceivedSpan]) -> dict[str, Any]:
    """What the hop wrote: the run span's run and check verdicts, each pass's engagement."""
    [run] = [s for s in spans if sc.RUN_MODE in s.attributes]
    passes = {
        s.attributes[sc.PASS_ITERATION]: {
            k: v for k, v in s.attributes.items() if k.startswith("footprint.engagement.")
        }
        for s in spans
        if "footprint.engagement.engaged_maps" in s.attributes
    }
    keep = ("footprint.run.", "footprint.check.", "footprint.summary", "footprint.signals")
    return {
        "run": {k: v for k, v in run.attributes.items() if k.startswith(keep) and k != sc.RUN_ID},
        "passes": passes,
        "rows": {
            k: v for k, v in run.attributes.items() if k.startswith("footprint.integrity.row.")
        },
    }


def test_through_serve_the_ai_sdk_run_gets_the_plain_recorders_verdicts(
    server: FakeOpenAI, ai_sdk_agent: Path, tmp_path: Path
) -> None:
    """The AI SDK agent and the plain-recorder agent through ``otel-footprint serve``: the same run
    and pass verdicts written on the SDK's own spans, every span forwarded once and none added."""
    runs: dict[str, tuple[Any, list[ReceivedSpan]]] = {}
    with OtlpSink() as sink:
        hop = start_hop(
            tmp_path / "hop", f"{sink.http_endpoint}/v1/traces", forward_protocol="http/protobuf"
        )
        with hop.stopped_cleanly():
            for agent, args in (
                (ai_sdk_agent, ()),
                (NODE_PROJECT / "openai_agent.mjs", ("--instrumentation=none", "--style=helper")),
            ):
                summary = _node(
                    agent,
                    [
                        f"--base-url={scripted(server).url}",
                        f"--endpoint=http://{hop.http}",
                        f"--passes={PASSES}",
                        f"--run-id=serve-{agent.stem}",
                        *args,
                    ],
                    None,
                )
                runs[agent.name] = summary, _annotated(sink, summary)
    summary, spans = runs[ai_sdk_agent.name]
    assert len(spans) == summary["spans"] == summary["exported"]
    assert len({s.span_id for s in spans}) == len(spans)
    sdk, plain = _verdicts(spans), _verdicts(runs["openai_agent.mjs"][1])
    assert len(sdk["passes"]) == PASSES
    passes = [s for s in spans if "footprint.engagement.engaged_maps" in s.attributes]
    assert {s.name for s in passes} == {"ai.generateText.doGenerate"}
    # The integrity rows the plain run could judge come out the same (the SDK's spans also carry
    # the offered tools, which the plain agent does not state: those rows differ by knowing more).
    known = {k: v for k, v in plain["rows"].items() if v in ("pass", "fail")}
    assert {k: sdk["rows"].get(k) for k in known} == known
    judged = ("footprint.integrity.", "footprint.summary")
    assert {k: v for k, v in sdk["run"].items() if not k.startswith(judged)} == {
        k: v for k, v in plain["run"].items() if not k.startswith(judged)
    }
    assert sdk["passes"] == plain["passes"]
