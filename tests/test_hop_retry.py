"""A sender's retry within ``release_grace`` leaves nothing held (issue 13, defect 3), end to end.

The same request twice, 0.3 s apart, to the real hop; a clean stop; a restart on the same data
directory: nothing is replayed and nothing is sent again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from tests.test_service_support import TRACE_EXPORT, HopProcess, Sink


def _run_request() -> bytes:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    run = Span(trace_id=b"\x0a" * 16, span_id=b"\x01" * 8, name="invoke_agent a")
    run.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = "invoke_agent"
    run.attributes.add(key=semconv.RUN_ID).value.string_value = "r-retry"
    chat = Span(trace_id=b"\x0a" * 16, span_id=b"\x02" * 8, parent_span_id=b"\x01" * 8, name="c")
    chat.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = "chat"
    spans.extend([chat, run])
    return req.SerializeToString()


def test_the_same_request_twice_leaves_nothing_held_after_a_clean_stop(tmp_path: Path) -> None:
    sink = Sink().start()
    data = tmp_path / "data"
    args = ("--set", "processing.release_grace=1s")
    try:
        hop = HopProcess(data, sink.endpoint, *args).start()
        with grpc.insecure_channel(hop.grpc) as channel:
            export = channel.unary_unary(TRACE_EXPORT, request_serializer=None)
            export(_run_request(), timeout=10)
            time.sleep(0.3)
            export(_run_request(), timeout=10)  # the sender's retry, within release_grace
        assert sink.wait_for(lambda: len(sink.spans()) >= 2, timeout=15)
        time.sleep(0.5)
        assert hop.terminate() == 0
        delivered = len(sink.spans())
        assert not list((data / "queue").glob("seg-*.log")) or _pending(hop) == 0
        again = HopProcess(data, sink.endpoint, *args).start()
        time.sleep(2.0)
        assert again.terminate() == 0
        assert len(sink.spans()) == delivered  # nothing was sent again
        recovered = [
            json.loads(line)
            for line in again.stderr().splitlines()
            if '"recovered from the journal"' in line
        ]
        assert recovered == [], recovered
    finally:
        sink.stop()


def _pending(hop: HopProcess) -> int:
    stopped = [
        json.loads(line)
        for line in hop.stderr().splitlines()
        if '"otel-footprint serve stopped"' in line
    ]
    return int(stopped[-1]["pending_batches"])
