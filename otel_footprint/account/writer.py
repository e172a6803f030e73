"""Writes lines from templates with the account's shared budgets (reference §4.9).

A :class:`Writer` lives for one ``account_for`` call: it counts unreadable lines and holds the
item budget (12 items / 3,000 characters, shared by every row) and the long-text budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from otel_footprint.account.model import Chip, FactStatus, Line, Pointer, RowId
from otel_footprint.account.pointers import bounded
from otel_footprint.account.templates import TEMPLATES, VAR_CHARS, template_parts, weakest

ITEM_LIMIT = 12
ITEM_CHARS = 3_000
LONG_TEXT_FREE = 300
"""Characters every quoted value may use before it draws on the shared long-text budget."""
LONG_TEXT_BUDGET = 3_000


class Var(NamedTuple):
    """A filled placeholder: its text, who vouches for it, and where it was read (several per
    account: a named tuple, about half the cost of a frozen dataclass)."""

    text: str
    source: str | None = None
    """None for presentation-only values (labels), which do not weaken a sentence's voucher."""
    pointer: Pointer | None = None


class Writer:
    """The per-account state of one fold. Pure from the outside: one is made per account."""

    __slots__ = ("_item_chars", "_items", "_long_text", "unread")

    def __init__(self) -> None:
        self.unread = 0
        self._items = ITEM_LIMIT
        self._item_chars = ITEM_CHARS
        self._long_text = LONG_TEXT_BUDGET

    def take_item(self, chars: int) -> bool:
        """Spend one bullet of the shared item budget; False when it is spent."""
        if self._items < 1 or chars > self._item_chars:
            return False
        self._items -= 1
        self._item_chars -= chars
        return True

    def quote(self, text: str, source: str | None, pointer: Pointer | None = None) -> Var:
        """A long value as a variable: 300 characters free, more from the shared budget, never
        more than 2,000; a cut value ends with an ellipsis."""
        limit = LONG_TEXT_FREE
        if len(text) > LONG_TEXT_FREE:
            extra = min(len(text), VAR_CHARS) - LONG_TEXT_FREE
            spent = min(extra, self._long_text)
            self._long_text -= spent
            limit += spent
        shown = text if len(text) <= limit else text[: limit - 1] + "…"
        return Var(shown, source, pointer)

    def text(self, template_id: str, values: Mapping[str, Var] | None = None) -> str:
        """The sentence alone (signals, unreachable explanations, summaries)."""
        parts = _PREPARED[template_id][0]  # KeyError on an unknown id, as ``fill`` raises
        text = parts[0] if len(parts) == 1 else _filled(parts, values)
        if text is None:
            self.unread += 1
            return _UNREADABLE
        return text

    def say(
        self,
        row: RowId,
        template_id: str,
        values: Mapping[str, Var] | None = None,
        *,
        status: FactStatus = "recorded",
        pointers: Sequence[Pointer] = (),
        chips: Iterable[Chip] = (),
        missing: str | None = None,
        item: bool = False,
        basis: Iterable[str] = (),
    ) -> Line:
        """One line: the filled template, its voucher (the weakest of the template's, every
        truth-deciding variable's and ``basis``), and its pointers (given, then the variables')."""
        parts, voucher = _PREPARED[template_id]  # KeyError on an unknown id
        text = parts[0] if len(parts) == 1 else _filled(parts, values)
        if text is None:
            self.unread += 1
            return Line(
                row=row,
                template_id="unreadable.line",
                text=_UNREADABLE,
                status="not-recorded",
                source="library",
                missing="unreadable",
                item=item,
            )
        every = pointers
        sources: list[str] | None = [voucher, *basis] if basis else None
        if values:
            extra: list[Pointer] | None = None
            for var in values.values():
                if var.source is not None:
                    if sources is None:
                        sources = [voucher]
                    sources.append(var.source)
                if var.pointer is not None:
                    if extra is None:
                        extra = [*every]
                    extra.append(var.pointer)
            if extra is not None:
                every = extra
        # The weakest of one voucher is that voucher.
        source = weakest(sources) if sources is not None else voucher
        return Line(
            row,
            template_id,
            text,
            status,
            source,
            tuple(every) if len(every) < 2 else bounded(every),
            tuple(chips) if chips else (),
            missing,
            item,
        )


_PREPARED: dict[str, tuple[tuple[str, ...], str]] = {
    t.id: (template_parts(t.id), t.voucher) for t in TEMPLATES.values()
}
"""Each template's text split at its placeholders, and its own voucher (read for every line)."""
_UNREADABLE = TEMPLATES["unreadable.line"].text


def _filled(parts: tuple[str, ...], values: Mapping[str, Var] | None) -> str | None:
    """:func:`~otel_footprint.account.templates.fill` of a template with placeholders, with the
    variables' texts read in place; None when it names a variable not given."""
    if not values:
        return None
    out = [parts[0]]
    for index in range(1, len(parts), 2):
        var = values.get(parts[index])
        if var is None:
            return None
        out.append(var.text)
        out.append(parts[index + 1])
    return "".join(out)
