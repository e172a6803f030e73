"""Writer for OTLP protobuf spans: appends a SpanNote to a ``Span`` message in place (the hop's path).

No copies, no SDK objects: the hop parses a request once, applies notes, and serializes once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags

from otel_footprint.annotate.form import Pairs, SpanNote
from otel_footprint.runs.events import AttributeValue

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan


def to_any_value(value: AttributeValue, out: AnyValue | None = None) -> AnyValue:
    """An attribute value as an OTLP ``AnyValue`` (bool before int: ``True`` is an int in Python)."""
    target = AnyValue() if out is None else out
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    else:
        # Setting the (possibly empty) array marks the oneof even when it has no items.
        array = target.array_value
        array.SetInParent()
        for item in value:
            to_any_value(item, array.values.add())
    return target


def _put_attributes(target: RepeatedCompositeFieldContainer[KeyValue], pairs: Pairs) -> None:
    index: Mapping[str, KeyValue] = {kv.key: kv for kv in target}
    for key, value in pairs:
        existing = index.get(key)
        if existing is not None:
            existing.value.Clear()
            to_any_value(value, existing.value)
        else:
            kv = target.add(key=key)
            to_any_value(value, kv.value)


def apply_note(pb_span: PbSpan, note: SpanNote) -> None:
    """Add ``note``'s attributes, events and links to ``pb_span`` in place.

    An attribute key already on the span is replaced rather than duplicated (OTLP says keys are
    unique). Events without their own time sit at the span's start or end, per their anchor.
    """
    _put_attributes(pb_span.attributes, note.attributes)
    for event in note.events:
        time = (
            pb_span.start_time_unix_nano if event.anchor == "start" else pb_span.end_time_unix_nano
        )
        pb_event = pb_span.events.add(name=event.name, time_unix_nano=time)
        _put_attributes(pb_event.attributes, event.attributes)
    for link in note.links:
        pb_link = pb_span.links.add(
            trace_id=bytes.fromhex(link.trace_id),
            span_id=bytes.fromhex(link.span_id),
            # As the SDK encoder writes links: "is_remote is known, and false" (same process/trace
            # store), so both writers produce identical links.
            flags=SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
        )
        _put_attributes(pb_link.attributes, link.attributes)
