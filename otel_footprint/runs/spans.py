"""A read-only span view over SDK ``ReadableSpan``s and OTLP protobuf spans, without converting them.

Reconstruction, the account and the annotators read spans only through :class:`SpanView`, so the
in-process processor and the protobuf-native hop share every rule. The OTLP view reads attributes
lazily: a span that is not a run, model-call or tool span costs one attribute lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from otel_footprint.codec import any_value_to_python, quick_init
from otel_footprint.runs.recognize import SpanRole, role_of

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
    from opentelemetry.sdk.trace import ReadableSpan


@quick_init
@dataclass(frozen=True, slots=True)
class SpanEventView:
    """One span event (or a log record joined to its span) as name, time and attributes."""

    name: str
    time_unix_nano: int
    attributes: Sequence[tuple[str, Any]]
    via: str = "span-event"


class SpanView(Protocol):
    """What every rule may read of a span. Ids are lowercase hex; absent parent is None."""

    @property
    def trace_id(self) -> str: ...
    @property
    def span_id(self) -> str: ...
    @property
    def parent_span_id(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def start_time_unix_nano(self) -> int: ...
    @property
    def end_time_unix_nano(self) -> int: ...
    def attribute(self, key: str) -> Any | None: ...
    def events(self) -> Sequence[SpanEventView]: ...
    @property
    def role(self) -> SpanRole: ...  # role_of(attribute), remembered: grouping and notes ask it


def key_values_to_pairs(items: Sequence[KeyValue]) -> list[tuple[str, Any]]:
    """OTLP ``KeyValue`` list as (key, python value) pairs, in order."""
    return [(kv.key, any_value_to_python(kv.value)) for kv in items]


class _RoleOnce:
    """Both views' ``role``: :func:`role_of` the span's attributes, read once and remembered."""

    __slots__ = ("_role",)
    _role: SpanRole | None

    def attribute(self, key: str) -> Any | None:
        raise NotImplementedError

    @property
    def role(self) -> SpanRole:
        role = self._role
        if role is None:
            role = self._role = role_of(self.attribute)
        return role


class OtlpSpanView(_RoleOnce):
    """A :class:`SpanView` over an OTLP protobuf ``Span`` (the collector path; no copies), with
    its ``role`` if the caller already recognised it (the hop, at the receiver)."""

    __slots__ = ("_attrs", "_span_id", "_trace_id", "pb")

    def __init__(self, pb: PbSpan, role: SpanRole | None = None) -> None:
        self.pb = pb
        self._role = role
        self._attrs: dict[str, AnyValue] | None = None
        # Ids are read for every event of the span; hex them once (they never change).
        self._trace_id: str | None = None
        self._span_id: str | None = None

    @property
    def trace_id(self) -> str:
        if self._trace_id is None:
            self._trace_id = self.pb.trace_id.hex()
        return self._trace_id

    @property
    def span_id(self) -> str:
        if self._span_id is None:
            self._span_id = self.pb.span_id.hex()
        return self._span_id

    @property
    def parent_span_id(self) -> str | None:
        return self.pb.parent_span_id.hex() or None

    @property
    def name(self) -> str:
        return self.pb.name

    @property
    def start_time_unix_nano(self) -> int:
        return int(self.pb.start_time_unix_nano)

    @property
    def end_time_unix_nano(self) -> int:
        return int(self.pb.end_time_unix_nano)

    def attribute_keys(self) -> Iterable[str]:
        """The span's attribute keys, from the index :meth:`attribute` builds (iterating the
        protobuf list again would build a message wrapper per attribute)."""
        return self.attribute_values().keys()

    def attribute(self, key: str) -> Any | None:
        raw = (self._attrs or self.attribute_values()).get(key)
        # A non-empty string (most values) is read as it is; "" is every other kind, or "".
        return None if raw is None else raw.string_value or any_value_to_python(raw)

    def attribute_values(self) -> Mapping[str, AnyValue]:
        """The span's attributes by key, as the protobuf values (a key given twice: its last).
        One pass builds the index; most spans are asked one or two keys and then dropped."""
        attrs = self._attrs
        if attrs is None:
            attrs = self._attrs = {kv.key: kv.value for kv in self.pb.attributes}
        return attrs

    def events(self) -> Sequence[SpanEventView]:
        return [
            SpanEventView(ev.name, int(ev.time_unix_nano), key_values_to_pairs(ev.attributes))
            for ev in self.pb.events
        ]


class SdkSpanView(_RoleOnce):
    """A :class:`SpanView` over an SDK ``ReadableSpan`` (the in-process path)."""

    __slots__ = ("_attrs", "_span_id", "_trace_id", "span")

    def __init__(self, span: ReadableSpan) -> None:
        self.span = span
        self._role: SpanRole | None = None
        # Ids are read for every event of the span; format them once (they never change).
        self._trace_id: str | None = None
        self._span_id: str | None = None
        # The ended span's attributes, copied on the first read: the SDK builds a read-only proxy
        # on every access, the rules ask some keys many times per run, and a key the span lacks
        # (most recognition keys) costs the SDK's mapping a raised KeyError per lookup.
        self._attrs: dict[str, Any] | None = None

    @property
    def trace_id(self) -> str:
        if self._trace_id is None:
            ctx = self.span.context
            self._trace_id = format(ctx.trace_id, "032x") if ctx is not None else ""
        return self._trace_id

    @property
    def span_id(self) -> str:
        if self._span_id is None:
            ctx = self.span.context
            self._span_id = format(ctx.span_id, "016x") if ctx is not None else ""
        return self._span_id

    @property
    def parent_span_id(self) -> str | None:
        parent = self.span.parent
        return format(parent.span_id, "016x") if parent is not None else None

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def start_time_unix_nano(self) -> int:
        return self.span.start_time or 0

    @property
    def end_time_unix_nano(self) -> int:
        return self.span.end_time or 0

    def attribute(self, key: str) -> Any | None:
        attrs = self._attrs
        if attrs is None:
            source = self.span.attributes
            attrs = self._attrs = dict(source) if source else {}
        return attrs.get(key)

    def attribute_keys(self) -> Iterable[str]:
        """The span's attribute keys (from the copy :meth:`attribute` reads)."""
        if self._attrs is None:
            source = self.span.attributes
            self._attrs = dict(source) if source else {}
        return self._attrs.keys()

    def events(self) -> Sequence[SpanEventView]:
        return [
            SpanEventView(ev.name, ev.timestamp, _pairs(ev.attributes)) for ev in self.span.events
        ]


def _pairs(attributes: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    # Plain key iteration: the SDK's attribute mapping goes through the abstract Mapping layers
    # for ``items()``, which costs more than reading each key back.
    # An ended span's event attributes are an immutable BoundedAttributes over a plain dict: its
    # items are read at C speed (any other mapping key by key, as before).
    inner = getattr(attributes, "_dict", None)
    if isinstance(inner, dict) and getattr(attributes, "_immutable", False):
        return list(inner.items())
    if not attributes:
        return []
    return [(key, attributes[key]) for key in attributes]


def log_record_event(
    record: LogRecord, event_name_attr: str = "event.name"
) -> SpanEventView | None:
    """A log record that carries an event (``event_name``, or the older ``event.name`` attribute)."""
    pairs = key_values_to_pairs(record.attributes)
    name = record.event_name
    if not name:
        name = next((str(v) for k, v in pairs if k == event_name_attr), "")
    if not name:
        return None
    time = int(record.time_unix_nano or record.observed_time_unix_nano)
    return SpanEventView(name, time, pairs, via="log-record")


RawEvent = tuple[int, str, str, int, "Iterable[tuple[str, Any]] | Iterable[KeyValue]", bool]
"""(index among the span's events, name, the type ``wanted`` read off it, time, attributes, whether
they are OTLP ``KeyValue``s rather than (key, Python value) pairs) of one span event."""


def raw_events(view: SpanView, wanted: Callable[[str], str | None]) -> Iterator[RawEvent]:
    """The span's own events whose name ``wanted`` answers (not None), with their index among all
    the span's events. The two known views are read straight from the protobuf / SDK objects (an
    OTLP event's attributes as they are, for ``codec.decode_attributes``): no
    :class:`SpanEventView` is built, and an unwanted event's attributes are never read."""
    if isinstance(view, OtlpSpanView):
        for index, ev in enumerate(view.pb.events):
            name = ev.name
            answer = wanted(name)
            if answer is not None:
                yield index, name, answer, ev.time_unix_nano, ev.attributes, True
    elif isinstance(view, SdkSpanView):
        for index, sdk_event in enumerate(view.span.events):
            name = sdk_event.name
            answer = wanted(name)
            if answer is not None:
                yield index, name, answer, sdk_event.timestamp, _pairs(sdk_event.attributes), False
    else:
        yield from listed_events(view.events(), wanted)


def listed_events(
    events: Sequence[SpanEventView], wanted: Callable[[str], str | None]
) -> Iterator[RawEvent]:
    """:func:`raw_events` of events already read (a span's log records, another view's events)."""
    for index, event in enumerate(events):
        answer = wanted(event.name)
        if answer is not None:
            yield index, event.name, answer, event.time_unix_nano, event.attributes, False
