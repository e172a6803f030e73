"""Evidence pointers in OpenTelemetry terms: an event's attribute (+ RFC 6901 path) or a span attribute."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from otel_footprint import semconv
from otel_footprint.account.model import Pointer
from otel_footprint.codec import EventPointer, FootprintEvent

MAX_POINTERS: int = 12
"""Pointers per sentence (reference §4.9)."""


@lru_cache(maxsize=1024, typed=True)  # typed: an index 1 is not a key True
def json_path(*parts: str | int) -> str | None:
    """An RFC 6901 pointer (``/scores/0/score``); None for the whole value."""
    # Memoized: the parts are the account's own field names and small indexes, asked again and
    # again for every pointer of every line.
    if not parts:
        return None
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def at_event(event: FootprintEvent, field: str | None = None, *path: str | int) -> Pointer:
    """The payload ``field`` of ``event`` (its ``footprint.<snake>`` attribute), or the event itself."""
    where = event.pointer
    # Positional (trace, span, event name, event index, attribute, JSON path): built for most
    # lines, and a record built with keywords costs about twice as much.
    if field is None:
        return Pointer(where.trace_id, where.span_id, where.event_name, where.event_index)
    return Pointer(
        where.trace_id,
        where.span_id,
        where.event_name,
        where.event_index,
        event.attribute_of(field),
        json_path(*path),
    )


def at_state(resume: EventPointer, key: str, *path: str | int) -> Pointer:
    """A value in the state a resumed leg holds: ``footprint.state`` on its ``pause.resume`` event."""
    return Pointer(
        resume.trace_id,
        resume.span_id,
        resume.event_name,
        resume.event_index,
        semconv.F_STATE,
        json_path(key, *path),
    )


def bounded(pointers: Sequence[Pointer]) -> tuple[Pointer, ...]:
    """Distinct pointers in first-seen order, at most :data:`MAX_POINTERS`."""
    if len(pointers) < 2:
        return tuple(pointers)  # most lines have one: nothing to deduplicate (or to hash)
    seen: dict[Pointer, None] = {}
    for pointer in pointers:
        seen.setdefault(pointer, None)
        if len(seen) == MAX_POINTERS:
            break
    return tuple(seen)
