"""Run state that outlives one trace: what a resumed leg (or the next turn) needs from the one before.

Values are JSON bytes written by the engine (``LegState`` / ``SessionState``); the store only keeps
them by key. :class:`MemoryRunStore` serves ``explain`` and tests; the hop adds a SQLite store.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from threading import Lock
from typing import Any

from otel_footprint.kernel.jsoncodec import (
    JsonShapeError,
    engagement_from_json,
    engagement_to_json,
    plan_from_json,
    plan_to_json,
)
from otel_footprint.kernel.types import EngagementPlan, MapEngagementRecord
from otel_footprint.runs.passes import Carry, Pick

STATE_VERSION = 1
SESSION_KEY_PREFIX = "session:"
"""Session state is kept under ``session:<conversation id>``; leg state under the bare run id."""


class MemoryRunStore:
    """A bounded in-memory :class:`~otel_footprint.runs.model.RunStore` (least recently written
    keys are dropped first once ``max_entries`` is reached). Thread-safe."""

    def __init__(self, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._max = max_entries
        self._lock = Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class StateError(ValueError):
    """Stored state that cannot be read back (another version, or corrupt bytes)."""


@dataclass(frozen=True, slots=True)
class LegState:
    """What a leg leaves for the next leg of the same run (key: run id)."""

    run_id: str
    trace_id: str
    paused: bool
    carry: Carry
    """What the pass builder of the next leg continues from (last pass, engagement, batch)."""
    plan: EngagementPlan | None = None
    enforced: bool | None = None
    decided: bool = True
    """False when the leg's replay stopped early: its state must not be continued."""
    carried_verdict: Mapping[str, Any] | None = None
    """The routing verdict (and question) this run had so far, as the account's carried-verdict
    JSON object (``CarriedVerdict.to_dict()``); opaque here."""

    @property
    def last_iteration(self) -> int:
        """The last pass this leg reached."""
        return self.carry.last_iteration

    @property
    def engagement(self) -> tuple[MapEngagementRecord, ...] | None:
        """The kernel's records after that pass."""
        return self.carry.engagement

    def to_bytes(self) -> bytes:
        """Compact JSON (camelCase, versioned) for the run store."""
        carry = self.carry
        body: dict[str, Any] = {
            "v": STATE_VERSION,
            "runId": self.run_id,
            "traceId": self.trace_id,
            "lastIteration": carry.last_iteration,
            "paused": self.paused,
            "decided": self.decided,
            "plan": plan_to_json(self.plan) if self.plan is not None else None,
            "enforced": self.enforced,
            "engagement": engagement_to_json(carry.engagement),
            "served": list(carry.served),
            "batch": None
            if carry.batch_iteration is None
            else {
                "iteration": carry.batch_iteration,
                "toolNames": list(carry.batch),
                "picks": [
                    {"skillId": p.skill_id, **({} if p.hop is None else {"hop": p.hop})}
                    for p in carry.batch_picks
                ],
                **({} if carry.batch_cursor is None else {"cursor": carry.batch_cursor}),
            },
            "carriedVerdict": dict(self.carried_verdict)
            if self.carried_verdict is not None
            else None,
        }
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

    @staticmethod
    def from_bytes(data: bytes) -> LegState:
        """Read :meth:`to_bytes` output; raises :class:`StateError` on anything else."""
        try:
            body = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise StateError(f"leg state is not JSON: {error}") from None
        if not isinstance(body, dict) or body.get("v") != STATE_VERSION:
            raise StateError(f"leg state version is not {STATE_VERSION}")
        try:
            batch = body.get("batch")
            picks: tuple[Pick, ...] = ()
            if isinstance(batch, dict):
                picks = tuple(
                    Pick(
                        str(p["skillId"]), p.get("hop") if isinstance(p.get("hop"), bool) else None
                    )
                    for p in batch.get("picks", [])
                )
            carried = body.get("carriedVerdict")
            return LegState(
                run_id=str(body["runId"]),
                trace_id=str(body["traceId"]),
                paused=bool(body["paused"]),
                carry=Carry(
                    last_iteration=int(body["lastIteration"]),
                    engagement=engagement_from_json(body.get("engagement")),
                    served=tuple(str(s) for s in body.get("served", [])),
                    batch_iteration=int(batch["iteration"]) if isinstance(batch, dict) else None,
                    batch=tuple(str(n) for n in batch["toolNames"])
                    if isinstance(batch, dict)
                    else (),
                    batch_picks=picks,
                    batch_cursor=batch.get("cursor") if isinstance(batch, dict) else None,
                ),
                decided=body.get("decided") is not False,
                plan=plan_from_json(body["plan"]) if body.get("plan") is not None else None,
                enforced=body.get("enforced") if isinstance(body.get("enforced"), bool) else None,
                carried_verdict=carried if isinstance(carried, dict) else None,
            )
        except (KeyError, TypeError, ValueError, JsonShapeError) as error:
            raise StateError(f"leg state is not readable: {error}") from None


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the last turn of a conversation left (key: ``session:<id>``), for cross-turn findings."""

    run_id: str
    trace_id: str
    engagement: tuple[MapEngagementRecord, ...] | None
    final_cursor: str | None = None

    def to_bytes(self) -> bytes:
        """Compact JSON (camelCase, versioned) for the run store."""
        body = {
            "v": STATE_VERSION,
            "runId": self.run_id,
            "traceId": self.trace_id,
            "engagement": engagement_to_json(self.engagement),
            "finalCursor": self.final_cursor,
        }
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()

    @staticmethod
    def from_bytes(data: bytes) -> SessionState:
        """Read :meth:`to_bytes` output; raises :class:`StateError` on anything else."""
        try:
            body = json.loads(data)
            if not isinstance(body, dict) or body.get("v") != STATE_VERSION:
                raise StateError(f"session state version is not {STATE_VERSION}")
            cursor = body.get("finalCursor")
            return SessionState(
                run_id=str(body["runId"]),
                trace_id=str(body["traceId"]),
                engagement=engagement_from_json(body.get("engagement")),
                final_cursor=cursor if isinstance(cursor, str) else None,
            )
        except (
            json.JSONDecodeError,
            UnicodeDecodeError,
            KeyError,
            TypeError,
            JsonShapeError,
        ) as error:
            raise StateError(f"session state is not readable: {error}") from None


def session_key(session_id: str) -> str:
    """The store key of a conversation's state."""
    return SESSION_KEY_PREFIX + session_id
