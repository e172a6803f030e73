"""``explain`` reads what people have: stdin, OTLP protobuf (single, Collector-framed, delimited), the
Collector file exporter's JSON lines, and a trace downloaded from the Jaeger UI — each giving the
same runs as the OTLP JSON of the same spans.

The Jaeger document is written here by the OTLP → Jaeger translation rules (Collector contrib's
``pkg/translator/jaeger``: ids in hex, microseconds, typed tags, arrays as JSON text, events as
logs with an ``event`` field, ``span.kind`` / ``otel.status_code`` tags, links as FOLLOWS_FROM).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _shared import RECORDINGS
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.bridges.otlpjson import requests_to_jsonl
from otel_footprint.commands.cli import main

RECORDING = RECORDINGS / "no-kernel.ndjson"
pytestmark = pytest.mark.skipif(not RECORDING.exists(), reason="recordings not on this machine")


def _requests() -> list[ExportTraceServiceRequest]:
    return recording_to_requests(RECORDING.read_text().splitlines())


def _runs(*args: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    assert main(["explain", *args, "--format", "json"], out) == 0
    runs: list[dict[str, Any]] = json.loads(out.getvalue())["runs"]
    return runs


def _view(runs: list[dict[str, Any]]) -> list[Any]:
    """What a reader must not change: passes, engagement, checks, signals, summary."""
    return [
        (
            r["runId"],
            r["mode"],
            [(p["iteration"], p["engagedMaps"], p["parkedMaps"], p["servedWhileParked"])
             for p in r["passes"]],
            r["engagement"],
            {k: v["status"] for k, v in r["checks"].items()},
            r["signals"],
            r["summary"],
            r["rodeWhileParked"],
        )
        for r in runs
    ]  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    path = tmp_path_factory.mktemp("ref") / "otlp.jsonl"
    path.write_text("".join(requests_to_jsonl(_requests())))
    view = _view(_runs(str(path)))
    assert view and view[0][1] == "shadow"  # a run with something riding while parked
    assert view[0][-1], "the reference run should ride while parked"
    return view


def test_stdin_is_read_like_a_file(reference: list[Any]) -> None:
    data = "".join(requests_to_jsonl(_requests())).encode()
    done = subprocess.run(
        [sys.executable, "-m", "otel_footprint.commands.cli", "explain", "-", "--format", "json"],
        input=data,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert _view(json.loads(done.stdout)["runs"]) == reference


def _delimited(messages: list[bytes], style: str) -> bytes:
    out = b""
    for message in messages:
        if style == "fixed32":
            out += len(message).to_bytes(4, "big") + message
        else:
            size, prefix = len(message), b""
            while True:
                byte = size & 0x7F
                size >>= 7
                prefix += bytes([byte | (0x80 if size else 0)])
                if not size:
                    break
            out += prefix + message
    return out


@pytest.mark.parametrize("form", ["single", "fixed32", "varint"])
def test_otlp_protobuf_files(tmp_path: Path, reference: list[Any], form: str) -> None:
    requests = _requests()
    if form == "single":
        merged = ExportTraceServiceRequest()
        for request in requests:
            merged.resource_spans.extend(request.resource_spans)
        data = merged.SerializeToString()
    else:
        data = _delimited([r.SerializeToString() for r in requests], form)
    path = tmp_path / "traces.binpb"
    path.write_bytes(data)
    assert _view(_runs(str(path))) == reference


# ── a Jaeger UI download, written by the OTLP → Jaeger rules ─────────────────────────────────


def _tag(key: str, value: AnyValue) -> dict[str, Any]:
    kind = value.WhichOneof("value")
    if kind == "bool_value":
        return {"key": key, "type": "bool", "value": value.bool_value}
    if kind == "int_value":
        return {"key": key, "type": "int64", "value": value.int_value}
    if kind == "double_value":
        return {"key": key, "type": "float64", "value": value.double_value}
    if kind == "array_value":
        items = [json_format.MessageToDict(v) for v in value.array_value.values]
        plain = [next(iter(i.values())) if i else None for i in items]
        plain = [int(p) if isinstance(p, str) and p.lstrip("-").isdigit() else p for p in plain]
        return {"key": key, "type": "string", "value": json.dumps(plain)}
    return {"key": key, "type": "string", "value": value.string_value}


def _jaeger_span(span: Span, process: str, scope: str) -> dict[str, Any]:
    refs = []
    if span.parent_span_id:
        refs.append(
            {
                "refType": "CHILD_OF",
                "traceID": span.trace_id.hex(),
                "spanID": span.parent_span_id.hex(),
            }
        )
    refs += [
        {"refType": "FOLLOWS_FROM", "traceID": link.trace_id.hex(), "spanID": link.span_id.hex()}
        for link in span.links
    ]
    tags = [_tag(kv.key, kv.value) for kv in span.attributes]
    kinds = {2: "server", 3: "client", 4: "producer", 5: "consumer"}
    if span.kind in kinds:
        tags.append({"key": "span.kind", "type": "string", "value": kinds[span.kind]})
    if span.status.code == 2:
        tags += [
            {"key": "otel.status_code", "type": "string", "value": "ERROR"},
            {"key": "error", "type": "bool", "value": True},
        ]
    tags.append({"key": "otel.scope.name", "type": "string", "value": scope})
    tags.append({"key": "internal.span.format", "type": "string", "value": "otlp"})
    return {
        "traceID": span.trace_id.hex(),
        "spanID": span.span_id.hex(),
        "operationName": span.name,
        "references": refs,
        "startTime": span.start_time_unix_nano // 1000,
        "duration": (span.end_time_unix_nano - span.start_time_unix_nano) // 1000,
        "tags": tags,
        "logs": [
            {
                "timestamp": event.time_unix_nano // 1000,
                "fields": [
                    {"key": "event", "type": "string", "value": event.name},
                    *(_tag(kv.key, kv.value) for kv in event.attributes),
                ],
            }
            for event in span.events
        ],
        "processID": process,
        "warnings": None,
    }


def _jaeger_download(requests: list[ExportTraceServiceRequest]) -> dict[str, Any]:
    traces: dict[str, dict[str, Any]] = {}
    for request in requests:
        for index, rs in enumerate(request.resource_spans):
            service = next(
                (
                    kv.value.string_value
                    for kv in rs.resource.attributes
                    if kv.key == "service.name"
                ),
                "unknown",
            )
            for ss in rs.scope_spans:
                for span in ss.spans:
                    trace = traces.setdefault(
                        span.trace_id.hex(),
                        {
                            "traceID": span.trace_id.hex(),
                            "spans": [],
                            "processes": {},
                            "warnings": None,
                        },
                    )
                    process = f"p{index + 1}"
                    trace["processes"][process] = {
                        "serviceName": service,
                        "tags": [
                            _tag(kv.key, kv.value)
                            for kv in rs.resource.attributes
                            if kv.key != "service.name"
                        ],
                    }
                    trace["spans"].append(_jaeger_span(span, process, ss.scope.name))
    return {"data": list(traces.values()), "total": 0, "limit": 0, "offset": 0, "errors": None}


def test_a_jaeger_ui_download(tmp_path: Path, reference: list[Any]) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_jaeger_download(_requests()), indent=2))
    assert _view(_runs(str(path))) == reference


def test_the_collector_file_exporter_json_mixed_with_metrics(
    tmp_path: Path, reference: list[Any]
) -> None:
    lines = list(requests_to_jsonl(_requests()))
    lines.insert(1, json.dumps({"resourceMetrics": []}) + "\n")
    path = tmp_path / "collector.jsonl"
    path.write_text("".join(lines))
    assert _view(_runs(str(path))) == reference


def test_a_bad_jaeger_document_names_the_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _jaeger_download(_requests())
    doc["data"][0]["spans"][2]["spanID"] = "not-hex"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert main(["explain", str(path)], io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "trace 1 span 3 spanID" in err and "not hex" in err


def _tempo_batches(old_names: bool = False) -> list[dict[str, Any]]:
    """Every resource's spans as Tempo keeps them: the protobuf JSON mapping (base64 ids)."""
    batches = []
    for request in _requests():
        for resource_spans in request.resource_spans:
            batch = json_format.MessageToDict(resource_spans)
            if old_names:  # Tempo releases before OTLP 0.19's names
                batch["instrumentationLibrarySpans"] = batch.pop("scopeSpans")
                for scope_spans in batch["instrumentationLibrarySpans"]:
                    scope_spans["instrumentationLibrary"] = scope_spans.pop("scope", {})
            batches.append(batch)
    return batches


@pytest.mark.parametrize(
    "shape",
    ["v1-batches", "v2-trace-batches", "v2-trace-resource-spans", "old-names"],
)
def test_a_tempo_trace_download_gives_the_same_runs(
    shape: str, reference: list[Any], tmp_path: Path
) -> None:
    """Tempo's ``/api/traces/<id>`` (``{"batches": ...}``) and ``/api/v2/traces/<id>``
    (``{"trace": ...}``) downloads, as Grafana saves them too."""
    batches = _tempo_batches(old_names=shape == "old-names")
    document: dict[str, Any] = {
        "v1-batches": {"batches": batches},
        "v2-trace-batches": {"trace": {"batches": batches}, "status": "complete"},
        "v2-trace-resource-spans": {"trace": {"resourceSpans": batches}},
        "old-names": {"batches": batches},
    }[shape]
    path = tmp_path / "tempo.json"
    path.write_text(json.dumps(document, indent=2))
    assert _view(_runs(str(path))) == reference


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"batches": []}, "a Tempo trace download with no spans in it"),
        ({"trace": {}}, "a Tempo trace download with no spans in it"),
        ({"batches": [7]}, "a Tempo batch is a JSON int"),
    ],
)
def test_an_empty_or_broken_tempo_download_says_so(
    document: Any, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tempo.json"
    path.write_text(json.dumps(document))
    assert main(["explain", str(path)], io.StringIO()) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"null\n", "a JSON null, not OTLP JSON"),
        (b"42", "a JSON number"),
        (b'"a trace"', "a JSON string"),
        (b"true", "JSON true"),
        (b"[]", "an empty JSON list"),
        (
            b"trace id 4bf92f3577b34da6\n",
            "text that is not JSON (line 1: 'trace id 4bf92f3577b34da6')",
        ),
        (bytes(range(256)), "binary data"),
    ],
)
def test_what_is_not_a_trace_is_named(
    data: bytes, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "input"
    path.write_bytes(data)
    assert main(["explain", str(path)], io.StringIO()) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert len(err.splitlines()) == 1


def test_a_byte_order_mark_is_not_part_of_the_input(reference: list[Any], tmp_path: Path) -> None:
    """A Windows editor's UTF-8 byte order mark before the JSON: read as if it were not there."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(requests_to_jsonl(_requests())).encode())
    assert _view(_runs(str(path))) == reference
