"""``otel-footprint serve`` as a subprocess between the OpenTelemetry SDK and a real OTLP receiver.

Covers the issue's acceptance: annotated spans downstream over gRPC and HTTP (span events and
log-record events), bad input never stops the server, health / metrics / query service, and a
graceful shutdown that flushes what the hop holds.
"""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_service_support import (
    TRACE_EXPORT,
    HopProcess,
    HttpSink,
    Sink,
    attrs,
    by_id,
    emit_plain,
    emit_run,
    key_values,
    sdk_client,
)

from otel_footprint import semconv


@pytest.fixture(scope="module")
def sink() -> Iterator[Sink]:
    s = Sink().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def hop(sink: Sink, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopProcess]:
    base = tmp_path_factory.mktemp("hop")
    proc = HopProcess(
        base / "data",
        sink.endpoint,
        "--set",
        "processing.release_grace=500ms",
        "--set",
        "receivers.otlp.protocols.grpc.max_request_size=1MiB",
        "--set",
        "receivers.otlp.protocols.http.max_request_size=1MiB",
    ).start()
    yield proc
    code = proc.terminate()
    assert code == 0, proc.stderr()


def _run_span(sink: Sink | HttpSink, run_span_id: str, timeout: float = 15.0) -> Any:
    def arrived() -> bool:
        return any(
            s.span_id.hex() == run_span_id and semconv.RUN_COMPLETE in attrs(s)
            for s in sink.spans()
        )

    assert sink.wait_for(arrived, timeout), f"run span {run_span_id} never arrived annotated"
    return next(s for s in sink.spans() if s.span_id.hex() == run_span_id)


def _trace_spans(sink: Sink | HttpSink, trace_id: str) -> list[Any]:
    return [s for s in sink.spans() if s.trace_id.hex() == trace_id]


def _http(
    url: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body if method == "POST" else None, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, _lower(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, _lower(err.headers.items()), err.read()


def _lower(items: Any) -> dict[str, str]:
    """Header names are case-insensitive: keyed lower-cased."""
    return {str(k).lower(): str(v) for k, v in items}


def _declared_oversize(address: str, length: int) -> int:
    """Send only the headers of an oversized request: the hop answers 413 without reading the body."""
    import http.client

    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("POST", "/v1/traces")
    conn.putheader("Content-Type", "application/x-protobuf")
    conn.putheader("Content-Length", str(length))
    conn.endheaders()
    conn.send(b"\x00" * 1024)
    status = conn.getresponse().status
    conn.close()
    return status


# ---------------------------------------------------------------------------------------------


def test_grpc_sdk_spans_arrive_annotated_and_plain_spans_pass(hop: HopProcess, sink: Sink) -> None:
    client = sdk_client(hop.grpc, "grpc")
    _, plain_span = emit_plain(client.tracer)
    client.flush()
    # A plain span is forwarded at once: it must not wait for any run.
    assert sink.wait_for(lambda: plain_span in by_id(sink.spans()), 5)

    trace_id, run_span_id = emit_run(client.tracer, "run-grpc", passes=3)
    client.flush()
    run_span = _run_span(sink, run_span_id)
    run_attrs = attrs(run_span)
    assert run_attrs[semconv.RUN_ID] == "run-grpc"
    assert run_attrs[semconv.RUN_PASSES] == 3
    assert run_attrs[semconv.RUN_MODE] == semconv.MODE_SHADOW
    assert run_attrs[semconv.RUN_COMPLETE] is True
    assert semconv.EV_EVALUATION_RESULT in [e.name for e in run_span.events]
    spans = _trace_spans(sink, trace_id)
    passes = [s for s in spans if s.name.startswith("chat")]
    assert len(passes) == 3
    for p in passes:
        assert attrs(p)[semconv.ENG_ENGAGED_MAPS] == ("skills",)
    assert len(spans) == 5  # run + 3 passes + 1 tool, each exactly once
    plain = by_id(sink.spans())[plain_span][0]
    assert not any(k.startswith(semconv.PREFIX) for k in attrs(plain))
    client.shutdown()


def test_bad_input_never_stops_the_server(hop: HopProcess, sink: Sink) -> None:
    base = f"http://{hop.http}"
    proto = {"Content-Type": "application/x-protobuf"}
    # Malformed protobuf -> 400 with a google.rpc.Status body.
    status, _, body = _http(base + "/v1/traces", b"\xff\xff\xff\xff", proto)
    assert status == 400
    assert status_pb2.Status.FromString(body).message
    # Wrong content type -> 415; bad JSON -> 400; bad gzip -> 400; GET -> 405; unknown path -> 404.
    assert _http(base + "/v1/traces", b"hello", {"Content-Type": "text/plain"})[0] == 415
    assert _http(base + "/v1/traces", b"{oops", {"Content-Type": "application/json"})[0] == 400
    assert _http(base + "/v1/traces", b"xx", {**proto, "Content-Encoding": "gzip"})[0] == 400
    assert _http(base + "/v1/traces", b"", proto, method="GET")[0] == 405
    assert _http(base + "/v2/nothing", b"", proto)[0] == 404
    # Oversized bodies -> 413, compressed or not.
    assert _declared_oversize(hop.http, 2 << 20) == 413
    bomb = gzip.compress(b"\x00" * (3 << 20))
    assert _http(base + "/v1/traces", bomb, {**proto, "Content-Encoding": "gzip"})[0] == 413

    channel = grpc.insecure_channel(hop.grpc)
    export = channel.unary_unary(TRACE_EXPORT, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as err:
        export(b"\xff\xff\xff\xff", timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        export(b"\x0a" + b"\xff" * 5 + b"\x7f" * (2 << 20), timeout=5)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    # Garbage footprint attributes: the spans flow on (unannotated where unreadable).
    garbage = _garbage_run()
    assert export(garbage.SerializeToString(), timeout=5) == b""
    garbage_run = garbage.resource_spans[0].scope_spans[0].spans[0]
    assert sink.wait_for(lambda: garbage_run.span_id.hex() in by_id(sink.spans()), 10)
    channel.close()

    # ... and readable spans still flow, annotated, through both receivers.
    client = sdk_client(hop.http, "http")
    _, run_span_id = emit_run(client.tracer, "run-after-garbage")
    client.flush()
    _run_span(sink, run_span_id)
    client.shutdown()
    status, _, body = _http(f"http://{hop.telemetry}/health", method="GET")
    assert status == 200 and json.loads(body)["status"] == "ok"
    metrics = hop.metrics()
    assert (
        metrics['otel_footprint_requests_rejected_total{transport="http",reason="malformed"}'] >= 3
    )
    assert (
        metrics['otel_footprint_requests_rejected_total{transport="grpc",reason="malformed"}'] >= 1
    )


def _garbage_run() -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    trace = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
    run = scope.spans.add(trace_id=trace, span_id=b"\x01" * 8, name="invoke_agent x")
    run.attributes.extend(
        key_values(
            gen_ai__operation__name="invoke_agent", footprint__run__id=["not", "a", "string"]
        )
    )
    mounted = run.events.add(name=semconv.EV_MAPS_MOUNTED)
    mounted.attributes.extend(key_values(footprint__maps="{not json", footprint__renewal_grace="x"))
    chat = scope.spans.add(
        trace_id=trace, span_id=b"\x02" * 8, parent_span_id=b"\x01" * 8, name="chat"
    )
    chat.attributes.extend(
        key_values(gen_ai__operation__name="chat", footprint__pass__iteration="abc")
    )
    ev = chat.events.add(name=semconv.EV_CONTEXT_EVALUATED)
    ev.attributes.extend(key_values(footprint__cursor_move="[[[", footprint__active_ids=7))
    bad_event = chat.events.add(name="agentfootprint.context.injected")
    bad_event.attributes.add(key="footprint.chars")  # a key with no value at all
    return req


def test_health_and_prometheus_metrics(hop: HopProcess) -> None:
    status, headers, body = _http(f"http://{hop.telemetry}/health", method="GET")
    assert status == 200
    health = json.loads(body)
    assert health["status"] == "ok" and "runs_held" in health
    status, headers, body = _http(f"http://{hop.telemetry}/metrics", method="GET")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    assert "# TYPE otel_footprint_spans_received_total counter" in text
    assert "otel_footprint_decision_latency_seconds_bucket" in text


def test_self_metrics_are_pushed_as_otlp_metrics(tmp_path: Path) -> None:
    sink = Sink().start()
    proc = HopProcess(
        tmp_path / "data",
        sink.endpoint,
        "--set",
        f"service.telemetry.metrics.otlp.endpoint={sink.endpoint}",
        "--set",
        "service.telemetry.metrics.otlp.interval=200ms",
    ).start()
    try:
        wanted = {
            "otel_footprint.spans.forwarded",
            "otel_footprint.runs.held",
            "otel_footprint.queue.bytes",
        }
        assert sink.wait_for(lambda: wanted <= sink.metric_names, 10), sink.metric_names
    finally:
        assert proc.terminate() == 0, proc.stderr()
        sink.stop()


def test_query_service_answers_by_run_id_and_streams_verdicts(hop: HopProcess, sink: Sink) -> None:
    from otel_footprint.service.proto_gen import footprint_query_pb2 as pb
    from otel_footprint.service.proto_gen import footprint_query_pb2_grpc as pb_grpc

    client = sdk_client(hop.grpc, "grpc")
    _, run_span_id = emit_run(client.tracer, "run-query", passes=2)
    client.flush()
    _run_span(sink, run_span_id)
    channel = grpc.insecure_channel(hop.grpc)
    stub = pb_grpc.RunQueryStub(channel)
    response = stub.GetRun(pb.GetRunRequest(run_id="run-query"), timeout=5)
    (leg,) = response.legs
    assert leg.run_id == "run-query" and leg.run_span_id == run_span_id
    assert leg.mode == "shadow" and leg.complete and len(leg.passes) == 2
    assert "decided-delivered" in leg.checks
    with pytest.raises(grpc.RpcError) as err:
        stub.GetRun(pb.GetRunRequest(run_id="no-such-run"), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    stream = stub.StreamVerdicts(pb.StreamVerdictsRequest(replay_recent=1), timeout=20)
    first = next(stream)
    assert first.run_id == "run-query"
    emit_run(client.tracer, "run-streamed", passes=1)
    client.flush()
    assert next(stream).run_id == "run-streamed"
    stream.cancel()
    channel.close()
    client.shutdown()


def test_http_receiver_log_events_and_http_forwarding(tmp_path: Path) -> None:
    sink = HttpSink().start()
    proc = HopProcess(
        tmp_path / "data",
        sink.url,
        "--forward-protocol",
        "http/protobuf",
        "--set",
        "processing.release_grace=700ms",
    ).start()
    try:
        client = sdk_client(proc.http, "http")
        trace_id, run_span_id = emit_run(client.tracer, "run-logs", passes=2, as_logs=client.logger)
        client.flush()
        _run_span(sink, run_span_id)
        passes = [s for s in _trace_spans(sink, trace_id) if s.name.startswith("chat")]
        assert len(passes) == 2
        for p in passes:
            # The engagement came from events that arrived as log records, joined to the span.
            assert attrs(p)[semconv.ENG_ENGAGED_MAPS] == ("skills",)
            assert not [e for e in p.events if e.name == semconv.EV_CONTEXT_EVALUATED]
        # The log records themselves are forwarded too.
        assert sink.wait_for(lambda: len(sink.log_records()) >= 4, 10)
        names = {r.event_name for r in sink.log_records()}
        assert semconv.EV_CONTEXT_EVALUATED in names
        # OTLP/JSON in, annotated protobuf out.
        json_body = json.dumps(_json_run()).encode()
        status, _, body = _http(
            f"http://{proc.http}/v1/traces", json_body, {"Content-Type": "application/json"}
        )
        assert (status, body) == (200, b"{}")
        _run_span(sink, "1111111111111111")
        client.shutdown()
    finally:
        assert proc.terminate() == 0, proc.stderr()
        sink.stop()


def _json_run() -> dict[str, Any]:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    op = {"key": semconv.GEN_AI_OPERATION_NAME}
    return {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace,
                                "spanId": "2222222222222222",
                                "parentSpanId": "1111111111111111",
                                "name": "chat m",
                                "startTimeUnixNano": "10",
                                "endTimeUnixNano": "20",
                                "attributes": [{**op, "value": {"stringValue": "chat"}}],
                            },
                            {
                                "traceId": trace,
                                "spanId": "1111111111111111",
                                "name": "invoke_agent a",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "30",
                                "attributes": [
                                    {**op, "value": {"stringValue": "invoke_agent"}},
                                    {"key": semconv.RUN_ID, "value": {"stringValue": "run-json"}},
                                ],
                            },
                        ]
                    }
                ]
            }
        ]
    }


def test_sigterm_flushes_what_the_hop_holds(tmp_path: Path) -> None:
    sink = Sink().start()
    proc = HopProcess(
        tmp_path / "data",
        sink.endpoint,
        "--set",
        "processing.release_grace=60s",
        "--set",
        "processing.max_wait=10m",
    ).start()
    try:
        client = sdk_client(proc.grpc, "grpc")
        done_trace, done_run = emit_run(client.tracer, "run-finished", passes=1)
        # An unfinished run: only its model call has ended (its run span never ends).
        from opentelemetry import trace as trace_api

        tracer = client.tracer
        open_run = tracer.start_span("invoke_agent never-ends")
        with (
            trace_api.use_span(open_run, end_on_exit=False),
            tracer.start_as_current_span(
                "chat m", attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT}
            ) as chat,
        ):
            chat_id = format(chat.get_span_context().span_id, "016x")
        client.flush()
        client.shutdown()
        metrics = proc.metrics()
        assert metrics["otel_footprint_spans_held"] == 4  # nothing released on its own yet
        assert proc.terminate() == 0, proc.stderr()
        spans = by_id(sink.spans())
        assert attrs(spans[done_run][0])[semconv.RUN_COMPLETE] is True
        assert "shutdown" in attrs(spans[chat_id][0])[semconv.RUN_REASONS]
        assert len(_trace_spans(sink, done_trace)) == 3
    finally:
        proc.kill()
        sink.stop()


def test_a_second_hop_cannot_share_the_data_directory(hop: HopProcess, sink: Sink) -> None:
    other = HopProcess(hop.data_dir, sink.endpoint)
    with pytest.raises(AssertionError, match="in use by another otel-footprint"):
        other.start(timeout=20)


def test_a_full_queue_answers_retry_later_with_retry_information(tmp_path: Path) -> None:
    import socket

    from google.rpc import error_details_pb2  # type: ignore[import-untyped]

    with socket.socket() as s:  # a next hop that is not there: the queue only grows
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    proc = HopProcess(
        tmp_path / "data",
        dead,
        "--set",
        "exporters.otlp.queue.max_size=64KiB",
        "--set",
        "exporters.otlp.queue.batch_max_size=16KiB",
    ).start()
    try:
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        for i in range(40):
            scope.spans.add(
                trace_id=bytes([i + 1]) * 16, span_id=bytes([i + 1]) * 8, name="GET /" + "x" * 200
            )
        body = request.SerializeToString()
        proto = {"Content-Type": "application/x-protobuf"}
        statuses = [_http(f"http://{proc.http}/v1/traces", body, proto) for _ in range(12)]
        codes = [s for s, _, _ in statuses]
        assert 200 in codes and 503 in codes
        refused = next(h for s, h, _ in statuses if s == 503)
        assert int(refused["retry-after"]) >= 1

        channel = grpc.insecure_channel(proc.grpc)
        export = channel.unary_unary(
            TRACE_EXPORT, request_serializer=None, response_deserializer=None
        )
        with pytest.raises(grpc.RpcError) as err:
            export(body, timeout=5)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        trailers = dict(err.value.trailing_metadata())
        info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert info.retry_delay.seconds >= 1
        assert "grpc-status-details-bin" in trailers
        channel.close()
        status, _, health = _http(f"http://{proc.telemetry}/health", method="GET")
        assert status == 200 and json.loads(health)["forward_last_error"]
    finally:
        # The undeliverable batches stay in the journal; stop without waiting the full deadline.
        proc.kill()


def _leg_of(address: str, run_id: str) -> Any:
    from otel_footprint.service.proto_gen import footprint_query_pb2 as pb
    from otel_footprint.service.proto_gen import footprint_query_pb2_grpc as pb_grpc

    with grpc.insecure_channel(address) as channel:
        (leg,) = (
            pb_grpc.RunQueryStub(channel).GetRun(pb.GetRunRequest(run_id=run_id), timeout=5).legs
        )
    return leg


def test_witness_policy_and_account_lines_reach_spans_and_query_service(
    hop: HopProcess, sink: Sink, tmp_path: Path
) -> None:
    """``processing.witness: hash`` leaves the user's words ("refund") nowhere the hop writes: not
    on the spans, not in the query service's account; ``account_lines: false`` drops the lines."""
    from otel_footprint.annotate.form import hash_witness

    inputs = {semconv.EV_CONTEXT_EVALUATED, semconv.EV_CONTEXT_INJECTED, semconv.EV_MAPS_MOUNTED}

    def written(spans: list[Any]) -> bytes:
        """What the hop wrote: every attribute and event but the agent's own input events (which
        carry the words as the agent sent them)."""
        out = b""
        for span in spans:
            out += b"".join(kv.SerializeToString() for kv in span.attributes)
            out += b"".join(e.SerializeToString() for e in span.events if e.name not in inputs)
        return out

    # The default hop keeps them: the words are there to be hidden.
    client = sdk_client(hop.grpc, "grpc")
    trace_id, run_span_id = emit_run(client.tracer, "run-witness-kept", passes=2)
    client.flush()
    client.shutdown()
    kept = _run_span(sink, run_span_id)
    assert b"refund" in written(_trace_spans(sink, trace_id))
    assert any(e.name == semconv.EV_ACCOUNT_LINE for e in kept.events)
    assert "refund" in str(_leg_of(hop.grpc, "run-witness-kept"))

    private_sink = Sink().start()
    try:
        with (
            HopProcess(
                tmp_path / "data",
                private_sink.endpoint,
                "--set",
                "processing.release_grace=300ms",
                "--set",
                "processing.witness=hash",
                "--set",
                "processing.account_lines=false",
            )
            .start()
            .stopped_cleanly() as private
        ):
            client = sdk_client(private.grpc, "grpc")
            trace_id, run_span_id = emit_run(client.tracer, "run-witness-hashed", passes=2)
            client.flush()
            client.shutdown()
            run_span = _run_span(private_sink, run_span_id)
            spans = _trace_spans(private_sink, trace_id)
            hashed = hash_witness("refund").encode()
            assert b"refund" not in written(spans) and hashed in written(spans)
            assert not any(e.name == semconv.EV_ACCOUNT_LINE for e in run_span.events)
            assert semconv.CHECK_DECIDED_DELIVERED in attrs(run_span)
            leg = _leg_of(private.grpc, "run-witness-hashed")
            assert "refund" not in str(leg)
            witnesses = {c.witness for p in leg.passes for c in p.changes if c.witness}
            assert witnesses == {hash_witness("refund")}
    finally:
        private_sink.stop()
