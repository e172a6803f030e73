"""Every request answered with the OTLP-specified status, and the hop's log stays JSON (issue 13, 6).

Against the real hop subprocess over gRPC and HTTP: the campaign's named requests, then a bounded
run of the seeded fuzz generator of ``benchmarks/bench_hop_fuzz.py`` (the issue's figure is
100,000 requests: ``--requests 100000``).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from tests.test_service_support import TRACE_EXPORT, HopProcess, Sink

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_hop_fuzz


@pytest.fixture()
def hop(sink: Sink, tmp_path: Path) -> Iterator[HopProcess]:
    h = HopProcess(
        tmp_path / "data", sink.endpoint, "--set", "processing.release_grace=100ms"
    ).start()
    yield h
    h.kill()


def _run(
    trace: int, op_value: object = None, iteration: str | None = None
) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    tid = trace.to_bytes(16, "big")
    run = Span(trace_id=tid, span_id=b"\x01" * 8, name="invoke_agent a")
    run.attributes.add(key=semconv.GEN_AI_OPERATION_NAME).value.string_value = "invoke_agent"
    run.attributes.add(key=semconv.RUN_ID).value.string_value = "r-answers"
    chat = Span(trace_id=tid, span_id=b"\x02" * 8, parent_span_id=b"\x01" * 8, name="c")
    op = chat.attributes.add(key=semconv.GEN_AI_OPERATION_NAME)
    if op_value == "kvlist":
        op.value.kvlist_value.values.add(key="name").value.string_value = "chat"
    else:
        op.value.string_value = "chat"
    if iteration is not None:
        chat.attributes.add(key=semconv.PASS_ITERATION).value.string_value = iteration
    spans.extend([chat, run])
    return req


def _post(hop: HopProcess, body: bytes, ctype: str) -> int:
    req = urllib.request.Request(
        f"http://{hop.http}/v1/traces", data=body, headers={"Content-Type": ctype}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def _log_lines(hop: HopProcess) -> list[str]:
    return [line for line in hop.stderr().splitlines() if line.strip()]


def test_the_campaigns_requests_get_otlp_answers_and_json_log_lines(
    hop: HopProcess, sink: Sink
) -> None:
    channel = grpc.insecure_channel(hop.grpc)
    export = channel.unary_unary(TRACE_EXPORT, request_serializer=None)
    # gen_ai.operation.name as a kvlist: a name of no role, not a TypeError (was UNKNOWN).
    export(_run(1, "kvlist").SerializeToString(), timeout=10)
    assert _post(hop, _run(2, "kvlist").SerializeToString(), "application/x-protobuf") == 200
    # A 5,000-digit footprint.pass.iteration: decided with a reason, never a decision error.
    export(_run(3, iteration="9" * 5000).SerializeToString(), timeout=10)
    channel.close()
    # JSON nested 1,000 deep in a 2 KB body: 400 (was an uncaught RecursionError).
    assert _post(hop, b"[" * 1000 + b"]" * 1000, "application/json") == 400
    assert _post(hop, b'{"a":' * 1000 + b"1" + b"}" * 1000, "application/json") == 400
    # A lone surrogate in a wrongly typed field: 400 (was a UnicodeEncodeError writing the error).
    assert _post(hop, b'{"resourceSpans": "\\ud800"}', "application/json") == 400
    assert _post(hop, b'{"resourceSpans": ["\\ud800x"]}', "application/json") == 400
    assert _post(hop, b'"\\ud800"', "application/json") == 400
    # A 5,000-digit number in a JSON body: 400.
    assert _post(hop, b'{"resourceSpans": [' + b"9" * 5000 + b"]}", "application/json") == 400
    assert sink.wait_for(lambda: len(sink.spans()) >= 6, timeout=15)
    metrics = hop.metrics()
    assert metrics.get("otel_footprint_decision_errors_total", 0) == 0
    hop.terminate()
    lines = _log_lines(hop)
    assert lines and all(json.loads(line) for line in lines)
    assert not any("Traceback" in line for line in lines)


def test_fuzzed_requests_are_all_answered_never_unknown_and_logged_as_json(
    hop: HopProcess,
) -> None:
    tally = bench_hop_fuzz.drive(hop.grpc, hop.http, seed=13, count=600)
    assert tally.bad == []
    assert tally.unanswered == 0
    assert tally.grpc_codes is not None and tally.http_codes is not None
    assert "UNKNOWN" not in tally.grpc_codes and "INTERNAL" not in tally.grpc_codes
    assert sum(tally.grpc_codes.values()) + sum(tally.http_codes.values()) == 600
    assert tally.http_codes.get(400, 0) > 0 and tally.grpc_codes.get("INVALID_ARGUMENT", 0) > 0
    assert hop.metrics().get("otel_footprint_decision_errors_total", 0) == 0
    hop.terminate()
    lines = _log_lines(hop)
    assert bench_hop_fuzz.non_json_lines("\n".join(lines)) == []


def test_refusals_and_early_releases_log_one_line_per_interval() -> None:
    import io
    import logging

    from otel_footprint.service import jsonlog

    out = io.StringIO()
    logger = logging.getLogger("otel_footprint.test.throttled")
    handler = logging.StreamHandler(out)
    handler.setFormatter(jsonlog.JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False
    try:
        throttled = jsonlog.Throttled(logger, interval=60.0)
        for i in range(1000):
            throttled.log(logging.WARNING, "overflow:runs", "released a trace early", {"n": i})
        throttled.log(logging.WARNING, "timeout:None", "released a trace early", {"n": -1})
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [line["n"] for line in lines] == [0, -1]
        throttled.interval = 0.0
        throttled.log(logging.WARNING, "overflow:runs", "released a trace early", {"n": 1000})
        last = json.loads(out.getvalue().splitlines()[-1])
        assert last["suppressed_since_last"] == 999
    finally:
        logger.removeHandler(handler)
