"""The neutral footprint event and the one codec between upstream payloads and span attributes.

Agents (the recorder, the agentfootprint bridge, a Node.js client) encode an event's payload into
``footprint.<snake_case_field>`` attributes; reconstruction decodes them back into the upstream
camelCase payload, so every rule downstream reads the fields the reference names.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from otel_footprint import semconv

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

AttributeValue: TypeAlias = (
    str | bool | int | float | Sequence[str] | Sequence[bool] | Sequence[int] | Sequence[float]
)
"""An OpenTelemetry attribute value (the SDK's ``AttributeValue``, restated to stay API-neutral)."""

EventVia: TypeAlias = Literal["span-event", "log-record"]

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")

# Fields that are JSON on most events but plain text on these (a map event's witness is the
# matched words themselves; a turn_routed witness is an object).
_TEXT_FIELDS_BY_TYPE: Mapping[str, frozenset[str]] = {
    semconv.T_MAP_ENGAGED: frozenset({"witness"}),
    semconv.T_MAP_PARKED: frozenset({"witness"}),
}
_NO_FIELDS: frozenset[str] = frozenset()

# Field names repeat on every event of every run, so their conversions are memoized. Names come
# from the wire: only short ones are cached (a bounded cache of long garbage keys would still pin
# a lot of memory), and the cache holds at most _NAME_CACHE_SIZE of them.
_CACHED_NAME_CHARS = 64
_NAME_CACHE_SIZE = 2048


_Frozen = TypeVar("_Frozen", bound=type)


def quick_init(cls: _Frozen) -> _Frozen:
    """Give a frozen, slotted dataclass an ``__init__`` that builds the instance as a plain
    slotted twin of the class (the same slots, so the same layout) with each field stored at slot
    speed, then switches its class back, where the generated one calls ``object.__setattr__`` per
    field to get past the frozen ``__setattr__``: a third of the cost to build a five-field record
    (the decision path builds thousands of these per run). The class is otherwise unchanged: still
    frozen (assignment raises), compared, hashed, printed, pickled and ``dataclasses.replace``-d
    as before; an instance of a subclass is filled through the slot descriptors. Only for plain
    fields (positional or with a plain default; no ``default_factory``, ``kw_only``,
    ``init=False`` or ``__post_init__``): anything else is refused when the class is defined.
    Apply it above ``@dataclass(frozen=True, slots=True)``.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"quick_init needs a frozen, slotted dataclass, not {cls.__name__}")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init: {cls.__name__} has a __post_init__")
    twin = type(cls.__name__, cls.__bases__, {"__slots__": cls.__dict__["__slots__"]})
    names: dict[str, Any] = {"_cls": cls, "_twin": twin, "_switch": object.__setattr__}
    signature: list[str] = []
    fast: list[str] = []
    slow: list[str] = []
    for index, f in enumerate(dataclasses.fields(cls)):
        if f.default_factory is not dataclasses.MISSING or not f.init or f.kw_only:
            raise TypeError(f"quick_init: field {cls.__name__}.{f.name} is not a plain field")
        names[f"_set{index}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            signature.append(f.name)
        else:
            names[f"_default{index}"] = f.default
            signature.append(f"{f.name}=_default{index}")
        fast.append(f"        self.{f.name} = {f.name}\n")
        slow.append(f"        _set{index}(self, {f.name})\n")
    source = (
        f"def __init__(self, {', '.join(signature)}):\n    if self.__class__ is _cls:\n"
        f"        _switch(self, '__class__', _twin)\n{''.join(fast)}        self.__class__ = _cls\n"
        f"    else:\n{''.join(slow) or '        pass'}\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, names, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses a direct __init__ assignment
    return cls


def checked_after_built(cls: _Frozen) -> _Frozen:
    """Mark a record whose own checks (``__post_init__``, a validator) read the values it was built
    with: a user builds it from input of any type and gets the check's clear error.

    It returns the class unchanged. In the compiled core (docs/performance.md) it keeps the class a
    plain Python class: mypyc compiles a class with a decorator it does not know as a regular class,
    where a typed native class would turn ``True`` into ``1`` in an ``int`` field, or refuse a list
    for a tuple field with a ``TypeError``, before any check could say what is wrong.
    """
    return cls


class EventDecodeError(ValueError):
    """A footprint attribute could not be read; the message names the event and the attribute."""


@quick_init
@dataclass(frozen=True, slots=True)
class EventPointer:
    """Where an event lives in OpenTelemetry terms: the exact span (or log record) and index."""

    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits (the span the event is on, or the log record's span)."""
    event_name: str
    event_index: int
    """Index among the span's events (or among the log records joined to that span)."""
    via: EventVia = "span-event"

    def render(self, attribute: str | None = None, json_path: str | None = None) -> str:
        """A short, stable string: ``<trace>/<span>#<event>[<index>]@<attribute><json path>``."""
        text = f"{self.trace_id}/{self.span_id}#{self.event_name}[{self.event_index}]"
        if attribute is not None:
            text += f"@{attribute}"
            if json_path:
                text += json_path
        return text


@quick_init
@dataclass(frozen=True, slots=True)
class FootprintEvent:
    """One agent event, decoded: the upstream type, its camelCase payload, and where it was read."""

    type: str
    """Upstream event type without prefix, e.g. ``context.evaluated``."""
    payload: Mapping[str, Any]
    """Read-only camelCase payload (nested values are plain JSON data)."""
    pointer: EventPointer
    time_unix_nano: int = 0
    composition_id: str | None = None
    """Rows of one slot composition share it (upstream ``meta.runtimeStageId``)."""

    def attribute_of(self, field: str) -> str:
        """The attribute name that carries payload ``field`` (for evidence pointers)."""
        return field_attribute(field)


def _snake_case(name: str) -> str:
    return _CAMEL_BOUNDARY.sub(r"_\1", name).lower()


_snake_cached = lru_cache(maxsize=_NAME_CACHE_SIZE)(_snake_case)


def snake_case(name: str) -> str:
    """``sourceBreakdown`` -> ``source_breakdown`` (top-level payload keys only)."""
    return _snake_cached(name) if len(name) <= _CACHED_NAME_CHARS else _snake_case(name)


def camel_case(name: str) -> str:
    """``source_breakdown`` -> ``sourceBreakdown``; the inverse of :func:`snake_case` on upstream
    names (the decoder remembers what each attribute key means, names included)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _field_attribute(field: str) -> str:
    return semconv.PREFIX + _snake_case(field)


_field_attribute_cached = lru_cache(maxsize=_NAME_CACHE_SIZE)(_field_attribute)


def field_attribute(field: str) -> str:
    """The attribute name of a camelCase payload field: ``activeIds`` -> ``footprint.active_ids``."""
    if len(field) <= _CACHED_NAME_CHARS:
        return _field_attribute_cached(field)
    return _field_attribute(field)


def _is_homogeneous_scalar_list(values: Sequence[Any]) -> bool:
    if not values:
        return True
    first = type(values[0])
    if first not in (str, bool, int, float):
        return False
    return all(type(v) is first for v in values)


def encode_value(value: Any) -> AttributeValue | None:
    """One payload value as an attribute value: scalars and homogeneous scalar lists as they are,
    objects and mixed lists as compact JSON text. ``None`` means "leave the attribute out"."""
    if value is None:
        return None
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple) and _is_homogeneous_scalar_list(value):
        return tuple(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def encode_payload(
    payload: Mapping[str, Any], composition_id: str | None = None
) -> dict[str, AttributeValue]:
    """A camelCase payload as ``footprint.*`` attributes (absent and ``None`` fields are left out)."""
    attributes: dict[str, AttributeValue] = {}
    for key, value in payload.items():
        encoded = encode_value(value)
        if encoded is not None:
            attributes[field_attribute(key)] = encoded
    if composition_id is not None:
        attributes[semconv.COMPOSITION_ID] = composition_id
    return attributes


_PayloadKey: TypeAlias = "tuple[str, str | None] | None"
"""What an attribute key means to the decoder: ``(camelCase field, snake field when it may hold
JSON)``, or None for a key that is not payload."""
_payload_keys: dict[str, _PayloadKey] = {}
""":func:`_payload_key` by attribute key: a plain dict read per attribute; short keys only, at
most ``_NAME_CACHE_SIZE`` (then not added)."""


def _payload_key(key: str) -> _PayloadKey:
    """What ``key`` means (None: not ``footprint.``, dotted span identity, the composition id),
    remembered in ``_payload_keys``."""
    meaning: _PayloadKey = None
    if key != semconv.COMPOSITION_ID and key.startswith(semconv.PREFIX):
        field = key[len(semconv.PREFIX) :]
        # Dotted names (footprint.run.id, footprint.pass.iteration) are span identity, not payload.
        if "." not in field:
            meaning = camel_case(field), field if field in semconv.JSON_FIELDS else None
    if len(key) <= _CACHED_NAME_CHARS and len(_payload_keys) < _NAME_CACHE_SIZE:
        _payload_keys[key] = meaning
    return meaning


_scan_json: Callable[[str, int], tuple[Any, int]] = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009 - set in __init__, not in the stubs
"""The C scanner under ``json.loads``: one call instead of three Python frames per value."""


def loads_json(text: str) -> Any:
    """``json.loads(text)``: the same value or the same error, through the C scanner when the
    text is one JSON value without surrounding space (one call instead of three Python frames);
    anything else (space around it, trailing text, an error) goes to ``json.loads`` itself."""
    try:
        decoded, end = _scan_json(text, 0)
        if end == len(text):
            return decoded
    except (StopIteration, ValueError):
        pass
    return json.loads(text)


def _json_value(event_type: str, field: str, value: str) -> Any:
    # The value starts with { or [ (the caller checked); loads_json gives what json.loads would.
    try:
        return loads_json(value)
    except json.JSONDecodeError as exc:
        raise EventDecodeError(
            f"{semconv.event_name_of(event_type)}: attribute {semconv.PREFIX}{field} "
            f"is not valid JSON ({exc.msg} at {exc.pos})"
        ) from None
    # A number past the digit limit, deep nesting. A name of its own: a compiled build types a
    # name by its first ``except`` clause.
    except (ValueError, RecursionError) as unreadable:
        raise EventDecodeError(
            f"{semconv.event_name_of(event_type)}: attribute {semconv.PREFIX}{field} "
            f"cannot be read ({type(unreadable).__name__})"
        ) from None


_SCALAR_KINDS = frozenset({"string_value", "int_value", "double_value", "bool_value"})
"""The ``AnyValue`` kinds read as they are (the others are converted)."""


def any_value_to_python(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as plain Python (arrays as tuples, kvlists as dicts)."""
    kind = value.WhichOneof("value")
    if kind in _SCALAR_KINDS:
        return getattr(value, kind)
    if kind == "array_value":
        return tuple(any_value_to_python(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return bytes(value.bytes_value)
    return None


def decode_event(
    name: str,
    attributes: Iterable[tuple[str, Any]],
    pointer: EventPointer,
    time_unix_nano: int = 0,
) -> FootprintEvent | None:
    """Decode one span event or log record; None if its name is not a footprint event.

    Raises :class:`EventDecodeError` on a garbage attribute (the caller records it as a reason on
    the run and lets the span flow on unannotated).
    """
    event_type = semconv.event_type_of(name)
    if event_type is None:
        return None
    return decode_attributes(event_type, attributes, False, pointer, time_unix_nano)


def decode_attributes(
    event_type: str,
    items: Iterable[tuple[str, Any]] | Iterable[KeyValue],
    otlp: bool,
    pointer: EventPointer,
    time_unix_nano: int = 0,
) -> FootprintEvent:
    """:func:`decode_event` for a caller that has read the type off the name, over (key, Python
    value) pairs or (``otlp``) straight off an OTLP event's ``KeyValue``s, giving the same event or
    error either way (``tests/test_runs_fastpaths.py`` holds the two loops equal); an OTLP value
    is converted only for a payload key."""
    # These loops run for every attribute of every footprint event: what a key means is memoized,
    # and each kind of item has its own loop (no per-attribute test of which kind it is).
    text_fields = _TEXT_FIELDS_BY_TYPE.get(event_type, _NO_FIELDS)
    known = _payload_keys
    payload: dict[str, Any] = {}
    composition_id: str | None = None
    item: Any
    if otlp:
        for item in items:
            key = item.key
            try:
                meaning = known[key]
            except KeyError:
                meaning = _payload_key(key)
            if meaning is None:
                if key == semconv.COMPOSITION_ID:
                    raw = item.value
                    composition_id = raw.string_value or str(any_value_to_python(raw))
                continue
            name, json_field = meaning
            raw = item.value
            value = raw.string_value  # the common kind; "" for every other kind (and for "")
            if not value:
                kind = raw.WhichOneof("value")
                value = getattr(raw, kind) if kind in _SCALAR_KINDS else any_value_to_python(raw)
                if value.__class__ is tuple:
                    value = list(value)
            elif json_field is not None and value[0] in "{[" and json_field not in text_fields:
                value = _json_value(event_type, json_field, value)
            payload[name] = value
    else:
        for key, value in cast("Iterable[tuple[str, Any]]", items):
            try:
                meaning = known[key]
            except KeyError:
                meaning = _payload_key(key)
            if meaning is None:
                if key == semconv.COMPOSITION_ID:
                    composition_id = str(value)
                continue
            name, json_field = meaning
            cls = value.__class__
            if cls is str or (cls is not tuple and cls is not list and isinstance(value, str)):
                if (
                    json_field is not None
                    and value[:1] in ("{", "[")
                    and json_field not in text_fields
                ):
                    value = _json_value(event_type, json_field, value)
            elif cls is tuple or cls is list or isinstance(value, tuple | list):
                value = list(value)
            payload[name] = value
    # Positional: one per event of every run.
    return FootprintEvent(
        event_type, MappingProxyType(payload), pointer, time_unix_nano, composition_id
    )


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
"""The range of an OTLP ``int_value``: an integer outside it cannot be written back onto a span."""


def integral(value: Any) -> int | None:
    """A decoded value read as an integer: an int or an integral float, never a bool, within the
    OTLP integer range (int64); else None.

    The one rule every reader of counts and iterations uses (a JSON ``2.0`` is 2; ``true`` is not 1).
    A value no OTLP integer can hold (``1e308`` where a count belongs, a 30-digit JSON number) is
    unreadable like a string would be: it costs that value, never the run's annotations.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # also NaN and the infinities
            return None
        value = int(value)
    elif not isinstance(value, int):
        return None
    return value if INT64_MIN <= value <= INT64_MAX else None


def count(value: Any) -> int | None:
    """A decoded value read as a count: :func:`integral` and not negative; else None."""
    found = integral(value)
    return found if found is not None and found >= 0 else None
