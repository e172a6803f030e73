"""From one trace's held SDK spans (and footprint log records) to the notes to write on them.

The buffer calls this on its worker thread; it is the only place the SDK path meets runs/. The
engine's decider also decides in steps (:class:`SteppedDecider`, ``runs/slices.py``): the buffer's
worker then interleaves a long run's decision with the others'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from opentelemetry.sdk.trace import ReadableSpan

from otel_footprint.annotate.form import (
    AnnotateOptions,
    SpanNote,
    annotation_steps,
    merge_notes,
    unannotated_notes,
)
from otel_footprint.engine.decide import EngineOptions, decide_run_steps, span_keys, store_keys
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.group import group_runs_steps, incomplete_for
from otel_footprint.runs.model import Reason, RunStore
from otel_footprint.runs.slices import Steps, Ticket, finish
from otel_footprint.runs.spans import SdkSpanView, SpanEventView
from otel_footprint.sdk.verdict_metrics import VerdictRecorder, agent_of

LogEvents = Mapping[str, Sequence[SpanEventView]]
"""Footprint events that arrived as log records, by the span id (hex) they name."""


class Decider(Protocol):
    """``(spans of one trace, why it is incomplete or None) -> notes by span id``.

    ``log_events`` is passed (by keyword) only when the trace has footprint events that arrived as
    log records, so a decider written for span events alone keeps working for such traces.
    """

    def __call__(
        self,
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: LogEvents | None = None,
    ) -> dict[str, SpanNote]: ...


class SteppedDecider(Decider, Protocol):
    """A :class:`Decider` that can also decide in steps (the buffer's worker interleaves them)."""

    def steps(
        self,
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: LogEvents | None = None,
        turn: Ticket | None = None,
    ) -> Steps[dict[str, SpanNote]]:
        """The call's notes, computed in steps; ``turn`` orders the run-store use."""
        ...


def make_decider(
    *,
    store: RunStore | None = None,
    engine_options: EngineOptions | None = None,
    annotate_options: AnnotateOptions | None = None,
    on_verdict: Callable[[RunVerdict], None] | None = None,
    verdict_metrics: VerdictRecorder | None = None,
) -> SteppedDecider:
    """The engine pipeline as a :class:`Decider`: group_runs -> decide_run -> annotations_for.

    ``incomplete`` (a timeout, a flush before the run span ended) marks every verdict of the trace
    ``complete=false`` with that reason: the decision stands on the spans that had arrived.
    ``on_verdict`` sees every verdict before it is written (the demo prints them);
    ``verdict_metrics`` counts each one.
    """
    return _EngineDecider(
        store,
        engine_options or EngineOptions(),
        annotate_options or AnnotateOptions(),
        on_verdict,
        verdict_metrics,
    )


class _EngineDecider:
    """:func:`make_decider`'s decider: called, it decides in one go; :meth:`steps`, in steps."""

    __slots__ = ("_annotate", "_engine", "_metrics", "_on_verdict", "_store")

    def __init__(
        self,
        store: RunStore | None,
        engine: EngineOptions,
        annotate: AnnotateOptions,
        on_verdict: Callable[[RunVerdict], None] | None,
        metrics: VerdictRecorder | None = None,
    ) -> None:
        self._store = store
        self._engine = engine
        self._annotate = annotate
        self._on_verdict = on_verdict
        self._metrics = metrics

    def __call__(
        self,
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: LogEvents | None = None,
    ) -> dict[str, SpanNote]:
        return finish(self.steps(spans, incomplete, log_events=log_events))

    def steps(
        self,
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: LogEvents | None = None,
        turn: Ticket | None = None,
    ) -> Steps[dict[str, SpanNote]]:
        notes: dict[str, SpanNote] = {}
        # Log-record events join their spans inside group_runs: the engine then reads them exactly
        # as it reads span events (ordered by time, then span order), so the verdict is the same.
        views = [SdkSpanView(s) for s in spans]
        if turn is not None and self._store is not None:
            # Until its runs are grouped (several turns for a long run), a superset of their keys.
            turn.declare((yield from span_keys(views)))
        runs = yield from group_runs_steps(views, log_events, observed=self._engine.observed)
        if turn is not None:
            turn.declare(store_keys(runs))
        yield None
        for run in runs:
            if run.run_span is None:
                notes = merge_notes(
                    notes, unannotated_notes(run, run.reason or _NO_RUN, complete=None)
                )
                if incomplete is not None:
                    notes = merge_notes(notes, unannotated_notes(run, incomplete, complete=None))
                continue
            verdict: RunVerdict = yield from decide_run_steps(
                run, self._store, self._engine, turn=turn
            )
            held = incomplete_for(run, incomplete)
            if held is not None:
                verdict = dataclasses.replace(
                    verdict, complete=False, reasons=(*verdict.reasons, held)
                )
            if self._on_verdict is not None:
                self._on_verdict(verdict)
            if self._metrics is not None:
                self._metrics.record(verdict, agent_of(run.run_span))
            notes = merge_notes(notes, (yield from annotation_steps(verdict, self._annotate)))
        return notes


_NO_RUN = Reason("no-run-span", "footprint events without a run span")


DecisionRequest = tuple[Sequence[ReadableSpan], Reason | None, LogEvents | None]
"""One trace's unit to decide: its spans, why it is incomplete (or None), its log-record events."""


class BatchDecider(Decider, Protocol):
    """A :class:`Decider` that also answers many requests in one call (in order), each with the
    notes or the exception deciding it raised: the buffer's worker then asks it for a whole batch
    of released runs at once (``sdk/worker.py``'s child process: one round trip)."""

    def decide_many(
        self, requests: Sequence[DecisionRequest], /
    ) -> list[dict[str, SpanNote] | Exception]: ...
