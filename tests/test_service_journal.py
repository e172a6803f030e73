"""The disk journal on real files: durability order, replay after a crash, torn tails, bounds."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from otel_footprint.service.journal import (
    KIND_HELD_TRACES,
    KIND_OUT_LOGS,
    KIND_OUT_TRACES,
    Journal,
    QueueFullError,
)


def test_outbound_records_are_taken_in_order_and_merge_by_kind(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    seqs = j.append(
        [(KIND_OUT_TRACES, b"a", 1), (KIND_OUT_TRACES, b"bb", 2), (KIND_OUT_LOGS, b"c", 1)]
    )
    j.sync(seqs[-1])
    batch = j.take_outbound(max_bytes=100, timeout=0)
    assert [r.seq for r in batch] == seqs[:2]
    assert b"".join(j.read(r) for r in batch) == b"abb"
    (logs,) = j.take_outbound(max_bytes=100, timeout=0)
    assert logs.kind == KIND_OUT_LOGS
    assert j.outbound_count == 3  # taken but not yet forwarded
    j.mark_done(seqs)
    assert j.outbound_count == 0
    j.close()


def test_pending_records_survive_a_crash_and_done_ones_do_not(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    held, out, gone = j.append(
        [(KIND_HELD_TRACES, b"held", 3), (KIND_OUT_TRACES, b"out", 2), (KIND_OUT_TRACES, b"x", 1)]
    )
    j.sync(gone)
    j.mark_done([gone])
    # No close(): the process "dies" here; a new journal reads the same directory.
    again = Journal(tmp_path)
    replay = again.open()
    assert [(r.seq, r.kind, r.count, p) for r, p in replay.held] == [
        (held, KIND_HELD_TRACES, 3, b"held")
    ]
    assert replay.outbound == 1
    (record,) = again.take_outbound(100, timeout=0)
    assert (record.seq, again.read(record)) == (out, b"out")
    # Sequence numbers keep growing across restarts.
    (nxt,) = again.append([(KIND_OUT_TRACES, b"y", 1)])
    assert nxt > gone
    again.close()


def test_a_torn_tail_is_truncated_not_fatal(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    (seq,) = j.append([(KIND_OUT_TRACES, b"complete", 1)])
    j.sync(seq)
    (segment,) = tmp_path.glob("seg-*.log")
    with segment.open("ab") as f:
        f.write(b"\x7f\xf0\x00\x03garbage-half-record")
    replay = Journal(tmp_path).open()
    assert replay.outbound == 1
    assert replay.truncated_bytes > 0


def test_finished_segments_are_deleted(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_bytes=64)
    j.open()
    seqs = [j.append([(KIND_OUT_TRACES, b"z" * 40, 1)])[0] for _ in range(4)]
    assert len(list(tmp_path.glob("seg-*.log"))) >= 3
    j.mark_done(seqs)
    assert len(list(tmp_path.glob("seg-*.log"))) == 1  # only the active one is left
    j.close()
    assert list(tmp_path.glob("seg-*.log")) == []


def test_the_size_bound_refuses_new_input_but_not_internal_requeues(tmp_path: Path) -> None:
    j = Journal(tmp_path, max_bytes=100)
    j.open()
    j.append([(KIND_OUT_TRACES, b"a" * 50, 1)])
    with pytest.raises(QueueFullError):
        j.append([(KIND_OUT_TRACES, b"b" * 50, 1)])
    j.append([(KIND_OUT_TRACES, b"c" * 50, 1)], admit=False)
    j.close()


def test_group_commit_serves_concurrent_writers(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.open()
    calls = 0
    real = os.fdatasync

    def counting(fd: int) -> None:
        nonlocal calls
        calls += 1
        real(fd)

    os.fdatasync = counting  # type: ignore[assignment]
    try:

        def writer() -> None:
            for _ in range(25):
                (seq,) = j.append([(KIND_OUT_TRACES, b"p" * 100, 1)])
                j.sync(seq)

        threads = [threading.Thread(target=writer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        os.fdatasync = real  # type: ignore[assignment]
    assert 0 < calls <= 200  # one fsync may serve many writers, never more than one each
    assert len(j.pending_seqs()) == 200
    j.close()


def test_segments_pinned_by_a_few_pending_records_are_compacted(tmp_path: Path) -> None:
    """Disk tracks what is pending: one long-held record per segment does not pin the segment."""
    seg = 64 << 10
    j = Journal(tmp_path, segment_bytes=seg, max_bytes=2 << 20)
    j.open()
    held: list[int] = []
    worst = 0.0
    for i in range(2000):  # ~16 MB written through a 2 MiB journal: refused without compaction
        out, pin = j.append(
            [(KIND_OUT_TRACES, os.urandom(8000), 10), (KIND_HELD_TRACES, b"h%d" % i, 1)]
        )
        j.sync(pin)
        j.mark_done([out])
        held.append(pin)
        worst = max(worst, j.disk_bytes - 2 * (j.pending_bytes + 36 * len(held)) - seg)
    assert worst <= 8000 + 72  # one append's overshoot at most, before the next rotation
    assert j.compacted_segments > 0
    j.sync(held[-1])
    # A crash right now: every held record comes back exactly once, none lost, none doubled.
    again = Journal(tmp_path, segment_bytes=seg)
    replay = again.open()
    assert sorted(r.seq for r, _ in replay.held) == held
    assert [p for _, p in sorted(replay.held, key=lambda x: x[0].seq)] == [
        b"h%d" % i for i in range(2000)
    ]
    again.close()


def test_a_crash_between_copy_and_removal_keeps_one_copy(tmp_path: Path) -> None:
    seg = 4096
    j = Journal(tmp_path, segment_bytes=seg)
    j.open()
    (pin,) = j.append([(KIND_HELD_TRACES, b"pinned", 1)])
    (out,) = j.append([(KIND_OUT_TRACES, os.urandom(3000), 1)])
    j.sync(out)
    j.mark_done([out])
    (first,) = tmp_path.glob("seg-*.log")
    before = first.read_bytes()
    j.sync(j.append([(KIND_OUT_TRACES, os.urandom(3000), 1)])[-1])  # rotates, compacts
    assert j.compacted_segments == 1 and not first.exists()
    # Put the removed segment back, as if the process died before the unlink.
    first.write_bytes(before)
    again = Journal(tmp_path, segment_bytes=seg)
    replay = again.open()
    assert [(r.seq, p) for r, p in replay.held] == [(pin, b"pinned")]
    assert replay.outbound == 1
    again.close()
    # ... and the duplicate was marked done: a third start still sees one copy.
    third = Journal(tmp_path, segment_bytes=seg)
    assert [r.seq for r, _ in third.open().held] == [pin]
    third.close()
