"""Phoenix as a real OTLP backend: spans exported with the OpenTelemetry Python SDK come back with
typed attributes and events, and the query forms docs/e2e.md lists behave as documented on 20.26.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.trace import Status, StatusCode

from otel_footprint import semconv as sc

from .phoenix_api import (
    PhoenixClient,
    PhoenixError,
    PhoenixSpan,
    gql_contains,
    gql_literal,
    gql_ref,
)
from .sdk_export import OtlpProtocol, exporting_provider, make_exporter

pytestmark = pytest.mark.e2e

MAPS_JSON = json.dumps(
    [
        {
            "id": "skill-map",
            "memberIds": ["zone-audit", "run-finder"],
            "toolNames": ["get_zone_info"],
        }
    ],
    separators=(",", ":"),
)


def _export_one_run(
    phoenix: PhoenixClient, project: str, protocol: OtlpProtocol, run_id: str
) -> None:
    """A run span with the output annotations and an input event, and one pass span under it."""
    exporter = make_exporter(
        protocol, http_url=phoenix.otlp_http_traces_url, grpc_endpoint=phoenix.grpc_endpoint
    )
    with exporting_provider(exporter, project, min_spans=2) as provider:
        tracer = provider.get_tracer("e2e.smoke")
        with tracer.start_as_current_span("invoke_agent trap") as run:
            run.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.OP_INVOKE_AGENT)
            run.set_attribute(sc.RUN_ID, run_id)
            run.set_attribute(sc.RUN_PASSES, 30)
            run.set_attribute(sc.RUN_COMPLETE, True)
            run.set_attribute(sc.RUN_PARKED_MAPS, ["skill-map"])
            run.set_attribute(sc.ENG_PARKED_MAPS, ["skill-map", "billing"])
            run.set_attribute(sc.CHECK_DECIDED_DELIVERED, "unreachable")
            run.add_event(
                sc.EV_MAPS_MOUNTED,
                {sc.F_MAPS: MAPS_JSON, sc.F_RENEWAL_GRACE: 3, sc.F_ENFORCED: False},
            )
            run.set_status(Status(StatusCode.ERROR, "parked map kept riding"))
            with tracer.start_as_current_span("chat scripted") as chat:
                chat.set_attribute(sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT)
                chat.set_attribute(sc.PASS_ITERATION, 4)
                chat.add_event(
                    sc.EV_ENGAGEMENT_PARKED,
                    {
                        sc.CH_MAP_ID: "skill-map",
                        sc.CH_BY: "lexical",
                        sc.CH_IDLE_CALLS: 3,
                        sc.CH_WITNESS: "zone",
                    },
                )
                chat.add_event(
                    sc.EV_CONTEXT_EVALUATED,
                    {
                        sc.F_ITERATION: 4,
                        sc.F_ACTIVE_IDS: ["zone-audit"],
                        sc.F_SKIPPED_DETAILS: "[]",
                    },
                )


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_typed_attributes_and_events_round_trip(
    phoenix: PhoenixClient, project_name: str, protocol: OtlpProtocol
) -> None:
    if protocol == "grpc" and phoenix.grpc_endpoint is None:
        pytest.skip("OTEL_FOOTPRINT_PHOENIX_GRPC is not set")
    _export_one_run(phoenix, project_name, protocol, run_id=f"run-{protocol}")

    [run] = phoenix.wait_for_spans(project_name, attributes={sc.RUN_ID: f"run-{protocol}"})
    [chat] = phoenix.wait_for_spans(project_name, attributes={sc.PASS_ITERATION: 4})

    assert run.parent_id is None
    assert chat.parent_id == run.span_id and chat.trace_id == run.trace_id
    # Types survive: ints stay ints, bools stay bools, string arrays stay lists in order.
    assert run.attributes[sc.RUN_PASSES] == 30 and type(run.attributes[sc.RUN_PASSES]) is int
    assert run.attributes[sc.RUN_COMPLETE] is True
    assert run.attributes[sc.ENG_PARKED_MAPS] == ["skill-map", "billing"]
    assert run.attributes[sc.CHECK_DECIDED_DELIVERED] == "unreachable"
    assert (run.status_code, run.status_message) == ("ERROR", "parked map kept riding")
    # Events come back whole: names, order, and typed attributes (JSON text untouched).
    [mounted] = run.events_named(sc.EV_MAPS_MOUNTED)
    assert dict(mounted.attributes) == {
        sc.F_MAPS: MAPS_JSON,
        sc.F_RENEWAL_GRACE: 3,
        sc.F_ENFORCED: False,
    }
    assert [e.name for e in chat.events] == [sc.EV_ENGAGEMENT_PARKED, sc.EV_CONTEXT_EVALUATED]
    assert dict(chat.events[0].attributes) == {
        sc.CH_MAP_ID: "skill-map",
        sc.CH_BY: "lexical",
        sc.CH_IDLE_CALLS: 3,
        sc.CH_WITNESS: "zone",
    }
    assert chat.events[1].attributes[sc.F_ACTIVE_IDS] == ["zone-audit"]


@dataclass(frozen=True)
class Dataset:
    """Three run spans and one pass span in one project, ingested before any query runs."""

    project: str
    unreachable: PhoenixSpan
    delivered: PhoenixSpan
    numeric_id: PhoenixSpan
    chat: PhoenixSpan


@pytest.fixture
def dataset(phoenix: PhoenixClient, project_name: str) -> Iterator[Dataset]:
    exporter = make_exporter(
        "http/protobuf", http_url=phoenix.otlp_http_traces_url, grpc_endpoint=None
    )
    with exporting_provider(exporter, project_name, min_spans=4) as provider:
        tracer = provider.get_tracer("e2e.filters")
        with tracer.start_as_current_span("invoke_agent unreachable") as a:
            a.set_attributes(
                {
                    sc.RUN_ID: "run-a",
                    sc.RUN_MODE: sc.MODE_SHADOW,
                    sc.RUN_PASSES: 30,
                    sc.RUN_COMPLETE: True,
                    sc.ENG_PARKED_MAPS: ["skill-map", "billing"],
                    sc.CHECK_DECIDED_DELIVERED: "unreachable",
                }
            )
            a.add_event(sc.EV_MAPS_MOUNTED, {sc.F_MAPS: MAPS_JSON, sc.F_RENEWAL_GRACE: 3})
            with tracer.start_as_current_span("chat scripted") as chat:
                chat.set_attribute(sc.PASS_ITERATION, 4)
        with tracer.start_as_current_span("invoke_agent delivered") as b:
            # A leaf name that is also the dotted prefix of another name on the same span.
            b.set_attributes(
                {
                    sc.RUN_ID: "run-b",
                    sc.RUN_MODE: sc.MODE_SHADOW,
                    sc.RUN_PASSES: 5,
                    sc.RUN_COMPLETE: False,
                    sc.ENG_PARKED_MAPS: [],
                    sc.CHECK_DECIDED_DELIVERED: "reachable",
                    sc.CHECK_DECIDED_DELIVERED_OUTCOME: "delivered",
                    sc.SUMMARY: "The model had the skill in front of it when it answered.",
                    sc.SUMMARY_TONE: "ok",
                }
            )
        with tracer.start_as_current_span("invoke_agent numeric id") as c:
            c.set_attributes({sc.RUN_ID: "12345", sc.RUN_MODE: sc.MODE_VERIFY, sc.RUN_PASSES: 1})
    spans = phoenix.wait_for_spans(project_name, count=4)
    by_name = {s.name: s for s in spans}
    yield Dataset(
        project=project_name,
        unreachable=by_name["invoke_agent unreachable"],
        delivered=by_name["invoke_agent delivered"],
        numeric_id=by_name["invoke_agent numeric id"],
        chat=by_name["chat scripted"],
    )


def _names(spans: list[PhoenixSpan]) -> list[str]:
    return sorted(s.name for s in spans)


def test_rest_attribute_filters(phoenix: PhoenixClient, dataset: Dataset) -> None:
    p = dataset.project
    unreachable, delivered = dataset.unreachable.name, dataset.delivered.name

    def rest(attributes: dict[str, str | int | bool]) -> list[str]:
        return _names(phoenix.spans(p, attributes=attributes))

    # string (JSON-quoted), int, bool; several filters AND together.
    assert rest({sc.CHECK_DECIDED_DELIVERED: "unreachable"}) == [unreachable]
    assert rest({sc.RUN_PASSES: 30}) == [unreachable]
    assert rest({sc.RUN_COMPLETE: False}) == [delivered]
    assert rest({sc.RUN_MODE: sc.MODE_SHADOW, sc.RUN_PASSES: 5}) == [delivered]
    # Typed: a numeric-looking string matches only as a string, an int only as an int.
    assert rest({sc.RUN_ID: "12345"}) == [dataset.numeric_id.name]
    assert rest({sc.RUN_PASSES: "30"}) == []
    # A Python keyword inside the dotted name is fine for REST.
    assert rest({sc.PASS_ITERATION: 4}) == [dataset.chat.name]
    # Not matchable over REST: array members, names shadowed by a leaf prefix, event attributes.
    assert rest({sc.ENG_PARKED_MAPS: "skill-map"}) == []
    assert rest({sc.CHECK_DECIDED_DELIVERED_OUTCOME: "delivered"}) == []
    assert rest({sc.SUMMARY_TONE: "ok"}) == []
    assert rest({sc.F_RENEWAL_GRACE: 3}) == []
    # ... while the shadowing leaf itself still matches.
    assert rest({sc.CHECK_DECIDED_DELIVERED: "reachable"}) == [delivered]


def test_unquoted_rest_value_is_json_parsed(phoenix: PhoenixClient, dataset: Dataset) -> None:
    # Raw `key:12345` is parsed as an int and so misses the string "12345" (hence the quoting).
    body = phoenix._request(  # the raw form on purpose
        "GET", f"/v1/projects/{dataset.project}/spans", [("attribute", f"{sc.RUN_ID}:12345")]
    )
    assert body["data"] == []


def test_graphql_filter_conditions(phoenix: PhoenixClient, dataset: Dataset) -> None:
    p = dataset.project
    unreachable, delivered = dataset.unreachable.name, dataset.delivered.name

    def where(condition: str) -> list[str]:
        return _names(phoenix.spans_where(p, condition))

    # Dotted names work as-is unless a segment is a Python keyword; the bracket form always works.
    assert where(f"{sc.CHECK_DECIDED_DELIVERED} == 'unreachable'") == [unreachable]
    assert where(f"{gql_ref(sc.RUN_PASSES)} > 10") == [unreachable]
    assert where(f"{sc.RUN_PASSES} >= 5 and {sc.RUN_MODE} == 'shadow'") == [delivered, unreachable]
    assert where(f"{sc.RUN_COMPLETE} == False") == [delivered]
    assert where(f"{sc.RUN_MODE} in ('verify', 'nope')") == [dataset.numeric_id.name]
    assert where(f"{gql_ref(sc.PASS_ITERATION)} == 4") == [dataset.chat.name]
    with pytest.raises(PhoenixError, match="invalid syntax"):
        where(f"{sc.PASS_ITERATION} == 4")
    # String arrays: `in` is a substring test on the array's JSON text, so quote the element.
    assert where(gql_contains(sc.ENG_PARKED_MAPS, "skill-map")) == [unreachable]
    assert where(gql_contains(sc.ENG_PARKED_MAPS, "skill")) == []
    assert where(f"'skill' in {sc.ENG_PARKED_MAPS}") == [unreachable]
    # `not in` also drops spans that lack the attribute (SQL NULL), keeping the empty array.
    assert where(f"{gql_literal(json.dumps('skill-map'))} not in {sc.ENG_PARKED_MAPS}") == [
        delivered
    ]
    # A name shadowed by a leaf prefix is reachable only by its stored path.
    assert where(f"{sc.CHECK_DECIDED_DELIVERED_OUTCOME} == 'delivered'") == []
    outcome = gql_ref(sc.CHECK_DECIDED_DELIVERED_OUTCOME, leaf_sibling=sc.CHECK_DECIDED_DELIVERED)
    assert where(f"{outcome} == 'delivered'") == [delivered]
    tone = gql_ref(sc.SUMMARY_TONE, leaf_sibling=sc.SUMMARY)
    assert where(f"{tone} == 'ok'") == [delivered]
    # Span events are not searchable.
    assert where(f"{sc.F_RENEWAL_GRACE} == 3") == []
    # Span columns work next to attributes.
    assert where(f"parent_id is None and {sc.RUN_PASSES} == 1") == [dataset.numeric_id.name]
    assert where(f"span_id == '{dataset.chat.span_id}'") == [dataset.chat.name]


def test_span_annotations_round_trip(phoenix: PhoenixClient, dataset: Dataset) -> None:
    name = sc.evaluation_name(sc.CHECK_IDS[0])
    run = dataset.unreachable
    annotation_id = phoenix.annotate_span(
        run.span_id,
        name,
        label="fail",
        score=0.0,
        explanation="The skill was decided but not given to the model.",
        metadata={"run": "run-a"},
    )
    assert annotation_id

    [read] = phoenix.span_annotations(dataset.project, [run.span_id], names=[name])
    assert (read.span_id, read.name, read.annotator_kind) == (run.span_id, name, "CODE")
    assert (read.label, read.score) == ("fail", 0.0)
    assert read.explanation == "The skill was decided but not given to the model."
    assert dict(read.metadata) == {"run": "run-a"}
    # sync=true: the annotation is queryable at once, by label and by score.
    assert _names(
        phoenix.spans_where(dataset.project, f"annotations['{name}'].label == 'fail'")
    ) == [run.name]
    assert phoenix.spans_where(dataset.project, f"annotations['{name}'].label == 'pass'") == []
    assert _names(phoenix.spans_where(dataset.project, f"annotations['{name}'].score < 0.5")) == [
        run.name
    ]
