"""From shadow to savings: the recorder's live policy (enforce mode) and what it measurably saves.

The acceptance runs ``examples/shadow_to_savings.py`` in a fresh interpreter (the instrumentation
patches the ``openai`` client globally): the real client, ``opentelemetry-instrumentation-openai-v2``,
the fake OpenAI-compatible server and the in-process processor. The law: the live policy decides
on every pass what the processor's replay of the same trace decides (one kernel, one translation
of facts into kernel input), whatever the tools, picks and cursor moves.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from integration_agents import explain_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.kernel import ParkedChange
from otel_footprint.record.policy import Decision

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "shadow_to_savings.py"


def _example(*flags: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--json", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    body: dict[str, Any] = json.loads(result.stdout)
    return body


@pytest.mark.parametrize("spans", [(), ("--output-only",)], ids=["tool-spans", "output-only"])
@pytest.mark.parametrize(
    ("instrumentation", "module"),
    [
        ((), "opentelemetry.instrumentation.openai_v2"),
        (("--openinference",), "openinference.instrumentation.openai"),
    ],
    ids=["openai-v2", "openinference"],
)
def test_enforce_sends_what_shadow_predicted_fewer_with_the_same_answer(
    spans: tuple[str, ...], instrumentation: tuple[str, ...], module: str
) -> None:
    flags = (*spans, *instrumentation)
    for needed in ("openai", module):
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"{needed}: pip install -e '.[integrations]'")
    runs = _example(*flags)
    shadow, enforce, ignored = runs["shadow"], runs["enforce"], runs["ignored"]
    # Shadow mode: the finding predicts N characters.
    assert shadow["mode"] == "shadow" and shadow["complete"] and shadow["reasons"] == []
    assert shadow["parked_maps"] == ["shipping-map"]
    predicted = shadow["predicted_chars"]
    assert predicted > 0
    # Enforce mode: at least N fewer characters reached the server, same tool calls and answer.
    assert shadow["request_chars"] - enforce["request_chars"] >= predicted
    assert enforce["tool_calls"] == shadow["tool_calls"] and len(enforce["tool_calls"]) == 5
    assert enforce["answer"] == shadow["answer"]
    assert 0 < enforce["input_tokens"] < shadow["input_tokens"]  # as the model reported usage
    # The processor verified every decision; the run span says what was saved, beside N.
    assert enforce["mode"] == "verify" and enforce["complete"] and enforce["reasons"] == []
    assert enforce["mismatches"] == []
    assert enforce["saved_predicted_chars"] == predicted
    assert enforce["saved_chars"] > predicted  # the parked tool's definition too
    # The policy ignored for one call: a mismatch at that call, and only there.
    (mismatch,) = ignored["mismatches"]
    assert mismatch["iteration"] == 5
    assert mismatch["derived"] == [] and mismatch["reported"] != []
    # What it sent anyway is not counted as saved.
    assert 0 < ignored["saved_predicted_chars"] < predicted


# ── the law: the live policy decides what the replay decides ───────────────────────────────────

MAPS = [
    footprint.MountedMap("a-map", ("a1", "a2"), ("ta",)),
    footprint.MountedMap("b-map", ("b1",), ("tb",)),
]
MEMBERS = ["a1", "a2", "b1"]
MOVES = ["entry", "intent", "stay", "route", "model-pick", None]
TOOL_NAMES = ["ta", "tb", "other", "read_skill"]
OUTCOMES = ["ok", "error", "raises", "rejected", "denied", "picked"]
GRAPH = {
    "nodes": [{"id": m} for m in MEMBERS],
    "edges": [{"from": "a1", "to": "a2"}, {"from": "a2", "to": "b1"}],
}

STUCK = [{"to": "a1", "by": "entry", "tools": [("other", "a1", "ok")]}] + [
    {"to": "a1", "by": "stay", "tools": [("other", "a1", "ok")]}
] * 4
"""The cursor stays on a lexical guess while other tools are called: a-map parks on call 3."""

_pass = st.fixed_dictionaries(
    {
        "to": st.sampled_from([*MEMBERS, None]),
        "by": st.sampled_from(MOVES),
        "tools": st.lists(
            st.tuples(
                st.sampled_from(TOOL_NAMES), st.sampled_from(MEMBERS), st.sampled_from(OUTCOMES)
            ),
            max_size=3,
        ),
    }
)


STYLES = ("plan-first", "evaluate-first", "plan-only")


def _tool(run: footprint.Run, name: str, member: str, outcome: str) -> None:
    """One tool call and what the gate said of it (picks read from arguments, stated, refused)."""
    arguments = {"id": member} if name == "read_skill" else {}
    with contextlib.suppress(RuntimeError), run.tool_call(name, args=arguments) as tool:
        if outcome == "error":
            tool.result("boom", error=True)
        elif outcome == "raises":
            raise RuntimeError("the tool failed")
        elif outcome == "rejected":
            tool.rejected(member)
        elif outcome == "denied":
            tool.permission("skill_read", f"skill:{member}", "deny")
        elif outcome == "picked":
            tool.picked(member, hop=True)
        else:
            tool.result("ok")


def _recorded(
    passes: list[dict[str, Any]], *, ignore_at: int | None = None, style: str = "plan-first"
) -> tuple[list[Decision], RunVerdict]:
    """The agent on the plain recorder, following the live policy (except on ``ignore_at``);
    ``style``: ``plan-first`` (ask, then state what it serves), ``evaluate-first`` (state every
    member with the move, then ask with no move), ``plan-only`` (ask; state no evaluation)."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    decisions: list[Decision] = []
    with footprint.run(
        provider.get_tracer("t"), agent="a", maps=MAPS, renewal_grace=2, policy=True, graph=GRAPH
    ) as run:
        for iteration, step in enumerate(passes, start=1):
            with run.model_call("m") as call:
                witness = "word" if step["by"] == "entry" else None
                move = {"cursor_to": step["to"], "moved_by": step["by"], "witness": witness}
                if style == "evaluate-first":  # all members listed, then asked, then left out
                    call.evaluated(MEMBERS, **move)
                    decisions.append(call.plan())
                else:
                    decisions.append(call.plan(**move))
                if iteration == ignore_at:
                    served = list(MEMBERS)
                else:
                    served = [m for m in MEMBERS if call.keep(m, content=m * 10)]
                if style == "plan-first":
                    call.evaluated(served)
                for member in served:
                    call.injected("system-prompt", "skill", source_id=member, content=member * 10)
            for name, member, outcome in step["tools"]:
                _tool(run, name, member, outcome)
    provider.shutdown()
    (verdict,) = explain_spans(list(exporter.get_finished_spans()))
    return decisions, verdict


@settings(max_examples=30, deadline=None)
@example(passes=STUCK, style="plan-first")
@example(passes=STUCK, style="evaluate-first")
@example(passes=STUCK, style="plan-only")
@given(passes=st.lists(_pass, min_size=1, max_size=8), style=st.sampled_from(STYLES))
def test_the_live_policy_decides_every_pass_as_the_replay_does(
    passes: list[dict[str, Any]], style: str
) -> None:
    decisions, verdict = _recorded(passes, style=style)
    assert verdict.mode == "verify" and verdict.complete, verdict.reasons
    assert [p.iteration for p in verdict.passes] == [d.iteration for d in decisions]
    for decision, replayed in zip(decisions, verdict.passes, strict=True):
        assert decision.parked_injection_ids == replayed.parked_injection_ids
        assert decision.parked_tool_names == replayed.parked_tool_names
        assert decision.changes == replayed.changes
        assert not replayed.mismatch
        assert replayed.served_while_parked == ()


@pytest.mark.parametrize("style", STYLES)
def test_a_park_the_agent_ignored_is_a_mismatch_at_that_call(style: str) -> None:
    decisions, _ = _recorded(STUCK)
    parked_at = next(
        d.iteration for d in decisions if any(isinstance(c, ParkedChange) for c in d.changes)
    )
    _, verdict = _recorded(STUCK, ignore_at=parked_at, style=style)
    mismatched = [p for p in verdict.passes if p.mismatch]
    assert [p.iteration for p in mismatched] == [parked_at]
    (derived,) = mismatched[0].changes
    assert isinstance(derived, ParkedChange) and mismatched[0].reported == ()


def test_a_parked_map_served_later_is_a_mismatch_at_that_call_only() -> None:
    decisions, _ = _recorded(STUCK)
    parked_at = next(d.iteration for d in decisions if d.parked_maps)
    _, verdict = _recorded(STUCK, ignore_at=parked_at + 1)
    assert [p.iteration for p in verdict.passes if p.mismatch] == [parked_at + 1]


def test_the_policy_is_asked_only_in_a_run_that_has_one() -> None:
    tracer = TracerProvider().get_tracer("t")
    with (
        pytest.raises(ValueError, match="policy=True needs mounted maps"),
        footprint.run(tracer, agent="a", policy=True),
    ):
        pass
    with (
        pytest.raises(ValueError, match="enforce mode"),
        footprint.run(tracer, agent="a", maps=MAPS, policy=True, enforced=False),
    ):
        pass
    with (
        pytest.raises(ValueError, match="resumed"),
        footprint.run(tracer, agent="a", maps=MAPS, policy=True, resumed=True, next_iteration=4),
    ):
        pass
    with (
        footprint.run(tracer, agent="a", maps=MAPS) as run,
        pytest.raises(ValueError, match="no live policy"),
    ):
        run.plan(cursor_to="a1", moved_by="entry")
    with (
        footprint.run(tracer, agent="a", maps=MAPS, policy=True) as run,
        run.model_call("m") as call,
    ):
        with pytest.raises(ValueError, match="call plan"):
            call.keep("a1")
        call.plan(cursor_to="a1", moved_by="entry")
        with pytest.raises(ValueError, match="another cursor move"):
            call.evaluated(["a1"], cursor_to="a2", moved_by="intent")
