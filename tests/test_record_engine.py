"""Scripted agents instrumented with the recorder, decided by the runs engine from their SDK spans.

The agent below is a plain ReAct loop over scripted model replies on the trap graph of the
reference (``zone-audit`` owns ``get_zone_info`` and is a keyword entry; ``screen_open`` is not the
map's). With ``kernel=True`` it runs the engagement kernel itself and reports its decisions
(verify mode); without, it keeps serving the skill (shadow mode).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint.kernel import (
    PARK_CARD_ID,
    EngagementPass,
    MapEngagementRecord,
    ToolResult,
    advance_engagement,
    engagement_plan,
    park_card,
)
from otel_footprint.kernel.jsoncodec import change_to_json

engine = pytest.importorskip("otel_footprint.engine.decide")
group = pytest.importorskip("otel_footprint.runs.group")
from otel_footprint.runs.spans import SdkSpanView  # noqa: E402

MAP = footprint.MountedMap("skill-map", ("zone-audit", "run-finder"), ("get_zone_info",))
PLAN = engagement_plan([MAP], 3)
GRAPH = {
    "nodes": [{"id": "zone-audit", "kind": "skill"}, {"id": "run-finder", "kind": "skill"}],
    "edges": [
        {"from": None, "to": "zone-audit", "kind": "entry"},
        {"from": "zone-audit", "to": "run-finder", "kind": "model"},
    ],
}
BODIES = {
    "zone-audit": "ZONE AUDIT PROCEDURE: call get_zone_info, classify single-path hosts.",
    "run-finder": "RUN FINDER: list recorded runs, newest first.",
}
PROMPT = "find the most recent zone redundancy run"


def _agent(tracer_provider: TracerProvider, replies: Sequence[str], *, kernel: bool) -> None:
    """Replies: ``S`` screen_open, ``Z`` get_zone_info, ``R:<id>`` read_skill, ``F`` final."""
    tracer = tracer_provider.get_tracer("scripted-agent")
    cursor: str | None = None
    engagement: tuple[MapEngagementRecord, ...] = ()
    last_calls: list[str] = []
    picks: list[str] = []
    served: list[str] = []
    with footprint.run(
        tracer,
        agent="trap",
        run_id="run-trap",
        maps=[MAP],
        enforced=kernel,
        user_prompt=PROMPT,
        graph=GRAPH,
    ) as run:
        for reply in replies:
            # The cursor: a keyword entry on the first call, a hop on an accepted pick, else stay.
            hop = next((p for p in picks if cursor == "zone-audit" and p == "run-finder"), None)
            if cursor is None:
                move, cursor, witness = "entry", "zone-audit", "zone"
            elif hop is not None:
                move, cursor, witness = "model-pick", hop, None
            else:
                move, witness = "stay", None
            with run.model_call("scripted") as p:
                parked: tuple[str, ...] = ()
                if kernel:
                    advance = advance_engagement(
                        PLAN,
                        engagement,
                        EngagementPass(
                            iteration=p.iteration,
                            current_node=cursor,
                            move_by=move,
                            witness=witness,
                            tool_results=tuple(ToolResult(name) for name in last_calls),
                            pending_skill_pick=hop,
                            accepted_skill_picks=tuple(picks),
                            served_last_pass=tuple(served),
                        ),
                    )
                    engagement, parked = advance.next, advance.parked_injection_ids
                    for change in advance.changes:
                        p.engagement(change)
                active = [cursor] if cursor not in parked else []
                p.evaluated(active, cursor_to=cursor, moved_by=move, witness=witness)
                p.injected("system-prompt", "base", content="You help people find things.")
                for skill in active:
                    p.injected("system-prompt", "skill", source_id=skill, content=BODIES[skill])
                card = park_card(PLAN, engagement) if kernel else None
                if card:
                    p.injected("system-prompt", "steering", source_id=PARK_CARD_ID, content=card)
                p.composed("system-prompt")
                served = [*active, *([PARK_CARD_ID] if card else [])]
            last_calls, picks = [], []
            if reply == "F":
                run.answer("run-42")
                break
            name, _, arg = reply.partition(":")
            tool = {"S": "screen_open", "Z": "get_zone_info", "R": "read_skill"}[name]
            args = {"id": arg} if arg else {}
            with run.tool_call(tool, args=args) as call:
                if tool == "read_skill":
                    call.picked(arg, hop=cursor == "zone-audit" and arg == "run-finder")
                    picks.append(arg)
                call.result("ok")
            last_calls.append(tool)


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    tracer_provider = TracerProvider()
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider, exporter
    tracer_provider.shutdown()


def _decide(exporter: InMemorySpanExporter) -> object:
    views = [SdkSpanView(span) for span in exporter.get_finished_spans()]
    (leg,) = group.group_runs(views)
    return engine.decide_run(leg)


def _changes(verdict: object) -> list[dict[str, Any]]:
    return [
        change_to_json(change)
        for pass_verdict in verdict.passes  # type: ignore[attr-defined]
        for change in pass_verdict.changes
    ]


@pytest.mark.parametrize("kernel", [False, True], ids=["shadow", "verify"])
def test_thirty_call_stuck_turn_parks_on_call_four(
    provider: tuple[TracerProvider, InMemorySpanExporter], kernel: bool
) -> None:
    tracer_provider, exporter = provider
    _agent(tracer_provider, ["S"] * 29 + ["F"], kernel=kernel)
    verdict = _decide(exporter)
    assert verdict.mode == ("verify" if kernel else "shadow")  # type: ignore[attr-defined]
    assert len(verdict.passes) == 30  # type: ignore[attr-defined]
    assert _changes(verdict) == [
        {
            "kind": "engaged",
            "mapId": "skill-map",
            "iteration": 1,
            "by": "lexical",
            "witness": "zone",
        },
        {
            "kind": "parked",
            "mapId": "skill-map",
            "iteration": 4,
            "by": "lexical",
            "idleCalls": 3,
            "witness": "zone",
        },
    ]
    assert verdict.parked_maps == ("skill-map",)  # type: ignore[attr-defined]
    assert not any(p.mismatch for p in verdict.passes)  # type: ignore[attr-defined]
    riding = [p.iteration for p in verdict.passes if p.served_while_parked]  # type: ignore[attr-defined]
    # Shadow mode: what the missing kernel would have saved, pass by pass.
    assert riding == (list(range(4, 31)) if not kernel else [])


@pytest.mark.parametrize("kernel", [False, True], ids=["shadow", "verify"])
def test_explicit_pick_recovers_a_parked_map(
    provider: tuple[TracerProvider, InMemorySpanExporter], kernel: bool
) -> None:
    tracer_provider, exporter = provider
    _agent(tracer_provider, ["S", "S", "S", "R:zone-audit", "F"], kernel=kernel)
    verdict = _decide(exporter)
    changes = _changes(verdict)
    assert [(c["kind"], c["iteration"], c["by"]) for c in changes] == [
        ("engaged", 1, "lexical"),
        ("parked", 4, "lexical"),
        ("engaged", 5, "explicit"),
    ]
    assert changes[2].get("reengaged") is True
    assert not any(p.mismatch for p in verdict.passes)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kernel", [False, True], ids=["shadow", "verify"])
def test_calling_its_own_tool_upgrades_and_never_parks(
    provider: tuple[TracerProvider, InMemorySpanExporter], kernel: bool
) -> None:
    tracer_provider, exporter = provider
    _agent(tracer_provider, ["Z", "Z", "Z", "Z", "F"], kernel=kernel)
    verdict = _decide(exporter)
    changes = _changes(verdict)
    assert [(c["kind"], c["iteration"], c["by"]) for c in changes] == [
        ("engaged", 1, "lexical"),
        ("engaged", 2, "structural"),
    ]
    assert changes[1].get("upgraded") is True and changes[1].get("foundedBy") == "lexical"
    assert verdict.parked_maps == ()  # type: ignore[attr-defined]
    assert not any(p.mismatch for p in verdict.passes)  # type: ignore[attr-defined]
