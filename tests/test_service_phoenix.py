"""``exporters.phoenix_annotations``: the hop posts check results as Phoenix span annotations after
forwarding, in the background, bounded, never holding back or failing the spans.

A real HTTP server on 127.0.0.1 stands in for Phoenix's ``/v1/span_annotations`` (it records what
it is sent and can be told to fail); the last test runs against a real Phoenix when one is
configured (``OTEL_FOOTPRINT_PHOENIX_URL``, see docs/e2e.md) and is skipped otherwise.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_support import HopProcess, Sink, emit_run, sdk_client

from otel_footprint import semconv
from otel_footprint.annotate.phoenix import annotations_from_request
from otel_footprint.sdk.settings import PhoenixAnnotationsSettings
from otel_footprint.service import config as configuration
from otel_footprint.service.metrics import HopMetrics
from otel_footprint.service.phoenix import PhoenixAnnotations


class StandIn:
    """Phoenix's span-annotation endpoint as a real HTTP server: records requests, answers
    ``status`` (200 with ids by default)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.changed = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.changed:
                    outer.requests.append(body)
                    outer.paths.append(self.path)
                    outer.headers.append(dict(self.headers))
                    outer.changed.notify_all()
                if outer.status == 200:
                    ids = [{"id": f"a{i}"} for i in range(len(body["data"]))]
                    reply = json.dumps({"data": ids}).encode()
                else:
                    reply = json.dumps({"detail": "stand-in failure"}).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def annotations(self) -> list[dict[str, Any]]:
        with self.changed:
            return [a for body in self.requests for a in body["data"]]

    def wait_for(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.changed:
            while sum(len(b["data"]) for b in self.requests) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {self.requests} arrived"
                self.changed.wait(left)
        return self.annotations()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink().start()
    yield s
    s.stop()


def _hop(tmp_path: Path, sink: Sink, endpoint: str, *extra: str) -> HopProcess:
    return HopProcess(
        tmp_path / "data",
        sink.endpoint,
        "--set",
        "processing.release_grace=200ms",
        "--set",
        f"exporters.phoenix_annotations.endpoint={endpoint}",
        "--set",
        "exporters.phoenix_annotations.project=hop-tests",
        *extra,
    ).start()


def _forwarded_annotations(sink: Sink) -> list[dict[str, Any]]:
    """What the annotations of the spans the sink received are (helper-8's reading of them)."""
    with sink.lock:
        requests = list(sink.trace_requests)
    out: list[dict[str, Any]] = []
    for request in requests:
        out.extend(annotations_from_request(request, project="hop-tests"))
    return out


def test_check_results_are_posted_as_annotations_after_forwarding(
    tmp_path: Path, sink: Sink
) -> None:
    phoenix = StandIn()
    proc = _hop(
        tmp_path, sink, phoenix.url, "--set", "exporters.phoenix_annotations.headers.x-token=t1"
    )
    try:
        client = sdk_client(proc.grpc, "grpc")
        runs = [emit_run(client.tracer, f"run-{i}", passes=2) for i in range(3)]
        client.flush()
        # Three account checks and the armed integrity row (a map is mounted: compose) per run.
        expected = 4 * 3
        posted = phoenix.wait_for(expected)
        by_span = {(a["span_id"], a["name"]) for a in posted}
        assert {span for span, _ in by_span} == {run_span for _, run_span in runs}
        assert (runs[0][1], semconv.evaluation_name("decided-delivered")) in by_span
        # Exactly what the forwarded spans carry: the spans arrived before their annotations.
        forwarded = _forwarded_annotations(sink)
        key = lambda a: (a["span_id"], a["name"])  # noqa: E731
        assert sorted(posted, key=key) == sorted(forwarded, key=key)
        assert all(a["metadata"]["project"] == "hop-tests" for a in posted)
        assert set(phoenix.paths) == {"/v1/span_annotations?sync=true"}
        assert all({k.lower(): v for k, v in h.items()}["x-token"] == "t1" for h in phoenix.headers)
        deadline = time.monotonic() + 5
        while proc.metrics()["otel_footprint_phoenix_annotations_posted_total"] < expected:
            assert time.monotonic() < deadline, proc.metrics()
            time.sleep(0.05)
        metrics = proc.metrics()
        assert metrics["otel_footprint_phoenix_annotations_failed_total"] == 0
        assert metrics["otel_footprint_phoenix_annotations_pending"] == 0
        client.shutdown()
    finally:
        assert proc.terminate() == 0, proc.stderr()
        phoenix.stop()


@pytest.mark.parametrize("failure", ["refused", "unreachable"])
def test_a_failing_phoenix_never_holds_the_spans_back(
    tmp_path: Path, sink: Sink, failure: str
) -> None:
    phoenix = StandIn(status=400)  # 400: not retried
    endpoint = phoenix.url
    if failure == "unreachable":
        phoenix.stop()  # nothing listens there any more: connection refused, retried, then failed
    proc = _hop(
        tmp_path,
        sink,
        endpoint,
        "--set",
        "exporters.phoenix_annotations.max_attempts=2",
        "--set",
        "exporters.phoenix_annotations.timeout=1s",
    )
    try:
        client = sdk_client(proc.grpc, "grpc")
        _, run_span = emit_run(client.tracer, "run-failing-phoenix", passes=2)
        client.flush()
        assert sink.wait_for(
            lambda: any(
                s.span_id.hex() == run_span
                and semconv.RUN_COMPLETE in {kv.key for kv in s.attributes}
                for s in sink.spans()
            ),
            15,
        )
        deadline = time.monotonic() + 15
        while proc.metrics()["otel_footprint_phoenix_annotations_failed_total"] < 3:
            assert time.monotonic() < deadline, proc.metrics()
            time.sleep(0.1)
        assert proc.metrics()["otel_footprint_phoenix_annotations_posted_total"] == 0
        client.shutdown()
    finally:
        assert proc.terminate() == 0, proc.stderr()
        if failure == "refused":
            phoenix.stop()


def _annotation(i: int) -> dict[str, Any]:
    return {"span_id": f"{i:016x}", "name": "footprint.decided-delivered", "result": {}}


def test_annotations_wait_for_their_records_and_are_bounded() -> None:
    posted: list[list[dict[str, Any]]] = []
    done = threading.Event()

    def post(endpoint: str, chunk: list[dict[str, Any]], **_: Any) -> Any:
        from otel_footprint.annotate.phoenix import PostResult

        posted.append(chunk)
        done.set()
        return PostResult(len(chunk), 0)

    metrics = HopMetrics()
    cfg = PhoenixAnnotationsSettings(endpoint="http://127.0.0.1:1", max_pending=3)
    poster = PhoenixAnnotations(cfg, metrics, post=post)
    poster.start()
    with poster.registering():
        poster.expect(10, [_annotation(1), _annotation(2)])
        poster.expect(11, [_annotation(3)])
        poster.expect(12, [_annotation(4)])  # over max_pending: dropped, counted
    assert metrics.phoenix_annotations_dropped.value("queue_full") == 1
    poster.settled([11], delivered=False)  # its spans were refused downstream: never posted
    assert metrics.phoenix_annotations_dropped.value("spans_not_forwarded") == 1
    assert not posted
    poster.settled([10, 99], delivered=True)  # 99: a record without annotations
    assert done.wait(5)
    assert [a["span_id"] for a in posted[0]] == [f"{1:016x}", f"{2:016x}"]
    deadline = time.monotonic() + 5
    while metrics.phoenix_annotations_posted.value() < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with poster.registering():
        poster.expect(13, [_annotation(5)])
    poster.stop(time.monotonic() + 1)  # still waiting for its record: dropped at shutdown
    assert metrics.phoenix_annotations_dropped.value("shutdown") == 1
    assert metrics.phoenix_annotations_pending.value() == 0


@pytest.mark.parametrize(
    ("endpoint", "fragment"),
    [
        ("phoenix:6006", "must be http(s)"),
        ("http://phoenix:6006/v1/traces", "OTLP endpoint"),
    ],
)
def test_a_bad_phoenix_endpoint_is_a_configuration_error(endpoint: str, fragment: str) -> None:
    flags = configuration.flag_layer(
        forward="127.0.0.1:4317", sets=[f"exporters.phoenix_annotations.endpoint={endpoint}"]
    )
    with pytest.raises(configuration.ConfigError, match=re.escape(fragment)):
        configuration.load(None, flags, {})


def test_phoenix_annotations_are_off_by_default_and_configurable() -> None:
    cfg = configuration.load(None, configuration.flag_layer(forward="127.0.0.1:4317"), {})
    assert cfg.phoenix_annotations is None
    flags = configuration.flag_layer(
        forward="127.0.0.1:4317",
        sets=[
            "exporters.phoenix_annotations.endpoint=http://phoenix:6006",
            "exporters.phoenix_annotations.timeout=2s",
            "exporters.phoenix_annotations.headers={authorization: Bearer x}",
        ],
    )
    on = configuration.load(None, flags, {}).phoenix_annotations
    assert on is not None
    assert (on.endpoint, on.timeout, on.headers) == (
        "http://phoenix:6006",
        2.0,
        {"authorization": "Bearer x"},
    )


# ---------------------------------------------------------------------------------------------
# A real Phoenix (e2e)
# ---------------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_annotations_reach_a_real_phoenix(tmp_path: Path) -> None:
    base = os.environ.get("OTEL_FOOTPRINT_PHOENIX_URL")
    if not base:
        pytest.skip("OTEL_FOOTPRINT_PHOENIX_URL is not set: start scripts/phoenix.sh (docs/e2e.md)")
    from e2e.phoenix_api import PhoenixClient, PhoenixError, poll
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    client = PhoenixClient(base, None)
    if not client.healthy():
        pytest.fail(f"OTEL_FOOTPRINT_PHOENIX_URL={base} is set but Phoenix does not answer")
    project = f"hop-phoenix-annotations-{uuid.uuid4().hex[:8]}"
    proc = HopProcess(
        tmp_path / "data",
        client.otlp_http_traces_url,
        "--forward-protocol",
        "http/protobuf",
        "--set",
        "processing.release_grace=200ms",
        "--set",
        f"exporters.phoenix_annotations.endpoint={base}",
        "--set",
        f"exporters.phoenix_annotations.project={project}",
    ).start()
    try:
        provider = TracerProvider(
            resource=Resource.create(
                {"service.name": "hop-phoenix-test", "openinference.project.name": project}
            )
        )
        provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=proc.grpc, insecure=True), schedule_delay_millis=50
            )
        )
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        _, run_span = emit_run(provider.get_tracer("t"), run_id, passes=2)
        provider.shutdown()
        name = semconv.evaluation_name("decided-delivered")

        def fetch() -> list[Any]:
            try:
                return client.span_annotations(project, [run_span], names=[name])
            except PhoenixError:  # the project exists once Phoenix has ingested its first span
                return []

        found = poll(
            fetch,
            lambda got: len(got) == 1,
            timeout=30,
            what=f"the {name} annotation on run span {run_span}",
        )
        (annotation,) = found
        assert annotation.annotator_kind == "CODE"
        assert annotation.label in ("pass", "fail", "unknown")
        assert annotation.metadata["run_id"] == run_id
        assert annotation.metadata["project"] == project
        assert proc.metrics()["otel_footprint_phoenix_annotations_posted_total"] >= 3
    finally:
        assert proc.terminate() == 0, proc.stderr()
