"""OTLP wire helpers and the Prometheus exposition: JSON ids, bounded gzip, error bodies, metrics text."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otlp_oracle import build_request
from prometheus_client.parser import text_string_to_metric_families

from otel_footprint import semconv
from otel_footprint.service.metrics import Counter, HopMetrics
from otel_footprint.service.otlp import (
    BadRequestError,
    decode_body,
    footprint_log_events,
    group_spans,
    gunzip_bounded,
    iter_spans,
    serialize_request,
    status_body,
)

TRACE_HEX = "5b8efff798038103d269b633813fc60c"
SPAN_HEX = "eee19b7ec3c1b174"


def _json_request() -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]
                    },
                    "scopeSpans": [
                        {
                            "scope": {"name": "s"},
                            "spans": [
                                {
                                    "traceId": TRACE_HEX,
                                    "spanId": SPAN_HEX,
                                    "parentSpanId": "",
                                    "name": "invoke_agent x",
                                    "kind": 1,
                                    "startTimeUnixNano": "1",
                                    "endTimeUnixNano": "2",
                                    "someFutureField": True,
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    ).encode()


def test_otlp_json_uses_hex_ids_and_ignores_unknown_fields() -> None:
    msg = decode_body("traces", _json_request(), "application/json")
    assert isinstance(msg, ExportTraceServiceRequest)
    ((_, span),) = list(iter_spans(msg))
    assert span.trace_id.hex() == TRACE_HEX and span.span_id.hex() == SPAN_HEX


@pytest.mark.parametrize(
    ("body", "ctype", "status"),
    [
        (b"\xff\xff\xff", "application/x-protobuf", 400),
        (b"{not json", "application/json", 400),
        (
            json.dumps(
                {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}
            ).encode(),
            "application/json",
            400,
        ),
        (b"", "text/plain", 415),
    ],
)
def test_bad_bodies_are_refused_with_the_otlp_status(body: bytes, ctype: str, status: int) -> None:
    with pytest.raises(BadRequestError) as err:
        decode_body("traces", body, ctype)
    assert err.value.http_status == status


def test_gzip_bodies_are_bounded_after_inflation() -> None:
    data = b"a" * 10_000
    assert gunzip_bounded(gzip.compress(data), 10_000) == data
    with pytest.raises(BadRequestError) as err:
        gunzip_bounded(gzip.compress(data), 9_999)
    assert err.value.http_status == 413
    with pytest.raises(BadRequestError):
        gunzip_bounded(b"not gzip at all", 100)


def test_error_bodies_follow_the_request_encoding() -> None:
    body, ctype = status_body(3, "bad", "application/x-protobuf")
    assert ctype == "application/x-protobuf"
    assert status_pb2.Status.FromString(body).message == "bad"
    body, ctype = status_body(3, "bad", "application/json; charset=utf-8")
    assert ctype == "application/json" and json.loads(body)["message"] == "bad"


def test_regrouping_keeps_resource_and_scope() -> None:
    msg = decode_body("traces", _json_request(), "application/json")
    assert isinstance(msg, ExportTraceServiceRequest)
    rebuilt = build_request(group_spans(list(iter_spans(msg))))
    assert rebuilt == msg


def test_footprint_log_events_need_a_span_and_a_footprint_name() -> None:
    req = ExportLogsServiceRequest()
    scope = req.resource_logs.add().scope_logs.add()
    good = scope.log_records.add(event_name=semconv.EV_CONTEXT_EVALUATED)
    good.trace_id, good.span_id = bytes.fromhex(TRACE_HEX), bytes.fromhex(SPAN_HEX)
    scope.log_records.add(event_name=semconv.EV_CONTEXT_EVALUATED)  # no span: not joinable
    other = scope.log_records.add(event_name="app.login")
    other.trace_id, other.span_id = good.trace_id, good.span_id
    by_attr = scope.log_records.add()
    by_attr.trace_id, by_attr.span_id = good.trace_id, good.span_id
    kv = by_attr.attributes.add(key=semconv.LOG_EVENT_NAME_ATTR)
    kv.value.string_value = semconv.EV_CONTEXT_INJECTED
    events = footprint_log_events(req)
    assert [e.event.name for e in events] == [
        semconv.EV_CONTEXT_EVALUATED,
        semconv.EV_CONTEXT_INJECTED,
    ]


def test_prometheus_text_format() -> None:
    metrics = HopMetrics()
    metrics.requests_rejected.inc(2, "http", 'a"b')
    metrics.queue_bytes.set_reader(lambda: 1.5)
    metrics.decision_latency.record(0.05)
    metrics.decision_latency.record(5.0)
    text = metrics.render_prometheus()
    assert "# TYPE otel_footprint_requests_rejected_total counter" in text
    assert 'otel_footprint_requests_rejected_total{reason="a\\"b",transport="http"} 2.0' in text
    assert "otel_footprint_late_spans_total 0.0" in text  # unlabelled: exposed from the start
    assert "otel_footprint_queue_bytes 1.5" in text
    assert 'otel_footprint_decision_latency_seconds_bucket{le="0.025"} 0.0' in text
    assert 'otel_footprint_decision_latency_seconds_bucket{le="0.05"} 1.0' in text
    assert 'otel_footprint_decision_latency_seconds_bucket{le="+Inf"} 2.0' in text
    assert "otel_footprint_decision_latency_seconds_count 2.0" in text
    for absent in ("_created", "target_info", "otel_scope"):
        assert absent not in text
    assert metrics.queue_bytes.value() == 1.5
    assert metrics.requests_rejected.value("http", 'a"b') == 2
    with pytest.raises(ValueError):
        metrics.requests_rejected.inc(-1, "http", "x")
    with pytest.raises(ValueError):
        metrics.requests_rejected.inc(1, "http")  # a label missing
    # Each hop has its own registry: a second one in the same process starts from nothing.
    assert "otel_footprint_requests_rejected" not in HopMetrics().render_prometheus()


def test_every_hop_metric_is_exposed_under_its_documented_name() -> None:
    rows = [m for m in vars(semconv).values() if isinstance(m, semconv.Metric)]
    hop_rows = [m for m in rows if m.name.startswith("otel_footprint.")]
    metrics = HopMetrics()
    for instrument in vars(metrics).values():
        if isinstance(instrument, Counter) and instrument.metric.attributes:
            instrument.inc(1, *("x",) * len(instrument.metric.attributes))
    metrics.decision_latency.record(0.01)
    metrics.release_delay.record(1.0)
    exposed = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in text_string_to_metric_families(metrics.render_prometheus())
    }
    expected = {
        m.name.replace(".", "_") + ("_total" if m.kind == "counter" else "") for m in hop_rows
    }
    assert exposed == expected and len(expected) == len(hop_rows) == 43
    deploy = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text()
    undocumented = sorted(n for n in expected if n.removeprefix("otel_footprint_") not in deploy)
    assert not undocumented, f"docs/deploy.md's /metrics list lacks {undocumented}"


def test_the_otlp_reader_sees_the_instruments_prometheus_shows() -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    metrics = HopMetrics(reader)
    metrics.spans_received.inc(7, "grpc")
    metrics.decision_latency.record(0.01)
    data = reader.get_metrics_data()
    assert data is not None
    names = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    received = names["otel_footprint.spans.received"]
    assert [(p.value, dict(p.attributes or {})) for p in received.data.data_points] == [
        (7, {"transport": "grpc"})
    ]
    assert names["otel_footprint.decision.latency.seconds"].unit == "s"
    assert (
        'otel_footprint_spans_received_total{transport="grpc"} 7.0' in metrics.render_prometheus()
    )
    metrics.shutdown()
    assert metrics.render_prometheus() == ""


def test_only_agent_input_events_make_a_span_carry_footprint_events() -> None:
    """The hop, the in-process buffer and reconstruction share one rule: a span annotated by an
    earlier hop (our output events only) is not held again; an agent's input event is."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from otel_footprint.runs.group import is_footprint_input_event
    from otel_footprint.service.otlp import has_footprint_events

    annotated = Span(name="chat")
    annotated.events.add(name=semconv.EV_ENGAGEMENT_PARKED)
    annotated.events.add(name=semconv.EV_ACCOUNT_LINE)
    assert not has_footprint_events(annotated)
    annotated.events.add(name=semconv.UPSTREAM_PREFIX + semconv.T_CONTEXT_EVALUATED)
    assert has_footprint_events(annotated)
    assert [is_footprint_input_event(n) for n in ("exception", "footprint.", "gen_ai.x")] == [
        False,
        False,
        False,
    ]


def test_spans_keep_their_own_resource_when_resources_share_a_prefix_up_to_a_zero_byte() -> None:
    """A resource's wire bytes often hold a zero byte (a false flag, an int 0, an empty string):
    regrouping must key resources by all their bytes, or two services whose resources agree up to
    that byte would be forwarded under one resource."""
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

    req = ExportTraceServiceRequest()
    for n, service in enumerate(("svc-a", "svc-b")):
        rs: ResourceSpans = req.resource_spans.add()
        flag = rs.resource.attributes.add(key="telemetry.auto")
        flag.value.bool_value = False  # encodes as ... 0x10 0x00
        rs.resource.attributes.add(key="service.name").value.string_value = service
        span = rs.scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = b"\x01" * 16, bytes([n + 1]) * 8, service
    groups = group_spans(list(iter_spans(req)))
    for out in (
        build_request(groups),
        ExportTraceServiceRequest.FromString(serialize_request(groups)),
    ):
        names = {
            (rs.resource.attributes[1].value.string_value, s.name)
            for rs in out.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        }
        assert names == {("svc-a", "svc-a"), ("svc-b", "svc-b")}
