"""The test oracle of ``service.otlp.serialize_request``: the same request built as protobuf
messages (spans copied in), whose ``SerializeToString()`` the hand-written bytes must equal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint.service.otlp import Origin


def build_request(groups: Mapping[bytes, tuple[Origin, list[Span]]]) -> ExportTraceServiceRequest:
    """One request holding the spans grouped by resource, then scope."""
    out = ExportTraceServiceRequest()
    by_resource: dict[bytes, Any] = {}
    for origin, spans in groups.values():
        if not spans:
            continue
        rs = by_resource.get(origin.resource_key)
        if rs is None:
            rs = out.resource_spans.add()
            rs.resource.CopyFrom(origin.resource)
            rs.schema_url = origin.resource_schema_url
            by_resource[origin.resource_key] = rs
        ss = rs.scope_spans.add()
        ss.scope.CopyFrom(origin.scope)
        ss.schema_url = origin.scope_schema_url
        ss.spans.extend(spans)
    return out
