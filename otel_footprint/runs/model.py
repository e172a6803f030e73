"""What reconstruction reports beside the passes: reasons a fact could not be derived, and the
store a later leg of a run reads the earlier leg's state from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Reason:
    """Why something could not be derived: a short code (queryable) and a readable message."""

    code: str
    """e.g. ``no-plan``, ``bad-attribute``, ``no-model-call-span``, ``duplicate-iteration``,
    ``timeout``, ``overflow``, ``missing-spans``."""
    message: str
    span_id: str | None = None


class RunStore(Protocol):
    """What a later leg of a run needs from an earlier one, kept by key (run id).

    Values are opaque bytes (the engine's JSON); implementations: in-memory, embedded SQLite
    (the hop's default), or a shared store for scale-out.
    """

    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, value: bytes) -> None: ...
