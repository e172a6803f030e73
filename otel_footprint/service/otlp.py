"""OTLP wire helpers for the hop: decode bodies (protobuf / JSON, gzip), classify spans cheaply, split.

Everything stays protobuf: a request is parsed once, spans are classified by looking only at the
few attribute keys and event names that mark an agent run, and batches are re-framed without
re-encoding spans through any SDK object.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint import semconv
from otel_footprint.annotate.otlp import varint, varint_at
from otel_footprint.codec import any_value_to_python
from otel_footprint.runs.group import is_footprint_input_event
from otel_footprint.runs.recognize import ROLE_KEYS, SpanRole, role_of
from otel_footprint.runs.spans import SpanEventView, log_record_event

CONTENT_PROTOBUF: Final = "application/x-protobuf"
CONTENT_JSON: Final = "application/json"
TRACES_PATH: Final = "/v1/traces"
"""The OTLP/HTTP paths (received here, and appended to a forward base URL by the config)."""
LOGS_PATH: Final = "/v1/logs"
TRACE_SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
"""The OTLP gRPC services (served by the receivers, called by the forwarder's ``Export``)."""
LOGS_SERVICE: Final = "opentelemetry.proto.collector.logs.v1.LogsService"

Signal = Literal["traces", "logs"]
S = TypeVar("S", Span, bytes, Span | bytes)


class BadRequestError(Exception):
    """A request the receiver must refuse; ``http_status`` and the gRPC-equivalent reason."""

    def __init__(self, http_status: int, reason: str, message: str) -> None:
        message = safe_text(message)
        super().__init__(message)
        self.http_status = http_status
        self.reason = reason
        self.message = message


def safe_text(text: str, limit: int = 1000) -> str:
    """``text`` made encodable (a lone surrogate from a hostile body becomes U+FFFD), bounded."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return text.encode("utf-8", "replace").decode("utf-8")


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """Decompress a gzip body, refusing (413) anything that inflates past ``limit`` bytes."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise BadRequestError(400, "malformed", f"body is not valid gzip: {exc}") from exc
    if len(out) > limit or inflater.unconsumed_tail:
        raise BadRequestError(413, "too_large", f"decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise BadRequestError(400, "malformed", "gzip body is truncated")
    return out


_ID_FIELDS: Final = {
    "traceId": 16,
    "spanId": 8,
    "parentSpanId": 8,
    "trace_id": 16,
    "span_id": 8,
    "parent_span_id": 8,
}


def _hex_ids_to_base64(node: Any, path: str = "") -> Any:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping expects base64.

    Deliberately stricter than ``bridges.otlpjson.ids_to_base64`` (which reads files and keeps
    base64 ids as it finds them): a receiver answers 400 naming the field for an id that is not
    hex of the right length, so a sender's bug is not forwarded as a wrong id.
    """
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                if value == "":
                    out[key] = ""
                    continue
                try:
                    raw = bytes.fromhex(value)
                except ValueError as exc:
                    raise BadRequestError(
                        400, "malformed", f"{path}{key}: {value!r} is not a hex id"
                    ) from exc
                if len(raw) != _ID_FIELDS[key]:
                    raise BadRequestError(
                        400,
                        "malformed",
                        f"{path}{key}: expected {_ID_FIELDS[key]} bytes, got {len(raw)}",
                    )
                out[key] = base64.b64encode(raw).decode("ascii")
            else:
                out[key] = _hex_ids_to_base64(value, f"{path}{key}.")
        return out
    if isinstance(node, list):
        return [_hex_ids_to_base64(v, path) for v in node]
    return node


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(node: Any) -> bool:
    """Whether a decoded JSON value holds a string with an unpaired surrogate (keys included)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value, without parameters (``; charset=...``)."""
    return content_type.split(";", 1)[0].strip().lower()


def decode_body(
    signal: Signal, body: bytes, content_type: str, *, json_allowed: bool = True
) -> ExportTraceServiceRequest | ExportLogsServiceRequest:
    """Parse an OTLP/HTTP body (already decompressed) of ``content_type``."""
    message: ExportTraceServiceRequest | ExportLogsServiceRequest = (
        ExportTraceServiceRequest() if signal == "traces" else ExportLogsServiceRequest()
    )
    media = media_type(content_type)
    if media == CONTENT_PROTOBUF:
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise BadRequestError(
                400, "malformed", f"body is not a valid OTLP protobuf message: {exc}"
            ) from exc
        return message
    if media == CONTENT_JSON and json_allowed:
        try:
            raw = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequestError(400, "malformed", f"body is not valid JSON: {exc}") from exc
        except RecursionError:
            raise BadRequestError(400, "malformed", "body is JSON nested too deeply") from None
        if not isinstance(raw, dict):
            raise BadRequestError(
                400, "malformed", f"an OTLP/JSON body is an object, not {type(raw).__name__}"
            )
        if _SURROGATE_ESCAPE.search(body) and _has_lone_surrogate(raw):
            # Valid JSON, but not Unicode: OTLP strings are UTF-8 (and protobuf fails on them).
            raise BadRequestError(
                400, "malformed", "body holds a lone UTF-16 surrogate escape (not valid Unicode)"
            )
        try:
            json_format.ParseDict(_hex_ids_to_base64(raw), message, ignore_unknown_fields=True)
        except (
            json_format.ParseError,
            binascii.Error,
            TypeError,
            ValueError,
            AttributeError,
            KeyError,
            IndexError,
            SystemError,  # upb's JSON reader on input it does not expect
        ) as exc:
            raise BadRequestError(
                400, "malformed", f"body is not a valid OTLP/JSON message: {exc}"
            ) from exc
        except RecursionError:
            raise BadRequestError(400, "malformed", "body is JSON nested too deeply") from None
        return message
    raise BadRequestError(
        415,
        "unsupported_media_type",
        f"unsupported content type {content_type!r}; use {CONTENT_PROTOBUF} or {CONTENT_JSON}",
    )


def status_body(code: int, message: str, content_type: str) -> tuple[bytes, str]:
    """A ``google.rpc.Status`` error body in the request's encoding (OTLP/HTTP failure response)."""
    status = status_pb2.Status(code=code, message=safe_text(message))
    if media_type(content_type) == CONTENT_JSON:
        return json_format.MessageToJson(status).encode(), CONTENT_JSON
    return status.SerializeToString(), CONTENT_PROTOBUF


def success_body(signal: Signal, content_type: str) -> tuple[bytes, str]:
    """An empty ``Export*ServiceResponse`` (full success) in the request's encoding."""
    if media_type(content_type) == CONTENT_JSON:
        return b"{}", CONTENT_JSON
    return b"", CONTENT_PROTOBUF


# ---------------------------------------------------------------------------------------------
# Classification: which spans belong to an agent run (touch only a handful of keys)
# ---------------------------------------------------------------------------------------------


def span_role(span: Span) -> SpanRole:
    """The span's role from the recognition rule (runs/recognize.py), reading only its keys."""
    found: dict[str, Any] = {}
    for kv in span.attributes:
        key = kv.key
        if key in ROLE_KEYS:
            # A non-empty string (most names) is read as it is; "" is every other kind, or "".
            found[key] = kv.value.string_value or any_value_to_python(kv.value)
    return role_of(found.get) if found else SpanRole.OTHER


def has_footprint_events(span: Span) -> bool:
    # Our own output events (a span annotated by an earlier hop) are not agent input.
    return any(is_footprint_input_event(ev.name) for ev in span.events)


# ---------------------------------------------------------------------------------------------
# Walking and rebuilding requests
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a span came from in its request: resource and scope, as a content key for regrouping."""

    resource: Resource
    resource_schema_url: str
    scope: InstrumentationScope
    scope_schema_url: str
    key: bytes
    """Resource, scope and both schema URLs, each behind its length (wire bytes hold zero bytes:
    a separator would let two different origins share a key)."""
    resource_key: bytes
    """The part of ``key`` naming the resource and its schema URL (what spans regroup under)."""

    @staticmethod
    def of(resource: Resource, r_schema: str, scope: InstrumentationScope, s_schema: str) -> Origin:
        resource_key = _framed(resource.SerializeToString(deterministic=True), r_schema.encode())
        key = resource_key + _framed(scope.SerializeToString(deterministic=True), s_schema.encode())
        return Origin(resource, r_schema, scope, s_schema, key, resource_key)


def _framed(*parts: bytes) -> bytes:
    return b"".join(len(part).to_bytes(4, "little") + part for part in parts)


def iter_spans(request: ExportTraceServiceRequest) -> Iterator[tuple[Origin, Span]]:
    """Every span with its origin (one :class:`Origin` object per scope block)."""
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            origin = Origin.of(rs.resource, rs.schema_url, ss.scope, ss.schema_url)
            for span in ss.spans:
                yield origin, span


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def count_log_records(request: ExportLogsServiceRequest) -> int:
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)


def _head(tag: int, size: int) -> bytes:
    """The tag and length of one length-delimited protobuf field (``tag`` is its whole first
    byte) holding ``size`` bytes."""
    return bytes((tag,)) + varint(size)


# Field tags (field number << 3 | wire type 2) of the three messages the request is built from:
# ExportTraceServiceRequest.resource_spans = 1; ResourceSpans.resource = 1, .scope_spans = 2,
# .schema_url = 3; ScopeSpans.scope = 1, .spans = 2, .schema_url = 3.
_FIELD_1: Final = 0x0A
_FIELD_2: Final = 0x12
_FIELD_3: Final = 0x1A


def _field(tag: int, payload: bytes, chunks: list[bytes]) -> int:
    """Append one length-delimited field to ``chunks``; returns the bytes appended."""
    head = _head(tag, len(payload))
    chunks.append(head)
    chunks.append(payload)
    return len(head) + len(payload)


def serialize_request(groups: Mapping[bytes, tuple[Origin, Sequence[Span | bytes]]]) -> bytes:
    """The wire bytes of one request holding ``groups`` by resource, then scope, without copying
    a span: each span is serialized where it stands (or given as its bytes) and the enclosing
    messages are written around it (fields in number order, as protobuf writes them; the tests
    compare it with protobuf's own serialization of the same request built as messages). Each
    enclosing message's length is summed from its parts, so the bytes are joined once, at the end."""
    resources: dict[bytes, tuple[Origin, list[tuple[list[bytes], int]]]] = {}
    for origin, spans in groups.values():
        if not spans:
            continue
        r_key = origin.resource_key
        entry = resources.get(r_key)
        if entry is None:
            entry = resources[r_key] = (origin, [])
        chunks: list[bytes] = []
        size = _field(_FIELD_1, origin.scope.SerializeToString(), chunks)
        for span in spans:
            data = span if isinstance(span, bytes) else span.SerializeToString()
            size += _field(_FIELD_2, data, chunks)
        if origin.scope_schema_url:
            size += _field(_FIELD_3, origin.scope_schema_url.encode(), chunks)
        entry[1].append((chunks, size))
    out: list[bytes] = []
    for origin, scopes in resources.values():
        body: list[bytes] = []
        size = _field(_FIELD_1, origin.resource.SerializeToString(), body)
        for chunks, scope_size in scopes:
            head = _head(_FIELD_2, scope_size)
            body.append(head)
            body.extend(chunks)
            size += len(head) + scope_size
        if origin.resource_schema_url:
            size += _field(_FIELD_3, origin.resource_schema_url.encode(), body)
        out.append(_head(_FIELD_1, size))
        out.extend(body)
    return b"".join(out)


def group_spans(items: Iterable[tuple[Origin, S]]) -> dict[bytes, tuple[Origin, list[S]]]:
    groups: dict[bytes, tuple[Origin, list[S]]] = {}
    for origin, span in items:
        entry = groups.get(origin.key)
        if entry is None:
            groups[origin.key] = (origin, [span])
        else:
            entry[1].append(span)
    return groups


def _fields_of(data: bytes, start: int, end: int, tag: int) -> list[tuple[int, int]]:
    """Where the payloads of the fields ``tag`` (one byte) lie in the message ``data[start:end]``,
    in order. Every field of a request, resource and scope block is length-delimited: any other
    (an unknown field) raises ValueError."""
    found: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        key, pos = varint_at(data, pos)
        if key & 7 != 2:
            raise ValueError(f"field {key >> 3} of wire type {key & 7} in a traces request")
        size, pos = varint_at(data, pos)
        if key == tag:
            found.append((pos, pos + size))
        pos += size
    if pos != end:
        raise ValueError("a field runs past the end of its message")
    return found


def span_wires(request: ExportTraceServiceRequest, wire: bytes) -> list[bytes]:
    """Each span's own bytes as ``wire`` (the request's serialized form) holds them, in the order
    of :func:`iter_spans`: a span kept or forwarded as it came is never serialized again.
    Read from the tags alone (repeated fields parse in the order they are written); should
    ``wire`` hold what this reading does not follow (an unknown field), each span is serialized."""
    try:
        found = [
            wire[a:b]
            for rs in _fields_of(wire, 0, len(wire), _FIELD_1)
            for ss in _fields_of(wire, *rs, _FIELD_2)
            for a, b in _fields_of(wire, *ss, _FIELD_2)
        ]
    except (IndexError, ValueError):
        found = []
    if len(found) != count_spans(request):
        found = [span.SerializeToString() for _, span in iter_spans(request)]
    return found


_TRACE_ID: Final = b"\x0a\x10"
_SPAN_ID: Final = b"\x12\x08"
_PARENT_ID: Final = b"\x22\x08"
_TRACE_STATE: Final = 0x1A
"""The leading fields of a span as protobuf writes them, in number order: trace_id (1, 16 bytes),
span_id (2, 8 bytes), trace_state (3) and parent_span_id (4, 8 bytes)."""


def without_ids(data: bytes) -> bytes:
    """A span's bytes without its id fields where protobuf writes them (first, trace_state between
    span and parent id). Ids written elsewhere, or of another length, stay: restored in front of
    them by :func:`with_ids`, the later copy still wins, so the span parses the same."""
    pos = 18 if data.startswith(_TRACE_ID) else 0
    if data.startswith(_SPAN_ID, pos):
        pos += 10
    if pos < len(data) and data[pos] == _TRACE_STATE:
        size, end = varint_at(data, pos + 1)
        end += size
        if data.startswith(_PARENT_ID, end):
            return data[pos:end] + data[end + 10 :]
    elif data.startswith(_PARENT_ID, pos):
        pos += 10
    return data[pos:] if pos else data


def with_ids(data: bytes, trace_id: bytes, span_id: bytes, parent_id: bytes) -> bytes:
    """The span of :func:`without_ids` whole again: the ids written back where protobuf writes
    them (the bytes it serializes, when it wrote ``data``'s span)."""
    head = _head(0x0A, len(trace_id)) + trace_id if trace_id else b""
    if span_id:
        head += _head(0x12, len(span_id)) + span_id
    parent = _head(0x22, len(parent_id)) + parent_id if parent_id else b""
    if data[:1] == b"\x1a":
        size, end = varint_at(data, 1)
        end += size
        return b"".join((head, data[:end], parent, data[end:]))
    return b"".join((head, parent, data))


# ---------------------------------------------------------------------------------------------
# Log records that carry footprint events
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A footprint event read from a log record, with the span it belongs to."""

    trace_id: bytes
    span_id: bytes
    event: SpanEventView


def footprint_log_events(request: ExportLogsServiceRequest) -> list[LogEvent]:
    """The log records that carry a footprint event and name a span (others are only forwarded)."""
    found: list[LogEvent] = []
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for record in sl.log_records:
                if len(record.trace_id) != 16 or len(record.span_id) != 8:
                    continue
                name = record.event_name or _event_name_attribute(record)
                if not name or not is_footprint_input_event(name):
                    continue
                try:
                    view = log_record_event(record, semconv.LOG_EVENT_NAME_ATTR)
                except (ValueError, TypeError):
                    continue
                if view is not None:
                    found.append(LogEvent(bytes(record.trace_id), bytes(record.span_id), view))
    return found


def _event_name_attribute(record: LogRecord) -> str:
    for kv in record.attributes:
        if kv.key == semconv.LOG_EVENT_NAME_ATTR and kv.value.WhichOneof("value") == "string_value":
            return kv.value.string_value
    return ""


def footprint_log_subset(request: ExportLogsServiceRequest) -> ExportLogsServiceRequest | None:
    """The part of a logs request whose records carry footprint events (None when there is none)."""
    out = ExportLogsServiceRequest()
    kept = False
    for rl in request.resource_logs:
        target_rl = None
        for sl in rl.scope_logs:
            target_sl = None
            for record in sl.log_records:
                name = record.event_name or _event_name_attribute(record)
                if not name or not is_footprint_input_event(name):
                    continue
                if target_rl is None:
                    target_rl = out.resource_logs.add()
                    target_rl.resource.CopyFrom(rl.resource)
                    target_rl.schema_url = rl.schema_url
                if target_sl is None:
                    target_sl = target_rl.scope_logs.add()
                    target_sl.scope.CopyFrom(sl.scope)
                    target_sl.schema_url = sl.schema_url
                target_sl.log_records.append(record)
                kept = True
    return out if kept else None


# ---------------------------------------------------------------------------------------------
# Splitting a request that is too large for the next hop
# ---------------------------------------------------------------------------------------------

_FRAME_SLACK: Final = 64
"""Bytes of framing (tags and lengths of resource, scope and item blocks) allowed per piece."""


def split_request(
    traces: bool, payload: bytes, limit: int
) -> tuple[list[tuple[bytes, int]], list[tuple[bytes, int]]]:
    """Split a serialized export request into requests of at most ``limit`` bytes.

    Spans (and log records) are independent, so any partition that keeps each item under its own
    resource and scope is the same data. Returns ``(pieces, oversized)`` as ``(payload, items)``
    pairs: ``oversized`` are single items that are too large even alone (with their resource and
    scope). Raises :class:`DecodeError` when ``payload`` is not a request.
    """
    request: Any  # the two request types share their shape (resource, scope, item blocks)
    if traces:
        request = ExportTraceServiceRequest.FromString(payload)
    else:
        request = ExportLogsServiceRequest.FromString(payload)
    pieces: list[tuple[bytes, int]] = []
    oversized: list[tuple[bytes, int]] = []
    current: Any = type(request)()
    size = 0
    items = 0

    def close() -> None:
        nonlocal current, size, items
        if items:
            pieces.append((current.SerializeToString(), items))
        current, size, items = type(request)(), 0, 0

    outer = request.resource_spans if traces else request.resource_logs
    for block in outer:
        head = block.resource.ByteSize() + len(block.schema_url) + _FRAME_SLACK
        scopes = block.scope_spans if traces else block.scope_logs
        for scope_block in scopes:
            scope_head = scope_block.scope.ByteSize() + len(scope_block.schema_url) + _FRAME_SLACK
            records = scope_block.spans if traces else scope_block.log_records
            target: Any = None
            for record in records:
                cost = record.ByteSize() + 16
                if head + scope_head + cost > limit:
                    alone = type(request)()
                    _add_item(alone, block, scope_block, record, traces)
                    oversized.append((alone.SerializeToString(), 1))
                    continue
                if target is not None and size + cost <= limit:
                    (target.spans if traces else target.log_records).add().CopyFrom(record)
                    size += cost
                else:
                    if size + head + scope_head + cost > limit:
                        close()
                    target = _add_item(current, block, scope_block, record, traces)
                    size += head + scope_head + cost
                items += 1
            target = None
    close()
    return pieces, oversized


def _add_item(out: Any, block: Any, scope_block: Any, record: Any, traces: bool) -> Any:
    """Append ``record`` under a fresh copy of its resource and scope; returns the scope block."""
    new_block = (out.resource_spans if traces else out.resource_logs).add()
    if block.HasField("resource"):
        new_block.resource.CopyFrom(block.resource)
    new_block.schema_url = block.schema_url
    new_scope = (new_block.scope_spans if traces else new_block.scope_logs).add()
    if scope_block.HasField("scope"):
        new_scope.scope.CopyFrom(scope_block.scope)
    new_scope.schema_url = scope_block.schema_url
    (new_scope.spans if traces else new_scope.log_records).add().CopyFrom(record)
    return new_scope
