"""Writer for SDK spans: a new ``ReadableSpan`` carrying a SpanNote, built with public API only.

Ended SDK spans are immutable, so the in-process path exports an annotated copy in place of the
original. The copy keeps context, parent, resource, scope, kind, status and times, and the span's
limits: the span's own attributes, events and links are never evicted to make room for ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, SpanContext, TraceFlags

from otel_footprint.annotate.form import NoteEvent, NoteLink, Pairs, SpanNote

if TYPE_CHECKING:
    from opentelemetry.util.types import Attributes

_default_limits: SpanLimits | None = None


def default_limits() -> SpanLimits:
    """The limits a ``TracerProvider()`` built now would use (``OTEL_*_LIMIT`` variables, read once)."""
    global _default_limits
    if _default_limits is None:
        _default_limits = SpanLimits()
    return _default_limits


def _attributes(
    original: Attributes,
    pairs: Pairs,
    maxlen: int | None,
    max_value_len: int | None,
    already_dropped: int = 0,
) -> Mapping[str, Any]:
    """Original attributes plus ``pairs`` (replacing equal keys); new keys only while room remains.

    The SDK already cleaned the span's own values and ours are clean by construction, so the
    common case is a read-only dict; ``BoundedAttributes`` (which re-cleans every value, the
    costly part of a copy) is used only when something must be cut or counted as dropped.
    """
    merged: dict[str, Any] = dict(original) if original else {}
    if (
        max_value_len is None
        and not already_dropped
        and (maxlen is None or len(merged) + len(pairs) <= maxlen)
    ):
        # Everything fits (the common case): later pairs win, as in the loop below.
        merged.update(pairs)
        return MappingProxyType(merged)
    dropped = 0
    for key, value in pairs:
        if key in merged or maxlen is None or len(merged) < maxlen:
            merged[key] = value
        else:
            dropped += 1
    if not dropped and not already_dropped and max_value_len is None:
        return MappingProxyType(merged)
    bounded = BoundedAttributes(maxlen, merged, immutable=True, max_value_len=max_value_len)
    bounded.dropped += dropped + already_dropped
    return bounded


def _appended(items: Sequence[Any], extra: Sequence[Any], maxlen: int | None, dropped: int) -> Any:
    room = len(extra) if maxlen is None else max(maxlen - len(items), 0)
    kept = [*items, *extra[:room]]
    lost = dropped + len(extra) - min(room, len(extra))
    if not lost:
        return tuple(kept)
    out: BoundedList[Any] = BoundedList.from_seq(maxlen, kept)
    out.dropped = lost
    return out


def _events(events: Sequence[NoteEvent], span: ReadableSpan, limits: SpanLimits) -> list[Event]:
    start, end = span.start_time, span.end_time
    maxlen, max_value_len = limits.max_event_attributes, limits.max_attribute_length
    return [
        Event(
            event.name,
            _attributes(None, event.attributes, maxlen, max_value_len),
            timestamp=start if event.anchor == "start" else end,
        )
        for event in events
    ]


def _link(link: NoteLink, limits: SpanLimits) -> Link:
    context = SpanContext(
        trace_id=int(link.trace_id, 16),
        span_id=int(link.span_id, 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    attributes = _attributes(
        None, link.attributes, limits.max_link_attributes, limits.max_attribute_length
    )
    return Link(context, attributes)


def annotated_copy(
    span: ReadableSpan, note: SpanNote, limits: SpanLimits | None = None
) -> ReadableSpan:
    """A copy of ``span`` with ``note`` applied (the span itself is returned for an empty note).

    ``limits`` are the span's limits (default: the environment's, as ``TracerProvider`` reads
    them). What does not fit is counted in the copy's dropped counts, as the SDK does.
    """
    if not note.attributes and not note.events and not note.links:
        return span
    limits = limits or default_limits()
    attributes = _attributes(
        span.attributes,
        note.attributes,
        limits.max_span_attributes,
        limits.max_span_attribute_length,
        span.dropped_attributes,
    )
    events = _appended(
        span.events,
        _events(note.events, span, limits),
        limits.max_events,
        span.dropped_events,
    )
    links: Any = span.links
    if note.links or span.dropped_links:
        links = _appended(
            links,
            [_link(link, limits) for link in note.links],
            limits.max_links,
            span.dropped_links,
        )
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
