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


def snake_case(name: str) -> str:
    """``sourceBreakdown`` -> ``source_breakdown`` (top-level payload keys only)."""
    return _CAMEL_BOUNDARY.sub(r"_\1", name).lower()


def camel_case(name: str) -> str:
    """``source_breakdown`` -> ``sourceBreakdown``; the inverse of :func:`snake_case` on upstream names."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_attribute(field: str) -> str:
    """The attribute name of a camelCase payload field: ``activeIds`` -> ``footprint.active_ids``."""
    return semconv.PREFIX + snake_case(field)


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


def _decode_value(event_type: str, field: str, value: Any) -> Any:
    if isinstance(value, tuple | list):
        return list(value)
    if (
        isinstance(value, str)
        and field in semconv.JSON_FIELDS
        and field not in _TEXT_FIELDS_BY_TYPE.get(event_type, frozenset())
        and value[:1] in ("{", "[")
    ):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise EventDecodeError(
                f"{semconv.event_name_of(event_type)}: attribute {semconv.PREFIX}{field} "
                f"is not valid JSON ({exc.msg} at {exc.pos})"
            ) from None
    return value


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
    payload: dict[str, Any] = {}
    composition_id: str | None = None
    for key, value in attributes:
        if key == semconv.COMPOSITION_ID:
            composition_id = str(value)
            continue
        if not key.startswith(semconv.PREFIX):
            continue
        field = key[len(semconv.PREFIX) :]
        if "." in field:
            # Dotted names (footprint.run.id, footprint.pass.iteration) are span identity, not payload.
            continue
        payload[camel_case(field)] = _decode_value(event_type, field, value)
    return FootprintEvent(
        type=event_type,
        payload=MappingProxyType(payload),
        pointer=pointer,
        time_unix_nano=time_unix_nano,
        composition_id=composition_id,
    )
