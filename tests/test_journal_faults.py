"""The journal under failing writes and damaged files (issue 22): a full disk, a short write, an
I/O error leave the journal as it was and are retried, with new input refused meanwhile and no
decided run dropped; a damaged record costs that record only, set aside, counted and logged."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path

import pytest
from journal_faults import (
    Clock,
    FaultyIO,
    Instance,
    Ledger,
    Sink,
    Spans,
    check,
    recover,
    request,
)

from otel_footprint.service.journal import KIND_HELD_TRACES, KIND_OUT_TRACES, Journal
from otel_footprint.service.journalscan import HEADER, QUARANTINE
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.pipeline import JournalBlockedError


class DiskFull:
    """A fault switched on and off: every data write fails with ENOSPC while on."""

    def __init__(self) -> None:
        self.on = False

    def __call__(self, op: str, _n: int) -> OSError | None:
        if self.on and op in ("pwrite", "create"):
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return None


def test_a_full_disk_refuses_input_keeps_decided_runs_and_recovers_by_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    full = DiskFull()
    io = FaultyIO(fault=full)
    clock, sink, ledger, metrics = Clock(), Sink(), Ledger(), HopMetrics()
    hop = Instance(tmp_path / "q", io, clock, sink, metrics)
    make = Spans()
    for trace in range(1, 4):
        hop.ingest(ledger, request(*make.run(trace, 2)))
    assert len(ledger.acked) == 9
    full.on = True
    clock.now += 11.0
    worker = threading.Thread(target=hop.pipeline.process_due)  # the release worker's turn
    worker.start()
    deadline = time.monotonic() + 10
    while metrics.queue_blocked.value() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # a few tries
    assert worker.is_alive()  # still trying: the decided runs are kept, not dropped
    assert metrics.queue_blocked.value() == 1
    assert metrics.queue_write_failures.value("ENOSPC") >= 2
    assert hop.pipeline.buffer.releasing_bytes > 0
    assert hop.journal.blocked is not None and "space" in hop.journal.blocked
    (line,) = [
        r for r in caplog.records if r.levelno == logging.ERROR and "waiting_for" in r.__dict__
    ]
    assert "space" in line.__dict__["waiting_for"]
    # Unavailable, not overloaded (gRPC UNAVAILABLE, HTTP 503), each time until space returns.
    for _ in range(2):
        with pytest.raises(JournalBlockedError, match=r"cannot write|waiting for space"):
            hop.pipeline.ingest_traces(request(*make.run(9, 1)), None, "test")
    full.on = False  # space again: no restart
    worker.join(10)
    assert not worker.is_alive()
    assert metrics.queue_blocked.value() == 0 and hop.journal.blocked is None
    hop.forward()
    check(ledger, sink)
    hop.ingest(ledger, request(*make.run(10, 1)))  # new input is welcome again at once
    assert len(ledger.acked) == 11
    hop.journal.close()
    io.abandon()


@pytest.mark.parametrize("short", [False, True], ids=["failed", "short"])
def test_a_failed_write_leaves_the_journal_as_it_was(tmp_path: Path, short: bool) -> None:
    full = DiskFull()
    io = FaultyIO(fault=full, short=short)
    journal = Journal(tmp_path, io=io)
    journal.open()
    (kept,) = journal.append([(KIND_OUT_TRACES, b"kept" * 10, 1)])
    journal.sync(kept)
    (segment,) = tmp_path.glob("seg-*.log")
    before = segment.read_bytes()
    full.on = True
    with pytest.raises(OSError):
        journal.append([(KIND_OUT_TRACES, b"lost" * 100, 1), (KIND_HELD_TRACES, b"h" * 50, 1)])
    assert segment.read_bytes() == before  # a short write's half was cut off
    assert journal.pending_seqs() == [kept] and journal.outbound_count == 1
    full.on = False
    (later,) = journal.append([(KIND_HELD_TRACES, b"later", 1)], admit=False)
    journal.sync(later)
    io.abandon()  # a crash: the next start sees exactly the records that were written
    replay = Journal(tmp_path).open()
    assert [p for _, p in replay.held] == [b"later"]
    assert replay.outbound == 1 and replay.damaged == [] and replay.truncated_bytes == 0


def test_while_writes_fail_new_input_is_refused_without_trying_each_time(tmp_path: Path) -> None:
    from otel_footprint.service.journal import QueueFullError

    full = DiskFull()
    io = FaultyIO(fault=full)
    journal = Journal(tmp_path, io=io)
    journal.open()
    full.on = True
    with pytest.raises(OSError):
        journal.append([(KIND_OUT_TRACES, b"x", 1)])
    tries = len(io.calls)
    with pytest.raises(QueueFullError, match="waiting for space"):
        journal.append([(KIND_OUT_TRACES, b"x", 1)])
    assert len(io.calls) == tries  # refused without touching the disk (one probe a second)
    journal.close()
    io.abandon()


def _traces(first: int, n: int) -> bytes:
    make = Spans()
    return request(*(make.span(first + i, "chat", pad=40) for i in range(n))).SerializeToString()


def _records(tmp_path: Path, n: int) -> tuple[list[int], list[int]]:
    """``n`` held records of one trace each (trace ids 100...); returns (seqs, offsets)."""
    journal = Journal(tmp_path)
    journal.open()
    seqs = journal.append([(KIND_HELD_TRACES, _traces(100 + i, 1), 1) for i in range(n)])
    journal.sync(seqs[-1])
    journal.close()
    (segment,) = tmp_path.glob("seg-*.log")
    data, offsets, at = segment.read_bytes(), [], 0
    while at < len(data):
        offsets.append(at)
        at += HEADER.size + HEADER.unpack_from(data, at)[4]
    return seqs, offsets


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["payload", "length", "last"])
def test_a_flipped_byte_costs_only_its_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    seqs, offsets = _records(tmp_path, 8)
    (segment,) = tmp_path.glob("seg-*.log")
    original = segment.read_bytes()
    victim = 7 if where == "last" else 3
    at = offsets[victim] + (14 if where == "length" else HEADER.size + 30)
    _flip(segment, at)
    journal = Journal(tmp_path)
    replay = journal.open()
    assert sorted(r.seq for r, _ in replay.held) == [s for i, s in enumerate(seqs) if i != victim]
    (damage,) = replay.damaged
    assert damage.offset == offsets[victim] and damage.file is not None
    end = offsets[victim + 1] if victim + 1 < len(offsets) else len(original)
    kept = Path(damage.file).read_bytes()
    assert len(kept) == end - offsets[victim] and kept != original[offsets[victim] : end]
    assert Path(damage.file).parent == tmp_path / QUARANTINE
    if where == "payload":  # the header still reads: what was lost is named
        assert damage.seq == seqs[victim] and damage.items == 1
    (line,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.__dict__["offset"] == offsets[victim]
    journal.close()
    # The next start finds the same damage, keeps the first copy, loses nothing more.
    again = Journal(tmp_path)
    replay = again.open()
    assert len(replay.held) == 7 and len(list((tmp_path / QUARANTINE).iterdir())) == 1
    again.close()


def test_damage_is_counted_and_the_trace_ids_it_held_are_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, offsets = _records(tmp_path, 3)
    (segment,) = tmp_path.glob("seg-*.log")
    # The checksum byte of record 1: its payload is intact, so its trace id can be read.
    _flip(segment, offsets[1] + HEADER.size - 1)
    metrics = HopMetrics()
    hop = Instance(tmp_path, FaultyIO(), Clock(), Sink(), metrics)
    assert metrics.queue_quarantined.value() == 1
    assert metrics.queue_quarantined_bytes.value() == offsets[2] - offsets[1]
    (line,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.__dict__["trace_ids"] == [(101).to_bytes(16, "big").hex()]
    hop.journal.close()


def test_a_torn_tail_is_cut_off_not_quarantined(tmp_path: Path) -> None:
    _, offsets = _records(tmp_path, 3)
    (segment,) = tmp_path.glob("seg-*.log")
    data = segment.read_bytes()
    segment.write_bytes(data[: offsets[2] + 10])  # the last write, interrupted
    replay = Journal(tmp_path).open()
    assert len(replay.held) == 2 and replay.damaged == []
    assert replay.truncated_bytes == 10
    assert not (tmp_path / QUARANTINE).exists()


def test_stopping_on_a_full_disk_keeps_what_is_held_for_the_next_start(tmp_path: Path) -> None:
    full = DiskFull()
    io = FaultyIO(fault=full)
    clock, sink, ledger, metrics = Clock(), Sink(), Ledger(), HopMetrics()
    hop = Instance(tmp_path / "q", io, clock, sink, metrics)
    make = Spans()
    for trace in range(1, 4):
        hop.ingest(ledger, request(*make.run(trace, 2)))
    full.on = True
    hop.pipeline.flush()  # a shutdown that cannot write its decided runs: no exception, no wait
    hop.journal.close()
    io.abandon()
    full.on = False
    again = FaultyIO()
    recover(Instance(tmp_path / "q", again, clock, sink, metrics))
    again.abandon()
    check(ledger, sink)


def test_a_hop_started_on_a_full_disk_replays_and_waits_for_space(tmp_path: Path) -> None:
    clock, sink, ledger, metrics = Clock(), Sink(), Ledger(), HopMetrics()
    first = FaultyIO()
    hop = Instance(tmp_path / "q", first, clock, sink, metrics)
    make = Spans()
    hop.ingest(ledger, request(*make.run(1, 2)))
    first.abandon()  # killed with the run held
    full = DiskFull()
    full.on = True
    io = FaultyIO(fault=full)
    hop = Instance(tmp_path / "q", io, clock, sink, metrics)  # starts: no new segment possible
    assert hop.journal.blocked is not None and metrics.queue_blocked.value() == 1
    with pytest.raises(JournalBlockedError, match=r"cannot write|waiting for space"):
        hop.pipeline.ingest_traces(request(*make.run(2, 1)), None, "test")
    full.on = False
    hop.settle()  # the release worker's write creates the segment once there is space
    hop.forward()
    check(ledger, sink)
    assert hop.journal.blocked is None
    hop.journal.close()
    io.abandon()
