"""The account's results as immutable data: pointers, lines, checks, signals and the summary (the
records built per line, ``Pointer``, ``Chip`` and ``Line``, are ``Record`` classes: kernel/record.py).

This is the contract between ``account/`` (which computes it), ``annotate/`` (which writes it onto
spans) and ``explain`` (which prints it). Vocabulary follows the reference (§4.2) verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from otel_footprint.codec import quick_init
from otel_footprint.kernel.record import Record

CheckId: TypeAlias = Literal["decided-delivered", "existence", "empty-results"]
CheckState: TypeAlias = Literal["reachable", "unreachable", "not-applicable"]
Tone: TypeAlias = Literal["plain", "ok", "warn", "bad", "unknown"]
FactStatus: TypeAlias = Literal["recorded", "not-recorded", "not-applicable"]
RowId: TypeAlias = Literal[
    "asked", "understood", "checked", "not-checked", "found", "how-sure", "anything-wrong"
]
SignalId: TypeAlias = Literal[
    "decided-not-delivered",
    "existence-not-checked",
    "undeclared-empty-used",
    "undeclared-empty-in-view",
    "rode-while-parked",
]


class Pointer(Record):
    """Evidence in OpenTelemetry terms: a span, an event on it, and the attribute (+ JSON path).

    ``event_name``/``event_index`` are None when the evidence is a span attribute itself; ``state``
    pointers (a resumed leg's held verdict) name the attribute holding the state JSON.
    """

    __slots__ = ("attribute", "event_index", "event_name", "json_path", "span_id", "trace_id")
    trace_id: Final[str]
    span_id: Final[str]
    event_name: Final[str | None]
    event_index: Final[int | None]
    attribute: Final[str | None]
    json_path: Final[str | None]
    """RFC 6901 pointer inside a JSON attribute, e.g. ``/to``."""

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        event_name: str | None = None,
        event_index: int | None = None,
        attribute: str | None = None,
        json_path: str | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.event_name = event_name
        self.event_index = event_index
        self.attribute = attribute
        self.json_path = json_path

    def _values(self) -> tuple[Any, ...]:
        return (
            self.trace_id,
            self.span_id,
            self.event_name,
            self.event_index,
            self.attribute,
            self.json_path,
        )

    def render(self) -> str:
        """``<trace>/<span>#<event>[<i>]@<attribute><json path>`` — short enough to index."""
        text = f"{self.trace_id}/{self.span_id}"
        if self.event_name is not None:
            text += f"#{self.event_name}[{self.event_index if self.event_index is not None else 0}]"
        if self.attribute is not None:
            text += f"@{self.attribute}{self.json_path or ''}"
        return text


class Chip(Record):
    """A short mark beside a line (``decided and delivered``, ``missing from the record``, ...)."""

    __slots__ = ("mark", "text", "tone")
    mark: Final[str]
    text: Final[str]
    tone: Final[Tone]

    def __init__(self, mark: str, text: str, tone: Tone = "plain") -> None:
        self.mark = mark
        self.text = text
        self.tone = tone

    def _values(self) -> tuple[Any, ...]:
        return (self.mark, self.text, self.tone)


class Line(Record):
    """One sentence of a row, with the template it came from and the evidence behind it."""

    __slots__ = (
        "chips",
        "item",
        "missing",
        "pointers",
        "row",
        "source",
        "status",
        "template_id",
        "text",
    )
    row: Final[RowId]
    template_id: Final[str]
    text: Final[str]
    status: Final[FactStatus]
    source: Final[str]
    """The voucher: person / library / tool:<name> / model / app."""
    pointers: Final[tuple[Pointer, ...]]
    chips: Final[tuple[Chip, ...]]
    missing: Final[str | None]
    item: Final[bool]

    def __init__(
        self,
        row: RowId,
        template_id: str,
        text: str,
        status: FactStatus,
        source: str,
        pointers: tuple[Pointer, ...] = (),
        chips: tuple[Chip, ...] = (),
        missing: str | None = None,
        item: bool = False,
    ) -> None:
        self.row = row
        self.template_id = template_id
        self.text = text
        self.status = status
        self.source = source
        self.pointers = pointers
        self.chips = chips
        self.missing = missing
        self.item = item

    def _values(self) -> tuple[Any, ...]:
        return (
            self.row,
            self.template_id,
            self.text,
            self.status,
            self.source,
            self.pointers,
            self.chips,
            self.missing,
            self.item,
        )


@quick_init
@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's single state; ``outcome`` only for a reachable check 1."""

    check_id: CheckId
    state: CheckState
    outcome: Literal["delivered", "not-delivered"] | None = None
    sentence: str | None = None
    """The explanation written with the ``gen_ai.evaluation.result`` event."""
    pointers: tuple[Pointer, ...] = ()
    label: Literal["pass", "fail", "unknown"] = "unknown"
    """``gen_ai.evaluation.score.label``: pass / fail when reachable (fail = the check raised a
    signal), unknown otherwise."""


@quick_init
@dataclass(frozen=True, slots=True)
class Signal:
    """Something the account found wrong, in priority order."""

    signal_id: SignalId
    check_id: CheckId | None
    """The check that raised it; None for the engagement replay's own signal (rode while
    parked)."""
    tone: Tone
    sentence: str
    pointers: tuple[Pointer, ...] = ()


@quick_init
@dataclass(frozen=True, slots=True)
class Summary:
    """The one-line verdict and its tone."""

    template_id: str
    sentence: str
    tone: Tone
    appended: tuple[str, ...] = ()
    """Template ids of sentences appended to the base one (a resumed leg's pause note)."""


@quick_init
@dataclass(frozen=True, slots=True)
class VerdictFact:
    """The routing verdict the account read (reference §4.4 ``facts.routing.verdict``)."""

    by: str
    origin: Literal["event", "held", "carried"]
    """This leg's ``skill.turn_routed``, the state a resumed leg holds, or an earlier leg."""
    from_: str | None = None
    to: str | None = None
    decisive: bool | None = None
    scorer: str | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class ScoresFact:
    """The app's scores behind a verdict, when the pick is their top (source: app)."""

    top: float
    next: float
    next_id: str
    all_others_equal: bool


@quick_init
@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal to open a skill: ``skill.rejected`` (by ``skill-graph``) or a refusing check."""

    requested_id: str
    by: str


@quick_init
@dataclass(frozen=True, slots=True)
class RoutingFacts:
    """What the "It understood" row read, as data (ids and names cut at 200 characters)."""

    configured: Literal["graph", "none"] | None
    """``graph``: a skill graph is mounted; ``none``: run_configured says none; None: no
    run_configured in the record."""
    verdict: VerdictFact | None
    scores: ScoresFact | None
    delivered: tuple[str, ...]
    """Skills delivered in the system prompt, first-delivered order, at most 12."""
    refusals: tuple[Refusal, ...]
    """At most 12; the rest are counted in ``refusals_omitted``."""
    refusals_omitted: int = 0
    before_pause: Literal["lost", "held", "carried"] | None = None
    """Resumed legs: the verdict was lost, read from held state, or carried from an earlier leg."""


@quick_init
@dataclass(frozen=True, slots=True)
class AccountResult:
    """What the account says about one run (or leg): rows of lines, checks, signals, summary."""

    lines: tuple[Line, ...]
    checks: tuple[CheckResult, ...]
    """Always three, in CheckId order."""
    signals: tuple[Signal, ...]
    summary: Summary
    routing: RoutingFacts | None = None
    unread: int = 0
    """Events (or lines) the account could not read and skipped, counted (reference §4.3)."""

    def check(self, check_id: CheckId) -> CheckResult:
        """The result of one check."""
        return next(c for c in self.checks if c.check_id == check_id)

    def row(self, row: RowId) -> tuple[Line, ...]:
        """The lines of one row, in order."""
        return tuple(line for line in self.lines if line.row == row)
