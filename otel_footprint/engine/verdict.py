"""What the engine decides about one run (or resumed leg), as immutable data (``PassVerdict``, built
per pass, is a ``Record``: kernel/record.py).

The contract between ``engine/`` (which derives it), ``annotate/`` (which writes it onto spans),
``explain`` (which prints it) and the hop's query service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from otel_footprint.account.integrity.model import IntegrityResult
from otel_footprint.account.model import AccountResult
from otel_footprint.account.riding import RodeWhileParked
from otel_footprint.codec import quick_init
from otel_footprint.kernel.record import Record
from otel_footprint.kernel.types import EngagementChange, MapEngagementRecord
from otel_footprint.runs.model import Reason

Mode: TypeAlias = Literal["verify", "shadow", "observed"]
"""``observed``: a run read from its instrumentation alone (no recorder input): the account rows
its record fills and the integrity checks, no engagement kernel and no check 1."""


class PassVerdict(Record):
    """The kernel's decision for one pass (one model call) and where to write it."""

    __slots__ = (
        "changes",
        "engaged_maps",
        "iteration",
        "mismatch",
        "parked_injection_ids",
        "parked_maps",
        "parked_tool_names",
        "records",
        "reported",
        "rode",
        "served",
        "served_chars_by_id",
        "served_chars_while_parked",
        "served_while_parked",
        "span_id",
        "trace_id",
    )
    iteration: Final[int]
    trace_id: Final[str]
    span_id: Final[str | None]
    """The model-call span of this pass; None when the pass has no span (a reason says so)."""
    engaged_maps: Final[tuple[str, ...]]
    parked_maps: Final[tuple[str, ...]]
    parked_injection_ids: Final[tuple[str, ...]]
    parked_tool_names: Final[tuple[str, ...]]
    served_while_parked: Final[tuple[str, ...]]
    """Shadow mode: parked ids that still rode this pass (verify mode: always empty)."""
    served_chars_while_parked: Final[int]
    """Characters of the injections in ``served_while_parked`` (what riding cost)."""
    changes: Final[tuple[EngagementChange, ...]]
    reported: Final[tuple[EngagementChange, ...]]
    """Verify mode: the agent's own ``footprint.map.*`` decisions for this pass."""
    mismatch: Final[bool]
    served: Final[tuple[str, ...]]
    """What rode this pass: its active injection ids, plus the park card when it rode."""
    records: Final[tuple[MapEngagementRecord, ...]]
    """The kernel's state after this pass (standing, by, idle per map)."""
    rode: Final[tuple[str, ...] | None]
    """What was given to the model this pass on behalf of the mounted maps: the members whose
    injections are in the record (plus the park card). None when the pass records no injection
    rows; readers then fall back to ``served`` (what ``context.evaluated`` declared active)."""
    served_chars_by_id: Final[tuple[tuple[str, int], ...]]
    """Shadow mode: ``served_chars_while_parked`` per riding id."""

    def __init__(
        self,
        iteration: int,
        trace_id: str,
        span_id: str | None,
        engaged_maps: tuple[str, ...],
        parked_maps: tuple[str, ...],
        parked_injection_ids: tuple[str, ...],
        parked_tool_names: tuple[str, ...],
        served_while_parked: tuple[str, ...],
        served_chars_while_parked: int,
        changes: tuple[EngagementChange, ...],
        reported: tuple[EngagementChange, ...] = (),
        mismatch: bool = False,
        served: tuple[str, ...] = (),
        records: tuple[MapEngagementRecord, ...] = (),
        rode: tuple[str, ...] | None = None,
        served_chars_by_id: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.iteration = iteration
        self.trace_id = trace_id
        self.span_id = span_id
        self.engaged_maps = engaged_maps
        self.parked_maps = parked_maps
        self.parked_injection_ids = parked_injection_ids
        self.parked_tool_names = parked_tool_names
        self.served_while_parked = served_while_parked
        self.served_chars_while_parked = served_chars_while_parked
        self.changes = changes
        self.reported = reported
        self.mismatch = mismatch
        self.served = served
        self.records = records
        self.rode = rode
        self.served_chars_by_id = served_chars_by_id

    def _values(self) -> tuple[Any, ...]:
        return (
            self.iteration,
            self.trace_id,
            self.span_id,
            self.engaged_maps,
            self.parked_maps,
            self.parked_injection_ids,
            self.parked_tool_names,
            self.served_while_parked,
            self.served_chars_while_parked,
            self.changes,
            self.reported,
            self.mismatch,
            self.served,
            self.records,
            self.rode,
            self.served_chars_by_id,
        )


@quick_init
@dataclass(frozen=True, slots=True)
class RunVerdict:
    """Everything decided about one run leg."""

    run_id: str
    trace_id: str
    run_span_id: str | None
    mode: Mode | None
    """None when no plan was mounted (no engagement to decide); ``observed`` for an observed run."""
    complete: bool
    passes: tuple[PassVerdict, ...]
    engagement: tuple[MapEngagementRecord, ...]
    reasons: tuple[Reason, ...] = ()
    account: AccountResult | None = None
    resumed: bool = False
    findings: tuple[str, ...] = ()
    """Readable notes beyond the upstream, e.g. a turn-1 guess carried into turn 2 as continuity."""
    rode_while_parked: tuple[RodeWhileParked, ...] = ()
    """Shadow mode, per map: what kept riding after the kernel would have parked it."""
    integrity: IntegrityResult | None = None
    """The integrity checks (what each call was offered and what it acted on); None when not run."""

    @property
    def parked_maps(self) -> tuple[str, ...]:
        """Maps parked at any pass of the run, in first-parked order."""
        seen: dict[str, None] = {}
        for verdict in self.passes:
            for map_id in verdict.parked_maps:
                seen.setdefault(map_id, None)
        return tuple(seen)
