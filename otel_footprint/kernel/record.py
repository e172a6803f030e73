"""The base of the records the decision path builds per pass: plain slotted classes.

A record's attributes are ``Final``: ``mypy --strict`` refuses an assignment, the run time does not
check (a frozen dataclass checks on every build, and mypyc cannot compile one as a native class:
docs/performance.md, "Records, not ceremonies"). A subclass lists its attributes in ``__slots__``,
assigns them in ``__init__`` and returns them from ``_values`` in ``__init__``'s order; equality,
hashing, printing and pickling follow from that one method.
"""

from __future__ import annotations

from typing import Any


class Record:
    """Equal when of the same class with equal values; hashed, printed and pickled by the values."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        """Every attribute, in the order ``__init__`` takes them."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, Record):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return type(self).__name__ + repr(self._values())

    def __reduce__(self) -> tuple[type[Record], tuple[Any, ...]]:
        # Compiled, a native class is not pickled by its slots: rebuild it from its values.
        return type(self), self._values()
