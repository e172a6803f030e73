"""A bounded kill -9 soak of a real ``otel-footprint serve`` on loopback (issue 22).

A sender exports requests that each carry a long run and a few short ones (so decisions end out
of order, as they do under load) while the hop is killed with SIGKILL after a random uptime and
started again on the same port and data directory, several times; then the last instance gets
time to drain. Every span the hop acknowledged must reach the sink. Seeded, so a failure replays.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from pathlib import Path

import grpc
import pytest
from journal_faults import Spans, request
from servers import free_ports
from test_service_support import TRACE_EXPORT, HopProcess, Sink

KILLS = 6
LONG_RUN = 200
"""Model calls in each request's long run: its decision outlasts a group commit."""
SENDERS = 2
SEED = 22


@pytest.mark.slow
def test_kill_9_under_load_loses_no_acknowledged_span(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    sink = Sink().start()
    (port,) = free_ports(1)
    args = ("--set", "processing.release_grace=200ms", "--set", "processing.max_wait=3s")
    data = tmp_path / "data"
    hop = HopProcess(data, sink.endpoint, *args, grpc=f"127.0.0.1:{port}").start()
    make, traces = Spans(), itertools.count(1)
    acked: set[bytes] = set()
    sent = 0
    stop = threading.Event()

    def sender() -> None:
        nonlocal sent
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        export = channel.unary_unary(TRACE_EXPORT)
        while not stop.is_set():
            spans = []
            for size in (LONG_RUN, 1, 2, 1):  # one long run, three short ones, one request
                spans += make.run(next(traces), size, pad=30)
            body = request(*spans).SerializeToString()
            sent += len(spans)
            try:
                export(body, timeout=2.0)
            except grpc.RpcError:
                time.sleep(0.05)  # down or refusing: not acknowledged
                continue
            acked.update(s.span_id for s in spans)
        channel.close()

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(SENDERS)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 3.0))
            hop.kill()
            hop = HopProcess(data, sink.endpoint, *args, grpc=f"127.0.0.1:{port}").start()
        time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join(10)
        assert len(acked) > 1000, f"too little load to mean anything ({len(acked)} acked)"

        def delivered() -> set[bytes]:
            return {bytes(s.span_id) for s in sink.spans()}

        sink.wait_for(lambda: acked <= delivered(), 90)
        lost = acked - delivered()
        print(
            f"\nkill -9 soak: {KILLS} kills, {sent} spans sent, {len(acked)} acknowledged, "
            f"{len(lost)} lost"
        )
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged spans never arrived"
        assert hop.terminate() == 0, hop.stderr()
    finally:
        stop.set()
        hop.kill()
        sink.stop()
