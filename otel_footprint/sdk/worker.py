"""Decisions in a child process: a :class:`~otel_footprint.sdk.decide.Decider` that sends each
trace's spans to a worker process running the same pipeline, and that process's main loop.

The application process keeps the buffer, the annotated copies and the export; only the decision
(grouping, the engine, the account, the notes) runs in the child, so the application's threads
stop sharing one GIL with it. What crosses the pipe is what the decision reads of a span (ids,
name, times, attributes, events) as plain tuples, and the notes back as plain tuples: both sides
build the same records the in-thread path builds, so the notes are the same. The child is a new
interpreter running :func:`main` (no fork of a threaded application); it ends when its input
closes. Messages are length-prefixed pickles on the two pipes (parent and child only). A child
that dies or does not answer within the timeout is killed, its runs are answered with an error
(the buffer then releases them unannotated with reason ``decision-error``) and the next call
starts a new one.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext

from otel_footprint.annotate.form import Anchor, AnnotateOptions, NoteEvent, NoteLink, SpanNote
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.runs.model import Reason
from otel_footprint.sdk.decide import DecisionRequest, LogEvents
from otel_footprint.sdk.verdict_metrics import Tallies, Tally, VerdictMetrics

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
    # Key by key: ``dict()`` of the SDK's attribute mapping goes through its abstract views.
    return (
        context.trace_id if context is not None else 0,
        context.span_id if context is not None else 0,
        parent.span_id if parent is not None else 0,
        parent.is_remote if parent is not None else False,
        span.name,
        span.start_time or 0,
        span.end_time or 0,
        {key: attributes[key] for key in attributes} if attributes else {},
        [
            (e.name, e.timestamp, {key: a[key] for key in a} if (a := e.attributes) else {})
            for e in span.events
        ],
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
    """A note as plain tuples (what the child sends back)."""
    return (
        note.attributes,
        tuple((e.name, e.attributes, e.anchor) for e in note.events),
        tuple((link.trace_id, link.span_id, link.attributes) for link in note.links),
    )


def note_from_tuple(item: NoteTuple) -> SpanNote:
    """The note :func:`note_tuple` flattened."""
    attributes, events, links = item
    return SpanNote(
        attributes,
        tuple(NoteEvent(n, a, anchor) for n, a, anchor in events),
        tuple(NoteLink(t, s, a) for t, s, a in links),
    )


class WorkerError(RuntimeError):
    """The decision process failed, died or did not answer in time."""


CHUNK = 64
"""Requests per message: bounds a message's size and what one timeout covers."""
_HEADER = struct.Struct("!Q")


class ProcessDecider:
    """A :class:`~otel_footprint.sdk.decide.Decider` whose decisions run in a child process.

    One caller at a time (the buffer's single worker thread); the caller waits on the pipe
    without holding the GIL while the child decides. ``timeout_seconds`` bounds one message of at
    most :data:`CHUNK` runs, writing and reading included: a child that does not answer in time
    is killed, that message's runs are answered with a :class:`WorkerError`, and the next call
    starts a new child. The child is started at construction (its imports overlap the
    application's start), and again after a failure or, in a forked child, on its first call.
    """

    def __init__(
        self,
        *,
        engine_options: EngineOptions | None = None,
        annotate_options: AnnotateOptions | None = None,
        timeout_seconds: float = 30.0,
        verdict_metrics: VerdictMetrics | None = None,
    ) -> None:
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be > 0, not {timeout_seconds!r}")
        self._metrics = verdict_metrics
        """Counts the legs the child decided, from the tallies its answers carry."""
        options = (engine_options or EngineOptions(), annotate_options or AnnotateOptions())
        self._options = pickle.dumps(options, _PROTOCOL)
        self._timeout = timeout_seconds
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._closed = False
        ref = weakref.ref(self)

        def forget_in_child() -> None:
            decider = ref()
            if decider is not None:
                # The parent's decision process stays the parent's: this process drops its copies
                # of the pipes (so the parent's process still sees its input end) and starts its
                # own on its first call.
                child, decider._child = decider._child, None
                decider._lock = threading.Lock()
                for stream in (child.stdin, child.stdout) if child is not None else ():
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()

        os.register_at_fork(after_in_child=forget_in_child)
        with self._lock:
            self._start()

    @property
    def pid(self) -> int | None:
        """The decision process's id (None when none is running)."""
        child = self._child
        return None if child is None else child.pid

    def _start(self) -> subprocess.Popen[bytes]:
        # The child imports the same otel_footprint as this process, wherever it was found.
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
        child = subprocess.Popen(
            [sys.executable, "-c", "from otel_footprint.sdk.worker import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            env=env,
        )
        assert child.stdin is not None and child.stdout is not None
        os.set_blocking(child.stdin.fileno(), False)
        self._child = child
        _write(child.stdin.fileno(), self._options, time.monotonic() + self._timeout)
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
        """Each request's notes, or a :class:`WorkerError`: one round trip per :data:`CHUNK`."""
        answers: list[dict[str, SpanNote] | Exception] = []
        for at in range(0, len(requests), CHUNK):
            answers += self._round_trip(requests[at : at + CHUNK])
        return answers

    def _round_trip(
        self, requests: Sequence[DecisionRequest]
    ) -> list[dict[str, SpanNote] | Exception]:
        message = pickle.dumps(
            [
                ([span_tuple(s) for s in spans], incomplete, log_events or None)
                for spans, incomplete, log_events in requests
            ],
            _PROTOCOL,
        )
        with self._lock:
            if self._closed:
                return [WorkerError("the decision process is closed")] * len(requests)
            try:
                child = self._child or self._start()
                assert child.stdin is not None and child.stdout is not None
                deadline = time.monotonic() + self._timeout
                _write(child.stdin.fileno(), message, deadline)
                answers: list[tuple[str, Any, list[Tally]]] = pickle.loads(
                    _read(child.stdout.fileno(), deadline)
                )
                if len(answers) != len(requests):
                    raise WorkerError(f"{len(answers)} answers to {len(requests)} requests")
            except Exception as exc:
                if self._child is not None:
                    self._stop(self._child, kill=True)
                failed = WorkerError(f"the decision process failed: {exc!r}")
                return [failed] * len(requests)
        if self._metrics is not None:
            for _, _, counted in answers:
                for one in counted:
                    self._metrics.add(one)
        return [
            {span_id: note_from_tuple(n) for span_id, n in payload.items()}
            if status == "ok"
            else WorkerError(payload)
            for status, payload, _ in answers
        ]

    def close(self, timeout_seconds: float = 5.0) -> None:
        """End the child: its input closes and it exits (killed if not within the timeout)."""
        with self._lock:
            self._closed = True
            if self._child is not None:
                self._stop(self._child, kill=False, timeout_seconds=timeout_seconds)

    def _stop(
        self, child: subprocess.Popen[bytes], *, kill: bool, timeout_seconds: float = 5.0
    ) -> None:
        self._child = None
        if kill:
            child.kill()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            child.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _write(fd: int, payload: bytes, deadline: float) -> None:
    """One frame (length, then the bytes) to a non-blocking pipe, by ``deadline``."""
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the decision process does not read its input")
        _, ready, _ = select.select([], [fd], [], left)
        if ready:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue


def _read(fd: int, deadline: float) -> bytes:
    """One frame from a pipe, by ``deadline``."""
    header = _read_exactly(fd, _HEADER.size, deadline)
    (size,) = _HEADER.unpack(header)
    return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    parts: list[bytes] = []
    missing = size
    while missing:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from the decision process in time")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            part = os.read(fd, min(missing, 1 << 20))
            if not part:
                raise EOFError("the decision process exited")
            parts.append(part)
            missing -= len(part)
    return b"".join(parts)


def _receive(source: IO[bytes]) -> bytes | None:
    header = source.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    payload = source.read(size)
    return payload if len(payload) == size else None


def _send(sink: IO[bytes], payload: bytes) -> None:
    sink.write(_HEADER.pack(len(payload)) + payload)
    sink.flush()


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """The child's loop: the options first, then one message of requests -> one of answers,
    until the input ends."""
    from otel_footprint.sdk.decide import make_decider

    options = _receive(source)
    if options is None:
        return
    engine_options, annotate_options = pickle.loads(options)
    tallies = Tallies()
    decide = make_decider(
        engine_options=engine_options, annotate_options=annotate_options, verdict_metrics=tallies
    )
    while (message := _receive(source)) is not None:
        answers: list[tuple[str, Any, list[Tally]]] = []
        for spans, incomplete, log_events in pickle.loads(message):
            tallies.take()  # what a failed request decided is not counted
            try:
                views = [span_from_tuple(s) for s in spans]
                if log_events:
                    notes = decide(views, incomplete, log_events=log_events)
                else:
                    notes = decide(views, incomplete)
                answers.append(("ok", {k: note_tuple(v) for k, v in notes.items()}, tallies.take()))
            except Exception as exc:  # reported to the parent, which counts it
                answers.append(("error", f"{type(exc).__name__}: {exc}", []))
        _send(sink, pickle.dumps(answers, _PROTOCOL))


def main() -> None:
    """The child's entry point: the protocol owns stdin and stdout (printing goes to stderr)."""
    sink = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, sink)
