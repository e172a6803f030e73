"""The hop's annotation stage: released runs -> group_runs -> decide_run -> annotations_for -> apply_note.

Works on the protobuf spans in place (through ``OtlpSpanView``; no SDK objects). The buffer and
the forwarder only see the small :class:`AnnotationStage` interface, so ``processing.annotate:
false`` (the benchmark's baseline) and tests can swap the stage without touching the plumbing.
A release is decided in steps (``runs/slices.py``): the pipeline's release worker interleaves a
long run's decision with the others' so none waits behind a whole 3,000-pass decision.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from otel_footprint import semconv
from otel_footprint.annotate.form import (
    AnnotateOptions,
    SpanNote,
    annotation_steps,
    merge_notes,
    unannotated_notes,
)
from otel_footprint.annotate.otlp import apply_note
from otel_footprint.engine.decide import (
    EngineOptions,
    decide_run_steps,
    run_span_keys,
    span_keys,
    store_keys,
)
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.group import (
    RunSpans,
    chains_reach,
    group_runs_steps,
    incomplete_for,
    recorder_input,
)
from otel_footprint.runs.holding import reason_for
from otel_footprint.runs.model import Reason, RunStore
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.slices import STEP_SPANS, Steps, Ticket, finish
from otel_footprint.runs.spans import OtlpSpanView, SpanEventView
from otel_footprint.sdk.verdict_metrics import UNKNOWN_AGENT, agent_of
from otel_footprint.service import jsonlog
from otel_footprint.service.buffer import HeldSpan, LateSpan, Release, RunUnit

_log = jsonlog.get("annotate")


@dataclass(frozen=True, slots=True)
class Decision:
    """What was decided for one run of a release (for the decision cache and the query service)."""

    trace_id: str
    run_id: str | None
    run_span_id: str | None
    complete: bool
    reasons: tuple[str, ...]
    verdict: RunVerdict | None
    notes: Mapping[bytes, SpanNote]
    """Notes by span id (bytes), kept so late spans of the run get the same annotation."""
    annotated_spans: int
    decided_unix_nano: int
    agent: str = UNKNOWN_AGENT
    """The run span's ``gen_ai.agent.name`` (the verdict metrics' agent label)."""


class AnnotationStage(Protocol):
    """Decides released runs and writes the result onto their protobuf spans, in place.

    On a release that ended (cause ``ended``), only onto the spans its decisions' ``notes`` or the
    release's ``late_notes`` name: the pipeline forwards the others as they were held."""

    def annotate(self, release: Release) -> list[Decision]: ...

    def annotate_steps(self, release: Release, turn: Ticket | None = None) -> Steps[list[Decision]]:
        """:meth:`annotate` in steps; ``turn`` orders its run-store use among other releases'."""
        ...

    def annotate_late(self, late: LateSpan) -> bool:
        """Annotate a span of an already-decided run; True when something was written."""
        ...


class NoAnnotation:
    """``processing.annotate: false``: spans are forwarded exactly as received."""

    def annotate(self, release: Release) -> list[Decision]:
        return []

    def annotate_steps(self, release: Release, turn: Ticket | None = None) -> Steps[list[Decision]]:
        return []
        yield None  # a generator that ends at once

    def annotate_late(self, late: LateSpan) -> bool:
        return False


class FootprintAnnotation:
    """The real stage: the engine's decision per run, its notes applied to the spans in place."""

    def __init__(
        self,
        store: RunStore | None = None,
        engine_options: EngineOptions | None = None,
        annotate_options: AnnotateOptions | None = None,
    ) -> None:
        self.store = store
        self.engine_options = engine_options or EngineOptions()
        self.annotate_options = annotate_options or AnnotateOptions()

    def annotate(self, release: Release) -> list[Decision]:
        return finish(self.annotate_steps(release))

    def annotate_steps(self, release: Release, turn: Ticket | None = None) -> Steps[list[Decision]]:
        decisions: list[Decision] = []
        for unit in release.units:
            decisions.extend((yield from self._unit(release, unit, turn)))
        for held in release.late:
            note = release.late_notes.get(held.span_id)
            if note is not None:
                apply_note(held.span, _as_note(note))
        return decisions

    def _unit(self, release: Release, unit: RunUnit, turn: Ticket | None) -> Steps[list[Decision]]:
        members = unit.members
        if unit.run_span is not None:
            # The buffer grouped these members under this one run span by their parent chains, so
            # spans of no role and without footprint events (HTTP, DB, ...: often most of a trace)
            # need no view: group_runs would only drop them, and a chain broken by leaving them out
            # still leads to the one run span here.
            members = [m for m in members if m.runish or m.span_id in unit.log_events]
        # Whether every member's parent chain reaches the unit's run span (the usual case): then
        # grouping can make no run but that one, its keys are known before the spans are read,
        # and grouping needs no chain walked again.
        whole = _whole_run(unit, members)
        if turn is not None:
            # Else the keys are not known until the spans are read.
            turn.declare(None if whole is None else run_span_keys([whole]))
        views: dict[bytes, OtlpSpanView] = {}
        for count, m in enumerate(members, 1):
            # A held span is parsed here (the run span already was, for its keys).
            view = OtlpSpanView(m.span, m.role) if m is not unit.run_span or not whole else whole
            views[m.span_id] = view
            if not count % STEP_SPANS:
                yield None
        log_events: dict[str, Sequence[SpanEventView]] = {
            span_id.hex(): [e.event for e in events] for span_id, events in unit.log_events.items()
        }
        if turn is not None and not turn.declared:
            # Until its runs are grouped, the keys of every span that may be a run span: a
            # release behind this one need not wait for the whole grouping of a long run.
            turn.declare((yield from span_keys(views.values())))
        runs = yield from group_runs_steps(
            views.values(),
            log_events,
            observed=self.engine_options.observed,
            whole=None if whole is None else whole.span_id,
        )
        if turn is not None:
            turn.declare(store_keys(runs))
        yield None
        # "root" with the run span here: the root only ended first, nothing is missing.
        incomplete = reason_for(release.cause, release.limit, run_span=unit.run_span is not None)
        out: list[Decision] = []
        for run in runs:
            held = incomplete_for(run, incomplete)
            out.append((yield from self._run(release, unit, run, views, held, turn)))
        if not runs and incomplete is not None:
            # Spans of recorder input with no run span form no run; they still say why they
            # leave undecided. A span that is no recorder input is told nothing: a trace that
            # never had a run span is not missing one.
            runish = (views[m.span_id] for m in members if m.runish)
            loose = [view for view in runish if recorder_input(view)]
            for span_hex, note in unannotated_notes(loose, incomplete, complete=None).items():
                target = views.get(bytes.fromhex(span_hex))
                if target is not None:
                    apply_note(target.pb, note)
        return out

    def _run(
        self,
        release: Release,
        unit: RunUnit,
        run: RunSpans,
        views: Mapping[bytes, OtlpSpanView],
        incomplete: Reason | None,
        turn: Ticket | None,
    ) -> Steps[Decision]:
        verdict: RunVerdict | None = None
        notes: dict[str, SpanNote]
        run_span = run.run_span
        if release.cause == "overflow" and incomplete is not None:
            notes = unannotated_notes(run, incomplete)
        elif run_span is None:
            notes = unannotated_notes(run, run.reason or _NO_RUN, complete=None)
            if incomplete is not None:
                notes = merge_notes(notes, unannotated_notes(run, incomplete, complete=None))
        elif run_span.attribute(semconv.RUN_COMPLETE) is not None:
            # Already annotated (an in-process processor, or an earlier hop): never annotate twice.
            notes = {}
        else:
            verdict = yield from decide_run_steps(run, self.store, self.engine_options, turn=turn)
            if incomplete is not None:
                verdict = dataclasses.replace(
                    verdict, complete=False, reasons=(*verdict.reasons, incomplete)
                )
            notes = yield from annotation_steps(verdict, self.annotate_options)
        by_id: dict[bytes, SpanNote] = {}
        annotated = 0
        for span_hex, note in notes.items():
            try:
                span_id = bytes.fromhex(span_hex)
            except ValueError:
                continue
            by_id[span_id] = note
            view = views.get(span_id)
            if view is not None:
                apply_note(view.pb, note, view.attribute_values())
                annotated += 1
                if not annotated % STEP_SPANS:
                    yield None
        if verdict is not None:
            complete, reasons = verdict.complete, tuple(r.code for r in verdict.reasons)
        else:
            complete = False
            reasons = tuple(r.code for r in (run.reason, incomplete) if r is not None) or (
                "not-decided",
            )
        return Decision(
            trace_id=run.trace_id,
            run_id=run.run_id if run_span is not None else None,
            run_span_id=run.run_span_id,
            complete=complete,
            reasons=reasons,
            verdict=verdict,
            notes=by_id,
            annotated_spans=annotated,
            decided_unix_nano=time.time_ns(),
            agent=agent_of(run_span),
        )

    def annotate_late(self, late: LateSpan) -> bool:
        if late.note is not None:
            apply_note(late.info.span, _as_note(late.note))
            return True
        if late.info.role is not SpanRole.RUN:
            return False
        # A run span arriving after its run was decided without it (timeout, overflow, root).
        code = late.cause if late.cause in ("timeout", "overflow", "shutdown") else "late-span"
        view = OtlpSpanView(late.info.span, late.info.role)
        notes = unannotated_notes(
            [view],
            Reason(code, "this run span arrived after its run had been decided"),
            run_span_id=view.span_id,
            complete=False,
        )
        note = notes.get(view.span_id)
        if note is None:
            return False
        apply_note(late.info.span, note)
        return True


_NO_RUN = Reason("no-run-span", "footprint events without a run span")


def _whole_run(unit: RunUnit, members: Sequence[HeldSpan]) -> OtlpSpanView | None:
    """The unit's run span when every one of ``members`` reaches it by its parent chain through
    the others (:func:`chains_reach`, from the ids alone, without parsing the held spans), else
    None. The buffer made it the only run span among them; grouping makes another run only of an
    agent span that footprint events with no run above them (a broken chain) lead to."""
    run_span = unit.run_span
    if run_span is None or not chains_reach(
        run_span.span_id, {m.span_id: m.parent_id for m in members}
    ):
        return None
    return OtlpSpanView(run_span.span, run_span.role)


def _as_note(note: object) -> SpanNote:
    if not isinstance(note, SpanNote):
        raise TypeError(f"the decision cache holds a {type(note).__name__}, not a SpanNote")
    return note
