"""Functional: ``decide_in="process"`` — decisions in a child process give the spans the in-thread
path gives (same inputs replayed into both, compared exactly), and a child that dies, hangs or is
shut down never stops the pipeline nor outlives it. Real TracerProvider, real child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.runs.store import MemoryRunStore
from otel_footprint.sdk import FootprintSpanProcessor
from otel_footprint.sdk.decide import make_decider
from otel_footprint.sdk.worker import ProcessDecider, WorkerError

Call = tuple[str, Any]


class Recorder(SpanProcessor, LogRecordProcessor):
    """Every span start, span end and log record, in the order the application made them."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.calls.append(("start", span))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("end", span))

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self.calls.append(("log", log_record))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def record(scenarios: Sequence[str], emit_as: str = "span") -> list[Call]:
    recorder = Recorder()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(recorder)
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(recorder)
    for name in scenarios:
        run_script(
            tracer_provider.get_tracer("test"),
            SCENARIOS[name].script,
            emit_as=emit_as,  # type: ignore[arg-type]
            logger_provider=logger_provider,
        )
    return recorder.calls


def replay(calls: Sequence[Call], **options: Any) -> tuple[list[ReadableSpan], Any]:
    """The recorded calls through a fresh processor; its exported spans (in span-id order)."""
    exporter = InMemorySpanExporter()
    processor = FootprintSpanProcessor(exporter, grace_seconds=0.05, **options)
    logs = processor.log_record_processor()
    try:
        for kind, item in calls:
            if kind == "start":
                processor.on_start(item)
            elif kind == "end":
                processor.on_end(item)
            else:
                logs.on_emit(item)
        assert processor.force_flush(60_000)
        stats = processor.stats()
    finally:
        processor.shutdown()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.context.span_id)
    return spans, stats


def shape(span: ReadableSpan) -> tuple[Any, ...]:
    """Everything the annotation may write, exactly (values, order, times, links)."""
    return (
        span.context.span_id,
        span.name,
        tuple((span.attributes or {}).items()),
        tuple((e.name, e.timestamp, tuple((e.attributes or {}).items())) for e in span.events),
        tuple(
            (link.context.span_id, tuple((link.attributes or {}).items())) for link in span.links
        ),
        span.dropped_attributes,
        span.dropped_events,
    )


@pytest.mark.parametrize("emit_as", ["span", "log"])
def test_a_child_process_annotates_every_scenario_exactly_as_the_thread_does(emit_as: str) -> None:
    calls = record(list(SCENARIOS), emit_as)
    in_thread, thread_stats = replay(calls)
    in_process, process_stats = replay(calls, decide_in="process")
    assert [shape(s) for s in in_process] == [shape(s) for s in in_thread]
    assert thread_stats.runs_decided == process_stats.runs_decided == len(SCENARIOS)
    assert process_stats.spans_annotated == thread_stats.spans_annotated > 0
    assert process_stats.decision_errors == 0
    if emit_as == "log":
        assert process_stats.log_records_held == thread_stats.log_records_held > 0


def test_decide_many_answers_each_request_as_the_decider_does() -> None:
    calls = record(["routed-delivered", "stuck-verify"])
    traces: dict[int, list[ReadableSpan]] = {}
    for kind, span in calls:
        if kind == "end":
            traces.setdefault(span.context.trace_id, []).append(span)
    requests = [(spans, None, None) for spans in traces.values()]
    decider = ProcessDecider()
    try:
        answers = decider.decide_many(requests)
        assert decider(requests[0][0], None) == answers[0]
    finally:
        decider.close()
    expected = make_decider()
    assert answers == [expected(spans, None) for spans, _, _ in requests]
    assert decider.pid is None


def _run_one(processor: FootprintSpanProcessor, exporter: InMemorySpanExporter) -> dict[str, Any]:
    """One routed run through ``processor``: every span it ended is exported (none lost, whatever
    the child did); the run span's attributes."""
    provider = TracerProvider()
    ended = Recorder()
    provider.add_span_processor(ended)
    provider.add_span_processor(processor)
    run_script(provider.get_tracer("test"), SCENARIOS["routed-delivered"].script)
    assert processor.force_flush(60_000)
    exported = exporter.get_finished_spans()
    assert sorted(s.context.span_id for s in exported) == sorted(
        span.context.span_id for kind, span in ended.calls if kind == "end"
    )
    (run,) = [s for s in exported if s.name.startswith("invoke_agent")]
    exporter.clear()
    return dict(run.attributes or {})


def _process(processor: FootprintSpanProcessor) -> ProcessDecider:
    decider = processor._process
    assert decider is not None
    return decider


def test_a_child_that_dies_costs_its_runs_their_notes_then_a_new_one_starts() -> None:
    exporter = InMemorySpanExporter()
    processor = FootprintSpanProcessor(exporter, grace_seconds=0.05, decide_in="process")
    try:
        first = _process(processor).pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        run = _run_one(processor, exporter)
        assert run[sc.RUN_REASONS] == ("decision-error",) and run[sc.RUN_COMPLETE] is False
        assert processor.stats().decision_errors == 1
        run = _run_one(processor, exporter)
        assert sc.RUN_REASONS not in run or "decision-error" not in run[sc.RUN_REASONS]
        assert processor.stats().runs_decided == 1
        assert _process(processor).pid not in (None, first)
    finally:
        processor.shutdown()


def test_a_child_that_hangs_is_killed_after_the_timeout() -> None:
    decider = ProcessDecider(timeout_seconds=5)
    calls = record(["routed-delivered"])
    spans = [span for kind, span in calls if kind == "end"]
    try:
        assert decider(spans, None)  # warm: the child has started and answers
        hung = decider.pid
        assert hung is not None
        os.kill(hung, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(WorkerError, match="in time"):
            decider(spans, None)
        assert time.monotonic() - started < 15
        assert decider.pid is None  # killed, not left behind
        assert decider(spans, None) == make_decider()(spans, None)
    finally:
        decider.close()


def test_shutdown_ends_the_child() -> None:
    processor = FootprintSpanProcessor(InMemorySpanExporter(), decide_in="process")
    decider = _process(processor)
    child = decider._child
    assert child is not None
    processor.shutdown()
    assert child.poll() is not None and decider.pid is None
    answer = decider.decide_many([([], None, None)])
    assert isinstance(answer[0], WorkerError)


@pytest.mark.parametrize(
    "options",
    [
        {"decide_in": "elsewhere"},
        {"decide_in": "process", "run_store": MemoryRunStore()},
        {"decide_in": "process", "decider": make_decider()},
    ],
)
def test_settings_the_child_cannot_honour_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="decide_in"):
        FootprintSpanProcessor(InMemorySpanExporter(), **options)


def test_a_refused_bound_starts_no_child_process() -> None:
    before = _children()
    with pytest.raises(ValueError, match="max_runs"):
        FootprintSpanProcessor(InMemorySpanExporter(), decide_in="process", max_runs=0)
    assert _children() <= before  # no new child (an earlier test's may have exited since)


def _children() -> set[str]:
    """This process's live child processes (``/proc``)."""
    tasks = Path(f"/proc/{os.getpid()}/task")
    if not tasks.is_dir():
        pytest.skip("needs /proc")
    return {pid for task in tasks.iterdir() for pid in (task / "children").read_text().split()}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() in a multi-threaded process
def test_after_fork_the_child_starts_its_own_decision_process() -> None:
    exporter = InMemorySpanExporter()
    processor = FootprintSpanProcessor(exporter, grace_seconds=0.05, decide_in="process")
    parents = _process(processor).pid
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the forked application: record a run, report its verdict and decider
            code = 1
            try:
                run_script(tracer_provider.get_tracer("t"), SCENARIOS["routed-delivered"].script)
                processor.force_flush(30_000)
                (run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke")]
                own = _process(processor).pid
                os.write(write, f"{(run.attributes or {}).get(sc.RUN_COMPLETE)} {own}".encode())
                processor.shutdown()
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        complete, own = os.read(read, 100).decode().split()
        os.close(read)
        assert os.waitstatus_to_exitcode(status) == 0
        assert complete == "True" and int(own) != parents
        # The parent's decision process was left alone and still answers.
        assert _run_one(processor, exporter)[sc.RUN_COMPLETE] is True
        assert _process(processor).pid == parents
    finally:
        processor.shutdown()


_UNGUARDED_APP = """
import os
print("app module ran in", os.getpid(), flush=True)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_footprint import semconv as sc
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.sdk import FootprintSpanProcessor
exporter = InMemorySpanExporter()
processor = FootprintSpanProcessor(exporter, grace_seconds=0.05, decide_in="process")
provider = TracerProvider()
provider.add_span_processor(processor)
run_script(provider.get_tracer("app"), SCENARIOS["routed-delivered"].script)
assert processor.force_flush(60_000)
(run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
print("complete", (run.attributes or {}).get(sc.RUN_COMPLETE), flush=True)
processor.shutdown()
"""


def test_the_decision_process_never_runs_the_applications_main_module(tmp_path: Path) -> None:
    """The child is a fresh interpreter that imports only otel_footprint: an application script
    without an ``if __name__ == "__main__"`` guard is not run a second time in it (a
    ``multiprocessing`` spawn or forkserver child would run it as ``__mp_main__``)."""
    script = tmp_path / "app.py"
    script.write_text(_UNGUARDED_APP)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.startswith("app module ran") for line in lines) == 1, lines
    assert "complete True" in lines
