"""Fault injection for the hop's journal, and an in-process hop to crash at any of its I/O calls.

:class:`FaultyIO` is the journal's I/O seam (``service/journalio.py``) with every call that changes
a file numbered: it can *crash* the process at call ``n`` (before the call, after it, or in the
middle of a write: a torn write), or make a call fail with an ``OSError`` (a full disk, an I/O
error, a short write). A crash raises :class:`Crash`, a ``BaseException`` no ``except Exception``
of the hop catches, and every later call raises it too: the "process" is dead, and what it left in
its files is what the next instance starts from.

:class:`Instance` is the hop's delivery path in-process and driven step by step on a fake clock:
the real journal, pipeline (run buffer, release worker's settle and group commit) and forwarder,
with a decision stage that takes one step per span (so long and short decisions interleave, as the
slices make them do) and a sender that delivers into a :class:`Sink` which outlives every crash.
:func:`workload` takes one through receive → hold → decide → release → forward → retire, with
segment rotation and compaction, a sender's retry and a late span; :func:`recover` is what a
restarted hop does with what it found.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from otel_footprint.runs.slices import Steps, Ticket
from otel_footprint.service import config as c
from otel_footprint.service.annotation import Decision, NoAnnotation
from otel_footprint.service.buffer import BufferLimits, Release
from otel_footprint.service.forward import Forwarder, Outcome
from otel_footprint.service.journal import KIND_OUT_TRACES, Journal
from otel_footprint.service.journalio import FileIO
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import OverloadedError, Pipeline, PipelineOptions

Mode = Literal["before", "after", "torn"]
MODES: tuple[Mode, ...] = ("before", "after", "torn")


class Crash(BaseException):
    """The process died here (kill -9): nothing after this point happens."""


@dataclass
class FaultyIO(FileIO):
    """The journal's I/O with its file-changing calls numbered, crashing or failing on demand."""

    crash_at: int | None = None
    """The number of the call to crash at (None: never)."""
    mode: Mode = "before"
    fault: Callable[[str, int], OSError | None] | None = None
    """Asked before each numbered call ``(op, number)``: an error to raise instead (the call does
    nothing, or for ``pwrite`` a short write of half the data first when the error says so)."""
    short: bool = False
    """A ``pwrite`` fault writes half its data before raising (a short write)."""
    power: bool = False
    """The crash is a power loss, not only the process dying: what was written to a file since
    its last ``fdatasync`` is lost (the file goes back to what that sync made durable)."""
    calls: list[str] = field(default_factory=list)
    """Each numbered call's name, in order."""
    dead: bool = False
    fds: set[int] = field(default_factory=set)
    _paths: dict[int, Path] = field(default_factory=dict)
    _durable: dict[Path, bytes] = field(default_factory=dict)
    _dirty: set[Path] = field(default_factory=set)

    def _numbered(self, op: str) -> int:
        if self.dead:
            raise Crash
        n = len(self.calls)
        self.calls.append(op)
        if n == self.crash_at and self.mode == "before":
            self._die()
        if self.fault is not None:
            error = self.fault(op, n)
            if error is not None:
                raise error
        return n

    def _after(self, n: int) -> None:
        if n == self.crash_at:
            self._die()

    def _die(self) -> None:
        self.dead = True
        if self.power:
            for path in self._dirty:
                if path.exists():
                    path.write_bytes(self._durable.get(path, b""))
        raise Crash

    def _written(self, fd: int) -> None:
        path = self._paths.get(fd)
        if path is not None:
            self._dirty.add(path)

    def _alive(self) -> None:
        if self.dead:
            raise Crash

    def makedirs(self, path: Path) -> None:
        n = self._numbered("makedirs")
        super().makedirs(path)
        self._after(n)

    def listdir(self, path: Path) -> list[str]:
        self._alive()
        return super().listdir(path)

    def open(self, path: Path, flags: int, mode: int = 0o600) -> int:
        n = self._numbered("create" if flags & os.O_CREAT else "open")
        if path not in self._durable:
            self._durable[path] = path.read_bytes() if path.exists() else b""
        fd = super().open(path, flags, mode)
        self.fds.add(fd)
        self._paths[fd] = path
        self._after(n)
        return fd

    def close(self, fd: int) -> None:
        self._alive()
        self.fds.discard(fd)
        super().close(fd)

    def size(self, fd: int) -> int:
        self._alive()
        return super().size(fd)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self._alive()
        return super().pread(fd, size, offset)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        try:
            n = self._numbered("pwrite")
        except OSError:
            if self.short and len(data) > 1:
                super().pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise
        self._written(fd)
        if n == self.crash_at and self.mode == "torn" and len(data) > 1:
            super().pwrite(fd, bytes(data[: len(data) // 2]), offset)
            self._die()
        written = super().pwrite(fd, data, offset)
        self._after(n)
        return written

    def fdatasync(self, fd: int) -> None:
        n = self._numbered("fdatasync")
        super().fdatasync(fd)
        path = self._paths.get(fd)
        if path is not None:
            self._durable[path] = path.read_bytes()
            self._dirty.discard(path)
        self._after(n)

    def ftruncate(self, fd: int, length: int) -> None:
        n = self._numbered("ftruncate")
        self._written(fd)
        super().ftruncate(fd, length)
        self._after(n)

    def rename(self, source: Path, target: Path) -> None:
        n = self._numbered("rename")
        super().rename(source, target)
        self._after(n)

    def unlink(self, path: Path) -> None:
        n = self._numbered("unlink")
        super().unlink(path)
        self._after(n)

    def fsync_dir(self, path: Path) -> None:
        n = self._numbered("fsync_dir")
        super().fsync_dir(path)
        self._after(n)

    def abandon(self) -> None:
        """Close what the dead process left open (the kernel would)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()

    def points(self) -> Iterator[tuple[int, Mode]]:
        """Every crash point of the calls seen: before and after each, torn for each write."""
        for n, op in enumerate(self.calls):
            for mode in MODES:
                if mode != "torn" or op == "pwrite":
                    yield n, mode


def disk_full(op: str, _n: int) -> OSError | None:
    """A fault: every write fails as on a full disk."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) if op == "pwrite" else None


# -- the in-process hop ------------------------------------------------------------------------


class Sink:
    """What the next hop received, by span id and log record (kept across every crash and restart)."""

    def __init__(self) -> None:
        self.spans: dict[int, int] = {}
        self.logs: set[int] = set()

    def take_logs(self, payload: bytes) -> None:
        request = ExportLogsServiceRequest.FromString(payload)
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                self.logs.update(r.time_unix_nano for r in sl.log_records)

    def take(self, payload: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(payload)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    sid = int.from_bytes(span.span_id, "big")
                    self.spans[sid] = self.spans.get(sid, 0) + 1


class SinkSender:
    """The forwarder's sender, delivering into a :class:`Sink` (always accepted)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def send(self, kind: int, payload: bytes) -> Outcome:
        if kind == KIND_OUT_TRACES:
            self.sink.take(payload)
        else:
            self.sink.take_logs(payload)
        return Outcome("ok")

    def close(self) -> None:
        pass


class SteppingStage:
    """Decides nothing, in one step per span: a long trace's decision outlasts a short one's. It
    wraps the stage rather than subclassing it: the compiled wheel's classes take no subclass from
    interpreted code."""

    def __init__(self) -> None:
        stage = NoAnnotation()
        self.annotate = stage.annotate
        self.annotate_late = stage.annotate_late

    def annotate_steps(self, release: Release, turn: Ticket | None = None) -> Steps[list[Decision]]:
        for _ in release.spans():
            yield None
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


_FORWARD: c.Forward | None = None


def _forward_cfg() -> c.Forward:
    global _FORWARD
    if _FORWARD is None:
        _FORWARD = c.load(
            None, c.flag_layer(forward="127.0.0.1:1"), {"XDG_STATE_HOME": "/nonexistent"}
        ).exporter
    return _FORWARD


@dataclass
class Ledger:
    """What was sent and what was acknowledged, across every instance."""

    sent: set[int] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)
    logs_sent: set[int] = field(default_factory=set)
    """Log records, by their (unique) time stamp."""
    logs_acked: set[int] = field(default_factory=set)


class Instance:
    """One in-process hop over ``directory`` (journal, pipeline, forwarder), stepped by hand."""

    SEGMENT_BYTES = 1500
    """Small segments: the workload rotates, compacts and drops several."""

    def __init__(
        self, directory: Path, io: FileIO, clock: Clock, sink: Sink, metrics: HopMetrics
    ) -> None:
        self.clock = clock
        self.journal = Journal(directory, segment_bytes=self.SEGMENT_BYTES, io=io)
        replay = self.journal.open()
        self.pipeline = Pipeline(
            PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=10.0)),
            self.journal,
            SteppingStage(),
            metrics,
            clock=clock,
        )
        # One step per turn: every decision interleaves with the others in flight.
        self.pipeline.slice_seconds = 0.0
        self.pipeline.recover(replay)
        self.forwarder = Forwarder(_forward_cfg(), self.journal, metrics, SinkSender(sink))

    def ingest(self, ledger: Ledger, request: ExportTraceServiceRequest) -> None:
        ids = {int.from_bytes(s.span_id, "big") for s in _spans(request)}
        ledger.sent |= ids
        try:
            self.pipeline.ingest_traces(request, None, "test")
        except (OverloadedError, OSError):
            return  # refused: the sender would retry; not acknowledged
        ledger.acked |= ids

    def ingest_logs(self, ledger: Ledger, request: ExportLogsServiceRequest) -> None:
        ids = {
            r.time_unix_nano
            for rl in request.resource_logs
            for sl in rl.scope_logs
            for r in sl.log_records
        }
        ledger.logs_sent |= ids
        try:
            self.pipeline.ingest_logs(request, None, "test")
        except (OverloadedError, OSError):
            return
        ledger.logs_acked |= ids

    def settle(self) -> None:
        """Let every held trace fall due and decide, release and commit it."""
        self.clock.now += 11.0
        self.pipeline.process_due()

    def forward(self) -> None:
        while batch := self.journal.take_outbound(1 << 20, timeout=0):
            self.forwarder._deliver(batch)


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            yield from ss.spans


class Spans:
    """Builds requests of spans with unique ids."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def span(self, trace: int, op: str | None, parent: Span | None = None, pad: int = 0) -> Span:
        span = Span(
            trace_id=trace.to_bytes(16, "big"),
            span_id=next(self._ids).to_bytes(8, "big"),
            parent_span_id=parent.span_id if parent is not None else b"",
            name=op or "plain",
            start_time_unix_nano=1,
            end_time_unix_nano=2,
        )
        if op is not None:
            span.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = op
        if op == "invoke_agent":
            span.attributes.add(key=semconv.RUN_ID).value.string_value = f"run-{trace}"
        if pad:
            span.attributes.add(key="pad").value.string_value = "x" * pad
        return span

    def run(self, trace: int, children: int, pad: int = 0) -> list[Span]:
        """A run span and ``children`` model calls under it."""
        run = self.span(trace, "invoke_agent", pad=pad)
        return [run] + [self.span(trace, "chat", run, pad=pad) for _ in range(children)]


_log_ids = itertools.count(1)


def footprint_logs(*spans: Span) -> ExportLogsServiceRequest:
    """One footprint event as a log record per span (held for the join with its span)."""
    req = ExportLogsServiceRequest()
    scope = req.resource_logs.add().scope_logs.add()
    for span in spans:
        record = scope.log_records.add(event_name=semconv.EV_CONTEXT_EVALUATED)
        record.trace_id, record.span_id = span.trace_id, span.span_id
        record.time_unix_nano = next(_log_ids)
    return req


def request(*spans: Span) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    req.resource_spans.add().scope_spans.add().spans.extend(spans)
    return req


def workload(hop: Instance, ledger: Ledger) -> None:
    """receive → hold → decide → release → forward → retire, with the journal's own upkeep."""
    make = Spans()
    # One request, three traces: a long run, a short one and a plain span (passed on at once).
    # The short run's decision ends first; the request's held record must wait for the long one.
    long_run, short_run = make.run(1, 6), make.run(2, 1)
    first = request(*long_run, *short_run, make.span(3, None))
    hop.ingest(ledger, first)
    hop.ingest(ledger, request(*make.run(4, 2, pad=200)))
    # Footprint events as log records: two join the long run; one names a span that never comes.
    hop.ingest_logs(ledger, footprint_logs(long_run[1], long_run[2], make.span(10, "chat")))
    hop.ingest(ledger, first)  # a sender's retry of spans still held
    hop.settle()
    hop.ingest(ledger, request(make.span(1, "chat", long_run[0])))  # late: its run is decided
    hop.forward()
    for trace in range(5, 9):  # enough to rotate segments and compact the pinned ones
        hop.ingest(ledger, request(*make.run(trace, 1, pad=300)))
        if trace % 2:
            hop.settle()
            hop.forward()
    hop.ingest(ledger, request(*make.run(9, 1)))  # still held at the end
    hop.pipeline.flush()
    hop.forward()
    hop.journal.close()


def recover(hop: Instance) -> None:
    """What a restarted hop does with what it found: decide, forward, stop."""
    hop.settle()
    hop.forward()
    hop.pipeline.flush()
    hop.forward()
    hop.journal.close()


def check(ledger: Ledger, sink: Sink) -> None:
    """Every acknowledged span delivered at least once; nothing delivered that was never sent."""
    lost = ledger.acked - set(sink.spans)
    assert not lost, f"{len(lost)} acknowledged spans never delivered: {sorted(lost)}"
    invented = set(sink.spans) - ledger.sent
    assert not invented, f"delivered spans that were never sent: {sorted(invented)}"
    lost_logs = ledger.logs_acked - sink.logs
    assert not lost_logs, f"acknowledged log records never delivered: {sorted(lost_logs)}"
    assert sink.logs <= ledger.logs_sent
