"""One leg's events indexed once by type, and the small typed readers every fold shares."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from otel_footprint.codec import FootprintEvent, integral

if TYPE_CHECKING:  # the input module's records do not need the view at run time
    from otel_footprint.account.input import AccountInput


class LegView:
    """The leg's events by type, in order (built once; folds read it, never mutate it)."""

    __slots__ = ("_by_type", "events")

    def __init__(
        self,
        events: Sequence[FootprintEvent],
        by_type: Mapping[str, Sequence[FootprintEvent]] | None = None,
    ) -> None:
        """``by_type``: these events already indexed by type, each in order (the engine's read
        of the leg indexes them once; the account does not index them again)."""
        self.events = events
        if by_type is None:
            index: dict[str, list[FootprintEvent]] = {}
            for event in events:
                index.setdefault(event.type, []).append(event)
            by_type = index
        self._by_type = by_type

    def of(self, event_type: str) -> Sequence[FootprintEvent]:
        """Every event of one type (upstream type without prefix), in order."""
        return self._by_type.get(event_type, ())

    def first(self, event_type: str) -> FootprintEvent | None:
        """The first event of one type."""
        found = self._by_type.get(event_type)
        return found[0] if found else None

    def has(self, event_type: str) -> bool:
        """Whether the leg has an event of this type."""
        return event_type in self._by_type


def leg_view(inp: AccountInput) -> LegView:
    """The input's leg indexed by type: built once per input, shared by every reader of it."""
    view = inp.memo.get("view")
    if view is None:
        view = inp.memo["view"] = LegView(inp.events)
    return cast(LegView, view)


def as_str(value: object) -> str | None:
    """A string value, else None."""
    return value if isinstance(value, str) else None


def as_num(value: object) -> float | None:
    """A finite number (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def as_int(value: object) -> int | None:
    """An integral number (``2`` or ``2.0``; never a bool), else None."""
    return integral(value)


def as_obj(value: object) -> Mapping[str, Any] | None:
    """A JSON object, else None."""
    if type(value) is dict:  # what decoded JSON holds: no abstract-class check needed
        return cast(Mapping[str, Any], value)
    return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else None


def as_list(value: object) -> list[Any] | None:
    """A JSON list, else None."""
    if type(value) is list:
        return value
    return cast(list[Any], value) if isinstance(value, list | tuple) else None


def same_json(a: object, b: object) -> bool:
    """The upstream's ``JSON.stringify(a) === JSON.stringify(b)`` (key order matters)."""
    try:
        return _json_text(a) == _json_text(b)
    except (TypeError, ValueError):
        return False


def _json_text(value: object) -> str:
    return json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in cast(Mapping[object, object], value).items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in cast(Sequence[object], value)]
    return value


def strict_equal(a: object, b: object) -> bool:
    """JavaScript ``===`` on JSON scalars: numbers by value, never a bool as a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is None and b is None
