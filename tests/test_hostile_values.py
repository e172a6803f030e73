"""Bad input costs the value, not the run: the decision never raises on a hostile number.

Issue 22. One ``footprint.chars`` of ``1e308`` (a double where a count belongs) was read as a
309-digit integer, summed into the characters that rode while parked, and the note writer raised
``ValueError ... does not fit an OTLP int_value``: the whole trace went out unannotated. Here a real
recorded run (the scripted ``stuck-shadow`` scenario, encoded as OTLP by the SDK's own encoder) has
numeric attributes of its footprint events and spans replaced by hostile values (NaN, infinities,
doubles past int64, negative counts, int64's edges, numbers as text, JSON numbers past any range),
then is decided and annotated as the hop does: it must never raise, the run span must still get its
verdict, and the annotated spans must still serialize.
"""

from __future__ import annotations

import functools
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv
from otel_footprint.annotate.form import annotations_for
from otel_footprint.annotate.otlp import apply_note
from otel_footprint.codec import count, integral
from otel_footprint.commands.scenarios import run_scenarios
from otel_footprint.engine.decide import decide_run
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView

INT64_MAX = (1 << 63) - 1


@functools.cache
def recorded_run() -> bytes:
    """The ``stuck-shadow`` run (zone-audit keeps riding after it would have parked) as OTLP."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_scenarios(provider.get_tracer("hostile"), ["stuck-shadow"])
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


def _spans(request: ExportTraceServiceRequest) -> list[Span]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def _numeric(kv: KeyValue) -> bool:
    return kv.key.startswith(semconv.PREFIX) and kv.value.WhichOneof("value") in (
        "int_value",
        "double_value",
    )


def _json_text(kv: KeyValue) -> bool:
    text = kv.value.string_value
    return (
        kv.key.startswith(semconv.PREFIX) and text[:1] in ("{", "[") and bool(_NUMBER.search(text))
    )


_NUMBER = re.compile(r"(?<![\w.\"])-?\d+(\.\d+)?(?![\w\"])")

HOSTILE_VALUES = st.sampled_from(
    [
        AnyValue(double_value=1e308),
        AnyValue(double_value=-1e308),
        AnyValue(double_value=float("nan")),
        AnyValue(double_value=float("inf")),
        AnyValue(double_value=float("-inf")),
        AnyValue(double_value=9.2e18),  # within int64 alone; two of them summed are not
        AnyValue(double_value=1e19),
        AnyValue(double_value=-1.0),
        AnyValue(double_value=2.5),
        AnyValue(int_value=INT64_MAX),
        AnyValue(int_value=-INT64_MAX - 1),
        AnyValue(int_value=-7),
        AnyValue(string_value="12"),
        AnyValue(string_value="lots"),
        AnyValue(string_value="1e308"),
        AnyValue(string_value="9" * 30),
        AnyValue(bool_value=True),
    ]
)
JSON_NUMBERS = st.sampled_from(["1e999", "-1e999", "1e308", "-5", "9" * 30, "-" + "9" * 30, "0.5"])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_decision_never_raises_on_a_hostile_number(data: st.DataObject) -> None:
    request = ExportTraceServiceRequest.FromString(recorded_run())
    spans = _spans(request)
    attributes = [kv for s in spans for kv in s.attributes] + [
        kv for s in spans for ev in s.events for kv in ev.attributes
    ]
    numeric: dict[str, list[KeyValue]] = {}
    for kv in attributes:
        if _numeric(kv):
            numeric.setdefault(kv.key, []).append(kv)
    keys = sorted(numeric)  # footprint.chars, .iteration, .pass.iteration, .turn_index, ...
    for _ in range(data.draw(st.integers(1, 4), label="fields")):
        found = numeric[data.draw(st.sampled_from(keys), label="key")]
        value = data.draw(HOSTILE_VALUES, label="value")
        if data.draw(st.booleans(), label="in every event that carries it"):
            for kv in found:
                kv.value.CopyFrom(value)
        else:
            found[data.draw(st.integers(0, len(found) - 1), label="which")].value.CopyFrom(value)
    texts = [kv for kv in attributes if _json_text(kv)]
    for number in data.draw(st.lists(JSON_NUMBERS, max_size=3), label="json numbers"):
        kv = texts[data.draw(st.integers(0, len(texts) - 1), label="json field")]
        kv.value.string_value = _NUMBER.sub(number, kv.value.string_value, count=1)

    (run,) = group_runs([OtlpSpanView(s) for s in spans])
    verdict = decide_run(run)
    by_id = {bytes(s.span_id): s for s in spans}
    for span_hex, note in annotations_for(verdict).items():
        apply_note(by_id[bytes.fromhex(span_hex)], note)
    assert run.run_span is not None
    run_span = by_id[bytes.fromhex(run.run_span.span_id)]
    assert any(kv.key == semconv.RUN_COMPLETE for kv in run_span.attributes)
    for span in spans:
        Span.FromString(span.SerializeToString())


def test_a_double_past_int64_costs_that_count_and_the_run_keeps_its_verdict() -> None:
    """The issue's case: every ``footprint.chars`` of the run ``1e308``."""
    request = ExportTraceServiceRequest.FromString(recorded_run())
    spans = _spans(request)
    for span in spans:
        for event in span.events:
            for kv in event.attributes:
                if kv.key == semconv.F_CHARS:
                    kv.value.double_value = 1e308
    (run,) = group_runs([OtlpSpanView(s) for s in spans])
    verdict = decide_run(run)
    by_id = {bytes(s.span_id): s for s in spans}
    for span_hex, note in annotations_for(verdict).items():
        apply_note(by_id[bytes.fromhex(span_hex)], note)
    (rode,) = verdict.rode_while_parked
    assert rode.passes == 27 and 0 <= rode.chars <= INT64_MAX  # the rows still rode; sizes unknown


def test_the_count_readers_take_only_what_an_otlp_integer_holds() -> None:
    assert integral(2.0) == 2 and integral(-3) == -3 and integral(INT64_MAX) == INT64_MAX
    for bad in (1e308, float("nan"), float("inf"), INT64_MAX + 1, 2.5, True, "12", None):
        assert integral(bad) is None, bad
    assert count(0) == 0 and count(-1) is None and count(1e308) is None
