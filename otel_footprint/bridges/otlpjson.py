"""OTLP JSON lines (the Collector ``file`` exporter's format, one export request per line): written
with hex ids and integer enums as the Collector does, read with hex or base64 ids."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from typing import Any, TypeAlias

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ExportRequest: TypeAlias = ExportTraceServiceRequest | ExportLogsServiceRequest

# JSON names of the id fields: spans and links (traces), log records (logs).
_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_ID_HEX_LENGTHS = frozenset({16, 32})


class OtlpJsonError(ValueError):
    """A line that is not an OTLP JSON export request; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def _map_ids(node: Any, convert: Any) -> Any:
    """Rewrite every id field in a JSON tree (dicts and lists) with ``convert``, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = convert(value)
            elif isinstance(value, dict | list):
                _map_ids(value, convert)
    elif isinstance(node, list):
        for item in node:
            _map_ids(item, convert)
    return node


def _base64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _id_to_base64(value: str) -> str:
    """An id as protobuf JSON wants it (base64), from hex (the OTLP/JSON rule) or base64."""
    if len(value) in _ID_HEX_LENGTHS and set(value) <= _HEX_DIGITS:
        return base64.b64encode(bytes.fromhex(value)).decode("ascii")
    return value


def ids_to_base64(tree: Any) -> Any:
    """Rewrite every trace/span id of an OTLP JSON tree, in place, as ``json_format`` reads ids
    (base64); hex ids (the OTLP/JSON rule, the Collector ``file`` exporter's form) are converted,
    base64 ones are kept. Returns ``tree``."""
    return _map_ids(tree, _id_to_base64)


def request_to_json(request: ExportRequest) -> str:
    """One export request as a compact OTLP JSON line (no newline)."""
    tree = json_format.MessageToDict(request, use_integers_for_enums=True)
    _map_ids(tree, _base64_to_hex)
    return json.dumps(tree, ensure_ascii=False, separators=(",", ":"))


def requests_to_jsonl(requests: Iterable[ExportRequest]) -> Iterator[str]:
    """Each request as one OTLP JSON line, newline included (write them to a file as they come)."""
    for request in requests:
        yield request_to_json(request) + "\n"


def _parse_line(number: int, text: str) -> ExportRequest | None:
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OtlpJsonError(number, f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(tree, dict):
        raise OtlpJsonError(number, "not an export request object")
    message: ExportRequest
    if "resourceSpans" in tree or "resource_spans" in tree:
        message = ExportTraceServiceRequest()
    elif "resourceLogs" in tree or "resource_logs" in tree:
        message = ExportLogsServiceRequest()
    elif not tree:
        return None
    else:
        raise OtlpJsonError(number, "neither resourceSpans nor resourceLogs at the top level")
    try:
        json_format.ParseDict(ids_to_base64(tree), message, ignore_unknown_fields=True)
    except (json_format.ParseError, binascii.Error, ValueError) as exc:
        raise OtlpJsonError(number, f"not an OTLP export request ({exc})") from None
    return message


def read_otlp_json_records(lines: Iterable[str]) -> Iterator[ExportRequest]:
    """Every trace and logs export request in OTLP JSON lines, in file order; blank lines skipped.

    Raises :class:`OtlpJsonError` naming the line on anything else. Fields newer than our protobuf
    are ignored (a newer Collector must not break reading).
    """
    for index, raw in enumerate(lines):
        text = raw.strip()
        if not text:
            continue
        message = _parse_line(index + 1, text)
        if message is not None:
            yield message


def read_otlp_json_lines(lines: Iterable[str]) -> Iterator[ExportTraceServiceRequest]:
    """The trace export requests of OTLP JSON lines (logs lines are skipped; see
    :func:`read_otlp_json_records` for both)."""
    for message in read_otlp_json_records(lines):
        if isinstance(message, ExportTraceServiceRequest):
            yield message
