"""``otel-footprint import agentfootprint``: an upstream NDJSON recording as OTLP traces, to a file or
an OTLP endpoint (gRPC or HTTP/protobuf)."""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_footprint.bridges.agentfootprint import (
    DEFAULT_SERVICE_NAME,
    ImportOptions,
    RecordingError,
    recording_to_requests,
)
from otel_footprint.bridges.otlpjson import requests_to_jsonl
from otel_footprint.commands.errors import EXIT_FAILED, CommandError, check_writable
from otel_footprint.sdk.endpoint import (
    CONNECT_TIMEOUT,
    PROTOCOLS,
    Endpoint,
    EndpointError,
    resolve,
    unreachable,
    wrong_protocol_hint,
)

DEFAULT_TIMEOUT_S = 10.0


class ExportError(RuntimeError):
    """The endpoint could not be reached or did not accept the spans; the message says which."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {value}")
    return value


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def resource_attributes_from_env(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """``OTEL_RESOURCE_ATTRIBUTES`` (``k=v,k2=v2``, values percent-encoded) as pairs, in order."""
    pairs: list[tuple[str, str]] = []
    for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            pairs.append((key.strip(), urllib.parse.unquote(value.strip())))
    return pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags (contract: RECORDING, -o, --endpoint, --protocol, --renewal-grace)."""
    parser.add_argument("recording", metavar="RECORDING.ndjson", help="the recording ('-' = stdin)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write OTLP JSON lines (one export request per run leg) here; '-' or absent = stdout",
    )
    target.add_argument(
        "--endpoint",
        metavar="URL",
        help="send the traces to this OTLP receiver instead (e.g. http://127.0.0.1:4318)",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=None,
        help="OTLP protocol for --endpoint (default: OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, else "
        "http/protobuf for a URL ending in /v1/traces, else grpc)",
    )
    parser.add_argument(
        "--renewal-grace",
        type=_positive_int,
        metavar="N",
        help="the plan's renewal grace (default: a map.parked idleCalls in the recording, else 3)",
    )
    parkable = parser.add_mutually_exclusive_group()
    parkable.add_argument(
        "--non-parkable",
        dest="non_parkable",
        action="store_const",
        const=True,
        default=None,
        help="mount the skill map as nonParkable (default: inferred from the recording)",
    )
    parkable.add_argument(
        "--parkable",
        dest="non_parkable",
        action="store_const",
        const=False,
        help="mount the skill map as parkable, whatever the recording suggests",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"per-request timeout for --endpoint (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--service-name",
        default=None,
        help="service.name of the emitted resource (default: OTEL_SERVICE_NAME, else agentfootprint)",
    )
    parser.add_argument(
        "--resource-attribute",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="add a resource attribute, e.g. openinference.project.name=demo (repeatable; "
        "added to those of OTEL_RESOURCE_ATTRIBUTES, and wins over them)",
    )
    parser.add_argument(
        "--id-salt",
        default="",
        metavar="TEXT",
        help="mix TEXT into every trace and span id, so a re-import makes new traces",
    )


# ── sending ──────────────────────────────────────────────────────────────────────────────────


def _rejected(response: ExportTraceServiceResponse) -> str | None:
    partial = response.partial_success
    if partial.rejected_spans:
        return (
            f"the receiver rejected {partial.rejected_spans} spans: {partial.error_message or '-'}"
        )
    return None


def send_http(
    requests: Sequence[ExportTraceServiceRequest], endpoint: Endpoint, timeout: float
) -> None:
    """POST each request, serialized, to the traces URL (OTLP/HTTP protobuf)."""
    url = endpoint.target
    for request in requests:
        http_request = urllib.request.Request(
            url,
            data=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(http_request, timeout=timeout) as reply:
                body = reply.read()
                content_type = reply.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace").strip()
            raise ExportError(f"{url} answered HTTP {exc.code} {exc.reason}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ExportError(
                f"could not send to {url}: {reason}; {wrong_protocol_hint(endpoint)}"
            ) from None
        except http.client.HTTPException as exc:
            # Not an HTTP answer at all (e.g. a gRPC port): say so, with the likely cause.
            raise ExportError(
                f"{url} did not answer in HTTP ({type(exc).__name__}); "
                f"{wrong_protocol_hint(endpoint)}"
            ) from None
        if body and "protobuf" in content_type:
            response = ExportTraceServiceResponse()
            try:
                response.ParseFromString(body)
            except Exception:  # a non-OTLP answer is the receiver's business, not a failure
                continue
            rejected = _rejected(response)
            if rejected:
                raise ExportError(f"{url}: {rejected}")


def send_grpc(
    requests: Sequence[ExportTraceServiceRequest], endpoint: Endpoint, timeout: float
) -> None:
    """Call ``TraceService/Export`` once per request on a real gRPC channel."""
    import grpc  # imported here: the file path of the command must not pay for it
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    target, secure = endpoint.target, endpoint.secure
    channel = (
        grpc.secure_channel(target, grpc.ssl_channel_credentials())
        if secure
        else grpc.insecure_channel(target)
    )
    with channel:
        stub = TraceServiceStub(channel)  # type: ignore[no-untyped-call]
        for request in requests:
            try:
                response = stub.Export(request, timeout=timeout)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                name = code.name if code is not None else "ERROR"
                raise ExportError(
                    f"could not send to {target} (gRPC {name}): {details}; "
                    f"{wrong_protocol_hint(endpoint)}"
                ) from None
            if isinstance(response, ExportTraceServiceResponse):
                rejected = _rejected(response)
                if rejected:
                    raise ExportError(f"{target}: {rejected}")


# ── the command ──────────────────────────────────────────────────────────────────────────────


def _read_lines(path: str) -> list[str]:
    """The recording's lines; bytes that are not UTF-8 text are refused (file or stdin alike)."""
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    name = "stdin" if path == "-" else path
    if not data.strip():
        raise CommandError(f"{name}: empty input; expected an agentfootprint NDJSON recording")
    if data[:2] == b"\x1f\x8b":
        raise CommandError(f"{name}: gzip-compressed data; decompress it first (gunzip)")
    try:
        # utf-8-sig: a byte order mark (Windows editors) is not part of the first line.
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"{name}: not an NDJSON recording (not UTF-8 text at byte {exc.start})"
        ) from None


def _counts(requests: Sequence[ExportTraceServiceRequest]) -> tuple[int, int]:
    spans = events = 0
    for request in requests:
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans += len(scope_spans.spans)
                events += sum(len(span.events) for span in scope_spans.spans)
    return spans, events


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Import the recording and write or send it; exit 0, 1 (send failed) or 2 (bad input)."""
    started = time.perf_counter()
    try:
        endpoint = resolve(args.endpoint, args.protocol) if args.endpoint else None
    except EndpointError as exc:
        raise CommandError(str(exc)) from None
    if args.output not in (None, "-"):
        check_writable(Path(args.output))
    try:
        lines = _read_lines(args.recording)
    except OSError as exc:
        raise CommandError(f"cannot read {args.recording}: {exc.strerror or exc}") from None
    resource = dict(resource_attributes_from_env(os.environ))
    resource.update(args.resource_attribute)
    # The SDK's precedence: an explicit name, then OTEL_SERVICE_NAME, then the resource variable.
    service_name = (
        args.service_name
        or os.environ.get("OTEL_SERVICE_NAME")
        or resource.pop("service.name", None)
        or DEFAULT_SERVICE_NAME
    )
    resource.pop("service.name", None)
    options = ImportOptions(
        renewal_grace=args.renewal_grace,
        non_parkable=args.non_parkable,
        service_name=service_name,
        resource_attributes=tuple(resource.items()),
        id_salt=args.id_salt,
    )
    try:
        requests = recording_to_requests(lines, options)
    except RecordingError as exc:
        raise CommandError(f"{args.recording}: {exc}") from None
    except RecursionError:
        raise CommandError(f"{args.recording}: JSON nested too deeply to read") from None
    spans, events = _counts(requests)
    summary = f"{args.recording}: {len(requests)} run legs, {spans} spans, {events} events"
    if endpoint is not None:
        reason = unreachable(endpoint.target, min(args.timeout, CONNECT_TIMEOUT))
        if reason is not None:
            raise CommandError(
                f"cannot reach {endpoint.describe()}: {reason}; nothing sent", EXIT_FAILED
            )
        send = send_grpc if endpoint.protocol == "grpc" else send_http
        try:
            send(requests, endpoint, args.timeout)
        except ExportError as exc:
            raise CommandError(str(exc), EXIT_FAILED) from None
        elapsed = (time.perf_counter() - started) * 1000
        print(f"{summary} -> {endpoint.describe()}, {elapsed:.0f} ms", file=out)
        return 0
    if args.output in (None, "-"):
        out.writelines(requests_to_jsonl(requests))
        out.flush()
        print(summary, file=sys.stderr)
        return 0
    try:
        with Path(args.output).open("w", encoding="utf-8") as handle:
            handle.writelines(requests_to_jsonl(requests))
    except OSError as exc:
        raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    elapsed = (time.perf_counter() - started) * 1000
    print(f"{summary} -> {args.output} ({elapsed:.0f} ms)", file=out)
    return 0
