"""The neutral footprint event and the one codec between upstream payloads and span attributes.

Agents (the recorder, the agentfootprint bridge, a Node.js client) encode an event's payload into
``footprint.<snake_case_field>`` attributes; reconstruction decodes them back into the upstream
camelCase payload, so every rule downstream reads the fields the reference names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from otel_footprint import semconv

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


class EventDecodeError(ValueError):
    """A footprint attribute could not be read; the message names the event and the attribute."""


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


def _camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_snake_cached = lru_cache(maxsize=_NAME_CACHE_SIZE)(_snake_case)
_camel_cached = lru_cache(maxsize=_NAME_CACHE_SIZE)(_camel_case)


def snake_case(name: str) -> str:
    """``sourceBreakdown`` -> ``source_breakdown`` (top-level payload keys only)."""
    return _snake_cached(name) if len(name) <= _CACHED_NAME_CHARS else _snake_case(name)


def camel_case(name: str) -> str:
    """``source_breakdown`` -> ``sourceBreakdown``; the inverse of :func:`snake_case` on upstream names."""
    return _camel_cached(name) if len(name) <= _CACHED_NAME_CHARS else _camel_case(name)


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


def _payload_field(key: str) -> tuple[str, str, bool] | None:
    """``(snake field, camelCase field, may hold JSON)`` of a payload attribute key; None for keys
    that are not payload (not ``footprint.``, dotted span identity, the composition id)."""
    if key == semconv.COMPOSITION_ID or not key.startswith(semconv.PREFIX):
        return None
    field = key[len(semconv.PREFIX) :]
    if "." in field:
        # Dotted names (footprint.run.id, footprint.pass.iteration) are span identity, not payload.
        return None
    return field, _camel_case(field), field in semconv.JSON_FIELDS


_payload_field_cached = lru_cache(maxsize=_NAME_CACHE_SIZE)(_payload_field)


def _json_value(event_type: str, field: str, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise EventDecodeError(
            f"{semconv.event_name_of(event_type)}: attribute {semconv.PREFIX}{field} "
            f"is not valid JSON ({exc.msg} at {exc.pos})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number past the digit limit, deep nesting
        raise EventDecodeError(
            f"{semconv.event_name_of(event_type)}: attribute {semconv.PREFIX}{field} "
            f"cannot be read ({type(exc).__name__})"
        ) from None


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
    text_fields = _TEXT_FIELDS_BY_TYPE.get(event_type, _NO_FIELDS)
    payload: dict[str, Any] = {}
    composition_id: str | None = None
    # This loop runs for every attribute of every footprint event: what a key means is memoized.
    for key, value in attributes:
        if len(key) <= _CACHED_NAME_CHARS:
            known = _payload_field_cached(key)
        else:
            known = _payload_field(key)
        if known is None:
            if key == semconv.COMPOSITION_ID:
                composition_id = str(value)
            continue
        field, name, may_be_json = known
        if isinstance(value, tuple | list):
            value = list(value)
        elif (
            may_be_json
            and isinstance(value, str)
            and field not in text_fields
            and value[:1] in ("{", "[")
        ):
            value = _json_value(event_type, field, value)
        payload[name] = value
    return FootprintEvent(
        type=event_type,
        payload=MappingProxyType(payload),
        pointer=pointer,
        time_unix_nano=time_unix_nano,
        composition_id=composition_id,
    )


def integral(value: Any) -> int | None:
    """A decoded value read as an integer: an int or an integral float, never a bool; else None.

    The one rule every reader of counts and iterations uses (a JSON ``2.0`` is 2; ``true`` is not 1).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
