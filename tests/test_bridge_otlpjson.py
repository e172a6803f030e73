"""OTLP JSON lines: the Collector file-exporter format, written with hex ids, read with hex or base64."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint.bridges.otlpjson import (
    ExportRequest,
    OtlpJsonError,
    read_otlp_json_lines,
    read_otlp_json_records,
    request_to_json,
    requests_to_jsonl,
)

TRACE = bytes(range(1, 17))
SPAN = bytes(range(21, 29))
PARENT = bytes(range(31, 39))


def _trace_request() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.parent_span_id = TRACE, SPAN, PARENT
    span.name = "chat m"
    span.kind = span.SpanKind.SPAN_KIND_CLIENT
    span.start_time_unix_nano = 1_796_031_430_505_000_000
    attribute = span.attributes.add()
    attribute.key, attribute.value.int_value = "footprint.pass.iteration", 4
    link = span.links.add()
    link.trace_id, link.span_id = TRACE, PARENT
    event = span.events.add()
    event.name = "footprint.context.evaluated"
    return request


def _logs_request() -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.trace_id, record.span_id, record.event_name = TRACE, SPAN, "footprint.maps.mounted"
    return request


def test_written_like_the_collector_hex_ids_and_integer_enums() -> None:
    line = request_to_json(_trace_request())
    assert "\n" not in line
    span = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceId"] == TRACE.hex() and span["spanId"] == SPAN.hex()
    assert span["parentSpanId"] == PARENT.hex()
    assert span["links"][0] == {"traceId": TRACE.hex(), "spanId": PARENT.hex()}
    assert span["kind"] == 3
    assert span["startTimeUnixNano"] == "1796031430505000000"


def test_round_trip_of_traces_and_logs() -> None:
    requests: list[ExportRequest] = [_trace_request(), _logs_request()]
    lines = list(requests_to_jsonl(requests))
    assert all(line.endswith("\n") for line in lines)
    back = list(read_otlp_json_records(lines))
    assert [type(b) for b in back] == [ExportTraceServiceRequest, ExportLogsServiceRequest]
    assert [b.SerializeToString() for b in back] == [r.SerializeToString() for r in requests]
    # The traces-only reader skips the logs line.
    assert [r.SerializeToString() for r in read_otlp_json_lines(lines)] == [
        requests[0].SerializeToString()
    ]


def test_base64_ids_from_protobufs_own_printer_read_too() -> None:
    request = _trace_request()
    printed = json_format.MessageToJson(request, indent=None)
    assert base64.b64encode(TRACE).decode() in printed
    (back,) = read_otlp_json_lines([printed, ""])
    assert back.SerializeToString() == request.SerializeToString()


def test_unknown_fields_from_a_newer_collector_are_ignored() -> None:
    tree = json.loads(request_to_json(_trace_request()))
    tree["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["someFutureField"] = 1
    (back,) = read_otlp_json_lines([json.dumps(tree)])
    assert back.resource_spans[0].scope_spans[0].spans[0].name == "chat m"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{nope", r"^line 2: not JSON"),
        ("[1]", r"^line 2: not an export request"),
        ('{"spans":[]}', r"^line 2: neither resourceSpans nor resourceLogs"),
        (
            '{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}',
            r"^line 2: not an OTLP",
        ),
    ],
)
def test_bad_lines_name_their_line(line: str, message: str) -> None:
    with pytest.raises(OtlpJsonError, match=message):
        list(read_otlp_json_lines([request_to_json(_trace_request()), line]))
