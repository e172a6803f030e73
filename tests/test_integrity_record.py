"""The recorder's integrity methods: what they write, what they refuse, and that the engine reads
back exactly what they wrote (the upstream's own finding shape included)."""

from __future__ import annotations

import pytest
from integrity_fixtures import decide, tool_def, user
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import record as footprint
from otel_footprint.codec import encode_payload
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.integrity_inputs import read_integrity_inputs
from otel_footprint.runs.passes import read_run
from otel_footprint.runs.spans import SdkSpanView


def _tracer() -> tuple[InMemorySpanExporter, object]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider.get_tracer("record")


def test_the_recorder_writes_what_the_reader_reads() -> None:
    exporter, tracer = _tracer()
    with footprint.run(tracer, agent="a") as run:  # type: ignore[arg-type]
        run.declare_tool(
            "get_host",
            arguments_from=["list_hosts"],
            result_columns={"host": "string", "seen": {"type": "date", "nullable": True}},
        )
        run.integrity_settings(notice_empty_lookups=True, check_column_types="warn")
        with run.model_call("m") as call:
            run.frame(
                call, tools=[tool_def("get_host")], system=["be careful"], messages=[user("hi")]
            )
            run.external_ground("host-zeta-99", "cmdb")
            run.wire_manifest(["get_host"])
            run.window_compacted(["list_hosts"])
        run.context_error("unsupported-argument", "choice", ["tool:get_host"], predicate="machine")
    (grouped,) = group_runs(SdkSpanView(s) for s in exporter.get_finished_spans())
    inputs = read_integrity_inputs(read_run(grouped))
    declared = inputs.declarations["get_host"]
    assert declared.arguments_from == ("list_hosts",)
    assert declared.result_columns == {"host": "string", "seen": {"type": "date", "nullable": True}}
    assert (inputs.settings.notice_empty_lookups, inputs.settings.check_column_types) == (
        True,
        "warn",
    )
    (pass_,) = inputs.passes
    assert pass_.iteration == 1
    assert [t.name for t in pass_.tools()[0] or ()] == ["get_host"]
    assert pass_.framework.system == ("be careful",)
    assert pass_.wire_manifest == ("get_host",)
    assert pass_.dropped == ("list_hosts",)
    (ground,) = inputs.grounds
    assert (ground.value, ground.source, ground.iteration) == ("host-zeta-99", "cmdb", 1)
    (reported,) = inputs.reported or ()
    assert (reported.kind, reported.subjects, reported.predicate) == (
        "unsupported-argument",
        ("tool:get_host",),
        "machine",
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda run: run.declare_tool("t", arguments_from=[""]), "arguments_from"),
        (lambda run: run.declare_tool("t", arguments_from=["t"]), "arguments_from"),
        (lambda run: run.integrity_settings(check_column_types="strict"), "check_column_types"),
        (lambda run: run.integrity_settings(notice_empty_lookups="yes"), "notice_empty_lookups"),
        (lambda run: run.declare_tool("t", result_columns={}), "non-empty"),
        (lambda run: run.declare_tool("t", result_columns={"c": "unknown"}), "type must be"),
        (lambda run: run.declare_tool("t", result_columns={" ": "number"}), "blank"),
        (
            lambda run: run.declare_tool(
                "t", result_columns={"c": {"type": "number", "nullable": "yes"}}
            ),
            "nullable",
        ),
        (lambda run: run.external_ground(" ", "cmdb"), "external ground"),
        (lambda run: run.external_ground("x1234", ""), "external ground"),
        (lambda run: run.integrity_settings(posture="strict"), "posture"),
    ],
)
def test_the_doors_refuse_bad_declarations(call: object, message: str) -> None:
    _, tracer = _tracer()
    with footprint.run(tracer, agent="a") as run, pytest.raises(ValueError, match=message):  # type: ignore[arg-type]
        call(run)  # type: ignore[operator]


def test_an_upstream_finding_with_object_subjects_is_read_and_verified() -> None:
    # agentfootprint's own event: subjects are {kind, id} objects; a canary is left out.
    exporter, tracer = _tracer()
    with footprint.run(tracer, agent="a", run_id="up") as run:  # type: ignore[arg-type]
        run.declare_tool("get_host", arguments_from=["list_hosts"])
        with run.model_call("m") as call:
            run.frame(
                call,
                tools=[tool_def("get_host")],
                messages=[user("check the estate")],
                output=[
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "c1",
                                "name": "get_host",
                                "arguments": {"machine": "host-zeta-99"},
                            }
                        ],
                    }
                ],
            )
        for synthetic in (False, True):
            run.span.add_event(
                "agentfootprint.integrity.context_error",
                attributes=encode_payload(
                    {
                        "kind": "unsupported-argument",
                        "seam": "choice",
                        "subjects": [{"kind": "tool", "id": "get_host"}],
                        "predicate": "canary_arg" if synthetic else "machine",
                        "epoch": -1 if synthetic else 1,
                        "synthetic": synthetic,
                    }
                ),
            )
    verdict = decide(exporter.get_finished_spans())  # type: ignore[attr-defined]
    result = verdict.integrity
    assert result is not None and result.verified
    assert result.disagreements == ()
    assert len(result.findings) == 1


def test_claims_and_semantics_round_trip() -> None:
    exporter, tracer = _tracer()
    with footprint.run(tracer, agent="a") as run:  # type: ignore[arg-type]
        run.declare_claim("health.paths", "lun-7", "paths")
        with pytest.raises(ValueError, match="non-blank"):
            run.declare_claim("x", " ", "paths")
        with run.model_call("m"):
            pass
        with run.tool_call("count_paths", call_id="c1") as call:
            run.tool_semantics(
                call,
                facts=[{"entity": "lun-7", "paths": 2}],
                series=[
                    {"entity": "lun-7", "metric": "latency_ms", "value": 3.5, "t": "2026-12-01"}
                ],
                measured_at="2026-11-30",
            )
        run.answer('{"health": {"paths": 2}}')
    (grouped,) = group_runs(SdkSpanView(s) for s in exporter.get_finished_spans())
    inputs = read_integrity_inputs(read_run(grouped))
    (claim,) = inputs.claims
    assert (claim.answer_field, claim.entity, claim.field) == ("health.paths", "lun-7", "paths")
    assert [
        (f.entity, f.field, f.value, f.tool, f.call_id, f.iteration, f.measured_at)
        for f in inputs.facts
    ] == [
        ("lun-7", "paths", 2, "count_paths", "c1", 1, "2026-11-30"),
        ("lun-7", "latency_ms", 3.5, "count_paths", "c1", 1, "2026-12-01"),
    ]
    assert inputs.answer is not None and inputs.answer.content == '{"health": {"paths": 2}}'


def test_the_result_shape_is_read_back_and_bad_shapes_are_refused() -> None:
    exporter, tracer = _tracer()
    with footprint.run(tracer, agent="a") as run:  # type: ignore[arg-type]
        with run.model_call("m"):
            pass
        with run.tool_call("list_hosts", call_id="c1") as call:
            call.result([])
            call.result_shape("rowset", rows=0)
            with pytest.raises(ValueError, match="shape must be"):
                call.result_shape("table")  # type: ignore[arg-type]
            for rows in (-1, True, 1.5):
                with pytest.raises(ValueError, match="rows must be"):
                    call.result_shape("rowset", rows=rows)  # type: ignore[arg-type]
        with run.tool_call("note", call_id="c2") as call:
            call.result_shape("bespoke")
    (grouped,) = group_runs(SdkSpanView(s) for s in exporter.get_finished_spans())
    inputs = read_integrity_inputs(read_run(grouped))
    assert [(e.call_id, e.shape, e.rows) for e in inputs.executions] == [
        ("c1", "rowset", 0),
        ("c2", "bespoke", None),
    ]


def test_an_absence_and_a_stated_shape_on_one_call_are_read_in_their_order() -> None:
    # The last statement on a call wins: the two event types are read in run order, across types.
    exporter, tracer = _tracer()
    with footprint.run(tracer, agent="a") as run:  # type: ignore[arg-type]
        with run.model_call("m"):
            pass
        with run.tool_call("list_hosts", call_id="c1") as call:
            call.event("tools.absent", {"toolName": "list_hosts", "reason": "no match"})
            call.result_shape("rowset", rows=2)
        with run.tool_call("list_hosts", call_id="c2") as call:
            call.result_shape("rowset", rows=3)
            call.event("tools.absent", {"toolName": "list_hosts", "reason": "no match"})
    (grouped,) = group_runs(SdkSpanView(s) for s in exporter.get_finished_spans())
    inputs = read_integrity_inputs(read_run(grouped))
    assert [(e.call_id, e.shape, e.rows) for e in inputs.executions] == [
        ("c1", "rowset", 2),
        ("c2", "absence", 3),
    ]
