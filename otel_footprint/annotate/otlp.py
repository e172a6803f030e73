"""Writer for OTLP protobuf spans: appends a SpanNote to a ``Span`` message in place (the hop's path).

No copies, no SDK objects: the note is encoded straight to protobuf wire bytes (repeated fields
concatenate) and merged into the span with one parse, instead of one message object per value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from google.protobuf.descriptor import FieldDescriptor
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags

from otel_footprint.annotate.form import Pairs, SpanNote
from otel_footprint.codec import INT64_MAX, INT64_MIN, AttributeValue

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer


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


# ── wire encoding ─────────────────────────────────────────────────────────────────────────────
# Building one KeyValue message per value costs several Python-level protobuf calls each; a run
# span's note has ~100 of them. Encoding the bytes here and merging them with one MergeFromString
# is the same message (tests compare both ways), and repeated values come from a small cache.


_SMALL: Final = tuple(bytes([n]) for n in range(128))


def varint(n: int) -> bytes:
    """``n`` (not negative) as a protobuf varint: the project's one varint writer."""
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 128:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_at(data: bytes, pos: int) -> tuple[int, int]:
    """The protobuf varint at ``pos`` of ``data`` and the position after it (IndexError when it
    runs past the end): the project's one varint reader."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _tag(descriptor: FieldDescriptor, wire_type: int) -> bytes:
    # A varint, not one byte: a field number of 16 or more takes two (none used here, today).
    return varint(descriptor.number << 3 | wire_type)


_LEN, _I64, _I32, _VARINT = 2, 1, 5, 0


def _field(message: type, name: str, wire_type: int) -> bytes:
    return _tag(message.DESCRIPTOR.fields_by_name[name], wire_type)  # type: ignore[attr-defined]


_SPAN_ATTRIBUTE: Final = _field(Span, "attributes", _LEN)
_SPAN_EVENT: Final = _field(Span, "events", _LEN)
_SPAN_LINK: Final = _field(Span, "links", _LEN)
_EVENT_TIME: Final = _field(Span.Event, "time_unix_nano", _I64)
_EVENT_NAME: Final = _field(Span.Event, "name", _LEN)
_EVENT_ATTRIBUTE: Final = _field(Span.Event, "attributes", _LEN)
_LINK_TRACE_ID: Final = _field(Span.Link, "trace_id", _LEN)
_LINK_SPAN_ID: Final = _field(Span.Link, "span_id", _LEN)
_LINK_ATTRIBUTE: Final = _field(Span.Link, "attributes", _LEN)
_EVENT_DROPPED: Final = _field(Span.Event, "dropped_attributes_count", _VARINT)
_LINK_DROPPED: Final = _field(Span.Link, "dropped_attributes_count", _VARINT)
_LINK_FLAGS: Final = _field(Span.Link, "flags", _I32)
_KV_KEY: Final = _field(KeyValue, "key", _LEN)
_KV_VALUE: Final = _field(KeyValue, "value", _LEN)
_ANY_STRING: Final = _field(AnyValue, "string_value", _LEN)
_ANY_BOOL: Final = _field(AnyValue, "bool_value", _VARINT)
_ANY_INT: Final = _field(AnyValue, "int_value", _VARINT)
_ANY_DOUBLE: Final = _field(AnyValue, "double_value", _I64)
_ANY_ARRAY: Final = _field(AnyValue, "array_value", _LEN)
_ARRAY_VALUE: Final = _field(ArrayValue, "values", _LEN)

_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_LINK_FLAG_BYTES: Final = _LINK_FLAGS + _FIXED32(SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)


def _delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def length_delimited(field_number: int, payload: bytes) -> bytes:
    """Protobuf field ``field_number`` (wire type 2: bytes, string or message) holding ``payload``
    (the hop's query service frames stored messages with it, without re-encoding them)."""
    return _delimited(varint(field_number << 3 | _LEN), payload)


def _any_value_bytes(value: AttributeValue) -> bytes:
    """The ``AnyValue`` message of ``value`` (the same cases, in the same order, as to_any_value)."""
    if isinstance(value, bool):
        return _ANY_BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{value} does not fit an OTLP int_value (int64)")
        return _ANY_INT + varint(value & 0xFFFF_FFFF_FFFF_FFFF)
    if isinstance(value, float):
        return _ANY_DOUBLE + _DOUBLE(value)
    if isinstance(value, str):
        return _delimited(_ANY_STRING, value.encode("utf-8"))
    items = b"".join([_delimited(_ARRAY_VALUE, _any_value_bytes(item)) for item in value])
    return _delimited(_ANY_ARRAY, items)


_CACHE_ENTRIES: Final = 16384
_cache: dict[tuple[object, ...], bytes] = {}
"""Encoded key-value fields by (field tag, key, value class, value): checks, states, map ids and
templates repeat from run to run. Bounded (cleared when full); plain dict operations, thread-safe.

Only values whose equality implies equal bytes are stored: str, bool and int (the class is in the
key, since True == 1), and tuples of str. A lookup of any other value can therefore only hit an
entry that encodes the same (a (1,) never equals a stored ("1",); 0.0 and -0.0 are not stored)."""


_key_fields: dict[str, bytes] = {}
"""Encoded ``KeyValue.key`` fields (attribute names are a small vocabulary)."""
_event_names: dict[str, bytes] = {}
"""Encoded event-name fields (a small vocabulary: the form's event names)."""


def _encode_key_value(tag: bytes, key: str, value: AttributeValue, store: bool = True) -> bytes:
    """One ``KeyValue`` as a field of the repeated attributes field ``tag`` (and cache it)."""
    key_field = _key_fields.get(key)
    if key_field is None:
        key_field = _delimited(_KV_KEY, key.encode("utf-8"))
        if len(_key_fields) < _CACHE_ENTRIES:
            _key_fields[key] = key_field
    cls = value.__class__
    if cls is str:  # most values: skip the type dispatch
        text = value.encode("utf-8")  # type: ignore[union-attr]
        any_value = _ANY_STRING + varint(len(text)) + text
    else:
        any_value = _any_value_bytes(value)
    body = key_field + _KV_VALUE + varint(len(any_value)) + any_value
    encoded = tag + varint(len(body)) + body
    if store and (
        cls is str
        or cls is int
        or cls is bool
        or (cls is tuple and all(item.__class__ is str for item in value))  # type: ignore[union-attr]
    ):
        if len(_cache) >= _CACHE_ENTRIES:
            _cache.clear()
        _cache[(tag, key, cls, value)] = encoded
    return encoded


def _attributes_bytes(
    tag: bytes, pairs: Iterable[tuple[str, AttributeValue]], dropped: list[int]
) -> bytes:
    """The attributes ``pairs`` as fields ``tag``; a value OTLP cannot hold (an integer past
    int64) is left off and counted in ``dropped[0]``: it costs that value, not the note."""
    get = _cache.get
    try:
        return b"".join(
            [
                get((tag, key, value.__class__, value)) or _encode_key_value(tag, key, value)
                for key, value in pairs
            ]
        )
    except (TypeError, ValueError):
        # An unhashable value (a list where a tuple was expected): encode without the cache;
        # a value that cannot be written: leave it off (``pairs`` is a sequence or a dict view).
        parts: list[bytes] = []
        for key, value in pairs:
            try:
                parts.append(_encode_key_value(tag, key, value, store=False))
            except ValueError:
                dropped[0] += 1
        return b"".join(parts)


def _with_dropped(tag: bytes, dropped: list[int]) -> bytes:
    """A message's ``dropped_attributes_count`` field for what :func:`_attributes_bytes` left off
    (empty when nothing was: then not written at all, as before)."""
    n, dropped[0] = dropped[0], 0
    return tag + varint(n) if n else b""


def _unique(pairs: Pairs) -> Pairs | Iterable[tuple[str, AttributeValue]]:
    """``pairs`` with one entry per key: the later value at the first position (as a dict merges)."""
    if len(pairs) < 2:
        return pairs
    merged = dict(pairs)  # built in C: cheaper than a set of the keys
    return pairs if len(merged) == len(pairs) else merged.items()


def _replace_in_place(
    target: RepeatedCompositeFieldContainer[KeyValue],
    replacements: dict[str, AttributeValue],
) -> None:
    for kv in target:
        if kv.key in replacements:
            kv.value.Clear()
            to_any_value(replacements[kv.key], kv.value)


def apply_note(pb_span: Span, note: SpanNote) -> None:
    """Add ``note``'s attributes, events and links to ``pb_span`` in place.

    An attribute key already on the span is replaced where it stands rather than duplicated (OTLP
    says keys are unique); a key given twice in the note keeps its later value. Events without
    their own time sit at the span's start or end, per their anchor.
    """
    parts: list[bytes] = []
    dropped = [0]
    if note.attributes:
        pairs = _unique(note.attributes)
        if pb_span.attributes:
            # A note restating a key (every pass note restates footprint.pass.iteration): a key
            # whose value is already there, byte for byte, needs no rewrite; the others change
            # where they stand. One pass over the span's attributes finds both.
            wanted = dict(pairs)
            restated: set[str] = set()
            replace: dict[str, AttributeValue] = {}
            for kv in pb_span.attributes:
                key = kv.key
                if key in wanted and key not in replace:
                    restated.add(key)
                    value = wanted[key]
                    try:
                        if kv.value.SerializeToString() != _any_value_bytes(value):
                            replace[key] = value
                    except ValueError:  # cannot be written: the span's own value stays
                        dropped[0] += 1
            if replace:
                _replace_in_place(pb_span.attributes, replace)
            if restated:
                pairs = [(key, value) for key, value in pairs if key not in restated]
        parts.append(_attributes_bytes(_SPAN_ATTRIBUTE, pairs, dropped))
        if dropped[0]:
            pb_span.dropped_attributes_count += dropped[0]
            dropped[0] = 0
    if note.events:
        start = _EVENT_TIME + _FIXED64(pb_span.start_time_unix_nano)
        end = _EVENT_TIME + _FIXED64(pb_span.end_time_unix_nano)
        for event in note.events:
            name = _event_names.get(event.name)
            if name is None:
                name = _delimited(_EVENT_NAME, event.name.encode("utf-8"))
                if len(_event_names) < _CACHE_ENTRIES:
                    _event_names[event.name] = name
            body = (
                (start if event.anchor == "start" else end)
                + name
                + _attributes_bytes(_EVENT_ATTRIBUTE, _unique(event.attributes), dropped)
                + _with_dropped(_EVENT_DROPPED, dropped)
            )
            parts.append(_SPAN_EVENT + varint(len(body)) + body)
    for link in note.links:
        body = (
            _delimited(_LINK_TRACE_ID, bytes.fromhex(link.trace_id))
            + _delimited(_LINK_SPAN_ID, bytes.fromhex(link.span_id))
            + _attributes_bytes(_LINK_ATTRIBUTE, _unique(link.attributes), dropped)
            + _with_dropped(_LINK_DROPPED, dropped)
            # As the SDK encoder writes links: "is_remote is known, and false" (same process/trace
            # store), so both writers produce identical links.
            + _LINK_FLAG_BYTES
        )
        parts.append(_delimited(_SPAN_LINK, body))
    if parts:
        pb_span.MergeFromString(b"".join(parts))
