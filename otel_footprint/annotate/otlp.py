"""Writer for OTLP protobuf spans: appends a SpanNote to a ``Span`` message in place (the hop's path).

No copies, no SDK objects: the note is encoded straight to protobuf wire bytes (repeated fields
concatenate) and merged into the span with one parse, instead of one message object per value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Final

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags

from otel_footprint.annotate.form import Pairs, SpanNote
from otel_footprint.codec import INT64_MAX, INT64_MIN, AttributeValue


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


_LEN, _I64, _I32, _VARINT = 2, 1, 5, 0


def _field(message: type, name: str, wire_type: int) -> bytes:
    # A varint, not one byte: a field number of 16 or more takes two (none used here, today).
    number: int = message.DESCRIPTOR.fields_by_name[name].number  # type: ignore[attr-defined]
    return varint(number << 3 | wire_type)


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
    parts: list[bytes] = []
    for item in value:
        if item.__class__ is str:  # most items (map ids, pointers): skip the type dispatch
            text = item.encode("utf-8")
            item_value = _ANY_STRING + varint(len(text)) + text
        else:
            item_value = _any_value_bytes(item)
        parts.append(_ARRAY_VALUE + varint(len(item_value)) + item_value)
    return _delimited(_ANY_ARRAY, b"".join(parts))


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


def _attributes_bytes(tag: bytes, pairs: Iterable[tuple[str, AttributeValue]]) -> tuple[bytes, int]:
    """The attributes ``pairs`` as fields ``tag``, and how many were left off: a value OTLP
    cannot hold (an integer past int64) costs that value, not the note."""
    get = _cache.get
    try:
        encoded = [
            get((tag, key, value.__class__, value)) or _encode_key_value(tag, key, value)
            for key, value in pairs
        ]
        return b"".join(encoded), 0
    except (TypeError, ValueError):
        # An unhashable value (a list where a tuple was expected): encode without the cache;
        # a value that cannot be written: leave it off (``pairs`` is a sequence or a dict view).
        parts: list[bytes] = []
        dropped = 0
        for key, value in pairs:
            try:
                parts.append(_encode_key_value(tag, key, value, store=False))
            except ValueError:
                dropped += 1
        return b"".join(parts), dropped


def _with_attributes(head: bytes, tag: bytes, pairs: Pairs, dropped_tag: bytes) -> bytes:
    """An event's or link's fields: ``head``, then ``pairs`` as attributes ``tag`` (a key given
    twice keeps its later value, at its first position) and, when a value was left off, its
    ``dropped_attributes_count`` (not written at all when none was)."""
    if len(pairs) > 1:
        merged = dict(pairs)  # built in C: cheaper than a set of the keys
        if len(merged) != len(pairs):
            pairs = tuple(merged.items())
    attributes, dropped = _attributes_bytes(tag, pairs)
    if dropped:
        return head + attributes + dropped_tag + varint(dropped)
    return head + attributes


def apply_note(
    pb_span: Span, note: SpanNote, present: Mapping[str, AnyValue] | None = None
) -> None:
    """Add ``note``'s attributes, events and links to ``pb_span`` in place.

    An attribute key already on the span is replaced where it stands rather than duplicated (OTLP
    says keys are unique); a key given twice in the note keeps its later value. Events without
    their own time sit at the span's start or end, per their anchor. ``present``: the span's
    attributes by key, when the caller has them indexed (``OtlpSpanView.attribute_values``): it
    spares a pass over the span's attributes (the protobuf's per-item cost).
    """
    parts: list[bytes] = []
    if note.attributes:
        # One entry per key: the later value at the first position.
        wanted = dict(note.attributes)
        dropped = 0
        # A note restating a key (every pass note restates footprint.pass.iteration): a key
        # whose value is already there, byte for byte, needs no rewrite; the others change
        # where they stand. Either way it is not appended.
        if present and len(present) == len(pb_span.attributes):
            # The index holds every attribute, each key once: a restated key is read from it.
            restated = [(present[key], key) for key in wanted if key in present]
        else:  # one pass over the span's attributes (a key it holds twice: each copy)
            restated = [(kv.value, kv.key) for kv in pb_span.attributes if kv.key in wanted]
        replace: dict[str, AttributeValue] = {}
        for held, key in restated:
            if key not in replace:
                try:
                    if held.SerializeToString() != _any_value_bytes(wanted[key]):
                        replace[key] = wanted[key]
                except ValueError:  # cannot be written: the span's own value stays
                    dropped += 1
        for _, key in restated:
            wanted.pop(key, None)
        for kv in pb_span.attributes if replace else ():
            if kv.key in replace:
                kv.value.Clear()
                to_any_value(replace[kv.key], kv.value)
        attributes, left_off = _attributes_bytes(_SPAN_ATTRIBUTE, wanted.items())
        parts.append(attributes)
        if dropped or left_off:
            pb_span.dropped_attributes_count += dropped + left_off
    if note.events:
        start = _EVENT_TIME + _FIXED64(pb_span.start_time_unix_nano)
        end = _EVENT_TIME + _FIXED64(pb_span.end_time_unix_nano)
        for event in note.events:
            name = _event_names.get(event.name)
            if name is None:
                name = _delimited(_EVENT_NAME, event.name.encode("utf-8"))
                if len(_event_names) < _CACHE_ENTRIES:
                    _event_names[event.name] = name
            body = _with_attributes(
                (start if event.anchor == "start" else end) + name,
                _EVENT_ATTRIBUTE,
                event.attributes,
                _EVENT_DROPPED,
            )
            parts.append(_SPAN_EVENT + varint(len(body)) + body)
    for link in note.links:
        ids = _delimited(_LINK_TRACE_ID, bytes.fromhex(link.trace_id)) + _delimited(
            _LINK_SPAN_ID, bytes.fromhex(link.span_id)
        )
        body = _with_attributes(ids, _LINK_ATTRIBUTE, link.attributes, _LINK_DROPPED)
        # As the SDK encoder writes links: "is_remote is known, and false" (same process/trace
        # store), so both writers produce identical links.
        parts.append(_delimited(_SPAN_LINK, body + _LINK_FLAG_BYTES))
    if parts:
        pb_span.MergeFromString(b"".join(parts))
