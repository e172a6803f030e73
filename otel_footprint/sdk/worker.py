"""Decisions in a child process: a :class:`~otel_footprint.sdk.decide.Decider` that sends each
trace's spans to a worker process running the same pipeline, and that process's main loop.

The application process keeps the buffer, the annotated copies and the export; only the decision
(grouping, the engine, the account, the notes) runs in the child, so the application's threads
stop sharing one GIL with it. What crosses the pipe is what the decision reads of a span (ids,
name, times, attributes, events) as plain tuples, and the notes back as plain tuples: both sides
build the same records the in-thread path builds, so the notes are the same. The child is
``python -c 'from otel_footprint.sdk.worker import main; main()'`` (no fork of a threaded application); it ends when its
input closes. A child that dies or does not answer within the timeout is killed, the call raises
(the buffer then releases the run unannotated with reason ``decision-error``) and the next call
starts a new one.
"""

from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from typing import IO, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext

from otel_footprint.annotate.form import Anchor, AnnotateOptions, NoteEvent, NoteLink, SpanNote
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.runs.model import Reason
from otel_footprint.sdk.decide import DecisionRequest, LogEvents

_PROTOCOL = pickle.HIGHEST_PROTOCOL

SpanTuple = tuple[
    int,  # trace id
    int,  # span id
    int,  # parent span id (0: none)
    bool,  # parent is remote
    str,  # name
    int,  # start time
    int,  # end time
    dict[str, Any],  # attributes
    list[tuple[str, int, dict[str, Any]]],  # events: name, time, attributes
]
NoteTuple = tuple[
    tuple[tuple[str, Any], ...],
    tuple[tuple[str, Any, Anchor], ...],
    tuple[tuple[str, str, Any], ...],
]


def span_tuple(span: ReadableSpan) -> SpanTuple:
    """What the decision reads of an ended SDK span, as plain picklable values."""
    context = span.context
    parent = span.parent
    attributes = span.attributes
    return (
        context.trace_id if context is not None else 0,
        context.span_id if context is not None else 0,
        parent.span_id if parent is not None else 0,
        parent.is_remote if parent is not None else False,
        span.name,
        span.start_time or 0,
        span.end_time or 0,
        dict(attributes) if attributes else {},
        [(e.name, e.timestamp, dict(e.attributes) if e.attributes else {}) for e in span.events],
    )


_EMPTY_RESOURCE = Resource.get_empty()


def span_from_tuple(item: SpanTuple) -> ReadableSpan:
    """An SDK span with what :func:`span_tuple` kept (the child's input to the decider)."""
    trace_id, span_id, parent_id, remote, name, start, end, attributes, events = item
    parent = SpanContext(trace_id, parent_id, is_remote=remote) if parent_id else None
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, is_remote=False),
        parent=parent,
        resource=_EMPTY_RESOURCE,
        attributes=attributes,
        events=[Event(n, a, timestamp=t) for n, t, a in events],
        start_time=start or None,
        end_time=end or None,
    )


def note_tuple(note: SpanNote) -> NoteTuple:
    return (
        note.attributes,
        tuple((e.name, e.attributes, e.anchor) for e in note.events),
        tuple((link.trace_id, link.span_id, link.attributes) for link in note.links),
    )


def note_from_tuple(item: NoteTuple) -> SpanNote:
    attributes, events, links = item
    return SpanNote(
        attributes,
        tuple(NoteEvent(n, a, anchor) for n, a, anchor in events),
        tuple(NoteLink(t, s, a) for t, s, a in links),
    )


class WorkerError(RuntimeError):
    """The decision process failed, died or did not answer in time."""


class ProcessDecider:
    """A :class:`~otel_footprint.sdk.decide.Decider` whose decisions run in a child process.

    One call at a time (the buffer's single worker thread calls it); the calling thread waits on
    the pipe without holding the GIL while the child decides. ``timeout_seconds`` bounds one
    decision. The child is started at construction (its imports overlap the application's
    start) and again after a failure or an ``os.fork``.
    """

    def __init__(
        self,
        *,
        engine_options: EngineOptions | None = None,
        annotate_options: AnnotateOptions | None = None,
        timeout_seconds: float = 30.0,
    ) -> None:
        self._options = (engine_options or EngineOptions(), annotate_options or AnnotateOptions())
        self._timeout = timeout_seconds
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._pid = os.getpid()
        ref = weakref.ref(self)

        def forget_in_child() -> None:
            decider = ref()
            if decider is not None:
                decider._child = None  # the parent's child stays the parent's
                decider._pid = os.getpid()
                decider._lock = threading.Lock()

        os.register_at_fork(after_in_child=forget_in_child)
        with self._lock:
            self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [sys.executable, "-c", "from otel_footprint.sdk.worker import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        assert child.stdin is not None
        pickle.dump(self._options, child.stdin, _PROTOCOL)
        child.stdin.flush()
        self._child = child
        return child

    def __call__(
        self,
        spans: Sequence[ReadableSpan],
        incomplete: Reason | None,
        /,
        *,
        log_events: LogEvents | None = None,
    ) -> dict[str, SpanNote]:
        (answer,) = self.decide_many([(spans, incomplete, log_events)])
        if isinstance(answer, Exception):
            raise answer
        return answer

    def decide_many(
        self, requests: Sequence[DecisionRequest], /
    ) -> list[dict[str, SpanNote] | Exception]:
        """All ``requests`` in one round trip; each answer is the notes or a :class:`WorkerError`."""
        message = [
            ([span_tuple(s) for s in spans], incomplete, log_events or None)
            for spans, incomplete, log_events in requests
        ]
        with self._lock:
            if self._closed:
                return [WorkerError("the decision process is closed")] * len(requests)
            try:
                child = self._child or self._start()
                assert child.stdin is not None and child.stdout is not None
                pickle.dump(message, child.stdin, _PROTOCOL)
                child.stdin.flush()
                answers = _read(child.stdout, self._timeout)
            except Exception as exc:
                if self._child is not None:
                    self._stop(self._child, kill=True)
                failed = WorkerError(f"the decision process failed: {exc!r}")
                return [failed] * len(requests)
        return [
            {span_id: note_from_tuple(n) for span_id, n in payload.items()}
            if status == "ok"
            else WorkerError(payload)
            for status, payload in answers
        ]

    def close(self, timeout_seconds: float = 5.0) -> None:
        """End the child (its input closes; killed if it has not exited within the timeout)."""
        with self._lock:
            self._closed = True
            if self._child is not None:
                self._stop(self._child, kill=False, timeout_seconds=timeout_seconds)

    def _stop(
        self, child: subprocess.Popen[bytes], *, kill: bool, timeout_seconds: float = 5.0
    ) -> None:
        self._child = None
        if os.getpid() != self._pid:
            return
        try:
            if child.stdin is not None:
                child.stdin.close()
        except OSError:
            pass
        if kill:
            child.kill()
        try:
            child.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def _read(stream: IO[bytes], timeout_seconds: float) -> list[tuple[str, Any]]:
    deadline = time.monotonic() + timeout_seconds
    fd = stream.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within {timeout_seconds} s")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            answers: list[tuple[str, Any]] = pickle.load(stream)
            return answers


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """The child's loop: options first, then one request -> one answer until the input ends."""
    from otel_footprint.sdk.decide import make_decider

    engine_options, annotate_options = pickle.load(source)
    decide = make_decider(engine_options=engine_options, annotate_options=annotate_options)
    while True:
        try:
            requests = pickle.load(source)
        except EOFError:
            return
        answers: list[tuple[str, Any]] = []
        for spans, incomplete, log_events in requests:
            try:
                views = [span_from_tuple(s) for s in spans]
                if log_events:
                    notes = decide(views, incomplete, log_events=log_events)
                else:
                    notes = decide(views, incomplete)
                answers.append(("ok", {k: note_tuple(v) for k, v in notes.items()}))
            except Exception as exc:  # reported to the parent, which counts it
                answers.append(("error", f"{type(exc).__name__}: {exc}"))
        pickle.dump(answers, sink, _PROTOCOL)
        sink.flush()


def main() -> None:
    """Entry point of ``python -c 'from otel_footprint.sdk.worker import main; main()'``: the protocol owns stdout."""
    sink = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # anything printed by accident must not corrupt the protocol
    serve(sys.stdin.buffer, sink)
