"""A Python agent on the recorder with the in-process processor (``otel_footprint.sdk.setup``),
exporting over OTLP/HTTP and over OTLP/gRPC straight to Phoenix: the verdicts, found server side."""

from __future__ import annotations

import uuid

import pytest

from otel_footprint import semconv as sc

from .footprint_e2e import (
    E2E_TIMEOUT_S,
    PASSES,
    all_of,
    assert_stuck_turn_in_phoenix,
    eq,
    footprint_provider,
    routed_turn,
    stuck_turn,
    subset,
)
from .phoenix_api import PhoenixClient
from .sdk_export import CheckedExporter, OtlpProtocol, make_exporter

pytestmark = pytest.mark.e2e

PROTOCOLS: tuple[OtlpProtocol, ...] = ("http/protobuf", "grpc")


def _exporter(phoenix: PhoenixClient, protocol: OtlpProtocol) -> CheckedExporter:
    if protocol == "grpc" and phoenix.grpc_endpoint is None:
        pytest.fail("OTEL_FOOTPRINT_PHOENIX_GRPC is not set: the gRPC export has nowhere to go")
    return CheckedExporter(
        make_exporter(
            protocol, http_url=phoenix.otlp_http_traces_url, grpc_endpoint=phoenix.grpc_endpoint
        )
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stuck_turn_parks_on_pass_four_in_phoenix(
    phoenix: PhoenixClient, project_name: str, protocol: OtlpProtocol
) -> None:
    run_id = f"py-stuck-{uuid.uuid4().hex[:12]}"
    with footprint_provider(
        _exporter(phoenix, protocol), project_name, min_spans=1 + PASSES + PASSES - 1
    ) as provider:
        emitted = stuck_turn(provider.get_tracer("e2e-python-agent"), run_id)

    assert_stuck_turn_in_phoenix(
        phoenix,
        project_name,
        run_id=run_id,
        trace_id=emitted.trace_id,
        run_span_id=emitted.run_span_id,
        pass_span_ids=emitted.pass_span_ids,
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_routed_runs_check_one_outcome_in_phoenix(
    phoenix: PhoenixClient, project_name: str, protocol: OtlpProtocol
) -> None:
    suffix = uuid.uuid4().hex[:12]
    with footprint_provider(
        _exporter(phoenix, protocol), project_name, min_spans=2 * 4
    ) as provider:
        tracer = provider.get_tracer("e2e-python-agent")
        good = routed_turn(tracer, f"py-routed-ok-{suffix}", delivered=True)
        bad = routed_turn(tracer, f"py-routed-bad-{suffix}", delivered=False)

    spans = {
        emitted.run_id: phoenix.wait_for_spans(
            project_name, attributes={sc.RUN_ID: emitted.run_id}, timeout=E2E_TIMEOUT_S
        )
        for emitted in (good, bad)
    }
    [delivered], [not_delivered] = spans[good.run_id], spans[bad.run_id]
    for span, emitted, outcome, label, signals, tone in (
        (delivered, good, "delivered", "pass", [], "ok"),
        (not_delivered, bad, "not-delivered", "fail", ["decided-not-delivered"], "bad"),
    ):
        assert span.span_id == emitted.run_span_id
        expected = {
            sc.RUN_MODE: "shadow",
            sc.RUN_PASSES: 2,
            sc.CHECK_DECIDED_DELIVERED: "reachable",
            sc.CHECK_DECIDED_DELIVERED_OUTCOME: outcome,
            sc.SIGNALS: signals,
            sc.SUMMARY_TONE: tone,
        }
        assert subset(span.attributes, expected) == expected, emitted.run_id
        [check1] = [
            e
            for e in span.events_named(sc.EV_EVALUATION_RESULT)
            if e.attributes[sc.EVAL_NAME] == "footprint.decided-delivered"
        ]
        assert check1.attributes[sc.EVAL_SCORE_LABEL] == label

    # Found server side by check 1: the outcome's name has check 1's own name as a dotted prefix
    # on the same span, so only its stored path filters it (docs/e2e.md, "Leaf prefix").
    reachable = eq(sc.CHECK_DECIDED_DELIVERED, "reachable")
    for outcome, emitted in (("delivered", good), ("not-delivered", bad)):
        condition = all_of(
            reachable,
            eq(
                sc.CHECK_DECIDED_DELIVERED_OUTCOME, outcome, leaf_sibling=sc.CHECK_DECIDED_DELIVERED
            ),
        )
        assert phoenix.span_ids_where(project_name, condition) == [emitted.run_span_id], outcome
    # Nothing else in the project is reachable: the filter does discriminate.
    assert sorted(phoenix.span_ids_where(project_name, reachable)) == sorted(
        [good.run_span_id, bad.run_span_id]
    )
    # The tone filters through its stored path too (footprint.summary is its prefix).
    bad_tone = eq(sc.SUMMARY_TONE, "bad", leaf_sibling=sc.SUMMARY)
    assert phoenix.span_ids_where(project_name, bad_tone) == [bad.run_span_id]
