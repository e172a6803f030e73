"""``otel-footprint demo``: scripted agents through the recorder and the in-process processor.

No model, no network, no key: each scenario records a known run, the FootprintSpanProcessor decides
and annotates it, the timeline and the account are printed, and the annotated spans are written as
OTLP JSON (``-o``, one export request per run) or sent over OTLP (``--endpoint``).
"""

from __future__ import annotations

import argparse
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
from otel_footprint.commands.explain import render_run_text
from otel_footprint.commands.scenarios import SCENARIOS, run_scenarios
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk.decide import make_decider
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
        choices=("grpc", "http/protobuf"),
        help="OTLP protocol for --endpoint (default: http/protobuf when the URL ends in "
        "/v1/traces, else grpc)",
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


def _forwarder(endpoint: str | None, protocol: str | None) -> SpanExporter | None:
    if endpoint is None:
        return None
    chosen = protocol or (
        "http/protobuf" if endpoint.rstrip("/").endswith("/v1/traces") else "grpc"
    )
    if chosen == "grpc":
        insecure = not endpoint.startswith("https://")
        return otlp_span_exporter("grpc", endpoint=endpoint, insecure=insecure, timeout=10)
    return otlp_span_exporter("http/protobuf", endpoint=endpoint, timeout=10)


def write_otlp_json(spans: Sequence[ReadableSpan], path: Path) -> int:
    """Write ``spans`` as OTLP JSON, one ExportTraceServiceRequest per trace; returns the lines."""
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        trace_id = span.context.trace_id if span.context is not None else 0
        by_trace.setdefault(trace_id, []).append(span)
    requests = [encode_spans(group) for group in by_trace.values()]
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(requests_to_jsonl(requests))
    return len(requests)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the scenarios, print each run's timeline and account, write or send the spans."""
    verdicts: list[RunVerdict] = []
    collector = _Collector(_forwarder(args.endpoint, args.protocol))
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
        out.write(render_run_text(verdict) if verdict else "  (no verdict: see the counters)\n")
        out.write("\n")
    stats = processor.stats()
    out.write(
        f"{len(collector.spans)} spans exported, {stats.spans_annotated} annotated, "
        f"{stats.runs_decided} run{'' if stats.runs_decided == 1 else 's'} decided\n"
    )
    status = 0
    if args.output is not None:
        lines = write_otlp_json(collector.spans, args.output)
        out.write(f"wrote {lines} OTLP JSON export requests to {args.output}\n")
    if args.endpoint is not None:
        if collector.failed:
            out.write(f"{collector.failed} spans could not be sent to {args.endpoint}\n")
            status = 1
        else:
            out.write(f"sent to {args.endpoint}\n")
    if stats.decision_errors or stats.runs_decided < len(chosen):
        status = 1
    return status
