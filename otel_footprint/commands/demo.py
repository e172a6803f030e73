"""``otel-footprint demo``: scripted agents through the recorder and the in-process processor.

No model, no network, no key: each scenario records a known run, the FootprintSpanProcessor decides
and annotates it, each run's verdict and compact timeline are printed (the account behind it with
``--account``), and the annotated spans are written as OTLP JSON (``-o``, one export request per run)
or sent over OTLP (``--endpoint``).
"""

from __future__ import annotations

import argparse
import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_footprint.annotate.form import AnnotateOptions
from otel_footprint.bridges.otlpjson import requests_to_jsonl
from otel_footprint.commands.errors import EXIT_FAILED, CommandError
from otel_footprint.commands.explain_text import render_run_text
from otel_footprint.commands.scenarios import SCENARIOS, run_scenarios
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk.decide import make_decider
from otel_footprint.sdk.endpoint import (
    PROTOCOLS,
    Endpoint,
    EndpointError,
    resolve,
    unreachable,
    wrong_protocol_hint,
)
from otel_footprint.sdk.exporter import otlp_span_exporter
from otel_footprint.sdk.processor import FootprintSpanProcessor

SERVICE_NAME = "otel-footprint-demo"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` command's options."""
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help=f"run only this scenario (repeatable; default: all of {', '.join(SCENARIOS)})",
    )
    parser.add_argument(
        "--account",
        action="store_true",
        help="also print the account behind each verdict (its rows, the final standing, every "
        "integrity check)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="write the annotated spans as OTLP JSON lines (one export request per run)",
    )
    parser.add_argument(
        "--endpoint", metavar="URL", help="also send the annotated spans to this OTLP endpoint"
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        help="OTLP protocol for --endpoint (default: OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, else "
        "http/protobuf for a URL ending in /v1/traces, else grpc)",
    )
    parser.add_argument(
        "--witness",
        choices=("keep", "hash", "drop"),
        default="keep",
        help="what to write of the user's matched words (default: keep)",
    )


class _Collector(SpanExporter):
    """Keeps every exported span (for the file) and forwards them to an OTLP exporter if any."""

    def __init__(self, forward: SpanExporter | None) -> None:
        self.spans: list[ReadableSpan] = []
        self.failed = 0
        self._forward = forward
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.spans.extend(spans)
        if self._forward is None:
            return SpanExportResult.SUCCESS
        result = self._forward.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        if self._forward is not None:
            self._forward.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._forward.force_flush(timeout_millis) if self._forward is not None else True


def _forwarder(endpoint: Endpoint | None) -> SpanExporter | None:
    if endpoint is None:
        return None
    if endpoint.protocol == "grpc":
        return otlp_span_exporter(
            "grpc", endpoint=endpoint.target, insecure=not endpoint.secure, timeout=10
        )
    return otlp_span_exporter("http/protobuf", endpoint=endpoint.target, timeout=10)


def write_otlp_json(spans: Sequence[ReadableSpan], out: TextIO) -> int:
    """Write ``spans`` as OTLP JSON, one ExportTraceServiceRequest per trace; returns the lines."""
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        trace_id = span.context.trace_id if span.context is not None else 0
        by_trace.setdefault(trace_id, []).append(span)
    requests = [encode_spans(group) for group in by_trace.values()]
    out.writelines(requests_to_jsonl(requests))
    return len(requests)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the scenarios, print each run's verdict and timeline, write or send the spans."""
    # Everything that can be refused is checked before the scenarios run, not after.
    try:
        endpoint = resolve(args.endpoint, args.protocol) if args.endpoint else None
    except EndpointError as error:
        raise CommandError(str(error)) from None
    if endpoint is not None:
        reason = unreachable(endpoint.target)
        if reason is not None:
            raise CommandError(
                f"cannot reach {endpoint.describe()}: {reason}; nothing sent", EXIT_FAILED
            )
    output: TextIO | None = None
    if args.output is not None:
        try:
            output = args.output.open("w", encoding="utf-8")
        except OSError as error:
            raise CommandError(f"cannot write {args.output}: {error.strerror or error}") from None
    exporter_log = _ExporterLog()
    try:
        with exporter_log:
            return _run(args, out, endpoint, output, exporter_log)
    finally:
        if output is not None:
            output.close()


class _ExporterLog(logging.Handler):
    """Keeps the OTLP exporter's last complaint for the one error line, instead of letting its
    retry warnings reach stderr (the demo reports a failed send itself)."""

    LOGGER = "opentelemetry.exporter"

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self._logger = logging.getLogger(self.LOGGER)
        self._propagate = self._logger.propagate

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()

    def __enter__(self) -> _ExporterLog:
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def __exit__(self, *_: object) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate

    def reason(self) -> str:
        """The last complaint, short: gRPC's status and first detail (``UNAVAILABLE: failed to
        connect to all addresses``), else its first 100 characters."""
        if not self.last:
            return ""
        text = " ".join(self.last.split())
        status = re.search(r"StatusCode\.(\w+)(?:, error details: ([^;]+))?", text)
        if status is not None:
            detail = f": {status.group(2).strip()}" if status.group(2) else ""
            return f" ({status.group(1)}{detail[:100]})"
        return f" ({text[:100]}{'…' if len(text) > 100 else ''})"


def _run(
    args: argparse.Namespace,
    out: TextIO,
    endpoint: Endpoint | None,
    output: TextIO | None,
    exporter_log: _ExporterLog,
) -> int:
    verdicts: list[RunVerdict] = []
    collector = _Collector(_forwarder(endpoint))
    decider = make_decider(
        annotate_options=AnnotateOptions(witness=args.witness), on_verdict=verdicts.append
    )
    processor = FootprintSpanProcessor(collector, grace_seconds=0.05, decider=decider)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(processor)
    try:
        chosen = run_scenarios(provider.get_tracer("otel_footprint.demo"), args.scenario)
        processor.force_flush(30_000)
    finally:
        provider.shutdown()

    by_run = {v.run_id: v for v in verdicts}
    for scenario in chosen:
        out.write(f"== {scenario.name}: {scenario.description}\n")
        verdict = by_run.get(scenario.script.run_id)
        out.write(
            render_run_text(verdict, account=args.account)
            if verdict
            else "  (no verdict: see the counters)\n"
        )
        out.write("\n")
    stats = processor.stats()
    out.write(
        f"{len(collector.spans)} spans exported, {stats.spans_annotated} annotated, "
        f"{stats.runs_decided} run{'' if stats.runs_decided == 1 else 's'} decided\n"
    )
    if not args.account:
        out.write("the account behind each verdict: otel-footprint demo --account\n")
    if output is not None:
        lines = write_otlp_json(collector.spans, output)
        out.write(f"wrote {lines} OTLP JSON export requests to {args.output}\n")
    if endpoint is not None:
        if collector.failed:
            raise CommandError(
                f"{collector.failed} spans could not be sent to {endpoint.describe()}"
                f"{exporter_log.reason()}; {wrong_protocol_hint(endpoint)}",
                EXIT_FAILED,
            )
        out.write(f"sent to {endpoint.describe()}\n")
    return 1 if stats.decision_errors or stats.runs_decided < len(chosen) else 0
