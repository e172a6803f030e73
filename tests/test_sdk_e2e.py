"""End-to-end: annotated spans through the REAL OTLP gRPC exporter into a REAL OTLP receiver on
loopback — via the processor, via the annotating exporter, and via SDK autoconfiguration
(``OTEL_TRACES_EXPORTER=footprint_otlp`` resolved through the entry point, in a fresh process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_footprint import semconv as sc
from otel_footprint.commands.scenarios import SCENARIOS, run_script
from otel_footprint.runs.spans import key_values_to_pairs
from otel_footprint.sdk import FootprintOTLPSpanExporter, FootprintSpanProcessor
from otel_footprint.sdk.exporter import AutoconfiguredFootprintExporter


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver that keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[PbSpan] = []
        self.requests = 0
        self._lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        with self._lock:
            self.requests += 1
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def named(self, prefix: str) -> list[PbSpan]:
        with self._lock:
            return [s for s in self.spans if s.name.startswith(prefix)]


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, int]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = Receiver()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(0)


def attrs(span: PbSpan) -> dict[str, Any]:
    return dict(key_values_to_pairs(span.attributes))


def events(span: PbSpan, name: str) -> list[dict[str, Any]]:
    return [dict(key_values_to_pairs(e.attributes)) for e in span.events if e.name == name]


def run_of(receiver: Receiver, run_id: str) -> tuple[PbSpan, list[PbSpan]]:
    (run,) = [s for s in receiver.named("invoke_agent") if attrs(s).get(sc.RUN_ID) == run_id]
    passes = [s for s in receiver.spans if s.trace_id == run.trace_id and s.name.startswith("chat")]
    return run, sorted(passes, key=lambda s: attrs(s)[sc.PASS_ITERATION])


def assert_stuck_turn(receiver: Receiver, run_id: str, shadow: bool) -> None:
    run, passes = run_of(receiver, run_id)
    assert len(passes) == 30
    fourth = attrs(passes[3])
    assert fourth[sc.ENG_PARKED_MAPS] == ("skill-map",)
    (parked,) = events(passes[3], sc.EV_ENGAGEMENT_PARKED)
    assert parked[sc.CH_IDLE_CALLS] == 3 and parked[sc.CH_BY] == "lexical"
    for later in passes[3:]:
        assert attrs(later)[sc.ENG_SERVED_WHILE_PARKED] == (("zone-audit",) if shadow else ())
    for earlier in passes[:3]:
        assert attrs(earlier)[sc.ENG_PARKED_MAPS] == ()
    run_attrs = attrs(run)
    assert run_attrs[sc.RUN_MODE] == ("shadow" if shadow else "verify")
    assert run_attrs[sc.RUN_PASSES] == 30 and run_attrs[sc.RUN_COMPLETE] is True
    assert run_attrs[sc.CHECK_DECIDED_DELIVERED] == "unreachable"  # no turn-start routing
    evaluations = events(run, sc.EV_EVALUATION_RESULT)
    assert {e[sc.EVAL_NAME] for e in evaluations} == {
        "footprint.decided-delivered",
        "footprint.existence",
        "footprint.empty-results",
        # a map is mounted: the integrity compose row is armed (its tools were not recorded)
        "footprint.integrity.invariant-violation@compose",
    }
    assert run_attrs[sc.INTEGRITY_STATE] == "unreachable"


def test_processor_through_the_real_otlp_grpc_exporter(receiver: tuple[Receiver, int]) -> None:
    servicer, port = receiver
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=5)
    processor = FootprintSpanProcessor(exporter, grace_seconds=0.05)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("e2e")
    for name in ("stuck-shadow", "stuck-verify", "routed-not-delivered"):
        run_script(tracer, SCENARIOS[name].script)
    assert processor.force_flush(10_000)
    provider.shutdown()

    assert_stuck_turn(servicer, "stuck-30-shadow", shadow=True)
    assert_stuck_turn(servicer, "stuck-30-verify", shadow=False)
    run, _ = run_of(servicer, "routed-not-delivered")
    run_attrs = attrs(run)
    assert run_attrs[sc.CHECK_DECIDED_DELIVERED] == "reachable"
    assert run_attrs[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "not-delivered"
    assert run_attrs[sc.SIGNALS] == ("decided-not-delivered",)
    assert run_attrs[sc.SUMMARY_TONE] == "bad"
    (check1,) = [
        e
        for e in events(run, sc.EV_EVALUATION_RESULT)
        if e[sc.EVAL_NAME] == "footprint.decided-delivered"
    ]
    assert check1[sc.EVAL_SCORE_LABEL] == "fail"
    assert run.links and all(
        dict(key_values_to_pairs(link.attributes))[sc.LINK_EVIDENCE] for link in run.links
    )
    linked = {link.span_id for link in run.links}
    assert linked <= {s.span_id for s in servicer.spans if s.trace_id == run.trace_id}
    assert len(servicer.spans) == (1 + 30 + 29) * 2 + 4


def test_annotating_exporter_sends_other_spans_at_once_and_runs_annotated(
    receiver: tuple[Receiver, int],
) -> None:
    servicer, port = receiver
    exporter = FootprintOTLPSpanExporter(
        endpoint=f"127.0.0.1:{port}", insecure=True, timeout=5, grace_seconds=30
    )
    processor = BatchSpanProcessor(exporter, schedule_delay_millis=20)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("e2e")
    with tracer.start_as_current_span("GET /health"):
        pass
    run_script(tracer, SCENARIOS["recovery"].script)
    deadline = time.monotonic() + 5
    while not servicer.named("GET /health") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert servicer.named("GET /health") and not servicer.named("invoke_agent")
    provider.shutdown()  # the batch processor flushes, the exporter sends its held runs
    run, passes = run_of(servicer, "recovery-explicit-pick")
    assert attrs(run)[sc.RUN_MODE] == "verify"
    (reengaged,) = events(passes[4], sc.EV_ENGAGEMENT_ENGAGED)
    assert reengaged[sc.CH_REENGAGED] is True and reengaged[sc.CH_BY] == "explicit"
    assert all(attrs(p)[sc.ENG_MISMATCH] is False for p in passes)
    stats = exporter.stats()
    assert stats.runs_decided == 1 and stats.sink_failures == 0


_AUTOCONFIGURED_AGENT = textwrap.dedent(
    """
    from opentelemetry import trace
    from opentelemetry.sdk._configuration import _initialize_components
    from otel_footprint.commands.scenarios import SCENARIOS, run_script

    _initialize_components()  # what opentelemetry-instrument / the distro run at start-up
    provider = trace.get_tracer_provider()
    run_script(trace.get_tracer("autoconfigured"), SCENARIOS["routed-delivered"].script)
    provider.shutdown()
    """
)


def test_otel_traces_exporter_footprint_otlp_selects_the_annotating_exporter(
    receiver: tuple[Receiver, int],
) -> None:
    from importlib.metadata import entry_points

    (entry,) = entry_points(group="opentelemetry_traces_exporter", name="footprint_otlp")
    assert entry.load() is AutoconfiguredFootprintExporter

    servicer, port = receiver
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "footprint_otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_SERVICE_NAME": "autoconfigured-agent",
        "FOOTPRINT_GRACE_SECONDS": "30",  # only the shutdown flush can release the run
    }
    done = subprocess.run(
        [sys.executable, "-c", _AUTOCONFIGURED_AGENT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    run, passes = run_of(servicer, "routed-delivered")
    run_attrs = attrs(run)
    assert run_attrs[sc.CHECK_DECIDED_DELIVERED] == "reachable"
    assert run_attrs[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "delivered"
    assert [attrs(p)[sc.ENG_ENGAGED_MAPS] for p in passes] == [("skill-map",), ("skill-map",)]


_AUTOCONFIGURED_INSTRUMENTED_AGENT = textwrap.dedent(
    """
    import sys

    sys.path.insert(0, sys.argv[1])  # tests/: the fake server and the agent
    import openai
    from fake_openai import FakeOpenAI
    from integration_agents import SCRIPT, instrumented_agent
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry import trace
    from opentelemetry.sdk._configuration import _initialize_components

    _initialize_components()
    provider = trace.get_tracer_provider()
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    with FakeOpenAI(SCRIPT) as server:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        instrumented_agent(client, trace.get_tracer("autoconfigured"))
    provider.shutdown()
    """
)


def test_footprint_otlp_installs_the_span_start_hook_for_staged_passes(
    receiver: tuple[Receiver, int],
) -> None:
    """``OTEL_TRACES_EXPORTER=footprint_otlp`` and nothing else: the passes the agent states on its
    run land on OpenInference's model-call spans (without the hook: ``unattached-pass``)."""
    pytest.importorskip(
        "openinference.instrumentation.openai", reason="pip install -e '.[integrations]'"
    )
    servicer, port = receiver
    env = {
        **os.environ,
        "OTEL_TRACES_EXPORTER": "footprint_otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "FOOTPRINT_GRACE_SECONDS": "30",
    }
    tests = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", _AUTOCONFIGURED_INSTRUMENTED_AGENT, tests],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (run,) = servicer.named("invoke_agent")
    run_attrs = attrs(run)
    assert run_attrs.get(sc.RUN_REASONS, ()) == ()
    assert run_attrs[sc.RUN_PASSES] == 2 and run_attrs[sc.RUN_COMPLETE] is True
    passes = [s for s in servicer.named("ChatCompletion") if sc.PASS_ITERATION in attrs(s)]
    assert sorted(attrs(p)[sc.PASS_ITERATION] for p in passes) == [1, 2]
    assert all(attrs(p)[sc.ENG_ENGAGED_MAPS] == ("billing-map",) for p in passes)
