"""The hop's journal against SQLite in WAL mode, on the hop's write pattern (issue 22).

Both engines get the same work: each request is one held record appended and made durable before
its acknowledgement (fsync); every 64 requests, the release worker's group commit appends their 64
outbound records in one durable write and retires the 64 held ones, and the forwarder then
retires the 64 outbound ones. SQLite keeps one row per record (``journal_mode=WAL``,
``synchronous=FULL``, the setting under which a commit is durable when it returns; a retired row is
deleted so its space is reused). Measured per engine:

* requests per wall second and per CPU second of this process;
* fsyncs per request (``--strace``: the run is repeated under ``strace -f -c``, which counts
  ``fsync`` / ``fdatasync`` calls);
* recovery: open a store left with ``--pending`` held records (a crash) and read every pending
  record back (what a restart replays);
* a damaged byte: one byte flipped at 10%, 30%, ... 90% of the largest file (a fresh store each),
  then recovery again: what is lost, and whether the damage is noticed at all.

Usage::

    .venv/bin/python benchmarks/bench_journal_engines.py [--requests 3000] [--pending 10000]
        [--payload 2048] [--strace]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from otel_footprint.service.journal import KIND_HELD_TRACES, KIND_OUT_TRACES, Journal

GROUP = 64
DAMAGE_AT = (0.1, 0.3, 0.5, 0.7, 0.9)
"""Where in the largest file the flipped byte goes, one fresh store each."""


def _payload(i: int, size: int) -> bytes:
    return (i.to_bytes(8, "big") * (size // 8 + 1))[:size]


# -- the two engines, one interface ------------------------------------------------------------


class Segments:
    def __init__(self, directory: Path) -> None:
        self.journal = Journal(directory, segment_bytes=16 << 20)
        self.replay = self.journal.open()

    def ack(self, payload: bytes) -> int:
        (seq,) = self.journal.append([(KIND_HELD_TRACES, payload, 1)])
        self.journal.sync(seq)
        return seq

    def commit(self, held: list[int], outbound: list[bytes]) -> list[int]:
        seqs = self.journal.append([(KIND_OUT_TRACES, p, 1) for p in outbound], admit=False)
        self.journal.sync(seqs[-1])
        self.journal.mark_done(held)
        return seqs

    def forwarded(self, seqs: list[int]) -> None:
        self.journal.mark_done(seqs)

    def pending(self) -> int:
        return len(self.replay.held) + self.replay.outbound

    def close(self) -> None:
        self.journal.close()


class Sqlite:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(directory / "journal.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY, kind INTEGER, "
            "count INTEGER, payload BLOB)"
        )
        # What a restart replays: every pending record, read back.
        self.replayed = self.db.execute("SELECT seq, kind, count, payload FROM records").fetchall()

    def ack(self, payload: bytes) -> int:
        cur = self.db.execute(
            "INSERT INTO records (kind, count, payload) VALUES (?, 1, ?)",
            (KIND_HELD_TRACES, payload),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def commit(self, held: list[int], outbound: list[bytes]) -> list[int]:
        seqs = []
        self.db.execute("BEGIN")
        for p in outbound:
            cur = self.db.execute(
                "INSERT INTO records (kind, count, payload) VALUES (?, 1, ?)", (KIND_OUT_TRACES, p)
            )
            assert cur.lastrowid is not None
            seqs.append(cur.lastrowid)
        self.db.executemany("DELETE FROM records WHERE seq = ?", [(s,) for s in held])
        self.db.execute("COMMIT")
        return seqs

    def forwarded(self, seqs: list[int]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("DELETE FROM records WHERE seq = ?", [(s,) for s in seqs])
        self.db.execute("COMMIT")

    def pending(self) -> int:
        return len(self.replayed)

    def close(self) -> None:
        self.db.close()


Engine = Callable[[Path], Segments | Sqlite]
ENGINES: dict[str, Engine] = {"segments": Segments, "sqlite-wal": Sqlite}


# -- measurements ------------------------------------------------------------------------------


def workload(engine: Segments | Sqlite, requests: int, size: int) -> None:
    held: list[int] = []
    for i in range(requests):
        held.append(engine.ack(_payload(i, size)))
        if len(held) == GROUP:
            out = engine.commit(held, [_payload(i, size)] * GROUP)
            engine.forwarded(out)
            held = []


def throughput(name: str, directory: Path, requests: int, size: int) -> dict[str, float]:
    engine = ENGINES[name](directory)
    wall, cpu = time.perf_counter(), time.process_time()
    workload(engine, requests, size)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    engine.close()
    return {
        "requests_per_second": requests / wall,
        "requests_per_cpu_second": requests / cpu,
        "cpu_ms_per_request": 1000 * cpu / requests,
    }


def fsyncs(name: str, requests: int, size: int) -> float:
    """fsync + fdatasync calls per request, counted by strace on a child running the workload."""
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as d:
        out = Path(d) / "strace.txt"
        child = [sys.executable, __file__, "--child", name, "--requests", str(requests)]
        child += ["--payload", str(size), "--dir", str(Path(d) / "store")]
        strace = ["strace", "-f", "-c", "-o", str(out), "-e", "trace=fsync,fdatasync"]
        subprocess.run([*strace, *child], check=True)
        calls = 0
        for line in out.read_text().splitlines():
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$", line)
            if m:
                calls += int(m.group(1))
        return calls / requests


def recovery(name: str, directory: Path, pending: int, size: int) -> dict[str, float]:
    engine = ENGINES[name](directory)
    for i in range(pending):
        if name == "segments":
            assert isinstance(engine, Segments)
            engine.journal.append([(KIND_HELD_TRACES, _payload(i, size), 1)])
        else:
            engine.ack(_payload(i, size))
    if isinstance(engine, Segments):
        engine.journal.sync(pending)
    engine.close()  # segments: as a crash leaves them (pending records stay)
    wall, cpu = time.perf_counter(), time.process_time()
    again = ENGINES[name](directory)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    found = again.pending()
    again.close()
    return {"recovery_seconds": wall, "recovery_cpu_seconds": cpu, "recovered": found}


def damage(name: str, directory: Path, pending: int, size: int, at: float) -> dict[str, object]:
    """One byte flipped at fraction ``at`` of the store's largest file, then recovery."""
    recovery(name, directory, pending, size)  # leaves `pending` records on disk
    if name == "sqlite-wal":
        db = sqlite3.connect(directory / "journal.sqlite")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the rows into the main file, as at rest
        db.close()
    target = max((p for p in directory.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = bytearray(target.read_bytes())
    data[int(len(data) * at)] ^= 0x40
    target.write_bytes(bytes(data))
    try:
        engine = ENGINES[name](directory)
    except sqlite3.DatabaseError as exc:
        return {"recovered": 0, "error": str(exc)}
    wrong = 0
    if isinstance(engine, Sqlite):
        for seq, _, _, payload in engine.replayed:
            wrong += payload != _payload(seq - 1, size)
        check = engine.db.execute("PRAGMA integrity_check").fetchone()[0]
        found = engine.pending()
        engine.close()
        return {"recovered": found, "silently_wrong": wrong, "integrity_check": check}
    found = engine.pending()
    lost = len(engine.replay.damaged)
    engine.close()
    return {"recovered": found, "silently_wrong": 0, "damaged_regions_set_aside": lost}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--payload", type=int, default=2048, help="bytes per record")
    parser.add_argument("--strace", action="store_true", help="count fsyncs per request")
    parser.add_argument("--child", choices=sorted(ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        workload(ENGINES[args.child](args.dir), args.requests, args.payload)
        return 0
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as d:
        for name in ENGINES:
            row: dict[str, object] = {}
            row.update(throughput(name, Path(d) / name / "t", args.requests, args.payload))
            if args.strace and shutil.which("strace"):
                row["fsyncs_per_request"] = fsyncs(name, args.requests, args.payload)
            row.update(recovery(name, Path(d) / name / "r", args.pending, args.payload))
            row["damaged_byte"] = {
                f"at {at:.0%}": damage(
                    name, Path(d) / name / f"d{at}", args.pending, args.payload, at
                )
                for at in DAMAGE_AT
            }
            results[name] = row
    print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
