"""What ``explain`` reads: any trace file a person has, told apart by its content, never by its name.

- OTLP JSON: one export request per line (the Collector ``file`` exporter; ``demo -o``; ``import -o``)
  or one pretty-printed request; hex or base64 ids. Metrics lines are skipped.
- OTLP protobuf: one serialized request (``TracesData`` / ``LogsData`` are wire-compatible), or
  length-delimited messages: 4-byte big-endian sizes (the Collector ``file`` exporter with
  ``format: proto``) or varint sizes (the OTLP file-exporter spec's delimited form).
- A trace downloaded from the Jaeger UI (``bridges/jaegerjson.py``) or from Tempo, in both of its
  API's shapes (``bridges/tempojson.py``).
- An agentfootprint NDJSON recording (``bridges/agentfootprint.py``).

Anything else is refused with the reason (:class:`InputError`): an empty input, ``{}``, JSON that is
none of these (a lone ``null``, number or string is named as such), text that is not JSON, bytes
that are not a protobuf trace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint import semconv
from otel_footprint.annotate.otlp import varint_at
from otel_footprint.bridges.jaegerjson import JaegerJsonError, is_jaeger_trace, jaeger_to_requests
from otel_footprint.bridges.otlpjson import ids_to_base64
from otel_footprint.bridges.tempojson import (
    TempoJsonError,
    is_tempo_search,
    is_tempo_trace,
    tempo_to_otlp,
)

KINDS = "OTLP JSON or protobuf, a Jaeger UI or Tempo trace download, or an agentfootprint NDJSON recording"
"""What ``explain`` reads, in the words of its error messages and ``--help``."""


class InputError(ValueError):
    """An input that cannot be read; the message names the input and, when it can, the line."""


@dataclass(slots=True)
class Loaded:
    """Everything read from the inputs: trace requests and log requests."""

    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    logs: list[ExportLogsServiceRequest] = field(default_factory=list)


def _is_recording(first: Any) -> bool:
    kind = first.get("type") if isinstance(first, dict) else None
    return isinstance(kind, str) and kind.startswith(semconv.UPSTREAM_PREFIX)


_OTLP_KEYS = ("resourceSpans", "resource_spans", "resourceLogs", "resource_logs")
_METRIC_KEYS = ("resourceMetrics", "resource_metrics")


def _json_kind(document: Any) -> str:
    """What a JSON value is, in words: ``a JSON null``, ``a JSON number``, ``an empty object``."""
    if document is None:
        return "a JSON null"
    if isinstance(document, bool):
        return f"JSON {'true' if document else 'false'}"
    if isinstance(document, int | float):
        return "a JSON number"
    if isinstance(document, str):
        return "a JSON string"
    if isinstance(document, list):
        return "an empty JSON list" if not document else "a JSON list"
    if document == {}:
        return "an empty object"
    return f"an object with keys {', '.join(sorted(document)[:4])}"


def _parse_otlp(document: Any, where: str, loaded: Loaded) -> None:
    if is_tempo_search(document):
        raise InputError(
            f"{where}: a Tempo search result (trace ids, no spans); download each trace by its id "
            "(/api/traces/<id>) and explain that"
        )
    if is_tempo_trace(document):
        try:
            document = tempo_to_otlp(document, where)
        except TempoJsonError as error:
            raise InputError(str(error)) from None
    if is_jaeger_trace(document):
        try:
            loaded.traces.extend(jaeger_to_requests(document, where))
        except JaegerJsonError as error:
            raise InputError(str(error)) from None
        return
    if isinstance(document, dict) and document.get("data") == []:
        raise InputError(f"{where}: a Jaeger trace download with no traces in it")
    if not isinstance(document, dict) or not any(k in document for k in _OTLP_KEYS + _METRIC_KEYS):
        raise InputError(f"{where}: {_json_kind(document)}, not {KINDS}")
    # The Collector file exporter writes hex ids; the protobuf JSON mapping reads base64.
    ids_to_base64(document)
    try:
        if "resourceSpans" in document or "resource_spans" in document:
            loaded.traces.append(json_format.ParseDict(document, ExportTraceServiceRequest()))
        elif "resourceLogs" in document or "resource_logs" in document:
            loaded.logs.append(json_format.ParseDict(document, ExportLogsServiceRequest()))
        # Metrics lines (a Collector file exporter fed by a metrics pipeline too) are not ours.
    except json_format.ParseError as error:
        raise InputError(f"{where}: not an OTLP export request ({error})") from None


def _read_json(name: str, text: str, loaded: Loaded) -> None:
    lines = text.splitlines()
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    try:
        first = json.loads(numbered[0][1])
    except json.JSONDecodeError:
        first = None
    if _is_recording(first):
        from otel_footprint.bridges.agentfootprint import recording_to_requests
        from otel_footprint.bridges.recording import RecordingError

        try:
            loaded.traces.extend(recording_to_requests(lines))
        except RecordingError as error:
            raise InputError(f"{name}: {error}") from None
        return
    if first is None or len(numbered) == 1:
        # Not line-delimited: one pretty-printed document.
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(f"{name}: line {error.lineno} is not JSON ({error.msg})") from None
        _parse_otlp(document, name, loaded)
        return
    for number, line in numbered:
        try:
            document = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{name}: line {number} is not JSON ({error.msg})") from None
        _parse_otlp(document, f"{name}: line {number}", loaded)


def _frames(data: bytes) -> list[bytes] | None:
    """Length-delimited messages: 4-byte big-endian sizes, else varint sizes; None if neither
    chains exactly to the end of the data."""
    for reader in (_fixed32_frames, _varint_frames):
        frames = reader(data)
        if frames is not None:
            return frames
    return None


def _fixed32_frames(data: bytes) -> list[bytes] | None:
    frames, at = [], 0
    while at < len(data):
        if at + 4 > len(data):
            return None
        size = int.from_bytes(data[at : at + 4], "big")
        at += 4
        if size == 0 or at + size > len(data):
            return None
        frames.append(data[at : at + size])
        at += size
    return frames or None


def _varint_frames(data: bytes) -> list[bytes] | None:
    frames, at = [], 0
    while at < len(data):
        try:
            size, at = varint_at(data, at)
        except IndexError:  # a length that runs past the end
            return None
        if size == 0 or at + size > len(data):
            return None
        frames.append(data[at : at + size])
        at += size
    return frames or None


def _trace_message(data: bytes) -> ExportTraceServiceRequest | None:
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        return None
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    # A log message parses as a trace message with empty ids: real spans carry both ids.
    if spans and all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans):
        return request
    return None


def _log_message(data: bytes) -> ExportLogsServiceRequest | None:
    try:
        request = ExportLogsServiceRequest.FromString(data)
    except DecodeError:
        return None
    records = [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    return request if records and any(r.time_unix_nano or r.span_id for r in records) else None


def _read_protobuf(name: str, data: bytes, loaded: Loaded) -> None:
    candidates = [data]
    frames = _frames(data)
    if frames is not None:
        candidates = frames
    traces: list[ExportTraceServiceRequest] = []
    logs: list[ExportLogsServiceRequest] = []
    for index, message in enumerate(candidates):
        trace = _trace_message(message)
        if trace is not None:
            traces.append(trace)
            continue
        log = _log_message(message)
        if log is not None:
            logs.append(log)
            continue
        if frames is not None and candidates is frames:
            # The framing matched but a frame is no OTLP message: try the whole as one message.
            whole = _trace_message(data)
            if whole is not None:
                loaded.traces.append(whole)
                return
            raise InputError(f"{name}: message {index + 1} is not an OTLP trace or log request")
        raise InputError(f"{name}: {_what_bytes(data)}, not {KINDS}")
    loaded.traces.extend(traces)
    loaded.logs.extend(logs)


def _what_bytes(data: bytes) -> str:
    """Bytes that are none of the inputs: text (with its first line) or binary data."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary data"
    if "\x00" in text or not text.strip():
        return "binary data"
    first = text.strip().splitlines()[0]
    shown = first if len(first) <= 40 else first[:39] + "…"
    return f"text that is not JSON (line 1: {shown!r})"


_JSON_SCALAR_STARTS = tuple(b'"-0123456789ntf')


def _not_plain(name: str, data: bytes) -> InputError | None:
    """Inputs that are one step from readable: compressed, or text in UTF-16."""
    if data[:2] == b"\x1f\x8b":
        return InputError(f"{name}: gzip-compressed data; decompress it first (gunzip)")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return InputError(f"{name}: UTF-16 text; convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)")
    if data[:4] == b"PK\x03\x04":
        return InputError(f"{name}: a zip archive; extract the trace file from it first")
    return None


def read_input(name: str, data: bytes, loaded: Loaded) -> None:
    """Add one input's requests to ``loaded``; :class:`InputError` says why it cannot be read."""
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark (Windows editors)
    if not data.strip():
        raise InputError(f"{name}: empty input; expected {KINDS}")
    refused = _not_plain(name, data)
    if refused is not None:
        raise refused
    try:
        _read_input(name, data, loaded)
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deeply to read") from None


def _read_input(name: str, data: bytes, loaded: Loaded) -> None:
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"["):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{name}: not UTF-8 text at byte {error.start}") from None
        _read_json(name, text, loaded)
        return
    if stripped[0] in _JSON_SCALAR_STARTS:
        # A lone JSON value (``null``, ``42``, ``"x"``): say what it is, not "binary data".
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            document = ...
        if document is not ...:
            raise InputError(f"{name}: {_json_kind(document)}, not {KINDS}")
    _read_protobuf(name, data, loaded)


def read_inputs(named: Sequence[tuple[str, bytes]]) -> Loaded:
    """Every input into export requests; an input that yields no trace or log is refused."""
    loaded = Loaded()
    for name, data in named:
        before = len(loaded.traces) + len(loaded.logs)
        read_input(name, data, loaded)
        if len(loaded.traces) + len(loaded.logs) == before:
            raise InputError(f"{name}: no traces or logs in it; expected {KINDS}")
    return loaded
