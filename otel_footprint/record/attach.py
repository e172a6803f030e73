"""The span-start hook that lands a run's staged pass on the model-call span an instrumentation makes.

An agent with OpenTelemetry GenAI, OpenInference or OpenLLMetry instrumentation (or a framework's
own) states on its run what goes into the next model call (``run.evaluated(...)``,
``run.injected(...)``, ``run.composed(...)``, or inside ``run.model_call(...)``); the events wait in
the run. :class:`PassAttacher` is a ``SpanProcessor`` whose ``on_start`` sees every span as it
starts: the first model-call span (by the recognition rules of :mod:`otel_footprint.runs.recognize`)
that starts inside the run after the staging claims the events, gets ``footprint.pass.iteration``,
and is the pass. Model calls with nothing staged (guards, routers, summarisers; the client span
under a framework span that already claimed the pass) stay untouched and are no pass.

``otel_footprint.sdk.setup()`` installs it; a process that only exports to the hop installs it with
one line: ``otel_footprint.record.install_attach(tracer_provider)``. It adds nothing to spans of no
run and never raises into the application.
"""

from __future__ import annotations

import logging

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from otel_footprint import semconv
from otel_footprint.record.recorder import _ATTACH_INSTALLED, current_run
from otel_footprint.runs.recognize import SpanRole, role_of

_logger = logging.getLogger(__name__)


class PassAttacher(SpanProcessor):
    """Lands the current run's staged pass on the next model-call span started inside it.

    Add it to the tracer provider the instrumentations use, before any exporting processor (the
    SDK calls ``on_start`` in order; only ``on_start`` does anything here). Idempotent: two
    attachers on one provider attach each pass once (the first claims, the second finds the span
    already marked).
    """

    def __init__(self) -> None:
        self._counted = True
        _ATTACH_INSTALLED[0] += 1

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            self._on_start(span)
        except Exception:  # a hook must never break the application's model call
            _logger.exception("attaching a staged pass to span %s failed", span.name)

    def _on_start(self, span: Span) -> None:
        run = current_run()
        if run is None:
            return
        context = span.get_span_context()
        parent = span.parent.span_id if span.parent is not None else None
        run._span_started(context.span_id, parent)
        attributes = span.attributes
        if not attributes or semconv.PASS_ITERATION in attributes:
            return  # the recorder's own pass span, or one already claimed
        if role_of(attributes.get) is not SpanRole.PASS:
            return
        run._model_call_started(span, parent)

    def on_end(self, span: ReadableSpan) -> None:
        return

    def shutdown(self) -> None:
        if self._counted:
            self._counted = False
            _ATTACH_INSTALLED[0] -= 1

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def install_attach(tracer_provider: TracerProvider) -> PassAttacher:
    """Add a :class:`PassAttacher` to ``tracer_provider`` (the one-line install for agents that
    export to the hop without the in-process processor). Returns it."""
    attacher = PassAttacher()
    tracer_provider.add_span_processor(attacher)
    return attacher
