"""Shutdown within ``service.shutdown_timeout`` (plus at most a second), nothing acknowledged lost.

Issue 22. Under load with ``shutdown_timeout=5s`` the hop took 11.8 s to stop (30 s here with 300
runs held): a graceful stop decided every run still held, however long that took. Deciding now
stops at a deadline; what is not decided stays in the journal (its input records pending) and is
decided after the restart. The pipeline test makes the deadline pass in the middle of a request's
traces; the subprocess tests send SIGTERM to a real ``serve`` under load and restart it.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from otel_footprint.runs.slices import Ticket
from otel_footprint.service.annotation import Decision, FootprintAnnotation
from otel_footprint.service.buffer import BufferLimits, LateSpan, Release
from otel_footprint.service.journal import Journal
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import Pipeline, PipelineOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_shutdown

_ids = itertools.count(1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SlowOddTraces:
    """The real stage, slow (50 ms) for traces with an odd id: the even trace of a request is
    decided and written out first although it was released second."""

    def __init__(self) -> None:
        self.inner = FootprintAnnotation()
        self.decided = 0

    def annotate(self, release: Release) -> list[Decision]:
        return self.inner.annotate(release)

    def annotate_steps(self, release: Release, turn: Ticket | None = None) -> Iterator[Any]:
        if release.trace_id[-1] % 2:
            time.sleep(0.05)
        decisions = yield from self.inner.annotate_steps(release, turn)
        self.decided += 1
        return decisions

    def annotate_late(self, late: LateSpan) -> bool:
        return self.inner.annotate_late(late)


def _run(trace: int) -> list[Span]:
    spans = []
    run = Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=next(_ids).to_bytes(8, "big"),
        name="invoke_agent",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
    )
    run.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = "invoke_agent"
    run.attributes.add(key=semconv.RUN_ID).value.string_value = f"r{trace}"
    spans.append(run)
    chat = Span(
        trace_id=run.trace_id,
        span_id=next(_ids).to_bytes(8, "big"),
        parent_span_id=run.span_id,
        name="chat",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
    )
    chat.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = "chat"
    spans.append(chat)
    return spans


def _pipeline(journal: Journal, clock: Clock, stage: Any) -> Pipeline:
    return Pipeline(
        PipelineOptions(limits=BufferLimits(release_grace=1.0, max_wait=60.0)),
        journal,
        stage,
        HopMetrics(),
        clock=clock,
    )


def _forwarded(journal: Journal) -> set[bytes]:
    out: set[bytes] = set()
    while batch := journal.take_outbound(1 << 30, timeout=0):
        for record in batch:
            req = ExportTraceServiceRequest.FromString(journal.read(record))
            out |= {
                s.span_id for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans
            }
        journal.mark_done([r.seq for r in batch])
    return out


def test_deciding_stops_at_the_deadline_and_the_rest_is_decided_after_the_restart(
    tmp_path: Path,
) -> None:
    clock = Clock()
    journal = Journal(tmp_path / "queue", fsync=False)
    journal.open()
    stage = SlowOddTraces()
    pipeline = _pipeline(journal, clock, stage)
    sent: set[bytes] = set()
    for n in range(10):
        # One request, one held record, two traces: odd (slow) first, even (fast) second.
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        scope.spans.extend(_run(1000 + 2 * n + 1) + _run(1000 + 2 * n))
        sent |= {s.span_id for s in scope.spans}
        pipeline.ingest_traces(request, None, "test")
    clock.now += 1.5
    started = time.monotonic()
    pipeline.flush(deadline=started + 0.3)
    took = time.monotonic() - started
    assert 0 < stage.decided < 20, stage.decided  # the deadline passed with runs undecided
    assert took < 5.0  # generous for a loaded machine: the point is that it stopped deciding
    before = _forwarded(journal)
    assert before and before < sent
    journal.close()

    again = Journal(tmp_path / "queue", fsync=False)
    replay = again.open()
    restarted = _pipeline(again, clock, FootprintAnnotation())
    restarted.recover(replay)
    clock.now += 1.5
    restarted.process_due()
    after = _forwarded(again)
    assert sent - before <= after, "an acknowledged span was neither forwarded nor journaled"
    assert again.pending_seqs() == []


def test_sigterm_under_load_stops_in_bounded_time_and_loses_nothing(tmp_path: Path) -> None:
    """The functional version (the slow test below holds the issue's bound): a short load with
    runs held for 30 s, SIGTERM with ``shutdown_timeout=2s``, a restart on the same data."""
    result = bench_shutdown.run(
        rate=2000, clients=4, load_before=4, load_after=2, release_grace="30s", shutdown_timeout=2
    )
    assert result["exit_code"] == 0 and result["restart_exit_code"] == 0, result
    assert result["acknowledged_spans"] > 2000, result
    assert result["lost"] == 0, result
    assert result["stop_seconds"] < 2 + 10, result


@pytest.mark.slow
def test_sigterm_under_load_stops_within_the_shutdown_timeout_and_loses_nothing() -> None:
    """The issue's figure: ``shutdown_timeout=5s``; 300 runs held (30,000 spans) took 32 s to
    decide at the stop before, the stop must now take at most 5 s + 1 s."""
    result = bench_shutdown.run(rate=3000, load_before=10, release_grace="30s", shutdown_timeout=5)
    assert result["exit_code"] == 0, result
    assert result["spans_held_at_signal"] > 10_000, result
    assert result["lost"] == 0, result
    assert result["stop_seconds"] <= 5 + 1, result
