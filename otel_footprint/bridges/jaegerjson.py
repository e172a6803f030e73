"""A trace downloaded from the Jaeger UI (its JSON form) → OTLP trace export requests.

The Jaeger UI's "Download JSON" (and its ``/api/traces/<id>`` answer) is
``{"data": [{"traceID", "spans": [{"traceID", "spanID", "operationName", "references",
"startTime", "duration", "tags", "logs", "processID"}], "processes": {...}}]}`` with times in
microseconds. Jaeger stores OTLP span events as logs whose ``event`` field is the event name, OTLP
array attributes as JSON strings, the span kind in ``span.kind`` and the status in
``otel.status_code`` / ``otel.status_description``; this reader undoes each of those, so the engine
reads a Jaeger download as it reads the spans that were sent to Jaeger.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from otel_footprint.annotate.otlp import to_any_value

_MICROS = 1000
_KINDS = {
    "internal": Span.SPAN_KIND_INTERNAL,
    "server": Span.SPAN_KIND_SERVER,
    "client": Span.SPAN_KIND_CLIENT,
    "producer": Span.SPAN_KIND_PRODUCER,
    "consumer": Span.SPAN_KIND_CONSUMER,
}
# Tags Jaeger derives from OTLP fields: turned back into those fields, not kept as attributes.
_DERIVED = frozenset(
    {
        "span.kind",
        "otel.status_code",
        "otel.status_description",
        "otel.library.name",
        "otel.library.version",
        "otel.scope.name",
        "otel.scope.version",
        "internal.span.format",
    }
)


class JaegerJsonError(ValueError):
    """A document that looks like a Jaeger trace but cannot be read; the message says where."""


def is_jaeger_trace(document: Any) -> bool:
    """True for the Jaeger UI's download shape: ``{"data": [{"traceID", "spans", ...}]}``."""
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        return False
    return any(isinstance(t, dict) and "spans" in t for t in document["data"])


def _hex_id(value: Any, size: int, where: str) -> bytes:
    if not isinstance(value, str) or not value:
        raise JaegerJsonError(f"{where}: the id is not a hex string")
    try:
        raw = bytes.fromhex(value.rjust(size * 2, "0"))
    except ValueError:
        raise JaegerJsonError(f"{where}: the id {value!r} is not hex") from None
    if len(raw) != size:
        raise JaegerJsonError(f"{where}: the id {value!r} is not {size} bytes")
    return raw


def _scalar(value: Any) -> AnyValue:
    return to_any_value(value if isinstance(value, str | int | float) else str(value))


def _any_value(tag: Mapping[str, Any]) -> AnyValue:
    kind, value = tag.get("type"), tag.get("value")
    if kind == "bool":
        return _scalar(bool(value))
    try:
        if kind == "int64":
            return _scalar(int(str(value)))
        if kind == "float64":
            return _scalar(float(str(value)))
    except ValueError:
        pass  # a mistyped tag keeps its text
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        # Jaeger writes OTLP array attributes as JSON text: read a list of scalars back.
        try:
            items = json.loads(value)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list) and all(isinstance(i, (str, int, float, bool)) for i in items):
            out = AnyValue()
            out.array_value.values.extend(_scalar(i) for i in items)
            return out
    return _scalar("" if value is None else value)


def _key_values(tags: Any, where: str, skip: frozenset[str] = frozenset()) -> list[KeyValue]:
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise JaegerJsonError(f"{where}: tags are not a list")
    out = []
    for tag in tags:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise JaegerJsonError(f"{where}: a tag without a key")
        if tag["key"] in skip:
            continue
        out.append(KeyValue(key=tag["key"], value=_any_value(tag)))
    return out


def _tag(tags: Any, key: str) -> Any:
    for tag in tags or ():
        if isinstance(tag, dict) and tag.get("key") == key:
            return tag.get("value")
    return None


def _micros(value: Any, where: str) -> int:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise JaegerJsonError(f"{where}: not a number of microseconds")
    return int(value) * _MICROS


def _span(raw: Any, where: str) -> tuple[str, str | None, Span]:
    if not isinstance(raw, dict):
        raise JaegerJsonError(f"{where}: a span is not an object")
    span = Span(
        trace_id=_hex_id(raw.get("traceID"), 16, f"{where} traceID"),
        span_id=_hex_id(raw.get("spanID"), 8, f"{where} spanID"),
        name=str(raw.get("operationName", "")),
    )
    start = _micros(raw.get("startTime", 0), f"{where} startTime")
    span.start_time_unix_nano = start
    span.end_time_unix_nano = start + _micros(raw.get("duration", 0), f"{where} duration")
    tags = raw.get("tags")
    code = str(_tag(tags, "otel.status_code") or "").upper()
    # ``error=true`` is what Jaeger adds for an ERROR status: the status says it already.
    skip = _DERIVED | {"error"} if code == "ERROR" else _DERIVED
    span.attributes.extend(_key_values(tags, where, skip))
    kind = _tag(tags, "span.kind")
    if kind:
        span.kind = _KINDS.get(str(kind).lower(), Span.SPAN_KIND_INTERNAL)
    if code in ("OK", "ERROR"):
        span.status.code = Status.STATUS_CODE_OK if code == "OK" else Status.STATUS_CODE_ERROR
        span.status.message = str(_tag(tags, "otel.status_description") or "")
    references = raw.get("references") or []
    if not isinstance(references, list):
        raise JaegerJsonError(f"{where}: references are not a list")
    for ref in references:
        if not isinstance(ref, dict):
            continue
        trace_id = _hex_id(ref.get("traceID"), 16, f"{where} reference")
        span_id = _hex_id(ref.get("spanID"), 8, f"{where} reference")
        if (
            ref.get("refType") == "CHILD_OF"
            and not span.parent_span_id
            and trace_id == span.trace_id
        ):
            span.parent_span_id = span_id
        else:
            span.links.add(trace_id=trace_id, span_id=span_id)
    logs = raw.get("logs") or []
    if not isinstance(logs, list):
        raise JaegerJsonError(f"{where}: logs are not a list")
    for index, log in enumerate(logs):
        if not isinstance(log, dict):
            raise JaegerJsonError(f"{where} log {index}: not an object")
        fields = log.get("fields")
        name = _tag(fields, "event")
        event = span.events.add(
            time_unix_nano=_micros(log.get("timestamp", 0), f"{where} log {index}"),
            name=str(name) if name is not None else "log",
        )
        event.attributes.extend(_key_values(fields, f"{where} log {index}", frozenset({"event"})))
    scope = _tag(tags, "otel.scope.name") or _tag(tags, "otel.library.name")
    process = raw.get("processID")
    return (str(process) if process is not None else "", str(scope) if scope else None, span)


def jaeger_to_requests(document: Any, where: str = "input") -> list[ExportTraceServiceRequest]:
    """One export request per trace of a Jaeger UI download (one resource per process)."""
    if not is_jaeger_trace(document):
        raise JaegerJsonError(f'{where}: not a Jaeger trace (expected {{"data": [{{"spans"...')
    requests = []
    for t_index, trace in enumerate(document["data"]):
        here = f"{where}: trace {t_index + 1}"
        if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
            raise JaegerJsonError(f"{here}: no spans list")
        processes = trace.get("processes") or {}
        if not isinstance(processes, dict):
            raise JaegerJsonError(f"{here}: processes is not an object")
        grouped: dict[tuple[str, str | None], list[Span]] = {}
        for s_index, raw in enumerate(trace["spans"]):
            process, scope, span = _span(raw, f"{here} span {s_index + 1}")
            grouped.setdefault((process, scope), []).append(span)
        request = ExportTraceServiceRequest()
        resources: dict[str, Any] = {}
        for (process, scope), spans in grouped.items():
            if process not in resources:
                resource_spans = request.resource_spans.add()
                info = processes.get(process) or {}
                service = info.get("serviceName") if isinstance(info, dict) else None
                if service:
                    resource_spans.resource.attributes.add(
                        key="service.name", value=AnyValue(string_value=str(service))
                    )
                if isinstance(info, dict):
                    resource_spans.resource.attributes.extend(
                        _key_values(info.get("tags"), f"{here} process {process}")
                    )
                resources[process] = resource_spans
            scope_spans = resources[process].scope_spans.add()
            if scope:
                scope_spans.scope.name = scope
            scope_spans.spans.extend(spans)
        requests.append(request)
    return requests
