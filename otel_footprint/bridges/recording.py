"""Reading an agentfootprint NDJSON recording: the envelope, event times, and the split into run
legs; pure functions that the importer and the plan inference both build on."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from otel_footprint import semconv

CONSUMER_SCOPE = "consumer-scope"
"""The run id upstream stamps on ``pause.request`` / ``pause.resume`` (not a run: placed by position)."""

_NANOS_PER_MS = 1_000_000


class RecordingError(ValueError):
    """A recording line that cannot be read; ``line`` is 1-based, as editors count."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True, slots=True)
class UpstreamEvent:
    """One line of a recording: the event type without prefix, its payload and meta, and its time."""

    line: int
    """0-based line number in the file (the sidecars' convention)."""
    type: str
    """e.g. ``context.evaluated`` (the ``agentfootprint.`` prefix removed)."""
    payload: Mapping[str, Any]
    meta: Mapping[str, Any]
    time_unix_nano: int
    """``meta.wallClockMs`` in nanoseconds, made strictly increasing in file order (see below)."""

    @property
    def run_id(self) -> str | None:
        """The leg's run id, or None for consumer-scope (pause) events and lines without one."""
        value = self.meta.get("runId")
        if isinstance(value, str) and value and value != CONSUMER_SCOPE:
            return value
        return None

    @property
    def stage_id(self) -> str | None:
        """``meta.runtimeStageId``: events of one stage (one slot composition) share it."""
        value = self.meta.get("runtimeStageId")
        return value if isinstance(value, str) else None

    def int_field(self, key: str) -> int | None:
        """A payload field that must be an int (bools are not ints here)."""
        value = self.payload.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def str_field(self, key: str) -> str | None:
        """A payload field that must be a non-empty string."""
        value = self.payload.get(key)
        return value if isinstance(value, str) and value else None


def parse_recording(lines: Iterable[str]) -> tuple[UpstreamEvent, ...]:
    """Parse NDJSON lines into events; blank lines are skipped.

    Raises :class:`RecordingError` naming the line when a line is not JSON or not an envelope
    ``{"type": str, "payload": object, "meta": object}``. Unknown event types are kept.

    Times: upstream stamps whole milliseconds and many events share one. Each event gets
    ``max(wallClockMs * 1e6, previous + 1)`` nanoseconds, so file order (the true emission order)
    survives any backend that sorts by time, and a clock that stepped back cannot reorder events.
    """
    events: list[UpstreamEvent] = []
    previous = -1
    for index, raw in enumerate(lines):
        text = raw.strip()
        if not text:
            continue
        try:
            envelope = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordingError(index + 1, f"not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(envelope, dict):
            raise RecordingError(index + 1, "not an event object")
        kind = envelope.get("type")
        payload = envelope.get("payload", {})
        meta = envelope.get("meta", {})
        if not isinstance(kind, str) or not kind:
            raise RecordingError(index + 1, 'missing "type" (a string like agentfootprint.x.y)')
        if not isinstance(payload, dict):
            raise RecordingError(index + 1, f'"payload" of {kind} is not an object')
        if not isinstance(meta, dict):
            raise RecordingError(index + 1, f'"meta" of {kind} is not an object')
        wall = meta.get("wallClockMs")
        if isinstance(wall, bool) or not isinstance(wall, int | float):
            wall = 0
        time = max(int(wall * _NANOS_PER_MS), previous + 1)
        previous = time
        event_type = semconv.event_type_of(kind) or kind
        events.append(
            UpstreamEvent(
                line=index,
                type=event_type,
                payload=MappingProxyType(payload),
                meta=MappingProxyType(meta),
                time_unix_nano=time,
            )
        )
    return tuple(events)


@dataclass(frozen=True, slots=True)
class Leg:
    """One ``run()`` / ``followUp()`` / ``resume()`` of the agent: one run span, one trace."""

    index: int
    upstream_run_id: str
    """``meta.runId`` of the leg's own events."""
    events: tuple[UpstreamEvent, ...]
    """In file order, including the consumer-scope pause events placed into this leg."""
    run_id: str
    """``footprint.run.id``: the leg's own run id, or, for a resumed leg, the first leg's."""
    resumes: int | None = None
    """Index of the leg this one resumes (a ``pause.resume`` opened it), else None."""

    @property
    def resumed(self) -> bool:
        """True for a leg opened by ``pause.resume``."""
        return self.resumes is not None


def _owner_of_consumer_scope(
    events: Sequence[UpstreamEvent], position: int, owners: Sequence[str | None]
) -> str | None:
    # A pause.resume opens the leg that follows it; every other consumer-scope event (pause.request)
    # closes the leg before it. Fall back to the other direction at the edges of the file.
    forward = events[position].type == semconv.T_PAUSE_RESUME
    after = range(position + 1, len(events))
    before = range(position - 1, -1, -1)
    scan_order: list[int] = [*after, *before] if forward else [*before, *after]
    for other in scan_order:
        owner = owners[other]
        if owner is not None:
            return owner
    return None


def split_legs(events: Sequence[UpstreamEvent]) -> tuple[Leg, ...]:
    """Group events into legs by ``meta.runId`` (first-appearance order), placing pause events by
    position, and link each resumed leg to the leg it continues."""
    owners = [event.run_id for event in events]
    placed: list[str] = []
    for position, owner in enumerate(owners):
        if owner is None:
            owner = _owner_of_consumer_scope(events, position, owners) or CONSUMER_SCOPE
        placed.append(owner)
    order: dict[str, list[UpstreamEvent]] = {}
    for owner, event in zip(placed, events, strict=True):
        order.setdefault(owner, []).append(event)
    legs: list[Leg] = []
    for index, (upstream_run_id, leg_events) in enumerate(order.items()):
        resumed = any(event.type == semconv.T_PAUSE_RESUME for event in leg_events)
        resumes = index - 1 if resumed and index > 0 else None
        run_id = legs[resumes].run_id if resumes is not None else upstream_run_id
        legs.append(
            Leg(
                index=index,
                upstream_run_id=upstream_run_id,
                events=tuple(leg_events),
                run_id=run_id,
                resumes=resumes,
            )
        )
    return tuple(legs)


def iteration_of(event: UpstreamEvent) -> int | None:
    """The iteration an event names in its payload (``iterIndex`` on ``agent.*`` loop events)."""
    if event.type.startswith("agent.") and event.type != semconv.T_EVIDENCE_CHECKED:
        return event.int_field("iterIndex")
    return event.int_field("iteration")


def composition_iterations(events: Sequence[UpstreamEvent]) -> dict[tuple[str | None, str], int]:
    """``(run id, runtimeStageId)`` of each ``context.slot_composed`` -> its iteration.

    ``context.injected`` rows carry no iteration; they belong to the slot composition with the same
    stage id that follows them.
    """
    found: dict[tuple[str | None, str], int] = {}
    for event in events:
        if event.type != semconv.T_SLOT_COMPOSED:
            continue
        stage = event.stage_id
        iteration = event.int_field("iteration")
        if stage is not None and iteration is not None:
            found[(event.run_id, stage)] = iteration
    return found
