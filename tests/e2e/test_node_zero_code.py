"""Node agents with no footprint code at all, through a real ``otel-footprint serve``: the support
desk of tests/observed_agents.py (tests/node/zero_code_agent.mjs) on each SDK, exporting only the
SDK's own spans to the hop, which reads each trace as an observed run: one run per agent run on
the SDK's own spans, its passes on the SDK's model-call spans, no span added, no ``missing-spans``,
the account and check 1 ``not-applicable``; the same verdicts on every SDK wherever it records the
same evidence, and as the same desk on the plain recorder (``--sdk plain``) wherever the observed
mode can know them.

What each SDK gets (docs/javascript.md, "No footprint code"):

- Vercel AI SDK 6 (``ai.generateText`` is the trace's top span, so the run; its
  ``ai.generateText.doGenerate`` spans are the passes): the account, and the argument check finds
  the invented id (``ai.prompt.tools`` records the offered tools).
- ``openai`` + OpenInference JS (the application's one plain span around its loop is the run, each
  ``OpenAI Chat Completions`` a pass): the same (``llm.tools.*``).
- ``@openai/agents`` + OpenInference (``Agent workflow`` AGENT → CHAIN → ``support`` AGENT →
  ``turn`` CHAIN: one run by the outermost-agent rule, each ``generation`` a pass): the account,
  but the argument check is ``unreachable`` — its ``generation`` spans do not record the offered
  tools, and without them no argument can be checked.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from observed_agents import SCRIPT

from otel_footprint import semconv as sc

from .footprint_e2e import start_hop
from .node_agents import NODE_PROJECT, _node, require_node_packages
from .otlp_sink import OtlpSink, ReceivedSpan

pytestmark = pytest.mark.e2e

AGENT = NODE_PROJECT / "zero_code_agent.mjs"
PASS_SPAN = {
    "ai": "ai.generateText.doGenerate",
    "agents": "generation",
    "openai": "OpenAI Chat Completions",
}
RUN_SPAN = {"ai": "ai.generateText", "agents": "Agent workflow", "openai": "support-desk"}
ARGUMENTS = sc.integrity_row_attribute("unsupported-argument", "choice")
ARGUMENT_STATE = {
    "ai": {"clean-m": "pass", "invented-m": "fail"},
    "openai": {"clean-m": "pass", "invented-m": "fail"},
    # The Agents SDK's spans do not say which tools the model was offered.
    "agents": {"clean-m": "unreachable", "invented-m": "unreachable"},
}


def _trace(sink: OtlpSink, summary: dict[str, Any], before: set[str]) -> list[ReceivedSpan]:
    """The one new trace's spans as the hop forwarded them, once its run span carries a verdict."""
    deadline = time.monotonic() + 20
    while True:
        spans = [s for s in sink.spans() if s.trace_id not in before]
        if len(spans) >= summary["spans"] and any(sc.RUN_MODE in s.attributes for s in spans):
            return spans
        assert time.monotonic() < deadline, f"{len(spans)} span(s), no verdict"
        time.sleep(0.1)


Served = dict[tuple[str, str], tuple[dict[str, Any], list[ReceivedSpan]]]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    """Each SDK's agent on each model (``clean-m``, ``invented-m``) through one ``serve``, and the
    same desk on the plain recorder (``plain``): the agent's summary and the spans the hop
    forwarded, by (sdk, model)."""
    require_node_packages()
    if not (NODE_PROJECT / "node_modules" / "ai").is_dir():
        pytest.skip("the ai package is not installed in tests/node: run scripts/node-install.sh")
    out: Served = {}
    with FakeOpenAI(SCRIPT) as server, OtlpSink() as sink:
        hop = start_hop(
            tmp_path_factory.mktemp("hop"),
            f"{sink.http_endpoint}/v1/traces",
            forward_protocol="http/protobuf",
        )
        with hop.stopped_cleanly():
            for sdk in (*PASS_SPAN, "plain"):
                for model in ("clean-m", "invented-m"):
                    server.reset()  # each run replays its model's script from the start
                    server.set_script(SCRIPT)
                    before = {s.trace_id for s in sink.spans()}
                    summary = _node(
                        AGENT,
                        [
                            f"--sdk={sdk}",
                            f"--base-url={server.url}",
                            f"--endpoint=http://{hop.http}",
                            f"--model={model}",
                        ],
                        None,
                    )
                    out[sdk, model] = summary, _trace(sink, summary, before)
    return out


def _run_span(spans: list[ReceivedSpan]) -> ReceivedSpan:
    [run] = [s for s in spans if sc.RUN_MODE in s.attributes]
    return run


def _account_rows(run: ReceivedSpan) -> list[str]:
    return [
        a.value.string_value
        for e in run.span.events
        if e.name == sc.EV_ACCOUNT_LINE
        for a in e.attributes
        if a.key == sc.LINE_ROW
    ]


@pytest.mark.parametrize("model", ["clean-m", "invented-m"])
@pytest.mark.parametrize("sdk", list(PASS_SPAN))
def test_the_sdk_spans_alone_make_one_observed_run_through_serve(
    served: Served, sdk: str, model: str
) -> None:
    summary, spans = served[sdk, model]
    assert summary["toolCalls"] == 2
    # One trace, every span forwarded once and none added.
    assert len({s.trace_id for s in spans}) == 1
    assert len(spans) == len({s.span_id for s in spans}) == summary["spans"]
    # Exactly one run, observed, on the SDK's own run span.
    run = _run_span(spans)
    assert (run.name, run.attributes[sc.RUN_MODE]) == (RUN_SPAN[sdk], "observed")
    assert run.attributes[sc.RUN_PASSES] == 3
    # The passes numbered on the SDK's own model-call spans, and only there.
    passes = [s for s in spans if sc.PASS_ITERATION in s.attributes]
    assert {s.name for s in passes} == {PASS_SPAN[sdk]}
    assert sorted(s.attributes[sc.PASS_ITERATION] for s in passes) == [1, 2, 3]
    # These traces never had a run span to miss.
    for span in spans:
        assert "missing-spans" not in str(span.attributes), span.name
    # The account: its rows on the run span; check 1 has no kernel to read.
    assert _account_rows(run), "no account line on the run span"
    assert run.attributes[sc.CHECK_DECIDED_DELIVERED] == "not-applicable"
    # The argument check: the invented id found where the offered tools are on record.
    state = ARGUMENT_STATE[sdk][model]
    assert run.attributes[ARGUMENTS] == state
    events = str(run.span.events)
    assert ("ORD-9999" in events) is (state == "fail")
    if state == "unreachable":
        assert "unsupported-argument@choice" in run.attributes[sc.INTEGRITY_UNREACHABLE]
        # ... with the reason, in the row's evaluation: the offered tools are not on record.
        assert "tools offered at pass 1 is not in the record" in events


def _verdict(spans: list[ReceivedSpan]) -> dict[str, Any]:
    """What the hop wrote that two SDKs doing the same work must agree on."""
    run = _run_span(spans)
    keep = ("footprint.run.", "footprint.check.", "footprint.integrity.row.")
    return {
        "run": {k: v for k, v in run.attributes.items() if k.startswith(keep)},
        "account": _account_rows(run),
    }


@pytest.mark.parametrize("model", ["clean-m", "invented-m"])
def test_the_same_work_gets_the_same_verdicts_on_every_sdk_where_each_can_know_them(
    served: Served, model: str
) -> None:
    """The AI SDK and the ``openai`` client record the same evidence: the same verdicts. The
    Agents SDK differs only in the argument check, which it cannot arm."""
    ai, openai, agents = (_verdict(served[sdk, model][1]) for sdk in ("ai", "openai", "agents"))
    assert ai == openai
    assert {k: v for k, v in agents["run"].items() if k != ARGUMENTS} == {
        k: v for k, v in ai["run"].items() if k != ARGUMENTS
    }
    assert agents["account"] == ai["account"]


def _account(spans: list[ReceivedSpan], rows: tuple[str, ...]) -> list[tuple[str, str]]:
    """The run's account lines of ``rows``: (row, text)."""
    out = []
    for event in _run_span(spans).span.events:
        if event.name == sc.EV_ACCOUNT_LINE:
            line = {a.key: a.value.string_value for a in event.attributes}
            if line.get(sc.LINE_ROW) in rows:
                out.append((line[sc.LINE_ROW], line.get(sc.LINE_TEXT, "")))
    return out


@pytest.mark.parametrize("model", ["clean-m", "invented-m"])
@pytest.mark.parametrize("sdk", list(PASS_SPAN))
def test_each_sdk_decides_as_the_plain_recorder_where_the_observed_mode_can_know(
    served: Served, sdk: str, model: str
) -> None:
    """The same desk on the plain recorder (its own spans, the frame stated, one map): checks 2
    and 3, every integrity row it judges, and the account's question, calls and results come out
    the same on the SDK's own spans. Check 1 cannot (no routing decision is recorded), and the
    argument check knows more there: the recorder arms it by a declaration, an observed run by
    its record."""
    observed, plain = served[sdk, model][1], served["plain", model][1]
    assert _run_span(plain).attributes[sc.RUN_MODE] == "shadow"
    checks = (sc.CHECK_EXISTENCE, sc.CHECK_EMPTY_RESULTS)
    assert {k: _run_span(observed).attributes[k] for k in checks} == {
        k: _run_span(plain).attributes[k] for k in checks
    }
    judged = {
        k: v
        for k, v in _verdict(plain)["run"].items()
        if k.startswith("footprint.integrity.row.") and v in ("pass", "fail")
    }
    assert {k: _verdict(observed)["run"].get(k) for k in judged} == judged
    rows = ("asked", "checked", "not-checked", "found")
    assert _account(observed, rows) == _account(plain, rows)
    assert len(_account(observed, ("found",))) == 2
