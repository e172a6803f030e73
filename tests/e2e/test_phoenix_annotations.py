"""Check results as Phoenix span annotations: ``phoenix_annotations_for`` on SDK and protobuf spans
(always run), and ``PhoenixAnnotationExporter`` / ``post_annotations`` against a real Phoenix (e2e),
plus every Phoenix condition and REST call of docs/queries.md run against it."""

from __future__ import annotations

import json
import re
import secrets
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.annotate.phoenix import (
    DEFAULT_IDENTIFIER,
    PhoenixAnnotationExporter,
    annotations_from_request,
    annotations_url,
    phoenix_annotations_for,
    post_annotations,
)
from otel_footprint.commands.scenarios import run_scenarios
from otel_footprint.runs.spans import SdkSpanView
from otel_footprint.sdk.processor import FootprintSpanProcessor

from .phoenix_api import PhoenixClient, PhoenixSpan

DOC = Path(__file__).resolve().parents[2] / "docs" / "queries.md"

# Three scenarios cover the three labels of check 1: fail (not delivered), pass, unknown.
LABEL_SCENARIOS = ("routed-not-delivered", "routed-delivered", "stuck-shadow")
PER_RUN = 4
"""Evaluations per run: the account's three checks and the one armed integrity row (a map is
mounted: invariant-violation @compose)."""
RUN_IDS = {
    "routed-not-delivered": "routed-not-delivered",
    "routed-delivered": "routed-delivered",
    "stuck-shadow": "stuck-30-shadow",
}
DD = sc.evaluation_name("decided-delivered")
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _run(provider: TracerProvider, processor: FootprintSpanProcessor, names: Sequence[str]) -> None:
    run_scenarios(provider.get_tracer("e2e.phoenix-annotations"), list(names))
    assert processor.force_flush(30_000)


@pytest.fixture(scope="module")
def annotated_spans() -> list[ReadableSpan]:
    """The label scenarios decided and annotated by the real in-process processor."""
    memory = InMemorySpanExporter()
    processor = FootprintSpanProcessor(memory, grace_seconds=0.05)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        _run(provider, processor, LABEL_SCENARIOS)
        return list(memory.get_finished_spans())
    finally:
        provider.shutdown()


def _run_span(spans: Sequence[ReadableSpan], run_id: str) -> ReadableSpan:
    found = [s for s in spans if (s.attributes or {}).get(sc.RUN_ID) == run_id]
    assert len(found) == 1, f"one run span for {run_id}, got {len(found)}"
    return found[0]


def _hex(span: ReadableSpan) -> str:
    return SdkSpanView(span).span_id


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ── phoenix_annotations_for (no Phoenix needed) ──────────────────────────────────────────────


def test_annotations_from_sdk_spans(annotated_spans: list[ReadableSpan]) -> None:
    annotations = phoenix_annotations_for(annotated_spans)
    by_key = {(a["span_id"], a["name"]): a for a in annotations}
    # Three account checks per run, and one integrity row each: a map is mounted (compose).
    integrity = [a for a in annotations if a["name"] in sc.INTEGRITY_EVALUATION_NAMES]
    assert len(annotations) - len(integrity) == 3 * len(LABEL_SCENARIOS)
    assert {a["name"] for a in integrity} == {"footprint.integrity.invariant-violation@compose"}
    expected = {
        "routed-not-delivered": ("fail", 0.0, "reachable", "not-delivered"),
        "routed-delivered": ("pass", 1.0, "reachable", "delivered"),
        "stuck-shadow": ("unknown", None, "unreachable", None),
    }
    for scenario, (label, score, state, outcome) in expected.items():
        span = _run_span(annotated_spans, RUN_IDS[scenario])
        events = {
            dict(e.attributes or {})[sc.EVAL_NAME]: dict(e.attributes or {})
            for e in span.events
            if e.name == sc.EV_EVALUATION_RESULT
        }
        assert set(events) - sc.INTEGRITY_EVALUATION_NAMES == {
            sc.evaluation_name(c) for c in sc.CHECK_IDS
        }
        for name, event in events.items():
            annotation = by_key[(_hex(span), name)]
            assert annotation["annotator_kind"] == "CODE"
            assert annotation["identifier"] == DEFAULT_IDENTIFIER
            assert annotation["result"]["label"] == event[sc.EVAL_SCORE_LABEL]
            assert annotation["result"].get("explanation") == event.get(sc.EVAL_EXPLANATION)
            assert annotation["metadata"]["run_id"] == RUN_IDS[scenario]
            assert annotation["metadata"]["trace_id"] == SdkSpanView(span).trace_id
        check1 = by_key[(_hex(span), DD)]
        assert check1["result"]["label"] == label
        assert check1["result"].get("score") == score
        assert ("score" in check1["result"]) == (score is not None)
        assert check1["metadata"]["state"] == state
        assert check1["metadata"].get("outcome") == outcome
        assert check1["result"]["explanation"]


def test_annotations_from_protobuf_spans_match_sdk(annotated_spans: list[ReadableSpan]) -> None:
    request = encode_spans(annotated_spans)
    from_pb = annotations_from_request(request, project="p")
    from_sdk = phoenix_annotations_for(annotated_spans, project="p")

    def key(a: dict[str, Any]) -> tuple[str, str]:
        return a["span_id"], a["name"]

    assert sorted(from_pb, key=key) == sorted(from_sdk, key=key)
    assert all(a["metadata"]["project"] == "p" for a in from_pb)
    assert len(from_pb) == PER_RUN * len(LABEL_SCENARIOS)


def test_only_footprint_evaluations_and_the_later_event_wins() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("invoke_agent x") as span:
        span.add_event(
            sc.EV_EVALUATION_RESULT, {sc.EVAL_NAME: "relevance", sc.EVAL_SCORE_LABEL: "x"}
        )
        span.add_event(sc.EV_EVALUATION_RESULT, {sc.EVAL_SCORE_LABEL: "pass"})  # no name
        span.add_event(sc.EV_TURN_END, {sc.EVAL_NAME: "footprint.existence"})  # not an evaluation
        existence = sc.evaluation_name("existence")
        span.add_event(
            sc.EV_EVALUATION_RESULT, {sc.EVAL_NAME: existence, sc.EVAL_SCORE_LABEL: "fail"}
        )
        span.add_event(
            sc.EV_EVALUATION_RESULT,
            {sc.EVAL_NAME: existence, sc.EVAL_SCORE_LABEL: "pass", sc.EVAL_SCORE_VALUE: 0.25},
        )
        empty = sc.evaluation_name("empty-results")
        span.add_event(
            sc.EV_EVALUATION_RESULT,
            {sc.EVAL_NAME: empty, sc.EVAL_SCORE_LABEL: "fail", sc.EVAL_SCORE_VALUE: True},
        )
    provider.shutdown()
    spans = memory.get_finished_spans()
    annotations = {a["name"]: a for a in phoenix_annotations_for(spans)}
    assert set(annotations) == {existence, empty}
    assert annotations[existence]["result"] == {"label": "pass", "score": 0.25}
    # a bool is not a score: the label decides
    assert annotations[empty]["result"] == {"label": "fail", "score": 0.0}
    assert "state" not in annotations[existence]["metadata"]  # no check attribute on this span


def test_annotations_url_and_bad_urls() -> None:
    assert annotations_url("http://127.0.0.1:6006/") == (
        "http://127.0.0.1:6006/v1/span_annotations?sync=true"
    )
    assert annotations_url("https://h/phoenix") == "https://h/phoenix/v1/span_annotations?sync=true"
    for bad in ("ftp://h", "127.0.0.1:6006", "http://h:6006/v1/traces"):
        with pytest.raises(ValueError):
            annotations_url(bad)
    with pytest.raises(ValueError):
        PhoenixAnnotationExporter(InMemorySpanExporter(), "http://h:6006/v1/traces")


def test_exporter_never_raises_when_phoenix_is_down(annotated_spans: list[ReadableSpan]) -> None:
    inner = InMemorySpanExporter()
    exporter = PhoenixAnnotationExporter(
        inner, _closed_port_url(), timeout=1.0, max_attempts=2, retry_delay=0.01
    )
    assert exporter.export(annotated_spans) is SpanExportResult.SUCCESS
    assert len(inner.get_finished_spans()) == len(annotated_spans)
    assert exporter.force_flush(10_000)
    stats = exporter.stats()
    assert (stats.posted, stats.failed, stats.pending) == (0, PER_RUN * len(LABEL_SCENARIOS), 0)
    exporter.shutdown()
    assert exporter.export(annotated_spans) is SpanExportResult.FAILURE  # inner is shut down
    assert exporter.stats().skipped == PER_RUN * len(LABEL_SCENARIOS)


def test_exporter_queue_is_bounded(annotated_spans: list[ReadableSpan]) -> None:
    exporter = PhoenixAnnotationExporter(
        InMemorySpanExporter(), _closed_port_url(), max_queue_size=2, max_attempts=1
    )
    exporter.export(annotated_spans)
    exporter.shutdown()
    stats = exporter.stats()
    assert stats.dropped == PER_RUN * len(LABEL_SCENARIOS) - 2
    assert stats.failed == 2
    assert stats.pending == 0


def test_post_annotations_reports_an_unreachable_phoenix(
    annotated_spans: list[ReadableSpan],
) -> None:
    slept: list[float] = []
    result = post_annotations(
        _closed_port_url(),
        phoenix_annotations_for(annotated_spans),
        max_attempts=3,
        retry_delay=0.5,
        sleep=slept.append,
        chunk_size=4,
    )
    assert (result.posted, result.failed) == (0, PER_RUN * len(LABEL_SCENARIOS))
    assert len(result.errors) == 3  # chunks of 4, 4, 1
    assert slept == [0.5, 1.0] * 3  # bounded, doubling


# ── against a real Phoenix ───────────────────────────────────────────────────────────────────


def _export_to_phoenix(
    phoenix: PhoenixClient, project: str, scenarios: Sequence[str]
) -> PhoenixAnnotationExporter:
    exporter = PhoenixAnnotationExporter(
        OTLPSpanExporter(endpoint=phoenix.otlp_http_traces_url, timeout=10),
        phoenix.base_url,
        project=project,
    )
    processor = FootprintSpanProcessor(exporter, grace_seconds=0.05)
    provider = TracerProvider(
        resource=Resource.create({sc.OI_PROJECT_NAME: project, SERVICE_NAME: "e2e-annotations"})
    )
    provider.add_span_processor(processor)
    try:
        _run(provider, processor, scenarios)
        assert exporter.force_flush(30_000)
    finally:
        provider.shutdown()
    return exporter


def _phoenix_run_span(phoenix: PhoenixClient, project: str, run_id: str) -> PhoenixSpan:
    (span,) = phoenix.wait_for_spans(project, attributes={sc.RUN_ID: run_id})
    return span


@pytest.mark.e2e
def test_checks_become_phoenix_annotations(phoenix: PhoenixClient, project_name: str) -> None:
    exporter = _export_to_phoenix(phoenix, project_name, LABEL_SCENARIOS)
    stats = exporter.stats()
    assert (stats.posted, stats.failed, stats.dropped, stats.pending) == (
        PER_RUN * len(LABEL_SCENARIOS),
        0,
        0,
        0,
    )

    scores = {"fail": 0.0, "pass": 1.0, "unknown": None, "not_applicable": None}
    for scenario, label in zip(LABEL_SCENARIOS, ("fail", "pass", "unknown"), strict=True):
        span = _phoenix_run_span(phoenix, project_name, RUN_IDS[scenario])
        annotations = {a.name: a for a in phoenix.span_annotations(project_name, [span.span_id])}
        assert set(annotations) == {sc.evaluation_name(c) for c in sc.CHECK_IDS} | {
            "footprint.integrity.invariant-violation@compose"
        }
        # What Phoenix shows as annotations is what the span's own evaluation events say.
        for event in span.events_named(sc.EV_EVALUATION_RESULT):
            annotation = annotations[event.attributes[sc.EVAL_NAME]]
            assert annotation.annotator_kind == "CODE"
            assert annotation.label == event.attributes[sc.EVAL_SCORE_LABEL]
            assert annotation.explanation == event.attributes.get(sc.EVAL_EXPLANATION)
            assert annotation.score == scores[str(annotation.label)]
            assert annotation.metadata["run_id"] == RUN_IDS[scenario]
            assert annotation.metadata["project"] == project_name
        check1 = annotations[DD]
        assert check1.label == label
        assert check1.metadata["state"] == span.attributes[sc.CHECK_DECIDED_DELIVERED]

    failing = phoenix.span_ids_where(project_name, f"annotations[{DD!r}].label == 'fail'")
    bad_run = _phoenix_run_span(phoenix, project_name, RUN_IDS["routed-not-delivered"])
    assert failing == [bad_run.span_id]


@pytest.mark.e2e
def test_repost_updates_instead_of_duplicating(phoenix: PhoenixClient, project_name: str) -> None:
    _export_to_phoenix(phoenix, project_name, ["routed-not-delivered"])
    span = _phoenix_run_span(phoenix, project_name, "routed-not-delivered")
    first = phoenix.span_annotations(project_name, [span.span_id], names=[DD])
    assert len(first) == 1
    again = [
        {
            "span_id": span.span_id,
            "name": DD,
            "annotator_kind": "CODE",
            "result": {"label": "fail", "score": 0.0, "explanation": "posted again"},
            "metadata": {"source": "test"},
            "identifier": DEFAULT_IDENTIFIER,
        }
    ]
    result = post_annotations(phoenix.base_url, again)
    assert (result.posted, result.failed) == (1, 0)
    after = phoenix.span_annotations(project_name, [span.span_id], names=[DD])
    assert [(a.label, a.explanation) for a in after] == [("fail", "posted again")]


@pytest.mark.e2e
def test_missing_spans_are_retried_then_left_out(phoenix: PhoenixClient, project_name: str) -> None:
    _export_to_phoenix(phoenix, project_name, ["routed-delivered"])
    span = _phoenix_run_span(phoenix, project_name, "routed-delivered")
    missing = secrets.token_hex(8)
    annotation = {
        "span_id": span.span_id,
        "name": "footprint.test-probe",
        "annotator_kind": "CODE",
        "result": {"label": "pass", "score": 1.0},
        "metadata": {},
        "identifier": DEFAULT_IDENTIFIER,
    }
    slept: list[float] = []
    result = post_annotations(
        phoenix.base_url,
        [annotation, {**annotation, "span_id": missing}],
        max_attempts=3,
        retry_delay=0.05,
        sleep=slept.append,
    )
    assert (result.posted, result.failed) == (1, 1)
    assert slept == [0.05, 0.1]  # a 404 is retried: the span may still be on its way
    assert missing in result.errors[0]
    got = phoenix.span_annotations(project_name, [span.span_id], names=["footprint.test-probe"])
    assert [a.label for a in got] == ["pass"]


# ── docs/queries.md against a real Phoenix ───────────────────────────────────────────────────

_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)


def _doc_lines(info: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return [
        line.strip()
        for kind, body in _FENCE.findall(text)
        if kind == info
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


# Conditions of the cookbook that must find these runs (by footprint.run.id of the run span, or of
# the pass spans' run) in the five demo scenarios.
EXPECTED = {
    "attributes['footprint']['pass']['iteration'] == 4 and '\"skill-map\"' in "
    "footprint.engagement.parked_maps": 3,
    "annotations['footprint.decided-delivered'].label == 'fail'": 1,
    "footprint.check.decided_delivered == 'reachable' and "
    "attributes['footprint']['check']['decided_delivered.outcome'] == 'not-delivered'": 1,
    "'\"decided-not-delivered\"' in footprint.signals": 1,
    "attributes['footprint']['summary.tone'] == 'bad'": 1,
    "footprint.run.mode == 'shadow' and footprint.run.served_chars_while_parked > 5000": 1,
    "'\"skill-map\"' in footprint.run.parked_maps": 3,
    "footprint.run.passes > 10 and footprint.run.mode == 'shadow'": 1,
    "footprint.check.decided_delivered in ('unreachable', 'not-applicable')": 3,
}


@pytest.fixture(scope="module")
def cookbook_project(phoenix: PhoenixClient) -> Iterator[str]:
    """All five demo scenarios, annotated, in one project (module scope: sent once)."""
    project = f"e2e-cookbook-{secrets.token_hex(4)}"
    exporter = _export_to_phoenix(
        phoenix,
        project,
        [
            "stuck-verify",
            "stuck-shadow",
            "recovery",
            "routed-delivered",
            "routed-not-delivered",
        ],
    )
    assert exporter.stats().failed == 0
    phoenix.wait_for_spans(project, count=5, attributes={sc.GEN_AI_OPERATION_NAME: "invoke_agent"})
    yield project


@pytest.mark.e2e
def test_cookbook_phoenix_conditions_run(phoenix: PhoenixClient, cookbook_project: str) -> None:
    conditions = _doc_lines("phoenix")
    assert len(conditions) >= 30, "the cookbook's phoenix blocks were not found"
    assert set(EXPECTED) <= set(conditions), "a condition this test pins left docs/queries.md"
    found = {}
    for condition in conditions:
        found[condition] = phoenix.span_ids_where(cookbook_project, condition)  # raises if refused
    for condition, count in EXPECTED.items():
        assert len(found[condition]) == count, condition
    nonempty = sum(1 for ids in found.values() if ids)
    assert nonempty >= len(conditions) // 2, f"only {nonempty} conditions found anything"


@pytest.mark.e2e
def test_cookbook_rest_calls_run(phoenix: PhoenixClient, cookbook_project: str) -> None:
    calls = [line for line in _doc_lines("http") if line.startswith("GET ")]
    assert len(calls) >= 8
    run_span = _phoenix_run_span(phoenix, cookbook_project, "routed-not-delivered")
    matched = 0
    for call in calls:
        path, _, query = call.removeprefix("GET ").partition("?")
        path = path.replace("{project}", urllib.parse.quote(cookbook_project, safe=""))
        pairs = [p.partition("=") for p in query.split("&") if p]
        params = [(k, v.replace("<run span id>", run_span.span_id)) for k, _, v in pairs]
        url = f"{phoenix.base_url}{path}?{urllib.parse.urlencode(params)}"
        with _LOOPBACK.open(url, timeout=10) as response:  # an error status raises HTTPError
            matched += bool(json.load(response)["data"])
    assert matched >= len(calls) - 2, f"only {matched} of {len(calls)} REST calls found anything"
