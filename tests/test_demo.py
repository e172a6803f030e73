"""Functional: ``otel-footprint demo`` writes annotated spans as OTLP JSON and sends them over OTLP."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from otel_footprint import semconv as sc
from otel_footprint.bridges.otlpjson import read_otlp_json_lines
from otel_footprint.commands.cli import main
from otel_footprint.runs.spans import key_values_to_pairs


def attrs(span: PbSpan) -> dict[str, Any]:
    return dict(key_values_to_pairs(span.attributes))


def spans_of(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> list[PbSpan]:
    return [
        span
        for request in requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def run_and_passes(spans: list[PbSpan], run_id: str) -> tuple[PbSpan, list[PbSpan]]:
    (run,) = [s for s in spans if attrs(s).get(sc.RUN_ID) == run_id]
    passes = [s for s in spans if s.trace_id == run.trace_id and s.name.startswith("chat ")]
    return run, sorted(passes, key=lambda s: attrs(s)[sc.PASS_ITERATION])


def test_demo_writes_the_done_criteria_as_otlp_json(tmp_path: Path) -> None:
    out = io.StringIO()
    target = tmp_path / "out.jsonl"
    assert main(["demo", "-o", str(target)], out) == 0
    text = out.getvalue()
    for name in ("stuck-verify", "stuck-shadow", "recovery", "routed-delivered"):
        assert f"== {name}:" in text
    assert "Run routed-not-delivered — something went wrong: The billing skill was chosen" in text

    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5  # one export request per scripted run
    spans = spans_of(list(read_otlp_json_lines(lines)))
    for run_id, shadow in (("stuck-30-verify", False), ("stuck-30-shadow", True)):
        run, passes = run_and_passes(spans, run_id)
        fourth = passes[3]
        assert attrs(fourth)[sc.ENG_PARKED_MAPS] == ("skill-map",)
        assert [e.name for e in fourth.events].count(sc.EV_ENGAGEMENT_PARKED) == 1
        rode = [attrs(p)[sc.ENG_SERVED_WHILE_PARKED] for p in passes[3:]]
        assert rode == [("zone-audit",) if shadow else ()] * 27
        run_attrs = attrs(run)
        assert sc.CHECK_DECIDED_DELIVERED in run_attrs and sc.CHECK_EXISTENCE in run_attrs
        assert sc.EV_EVALUATION_RESULT in [e.name for e in run.events]
    run, _ = run_and_passes(spans, "routed-delivered")
    assert attrs(run)[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "delivered"


def test_demo_one_scenario_with_hashed_witness(tmp_path: Path) -> None:
    target = tmp_path / "one.jsonl"
    out = io.StringIO()
    args = ["demo", "--scenario", "recovery", "--witness", "hash", "-o", str(target)]
    assert main(args, out) == 0
    spans = spans_of(list(read_otlp_json_lines(target.read_text().splitlines())))
    assert {attrs(s).get(sc.RUN_ID) for s in spans} - {None} == {"recovery-explicit-pick"}
    witnesses = [
        dict(key_values_to_pairs(e.attributes)).get(sc.CH_WITNESS)
        for s in spans
        for e in s.events
        if e.name in (sc.EV_ENGAGEMENT_ENGAGED, sc.EV_ENGAGEMENT_PARKED)
    ]
    assert witnesses and all(w is None or str(w).startswith("sha256:") for w in witnesses)
    assert any(w is not None for w in witnesses)


class _Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[PbSpan] = []

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.spans.extend(spans_of([request]))
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def receiver() -> Iterator[tuple[_Receiver, int]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = _Receiver()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(0)


def test_demo_sends_over_otlp(receiver: tuple[_Receiver, int]) -> None:
    servicer, port = receiver
    out = io.StringIO()
    args = ["demo", "--scenario", "routed-not-delivered", "--endpoint", f"http://127.0.0.1:{port}"]
    assert main(args, out) == 0, out.getvalue()
    run, passes = run_and_passes(servicer.spans, "routed-not-delivered")
    assert attrs(run)[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == "not-delivered"
    assert len(passes) == 2
    assert f"sent to http://127.0.0.1:{port}" in out.getvalue()


def test_demo_refuses_an_unknown_scenario() -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--scenario", "nope"], io.StringIO())


def test_the_readme_shows_what_the_demo_prints() -> None:
    """README's "What you will see" is the demo's output (its random ids aside), line for line."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("**What you will see.**", 1)[1].split("**Run the demo**", 1)[0]
    [block] = re.findall(r"^```text\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    out = io.StringIO()
    assert main(["demo"], out) == 0

    def runs(text: str) -> list[str]:
        ids = re.sub(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{16}\b", "<id>", text)
        return [run.strip("\n") for run in re.split(r"\n\s*\n|^== .*$", ids, flags=re.M) if run]

    printed = runs(out.getvalue())
    shown = runs(block)
    assert len(shown) == 2
    for run in shown:
        assert run in printed, run


def test_the_account_is_behind_a_flag() -> None:
    out = io.StringIO()
    assert main(["demo", "--scenario", "routed-not-delivered"], out) == 0
    assert "You asked" not in out.getvalue()
    assert "otel-footprint demo --account" in out.getvalue()
    out = io.StringIO()
    assert main(["demo", "--scenario", "routed-not-delivered", "--account"], out) == 0
    text = out.getvalue()
    for title in ("You asked:", "It understood:", "Anything wrong:", "final: skill-map"):
        assert f"  {title}" in text, title
    assert "otel-footprint demo --account" not in text


def test_the_failed_calls_say_so_in_the_timeline() -> None:
    out = io.StringIO()
    assert main(["demo"], out) == 0
    runs = out.getvalue().split("\n== ")
    (failed,) = [run for run in runs if run.startswith("routed-not-delivered")]
    rows = [line for line in failed.splitlines() if re.match(r"  \d+ ", line)]
    assert len(rows) == 2 and all("  check 1 failed" in row for row in rows), rows
    for run in runs:
        if not run.startswith("routed-not-delivered"):
            assert "failed" not in run.replace("FAILED", ""), run
