"""The test OTLP receiver itself: the Python SDK's real exporters reach it over gRPC, HTTP and
gzip-compressed HTTP, and it refuses what is not an OTLP traces request (no backend needed)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace.export import SpanExporter

from otel_footprint import semconv as sc

from .otlp_sink import OtlpSink, event_pairs
from .sdk_export import exporting_provider


@pytest.mark.parametrize("transport", ["grpc", "http", "http-gzip"])
def test_sdk_exporters_reach_the_sink(transport: str) -> None:
    with OtlpSink() as sink:
        exporter: SpanExporter
        if transport == "grpc":
            exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{sink.grpc_port}", insecure=True)
        else:
            exporter = HttpSpanExporter(
                endpoint=f"{sink.http_endpoint}/v1/traces",
                compression=Compression.Gzip
                if transport == "http-gzip"
                else Compression.NoCompression,
            )
        with exporting_provider(exporter, "sink-project", min_spans=2) as provider:
            tracer = provider.get_tracer("sink")
            with tracer.start_as_current_span("run") as run:
                run.set_attribute(sc.RUN_PASSES, 2)
                run.add_event(sc.EV_MAPS_MOUNTED, {sc.F_RENEWAL_GRACE: 3})
                with tracer.start_as_current_span("pass"):
                    pass
        spans = sink.wait_for_spans(2, timeout=10)

    by_name = {s.name: s for s in spans}
    assert by_name["pass"].parent_span_id == by_name["run"].span_id
    assert by_name["run"].attributes == {sc.RUN_PASSES: 2}
    assert by_name["run"].resource[sc.OI_PROJECT_NAME] == "sink-project"
    [event] = by_name["run"].events_named(sc.EV_MAPS_MOUNTED)
    assert event_pairs(event) == [(sc.F_RENEWAL_GRACE, 3)]


@pytest.mark.parametrize(
    ("path", "content_type", "body", "status"),
    [
        ("/v1/logs", "application/x-protobuf", b"", 404),
        ("/v1/traces", "application/json", b"{}", 415),
        ("/v1/traces", "application/x-protobuf", b"\xff\xff\xff", 400),
    ],
)
def test_sink_refuses_what_is_not_otlp_traces(
    path: str, content_type: str, body: bytes, status: int
) -> None:
    with OtlpSink() as sink:
        request = urllib.request.Request(
            sink.http_endpoint + path, data=body, headers={"Content-Type": content_type}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(request, timeout=5)
        assert refused.value.code == status
        assert sink.spans() == []
