"""The evidence ladder: how strong each cursor-move clause is, and which strengths are guesses.

Pure helpers over the five rungs of ``Strength``; the lease and the evidence feed both read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from otel_footprint.kernel.types import Strength

LADDER: Final[tuple[Strength, ...]] = ("explicit", "structural", "semantic", "lexical", "assumed")
"""Every rung, strongest first."""

_RANK: Final[dict[Strength, int]] = {
    strength: len(LADDER) - 1 - index for index, strength in enumerate(LADDER)
}
"""4 for ``explicit`` down to 0 for ``assumed``: read off the ladder, so they cannot disagree."""

# The clause vocabulary of the skill map's cursor moves. Anything not listed here is a clause
# from a newer engine and reads as structural: a wrongly strong reading merely delays a park,
# while a wrongly weak one would park a map the system itself just routed to.
_MOVE_STRENGTH: Final[dict[str, Strength]] = {
    "model-pick": "explicit",
    "route": "structural",
    "tool-proposal": "structural",
    "continuity": "structural",
    "intent": "semantic",
    "decider": "semantic",
    "entry": "lexical",
    # ``stay`` and ``none`` are not moves: nothing explains why the cursor is where it is.
    "stay": "assumed",
    "none": "assumed",
}

NON_MOVES: Final[frozenset[str]] = frozenset({"stay", "none"})
"""Clauses that say the cursor did not move: never renewal evidence for the map it is on."""

_TENTATIVE: Final[frozenset[Strength]] = frozenset({"semantic", "lexical", "assumed"})


def strength_of_move(clause: str) -> Strength:
    """The rung of a cursor-move clause (``CursorMove.by``); unknown clauses are structural.

    Matching is exact and case-sensitive: ``"Route"`` and ``""`` are unknown clauses.
    """
    return _MOVE_STRENGTH.get(clause, "structural")


def rank(strength: Strength) -> int:
    """The rung's height: 4 for ``explicit`` down to 0 for ``assumed``."""
    return _RANK[strength]


def stronger_of(a: Strength, b: Strength) -> Strength:
    """The stronger of two strengths; a tie keeps the first argument."""
    return a if _RANK[a] >= _RANK[b] else b


def strongest_of(strengths: Iterable[Strength]) -> Strength | None:
    """The strongest strength of a collection (a left fold of ``stronger_of``), ``None`` if empty."""
    best: Strength | None = None
    for strength in strengths:
        best = strength if best is None else stronger_of(best, strength)
    return best


def is_tentative(strength: Strength) -> bool:
    """True for the guesses that decay without corroboration: semantic, lexical, assumed."""
    return strength in _TENTATIVE
