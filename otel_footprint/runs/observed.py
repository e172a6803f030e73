"""Observed runs: where the runs of a trace with no recorder input are, from its spans' roles alone.

The one written rule (docs/schema.md, "Observed runs"): each outermost agent span is a run, and
the agent spans nested in it are parts of it; a trace without an agent span is one run whose run
span is its top span. A model call under a run span with no model call above it inside the run is
a pass; one nested in another model call is a second view of that pass; one under no run span is
no pass. Pure: span ids and roles in, span ids out (``runs/group.py`` builds the legs).
"""

from __future__ import annotations

from collections.abc import Mapping

from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.spans import SpanView

ObservedRun = tuple[str, list[str], list[str], list[str]]
"""(run span id, pass span ids, second views of passes, tool span ids)."""


def _chain(span_id: str, spans: Mapping[str, tuple[SpanView, SpanRole]]) -> list[str]:
    """The span's ancestors present here, nearest first (a parent cycle ends the chain)."""
    out: list[str] = []
    seen = {span_id}
    parent = spans[span_id][0].parent_span_id
    while parent is not None and parent in spans and parent not in seen:
        out.append(parent)
        seen.add(parent)
        parent = spans[parent][0].parent_span_id
    return out


def observed_runs(spans: Mapping[str, tuple[SpanView, SpanRole]]) -> list[ObservedRun]:
    """The observed runs of one trace's spans (``span id -> (view, role)``), in no set order."""
    chains = {span_id: _chain(span_id, spans) for span_id in spans}
    agents = [sid for sid, (_, role) in spans.items() if role is SpanRole.AGENT]
    if agents:
        runs = [
            sid for sid in agents if not any(spans[a][1] is SpanRole.AGENT for a in chains[sid])
        ]
    else:
        runs = [sid for sid in spans if not chains[sid]]  # the top span(s)
    members: dict[str, tuple[list[str], list[str], list[str]]] = {r: ([], [], []) for r in runs}
    chosen = set(runs)
    for span_id, (_, role) in spans.items():
        if role is not SpanRole.PASS and role is not SpanRole.TOOL:
            continue
        path = [span_id, *chains[span_id]]
        owner = next((sid for sid in path if sid in chosen), None)
        if owner is None:
            continue  # under no run span: a guard or router outside the agent
        passes, unmarked, tools = members[owner]
        if role is SpanRole.TOOL:
            if span_id != owner:
                tools.append(span_id)
            continue
        inner = path[: path.index(owner)]
        # A model call with another model call above it (within the run) is a second view.
        if any(spans[a][1] is SpanRole.PASS for a in inner[1:]):
            unmarked.append(span_id)
        else:
            passes.append(span_id)
    return [(r, *members[r]) for r in runs if members[r][0]]
