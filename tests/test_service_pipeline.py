"""The pipeline in-process with a fake clock: what the annotation says on timeout, overflow, late spans.

Real journal on disk, real engine and annotators; only time is driven by the test.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

import otel_footprint
from otel_footprint import semconv
from otel_footprint.codec import any_value_to_python
from otel_footprint.runs import recognize
from otel_footprint.service import pipeline as pipeline_module
from otel_footprint.service.annotation import FootprintAnnotation, NoAnnotation
from otel_footprint.service.buffer import BufferLimits
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import OverloadedError, Pipeline, PipelineOptions

_ids = itertools.count(1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _span(trace: int, op: str | None, parent: bytes = b"", **attrs: Any) -> Span:
    span = Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=next(_ids).to_bytes(8, "big"),
        parent_span_id=parent,
        name=op or "plain",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
    )
    if op is not None:
        span.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = op
    for key, value in attrs.items():
        span.attributes.add(key=key.replace("__", ".")).value.string_value = value
    return span


def _request(*spans: Span) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    scope.spans.extend(spans)
    return req


def _pipeline(tmp_path: Path, clock: Clock, **limits: Any) -> tuple[Pipeline, Journal, HopMetrics]:
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    metrics = HopMetrics()
    base: dict[str, Any] = {"release_grace": 1.0, "max_wait": 10.0}
    base.update(limits)
    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(**base)),
        journal,
        FootprintAnnotation(),
        metrics,
        clock=clock,
    )
    return pipeline, journal, metrics


def _forwarded(journal: Journal) -> dict[bytes, Span]:
    """Every span in the journal's outbound records (what the forwarder would send)."""
    out: dict[bytes, Span] = {}
    while batch := journal.take_outbound(1 << 30, timeout=0):
        for record in batch:
            req = ExportTraceServiceRequest.FromString(journal.read(record))
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out[bytes(span.span_id)] = span
        journal.mark_done([r.seq for r in batch])
    return out


def _attrs(span: Span) -> dict[str, Any]:
    return {kv.key: any_value_to_python(kv.value) for kv in span.attributes}


def test_a_run_is_decided_and_its_held_input_retired(tmp_path: Path) -> None:
    clock = Clock()
    pipeline, journal, metrics = _pipeline(tmp_path, clock)
    run = _span(1, "invoke_agent", footprint__run__id="r1")
    chat = _span(1, "chat", parent=run.span_id)
    pipeline.ingest_traces(_request(chat), None, "test")
    pipeline.ingest_traces(_request(run), None, "test")
    assert pipeline.process_due() == 0
    assert len(journal.pending_seqs()) == 2  # both held records wait in the journal
    clock.now += 1.5
    assert pipeline.process_due() == 1
    out = _forwarded(journal)
    assert _attrs(out[bytes(run.span_id)])[semconv.RUN_COMPLETE] is True
    assert journal.pending_seqs() == []
    assert metrics.runs_released.value("ended") == 1


@pytest.mark.skipif(
    otel_footprint.compiled,
    reason="compiled modules call role_of natively: no profile event to count",
)
def test_each_span_is_recognised_once_from_receipt_to_annotation(tmp_path: Path) -> None:
    """The receiver's role goes with the held span: grouping and annotating read it, and the
    recognition rule runs once per span on the hop."""
    clock = Clock()
    pipeline, journal, _ = _pipeline(tmp_path, clock)
    run = _span(7, "invoke_agent", footprint__run__id="r7")
    spans = [run, _span(7, "chat", parent=run.span_id), _span(7, "execute_tool", run.span_id)]
    rule = recognize.role_of.__code__
    calls: list[str] = []

    def count(frame: FrameType, event: str, _: object) -> None:
        if event == "call" and frame.f_code is rule:
            calls.append(event)

    sys.setprofile(count)
    try:
        pipeline.ingest_traces(_request(*spans), None, "test")
        clock.now += 1.5
        pipeline.process_due()
    finally:
        sys.setprofile(None)
    assert _attrs(_forwarded(journal)[bytes(run.span_id)])[semconv.RUN_COMPLETE] is True
    assert len(calls) == len(spans)


def test_timeout_marks_the_run_incomplete_and_a_late_run_span_says_so(tmp_path: Path) -> None:
    clock = Clock()
    pipeline, journal, metrics = _pipeline(tmp_path, clock)
    run = _span(2, "invoke_agent", footprint__run__id="r2")
    chat = _span(2, "chat", parent=run.span_id)
    pipeline.ingest_traces(_request(chat), None, "test")
    clock.now += 10.5
    pipeline.process_due()
    out = _forwarded(journal)
    assert "timeout" in _attrs(out[bytes(chat.span_id)])[semconv.RUN_REASONS]
    assert metrics.runs_released_timeout.value() == 1
    # The run span comes after the decision: forwarded at once, marked incomplete.
    pipeline.ingest_traces(_request(run), None, "test")
    late = _forwarded(journal)[bytes(run.span_id)]
    assert _attrs(late)[semconv.RUN_COMPLETE] is False
    assert "timeout" in _attrs(late)[semconv.RUN_REASONS]
    assert metrics.late_spans.value() == 1


def test_overflow_forwards_unannotated_with_the_reason(tmp_path: Path) -> None:
    clock = Clock()
    pipeline, journal, metrics = _pipeline(tmp_path, clock, max_runs=2)
    first = _span(3, "invoke_agent", footprint__run__id="first")
    pipeline.ingest_traces(_request(_span(3, "chat", parent=first.span_id), first), None, "test")
    # One request with two more traces: admitted (under the high-water mark), pushes trace 3 out.
    pipeline.ingest_traces(_request(_span(4, "chat"), _span(5, "chat")), None, "test")
    # Now at the limit: new input is refused (back-pressure) before anything more is shed.
    with pytest.raises(OverloadedError, match="full"):
        pipeline.ingest_traces(_request(_span(6, "chat")), None, "test")
    pipeline.process_due()
    out = _forwarded(journal)
    first_attrs = _attrs(out[bytes(first.span_id)])
    assert first_attrs[semconv.RUN_COMPLETE] is False
    assert "overflow" in first_attrs[semconv.RUN_REASONS]
    assert semconv.RUN_MODE not in first_attrs  # not decided
    assert metrics.runs_released_overflow.value("runs") == 1


def test_spans_of_no_run_are_forwarded_untouched_at_once(tmp_path: Path) -> None:
    clock = Clock()
    pipeline, journal, metrics = _pipeline(tmp_path, clock)
    plain = _span(5, None)
    request = _request(plain)
    wire = request.SerializeToString()
    pipeline.ingest_traces(request, wire, "test")
    (record,) = journal.take_outbound(1 << 20, timeout=0)
    assert journal.read(record) == wire  # the very bytes received: parsed once, never re-encoded
    assert metrics.spans_passed_through.value() == 1


def test_annotation_off_forwards_everything_as_received(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "q", fsync=False)
    journal.open()
    pipeline = Pipeline(PipelineOptions(annotate=False), journal, NoAnnotation(), HopMetrics())
    run = _span(6, "invoke_agent")
    request = _request(_span(6, "chat", parent=run.span_id), run)
    pipeline.ingest_traces(request, request.SerializeToString(), "test")
    assert pipeline.buffer.core.spans_held == 0
    assert len(_forwarded(journal)) == 2


class RecordingJournal(Journal):
    """A real journal that records the order of appends, syncs and done marks."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, fsync=False)
        self.calls: list[tuple[str, Any]] = []

    def append(self, items: Any, *, admit: bool = True) -> list[int]:
        seqs = super().append(items, admit=admit)
        self.calls.append(("append", seqs))
        return seqs

    def sync(self, seq: int) -> None:
        self.calls.append(("sync", (seq, self.pending_seqs())))
        super().sync(seq)

    def mark_done(self, seqs: Any) -> None:
        seqs = list(seqs)
        self.calls.append(("done", seqs))
        super().mark_done(seqs)


def test_released_runs_share_one_append_and_fsync_and_input_is_retired_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The commit window is wall time; on a loaded machine twenty decisions can outlast it.
    monkeypatch.setattr(pipeline_module, "GROUP_COMMIT_SECONDS", 60.0)
    clock = Clock()
    journal = RecordingJournal(tmp_path / "queue")
    journal.open()
    flushed_with_pending: list[list[int]] = []
    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=10.0)),
        journal,
        FootprintAnnotation(),
        HopMetrics(),
        clock=clock,
        commit_hooks=[lambda: flushed_with_pending.append(journal.pending_seqs())],
    )
    held: list[int] = []
    for trace in range(100, 120):
        run = _span(trace, "invoke_agent", footprint__run__id=f"r{trace}")
        pipeline.ingest_traces(_request(_span(trace, "chat", parent=run.span_id), run), None, "t")
        (held_seq,) = next(seqs for kind, seqs in reversed(journal.calls) if kind == "append")
        held.append(held_seq)
    journal.calls.clear()
    clock.now += 1.5
    assert pipeline.process_due() == 20
    kinds = [kind for kind, _ in journal.calls]
    assert kinds == ["append", "sync", "done"]  # one group commit for the twenty runs
    (_, appended), (_, (synced, pending_at_sync)), (_, retired) = journal.calls
    assert len(appended) == 20 and synced == appended[-1]
    assert set(held) <= set(pending_at_sync)  # input retired only after the outbound fsync
    assert sorted(retired) == sorted(held)
    assert flushed_with_pending and set(held) <= set(flushed_with_pending[0])
    out = _forwarded(journal)
    assert len(out) == 40 and all(
        semconv.RUN_COMPLETE in _attrs(s) for s in out.values() if s.name == "invoke_agent"
    )


def test_a_failing_commit_hook_does_not_stop_the_spans(tmp_path: Path) -> None:
    clock = Clock()
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()

    def broken() -> None:
        raise OSError("disk full")

    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=10.0)),
        journal,
        FootprintAnnotation(),
        HopMetrics(),
        clock=clock,
        commit_hooks=[broken],
    )
    run = _span(130, "invoke_agent", footprint__run__id="r130")
    pipeline.ingest_traces(_request(run), None, "t")
    clock.now += 1.5
    assert pipeline.process_due() == 1
    assert bytes(run.span_id) in _forwarded(journal)
    assert journal.pending_seqs() == []


def _event(span: Span, name: str, payload: dict[str, Any]) -> None:
    from otel_footprint.annotate.otlp import to_any_value
    from otel_footprint.codec import encode_payload

    event = span.events.add(name=name, time_unix_nano=span.start_time_unix_nano)
    for key, value in encode_payload(payload).items():
        to_any_value(value, event.attributes.add(key=key).value)


def test_plain_spans_between_a_run_and_its_calls_change_nothing_in_the_decision(
    tmp_path: Path,
) -> None:
    """The stage gives the engine only a run's role-bearing spans; a chain through plain spans
    (an agent framework's step spans) must still lead every call to its run, as group_runs does."""
    from otel_footprint.annotate.form import annotations_for
    from otel_footprint.annotate.otlp import apply_note
    from otel_footprint.engine.decide import decide_run
    from otel_footprint.runs.group import group_runs
    from otel_footprint.runs.spans import OtlpSpanView

    run = _span(140, "invoke_agent", footprint__run__id="r140")
    maps = [{"id": "skills", "memberIds": ["billing"], "toolNames": ["read_skill"]}]
    _event(run, semconv.EV_MAPS_MOUNTED, {"maps": maps, "renewalGrace": 1, "enforced": False})
    spans = [run]
    for i in (1, 2, 3):
        step = _span(140, None, parent=run.span_id)  # a plain framework span per step
        chat = _span(140, "chat", parent=step.span_id)
        chat.attributes.add(key=semconv.PASS_ITERATION).value.int_value = i
        _event(chat, semconv.EV_CONTEXT_EVALUATED, {"iteration": i, "activeIds": ["billing"]})
        http = _span(140, None, parent=chat.span_id)
        spans += [step, chat, http]
    reference = {bytes(s.span_id): Span.FromString(s.SerializeToString()) for s in spans}
    (leg,) = group_runs([OtlpSpanView(s) for s in reference.values()])
    for span_hex, note in annotations_for(decide_run(leg)).items():
        apply_note(reference[bytes.fromhex(span_hex)], note)

    clock = Clock()
    pipeline, journal, _ = _pipeline(tmp_path, clock)
    pipeline.ingest_traces(_request(*spans), None, "t")
    clock.now += 1.5
    pipeline.process_due()
    out = _forwarded(journal)
    assert _attrs(out[bytes(run.span_id)])[semconv.RUN_PASSES] == 3
    for span_id, expected in reference.items():
        assert out[span_id] == expected


def test_recovered_complete_runs_are_decided_not_released_as_overflow(tmp_path: Path) -> None:
    """After a crash with a backlog larger than max_runs, the restored runs are decided when due."""
    clock = Clock()
    pipeline, journal, _ = _pipeline(tmp_path, clock, max_runs=100)
    runs = []
    for trace in range(20, 30):
        run = _span(trace, "invoke_agent", footprint__run__id=f"r{trace}")
        runs.append(run)
        pipeline.ingest_traces(_request(_span(trace, "chat", parent=run.span_id), run), None, "t")
    journal.close()  # a crash: nothing decided, every held record still in the journal

    journal = Journal(tmp_path / "queue", fsync=False)
    replay = journal.open()
    metrics = HopMetrics()
    options = PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=10.0, max_runs=3))
    restarted = Pipeline(options, journal, FootprintAnnotation(), metrics, clock=clock)
    restarted.recover(replay)
    with pytest.raises(OverloadedError, match="full"):  # the backlog is over the limit: push back
        restarted.ingest_traces(_request(_span(99, "chat")), None, "t")
    clock.now += 2.0
    restarted.process_due()
    out = _forwarded(journal)
    assert metrics.runs_released_overflow.value("runs") == 0
    for run in runs:
        assert _attrs(out[bytes(run.span_id)])[semconv.RUN_COMPLETE] is True


def test_the_same_request_twice_within_the_grace_leaves_nothing_held(tmp_path: Path) -> None:
    """Issue 13, defect 3: a sender's retry must not leak a held journal record."""
    clock = Clock()
    pipeline, journal, _metrics = _pipeline(tmp_path, clock)
    run = _span(1, "invoke_agent", footprint__run__id="r1")
    chat = _span(1, "chat", parent=run.span_id)
    request = _request(run, chat)
    pipeline.ingest_traces(request, None, "test")
    clock.now += 0.3
    pipeline.ingest_traces(request, None, "test")  # the retry, 0.3 s later
    assert len(journal.pending_seqs()) == 1
    clock.now += 1.5
    assert pipeline.process_due() == 1
    out = _forwarded(journal)
    assert set(out) == {bytes(run.span_id), bytes(chat.span_id)}
    pipeline.flush()
    assert journal.pending_seqs() == []
    journal.close()
    # After a restart nothing comes back to be sent again.
    again = Journal(tmp_path / "queue", fsync=False)
    replay = again.open()
    assert replay.held == [] and replay.outbound == 0
    again.close()


def test_batches_waiting_for_the_forwarder_in_memory_count_against_max_bytes(
    tmp_path: Path,
) -> None:
    """Issue 13 (defect 4): the journal's in-memory copy of outbound batches is memory the hop
    holds, so a forwarder falling behind makes the hop push back (before RSS passes the bound);
    once the batches are forwarded (marked done) input is welcome again."""
    clock = Clock()
    pipeline, journal, metrics = _pipeline(tmp_path, clock, max_bytes=20_000)
    padding = "x" * 2_000
    admitted = 0
    with pytest.raises(OverloadedError, match="full"):
        for trace in range(100, 120):  # plain spans: forwarded at once, kept for the forwarder
            pipeline.ingest_traces(_request(_span(trace, None, pad=padding)), None, "test")
            admitted += 1
    assert 8 <= admitted < 12 and journal.memory_bytes >= 0.9 * 20_000
    assert metrics.memory_bytes.value() == journal.memory_bytes
    with pytest.raises(OverloadedError, match="full"):
        pipeline.ingest_traces(_request(_span(120, "chat")), None, "test")
    assert len(_forwarded(journal)) == admitted  # the forwarder catches up
    assert journal.memory_bytes == 0
    assert pipeline.ingest_traces(_request(_span(121, "chat")), None, "test") == 1


def test_a_retry_of_decided_runs_gets_the_same_annotations_from_the_packed_cache(
    tmp_path: Path,
) -> None:
    """Issue 13: the decision cache keeps each decided trace's notes packed (a marshalled blob,
    ~6 KB a run instead of ~19 KB of objects); a late copy of a decided span (a sender's retry
    after its acknowledgement was lost) must still leave byte for byte as the first one did."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_hop import build_requests

    clock = Clock()
    pipeline, journal, metrics = _pipeline(tmp_path, clock)
    (payload,) = build_requests(100, 0)  # 10 agent runs: notes with attributes, events, links
    request = ExportTraceServiceRequest.FromString(payload)
    pipeline.ingest_traces(request, payload, "test")
    clock.now += 1.5
    pipeline.process_due()
    first = _forwarded(journal)
    assert len(first) == 100 and pipeline.buffer.core.cached_traces() == 10
    assert any(span.events for span in first.values())
    assert any(span.links for span in first.values())
    cached = pipeline.buffer.core.cache_bytes
    assert 10 * 2_000 < cached < 10 * 12_000  # packed: ~8 KB a trace, not ~20 KB as objects
    pipeline.ingest_traces(ExportTraceServiceRequest.FromString(payload), payload, "test")
    assert metrics.late_spans.value() == 100
    again = _forwarded(journal)
    assert again == first


def test_the_memory_backstop_refuses_past_the_resident_limit_and_the_cache_gives_way(
    tmp_path: Path,
) -> None:
    """Issue 13: whatever the estimates say, a process whose resident memory is past the limit
    pushes back (RESOURCE_EXHAUSTED / 503 with a retry delay) while the runs held exceed a tenth of
    max_bytes, after shrinking the decision cache and handing free memory back (malloc_trim)."""
    from otel_footprint.service.memory import MemoryGuard

    clock = Clock()
    rss = [50_000]
    trims: list[float] = []
    guard = MemoryGuard(
        100_000, reader=lambda: rss[0], clock=clock, trim=lambda: trims.append(clock.now)
    )
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    metrics = HopMetrics()
    pipeline = Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_bytes=40_000)),
        journal,
        FootprintAnnotation(),
        metrics,
        clock=clock,
        memory=guard,
    )
    assert metrics.memory_limit_bytes.value() == 100_000
    # A decided run in the cache, then a run held: under the limit, all is admitted.
    first = _span(1, "invoke_agent", footprint__run__id="r1")
    pipeline.ingest_traces(_request(first), None, "test")
    clock.now += 1.5
    pipeline.process_due()
    assert pipeline.buffer.core.cached_traces() == 1
    for trace in range(2, 22):
        run = _span(trace, "invoke_agent", footprint__run__id=f"r{trace}")
        pipeline.ingest_traces(_request(run), None, "test")
    held = pipeline.buffer.core.bytes_held
    assert 4_000 < held < 20_000  # more than a tenth of max_bytes, far from its 90%
    assert metrics.resident_bytes.value() == 50_000
    # Past the limit: refused, counted, the cache emptied, free memory handed back once.
    rss[0] = 90_000  # past the soft limit (90% of it)
    clock.now += 0.2
    with pytest.raises(OverloadedError, match="over its memory limit"):
        pipeline.ingest_traces(_request(_span(9, "invoke_agent")), None, "test")
    assert metrics.memory_limit_refusals.value() == 1
    assert metrics.resident_bytes.value() == 90_000
    assert pipeline.buffer.core.cached_traces() == 0
    assert trims == [clock.now]
    clock.now += 0.2
    with pytest.raises(OverloadedError):
        pipeline.ingest_traces(_request(_span(9, "invoke_agent")), None, "test")
    assert len(trims) == 1  # at most every few seconds
    # The held runs drain; the process stays big (allocator slack), yet input is admitted again
    # while what is held stays under the low-water share.
    clock.now += 1.5
    pipeline.process_due()
    _forwarded(journal)  # the forwarder sends them: the journal's copies leave memory
    assert pipeline.buffer.core.bytes_held == 0
    pipeline.ingest_traces(_request(_span(9, "invoke_agent")), None, "test")
    assert metrics.memory_limit_refusals.value() == 2
    # Back under the limit: the ordinary 90% high-water mark again.
    rss[0] = 89_000
    clock.now += 0.2
    for trace in range(30, 50):
        pipeline.ingest_traces(_request(_span(trace, "invoke_agent")), None, "test")
    assert metrics.memory_limit_refusals.value() == 2
    journal.close()


def test_the_memory_guard_reads_this_process() -> None:
    from otel_footprint.service.memory import MemoryGuard, resident_bytes

    rss = resident_bytes()
    assert rss is not None and rss > 10 << 20  # Linux /proc: the interpreter alone is more
    assert MemoryGuard(1 << 40).over() is False
    assert MemoryGuard(1 << 20, trim=lambda: None).over() is True
    assert MemoryGuard(rss * 21 // 20, trim=lambda: None).over() is True  # the soft limit: 90%
    assert MemoryGuard(rss * 2).over() is False
