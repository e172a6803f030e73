"""From one trace's held SDK spans (and footprint log records) to the notes to write on them.

The buffer calls this on its worker thread; it is the only place the SDK path meets runs/.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from opentelemetry.sdk.trace import ReadableSpan

from otel_footprint.annotate.form import (
    AnnotateOptions,
    SpanNote,
    annotations_for,
    merge_notes,
    unannotated_notes,
)
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.model import Reason, RunStore
from otel_footprint.runs.spans import SdkSpanView, SpanEventView

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


DecisionRequest = tuple[Sequence[ReadableSpan], Reason | None, LogEvents | None]
"""One trace's unit to decide: its spans, why it is incomplete (or None), its log-record events."""


class BatchDecider(Decider, Protocol):
    """A :class:`Decider` that can also answer many requests at once (in order): each answer is
    the notes, or the exception that deciding that request raised."""

    def decide_many(
        self, requests: Sequence[DecisionRequest], /
    ) -> list[dict[str, SpanNote] | Exception]: ...


def decide_all(
    decide: Decider, requests: Sequence[DecisionRequest]
) -> list[dict[str, SpanNote] | Exception]:
    """Each request's notes, or the exception deciding it raised: one ``decide_many`` call when
    the decider has one, else one call per request."""
    many = getattr(decide, "decide_many", None)
    if many is not None:
        answers: list[dict[str, SpanNote] | Exception] = many(requests)
        return answers
    out: list[dict[str, SpanNote] | Exception] = []
    for spans, incomplete, log_events in requests:
        try:
            if log_events:
                out.append(decide(spans, incomplete, log_events=log_events))
            else:
                out.append(decide(spans, incomplete))
        except Exception as exc:  # answered, not raised: one bad run must not stop the others
            out.append(exc)
    return out


def make_decider(
    *,
    store: RunStore | None = None,
    engine_options: EngineOptions | None = None,
    annotate_options: AnnotateOptions | None = None,
    on_verdict: Callable[[RunVerdict], None] | None = None,
) -> Decider:
    """The engine pipeline as a :class:`Decider`: group_runs -> decide_run -> annotations_for.

    ``incomplete`` (a timeout, a flush before the run span ended) marks every verdict of the trace
    ``complete=false`` with that reason: the decision stands on the spans that had arrived.
    ``on_verdict`` sees every verdict before it is written (the demo prints them).
    """
    options = annotate_options or AnnotateOptions()
    engine = engine_options or EngineOptions()

    def decide(
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: LogEvents | None = None,
    ) -> dict[str, SpanNote]:
        notes: dict[str, SpanNote] = {}
        # Log-record events join their spans inside group_runs: the engine then reads them exactly
        # as it reads span events (ordered by time, then span order), so the verdict is the same.
        for run in group_runs((SdkSpanView(s) for s in spans), log_events):
            if run.run_span is None:
                notes = merge_notes(
                    notes, unannotated_notes(run, run.reason or _NO_RUN, complete=None)
                )
                if incomplete is not None:
                    notes = merge_notes(notes, unannotated_notes(run, incomplete, complete=None))
                continue
            verdict: RunVerdict = decide_run(run, store, engine)
            if incomplete is not None:
                verdict = dataclasses.replace(
                    verdict, complete=False, reasons=(*verdict.reasons, incomplete)
                )
            if on_verdict is not None:
                on_verdict(verdict)
            notes = merge_notes(notes, annotations_for(verdict, options))
        return notes

    return decide


_NO_RUN = Reason("no-run-span", "footprint events without a run span")
