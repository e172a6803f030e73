"""Shared pieces of the product's end-to-end tests against Phoenix: the Python stuck-turn agent on the
recorder, the ``otel-footprint serve`` hop started as a subprocess, and the Phoenix-side checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from test_service_support import HopProcess

from otel_footprint import record as footprint
from otel_footprint import semconv as sc
from otel_footprint.sdk import setup as footprint_setup

from .phoenix_api import PhoenixClient, PhoenixSpan, gql_contains, gql_literal, gql_ref, poll
from .sdk_export import CheckedExporter

REPO = Path(__file__).resolve().parents[2]
E2E_TIMEOUT_S = 30.0
"""Bound of every wait on Phoenix (ingestion is asynchronous; it usually takes well under 1 s)."""

# --- the stuck turn: the reference's 30-call turn, as tests/node/agent.mjs also emits it ---------

PASSES = 30
PARKED_FROM = 4
"""Renewal grace 3: the map engaged on pass 1 and unused since is parked on the fourth call."""
SKILL_MAP = "skill-map"
ZONE_AUDIT = "zone-audit"
MEMBERS = (ZONE_AUDIT, "run-finder")
ZONE_TOOL = "get_zone_info"
FOREIGN_TOOL = "screen_open"
USER_PROMPT = "find the most recent zone redundancy run"
SKILL_BODY = "ZONE AUDIT PROCEDURE: call get_zone_info, classify single-path hosts."
TOOL_ROWS = (
    ("screen_open", "Open a screen and look at it."),
    ("read_skill", "Activate a skill for the next iteration."),
    ("get_zone_info", "Zone redundancy audit data."),
)


@dataclass(frozen=True, slots=True)
class EmittedRun:
    """Ids of one run the Python agent emitted (lowercase hex, as Phoenix returns them)."""

    run_id: str
    trace_id: str
    run_span_id: str
    pass_span_ids: Mapping[int, str] = field(default_factory=dict)


def _hex_ids(span: Any) -> tuple[str, str]:
    context = span.get_span_context()
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def stuck_turn(tracer: Tracer, run_id: str, *, passes: int = PASSES) -> EmittedRun:
    """The 30-call stuck turn through the recorder, in shadow mode (the agent runs no kernel).

    Pass 1 places the cursor on zone-audit by an entry rule (witness "zone"); the model never uses
    the skill's tool and calls screen_open after every pass but the last, which answers.
    """
    pass_ids: dict[int, str] = {}
    with footprint.run(
        tracer,
        agent="scripted-agent",
        run_id=run_id,
        maps=[footprint.MountedMap(SKILL_MAP, MEMBERS, (ZONE_TOOL,))],
        renewal_grace=3,
        enforced=False,
        user_prompt=USER_PROMPT,
        graph={
            "nodes": [{"id": m, "kind": "skill"} for m in MEMBERS],
            "edges": [
                {"from": None, "to": ZONE_AUDIT, "kind": "entry"},
                {"from": ZONE_AUDIT, "to": "run-finder", "kind": "model"},
            ],
        },
    ) as run:
        trace_id, run_span_id = _hex_ids(run.span)
        for iteration in range(1, passes + 1):
            with run.model_call("scripted-model", provider="scripted") as call:
                if iteration == 1:
                    call.evaluated(
                        [ZONE_AUDIT],
                        cursor_to=ZONE_AUDIT,
                        moved_by="entry",
                        witness="zone",
                        witness_keyword="zone",
                    )
                else:
                    call.evaluated(
                        [ZONE_AUDIT], cursor_to=ZONE_AUDIT, cursor_from=ZONE_AUDIT, moved_by="stay"
                    )
                call.injected("system-prompt", "base", content="You help people find things.")
                call.injected("system-prompt", "skill", source_id=ZONE_AUDIT, content=SKILL_BODY)
                call.composed("system-prompt")
                for name, description in TOOL_ROWS:
                    call.injected("tools", "registry", source_id=name, content=description)
                call.injected(
                    "tools", "skill", source_id=ZONE_AUDIT, content=f"{ZONE_TOOL}: zone audit data"
                )
                call.composed("tools")
            # The pass's span exists once its block ends (the recorder's own `chat` span, as no
            # instrumentation claimed the pass).
            assert call.span is not None
            pass_ids[iteration] = _hex_ids(call.span)[1]
            if iteration < passes:
                with run.tool_call(FOREIGN_TOOL, args={"screen": "runs"}) as tool:
                    tool.result("screen shows: runs list")
        run.answer("The most recent zone redundancy run is run-42.")
    return EmittedRun(run_id, trace_id, run_span_id, pass_ids)


def routed_turn(tracer: Tracer, run_id: str, *, delivered: bool) -> EmittedRun:
    """A two-pass run whose turn-start routing decides the billing skill; the agent composes it
    (``delivered``) or, broken, composes the shipping skill in its place."""
    given = "billing" if delivered else "shipping"
    with footprint.run(
        tracer,
        agent="routed-agent",
        run_id=run_id,
        maps=[footprint.MountedMap(SKILL_MAP, ("billing", "shipping"), ())],
        user_prompt="please refund my order 1182",
    ) as run:
        trace_id, run_span_id = _hex_ids(run.span)
        run.routed(
            "intent",
            to="billing",
            decisive=True,
            scorer="keyword",
            scores=[{"id": "billing", "score": 0.91}, {"id": "shipping", "score": 0.12}],
        )
        for iteration in (1, 2):
            with run.model_call("scripted-model") as call:
                if iteration == 1:
                    call.evaluated(["billing"], cursor_to="billing", moved_by="intent")
                else:
                    call.evaluated(
                        ["billing"], cursor_to="billing", cursor_from="billing", moved_by="stay"
                    )
                call.injected("system-prompt", "base", content="You are the support assistant.")
                call.injected("system-prompt", "skill", source_id=given, content=f"{given} skill")
            if iteration == 1:
                with run.tool_call("lookup_order", args={"id": "1182"}) as tool:
                    tool.result('[{"order": 1182, "status": "charged twice"}]')
        run.answer("Order 1182 was charged twice; a refund is on its way.")
    return EmittedRun(run_id, trace_id, run_span_id)


@contextmanager
def footprint_provider(
    exporter: CheckedExporter, project: str, *, min_spans: int
) -> Iterator[TracerProvider]:
    """A TracerProvider whose spans go through ``otel_footprint.sdk.setup`` (the in-process
    processor) to ``exporter``, in Phoenix project ``project``; on exit: flush, shut down, and
    fail unless at least ``min_spans`` spans were exported without an export failure."""
    provider = TracerProvider(
        resource=Resource.create({sc.OI_PROJECT_NAME: project, SERVICE_NAME: "python-agent-e2e"})
    )
    # A short grace: the scripted run is complete when its run span ends.
    processor = footprint_setup(provider, exporter, grace_seconds=0.1)
    try:
        yield provider
    finally:
        flushed = processor.force_flush(20_000)
        provider.shutdown()
    assert flushed, "the footprint processor did not flush within 20 s"
    stats = processor.stats()
    if exporter.failures or exporter.exported < min_spans:
        raise AssertionError(
            f"export to project {project!r}: {exporter.exported} span(s) exported, "
            f"failures {exporter.failures}; processor stats {stats}"
        )


# --- the hop ---------------------------------------------------------------------------------


def start_hop(data_dir: Path, forward: str, *, forward_protocol: str) -> HopProcess:
    """``otel-footprint serve`` on free loopback ports, forwarding to ``forward`` (Phoenix).

    Logs are not forwarded (Phoenix takes no OTLP logs); the release grace is short because every
    test sends whole traces; fsync is off (a test journal need not survive a power cut).
    """
    hop = HopProcess(
        data_dir,
        forward,
        "--forward-protocol",
        forward_protocol,
        "--set",
        "exporters.otlp.forward_logs=false",
        "--set",
        "processing.release_grace=0.3s",
        "--set",
        "exporters.otlp.queue.fsync=false",
    )
    return hop.start(timeout=60)


def otel_footprint_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run the ``otel-footprint`` command line of this checkout (bounded), capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "otel_footprint.commands.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=str(REPO),
        env=dict(os.environ),
    )


# --- Phoenix-side checks ---------------------------------------------------------------------


def eq(name: str, value: str | int | bool, *, leaf_sibling: str | None = None) -> str:
    """A filter condition: attribute ``name`` equals ``value`` (bracket form, always valid)."""
    return f"{gql_ref(name, leaf_sibling=leaf_sibling)} == {gql_literal(value)}"


def all_of(*conditions: str) -> str:
    """Conditions joined with ``and``."""
    return " and ".join(f"({c})" for c in conditions)


def in_trace(trace_id: str) -> str:
    """Spans of one trace (a span column, filterable next to attributes)."""
    return f"trace_id == {gql_literal(trace_id)}"


def exactly(
    phoenix: PhoenixClient, project: str, condition: str, count: int, *, timeout: float = 10.0
) -> list[PhoenixSpan]:
    """Poll until exactly ``count`` spans match ``condition`` (ingestion may still be landing)."""
    return poll(
        lambda: phoenix.spans_where(project, condition),
        lambda found: len(found) == count,
        timeout=timeout,
        what=f"exactly {count} span(s) in {project!r} where {condition}",
    )


def attrs_of(span: PhoenixSpan, names: Sequence[str]) -> dict[str, Any]:
    """The given attributes of ``span`` (None for an absent one), for one readable comparison."""
    return {name: span.attributes.get(name) for name in names}


def subset(attributes: Mapping[str, Any], expected: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` restricted to the keys of ``expected`` (None for an absent one)."""
    return {name: attributes.get(name) for name in expected}


def assert_stuck_turn_in_phoenix(
    phoenix: PhoenixClient,
    project: str,
    *,
    run_id: str,
    trace_id: str,
    run_span_id: str,
    pass_span_ids: Mapping[int, str] | None = None,
) -> None:
    """The 30-call stuck turn (shadow mode) is annotated in Phoenix as the reference says.

    The values are literals and the lookups are server-side filters on our output attributes, so a
    renamed attribute or a changed value fails here: first as a readable diff of what Phoenix
    returned, then as a filter that no longer finds the span.
    """
    # Wait for the whole run first (the processor / hop exports a run only once it is annotated).
    passes_cond = all_of(in_trace(trace_id), eq(sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT))
    [run] = phoenix.wait_for_spans(project, attributes={sc.RUN_ID: run_id}, timeout=E2E_TIMEOUT_S)
    assert (run.span_id, run.trace_id, run.parent_id) == (run_span_id, trace_id, None)
    passes = exactly(phoenix, project, passes_cond, PASSES, timeout=E2E_TIMEOUT_S)
    by_iteration = {p.attributes.get(sc.PASS_ITERATION): p for p in passes}
    assert set(by_iteration) == set(range(1, PASSES + 1))

    expected_run = {
        sc.RUN_MODE: "shadow",
        sc.RUN_PASSES: 30,
        sc.RUN_COMPLETE: True,
        sc.RUN_RESUMED: False,
        sc.RUN_PARKED_MAPS: ["skill-map"],
        sc.RUN_REASONS: None,
        sc.CHECK_DECIDED_DELIVERED: "unreachable",  # no turn-start routing in this run
        sc.CHECK_DECIDED_DELIVERED_OUTCOME: None,  # written only when check 1 is reachable
        sc.CHECK_EXISTENCE: "not-applicable",
        sc.CHECK_EMPTY_RESULTS: "reachable",
        # Shadow mode's finding: zone-audit rode calls 4-30 after skill-map would have parked.
        sc.SIGNALS: ["rode-while-parked"],
        sc.RUN_SERVED_PASSES_WHILE_PARKED: 27,
        sc.RUN_SERVED_WHILE_PARKED: ["zone-audit"],
        sc.RUN_SERVED_WHILE_PARKED_MAPS: ["skill-map"],
    }
    assert subset(run.attributes, expected_run) == expected_run
    evaluations = {
        e.attributes[sc.EVAL_NAME]: e.attributes[sc.EVAL_SCORE_LABEL]
        for e in run.events_named(sc.EV_EVALUATION_RESULT)
    }
    assert evaluations == {
        "footprint.decided-delivered": "unknown",
        "footprint.existence": "unknown",
        "footprint.empty-results": "pass",
        # the map is mounted, the offered tools are not recorded: integrity cannot judge compose
        "footprint.integrity.invariant-violation@compose": "unknown",
    }
    assert run.events_named(sc.EV_ACCOUNT_LINE), "the account's lines were not written"
    # The run span, found by its verdict: GraphQL condition and the REST attribute filter.
    run_condition = all_of(
        eq(sc.RUN_ID, run_id),
        eq(sc.CHECK_DECIDED_DELIVERED, "unreachable"),
        eq(sc.RUN_MODE, "shadow"),
        eq(sc.RUN_PASSES, 30),
        eq(sc.RUN_COMPLETE, True),
        gql_contains(sc.RUN_PARKED_MAPS, SKILL_MAP),
    )
    assert phoenix.span_ids_where(project, run_condition) == [run_span_id]
    rest = phoenix.spans(
        project, attributes={sc.RUN_ID: run_id, sc.CHECK_DECIDED_DELIVERED: "unreachable"}
    )
    assert [s.span_id for s in rest] == [run_span_id]

    # The fourth pass: what Phoenix returned, then found by "skill-map" parked AND iteration 4.
    fourth = by_iteration[PARKED_FROM]
    assert (fourth.parent_id, fourth.span_kind) == (run_span_id, "LLM")
    if pass_span_ids is not None:
        assert fourth.span_id == pass_span_ids[PARKED_FROM]
    expected_fourth = {
        sc.PASS_ITERATION: 4,
        sc.ENG_ENGAGED_MAPS: [],
        sc.ENG_PARKED_MAPS: ["skill-map"],
        sc.ENG_SERVED_WHILE_PARKED: ["zone-audit"],
        sc.ENG_PARKED_INJECTION_IDS: ["zone-audit", "run-finder"],
    }
    assert subset(fourth.attributes, expected_fourth) == expected_fourth
    served_chars = fourth.attributes.get(sc.ENG_SERVED_CHARS_WHILE_PARKED)
    assert isinstance(served_chars, int) and served_chars > 0
    parked = gql_contains(sc.ENG_PARKED_MAPS, SKILL_MAP)
    found = phoenix.span_ids_where(project, all_of(parked, eq(sc.PASS_ITERATION, 4)))
    assert found == [fourth.span_id]
    # Span events cannot be filtered server side: the parked event is read back from the span.
    [event] = fourth.events_named(sc.EV_ENGAGEMENT_PARKED)
    expected_event = {
        sc.CH_MAP_ID: "skill-map",
        sc.CH_ITERATION: 4,
        sc.CH_BY: "lexical",
        sc.CH_IDLE_CALLS: 3,
        sc.CH_WITNESS: "zone",
    }
    assert subset(event.attributes, expected_event) == expected_event
    assert not fourth.events_named(sc.EV_ENGAGEMENT_ENGAGED)

    # Every pass, by membership: parked from 4 on, zone-audit riding on exactly those passes.
    parked_ids = phoenix.span_ids_where(project, all_of(passes_cond, parked))
    assert sorted(parked_ids) == sorted(by_iteration[i].span_id for i in range(4, PASSES + 1))
    riding = phoenix.span_ids_where(
        project, all_of(passes_cond, gql_contains(sc.ENG_SERVED_WHILE_PARKED, ZONE_AUDIT))
    )
    assert sorted(riding) == sorted(parked_ids)
    not_parked = f"{gql_literal(json.dumps(SKILL_MAP))} not in {gql_ref(sc.ENG_PARKED_MAPS)}"
    unparked = phoenix.span_ids_where(project, all_of(passes_cond, not_parked))
    assert sorted(unparked) == sorted(by_iteration[i].span_id for i in (1, 2, 3))
    first = by_iteration[1]
    assert first.attributes.get(sc.ENG_ENGAGED_MAPS) == ["skill-map"]
    [engaged] = first.events_named(sc.EV_ENGAGEMENT_ENGAGED)
    expected_engaged = {sc.CH_MAP_ID: "skill-map", sc.CH_ITERATION: 1, sc.CH_BY: "lexical"}
    assert subset(engaged.attributes, expected_engaged) == expected_engaged
