"""Crash consistency of the hop's journal, proven the way storage engines prove it.

The in-process hop of ``journal_faults`` runs a workload through receive → hold → decide → release
→ forward → retire; every call of the journal that changes a file is numbered, and for each one the
workload is run again and killed there (before the call, after it, and in the middle of a write),
then a new instance starts from the files as left and finishes the job. The invariant: every span
acknowledged before the crash is delivered at least once, and nothing is delivered that was never
sent. Recovery is crashed the same way (a crash during the restart after a crash).

A deterministic sample of the points runs by default (seconds); the whole sweep is ``slow``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_faults import (
    MODES,
    Clock,
    Crash,
    FaultyIO,
    Instance,
    Ledger,
    Mode,
    Sink,
    Spans,
    check,
    recover,
    request,
    workload,
)

from otel_footprint.service import pipeline as pipeline_module
from otel_footprint.service.journalscan import QUARANTINE
from otel_footprint.service.metrics import HopMetrics


@pytest.fixture(autouse=True)
def _commit_each_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each decided trace commits alone: the most commit orders, and the most crash points between.
    monkeypatch.setattr(pipeline_module, "GROUP_COMMIT_SECONDS", 0.0)


@pytest.fixture(scope="module")
def metrics() -> Iterator[HopMetrics]:
    shared = HopMetrics()  # one provider for the thousands of instances of a sweep
    yield shared
    shared.shutdown()


def _run(
    directory: Path,
    metrics: HopMetrics,
    crash: tuple[int, Mode] | None,
    recovery_crash: tuple[int, Mode] | None = None,
    *,
    power: bool = False,
) -> tuple[FaultyIO, FaultyIO | None]:
    """The workload crashed at ``crash`` (with ``power``: a power loss, unsynced writes lost), a
    restart crashed at ``recovery_crash``, then a clean restart; checks the invariant and returns
    the two crashed runs' I/O (their call lists)."""
    shutil.rmtree(directory, ignore_errors=True)
    clock, sink, ledger = Clock(), Sink(), Ledger()
    io = FaultyIO(*(crash or (None, "before")), power=power)
    try:
        workload(Instance(directory, io, clock, sink, metrics), ledger)
    except Crash:
        pass
    finally:
        io.abandon()
    second: FaultyIO | None = None
    if recovery_crash is not None:
        second = FaultyIO(*recovery_crash)
        try:
            recover(Instance(directory, second, clock, sink, metrics))
        except Crash:
            pass
        finally:
            second.abandon()
    last = FaultyIO()
    try:
        recover(Instance(directory, last, clock, sink, metrics))
    finally:
        last.abandon()
    check(ledger, sink)
    # ... and nothing leaks: after the last clean run every record was retired.
    assert list(directory.glob("seg-*.log")) == []
    return io, second


def _points(calls: int, every: int = 1) -> list[tuple[int, Mode]]:
    return [(n, mode) for n in range(0, calls, every) for mode in MODES]


def test_the_workload_without_a_crash_delivers_everything(
    tmp_path: Path, metrics: HopMetrics
) -> None:
    io, _ = _run(tmp_path / "q", metrics, None)
    ops = set(io.calls)
    # The workload reaches every kind of call the journal makes on its files.
    assert {"create", "pwrite", "fdatasync", "unlink", "fsync_dir"} <= ops, ops
    assert len(io.calls) > 50


@pytest.mark.parametrize("power", [False, True], ids=["kill", "power-loss"])
def test_a_sample_of_crash_points(tmp_path: Path, metrics: HopMetrics, power: bool) -> None:
    """Every seventh call of the workload, killed before, after and mid-write (seconds); and the
    same points as a power loss (what was not fdatasync'd is lost too)."""
    io, _ = _run(tmp_path / "q", metrics, None)
    points = [p for p in io.points() if p[0] % 7 == 3]
    for point in points:
        _run(tmp_path / "q", metrics, point, power=power)
    assert len(points) > 20


def test_a_held_record_outlives_the_long_decision_sharing_it(
    tmp_path: Path, metrics: HopMetrics
) -> None:
    """Issue 22's kill -9 loss: one request's held record carries a long run and a short one; the
    short one's decision ends first and is committed while the long one is still being decided. A
    kill at that moment must not find the record retired with the long run nowhere else."""
    io, _ = _run(tmp_path / "q", metrics, None)
    # Crash right after every status-byte write (the done marks) of the first settle.
    marks = [n for n, op in enumerate(io.calls) if op == "pwrite"]
    for n in marks[:12]:
        _run(tmp_path / "q", metrics, (n, "after"))


def test_a_recovery_setting_damage_aside_crashed_at_each_of_its_calls(
    tmp_path: Path, metrics: HopMetrics
) -> None:
    """A restart that finds a damaged record copies it aside (quarantine: directory, file, write,
    fsync, rename, directory fsync) and goes on; killed at each of those calls and restarted, only
    the damaged record's spans are lost, and its bytes are kept, once."""
    base, clock, ledger, make = tmp_path / "base", Clock(), Ledger(), Spans()
    io = FaultyIO()
    hop = Instance(base, io, clock, Sink(), metrics)
    batches = [make.run(trace, 2, pad=50) for trace in range(1, 5)]
    for spans in batches:
        hop.ingest(ledger, request(*spans))
    io.abandon()  # killed with all four held
    needle = batches[1][1].SerializeToString()
    (segment,) = [p for p in base.glob("seg-*.log") if needle in p.read_bytes()]
    data = bytearray(segment.read_bytes())
    second = data.index(needle)  # inside the second request's record
    data[second] ^= 0x01
    segment.write_bytes(bytes(data))
    damaged = {int.from_bytes(s.span_id, "big") for s in batches[1]}
    probe = FaultyIO()
    shutil.copytree(base, tmp_path / "probe")
    recover(Instance(tmp_path / "probe", probe, clock, Sink(), metrics))  # numbers its calls
    probe.abandon()
    points = list(probe.points())
    assert {"rename", "makedirs"} <= set(probe.calls)
    for point in points:
        directory = tmp_path / "q"
        shutil.rmtree(directory, ignore_errors=True)
        shutil.copytree(base, directory)
        sink, crashed = Sink(), FaultyIO(*point)
        try:
            recover(Instance(directory, crashed, clock, sink, metrics))
        except Crash:
            pass
        finally:
            crashed.abandon()
        last = FaultyIO()
        recover(Instance(directory, last, clock, sink, metrics))
        last.abandon()
        survivors = Ledger(ledger.sent, ledger.acked - damaged)
        check(survivors, sink)
        (kept,) = (directory / QUARANTINE).glob("*.bad")
        assert kept.read_bytes()[second - int(kept.name.rsplit("@", 1)[1][:-4]) :].startswith(
            bytes(data[second : second + 8])
        )


@pytest.mark.slow
def test_every_crash_point_of_the_workload_and_of_recovery(
    tmp_path: Path, metrics: HopMetrics
) -> None:
    """Every point of the workload; then, after a crash at every fifth of them, every point of
    the recovery from it (a crash while restarting)."""
    io, _ = _run(tmp_path / "q", metrics, None)
    points = list(io.points())
    for point in points:
        _run(tmp_path / "q", metrics, point)
        _run(tmp_path / "q", metrics, point, power=True)
    covered = 2 * len(points)
    for point in points[::5]:
        _, recovery = _run(tmp_path / "q", metrics, point, (10**9, "before"))  # numbers its calls
        assert recovery is not None
        for inner in recovery.points():
            _run(tmp_path / "q", metrics, point, inner)
            covered += 1
    print(
        f"\ncrash points covered: {covered} ({len(points)} in the workload's {len(io.calls)} "
        f"file-changing calls, each as a kill and as a power loss; {covered - 2 * len(points)} "
        "in recoveries)"
    )
    assert covered > len(points)
