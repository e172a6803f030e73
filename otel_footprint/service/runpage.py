"""The live run page's memory: the recent decided runs as small rows, and the newest runs' verdicts
to draw their full view, both bounded; the page itself is drawn by a :class:`RunPageRenderer`
handed in from above (``commands/run_page.py``: the same renderer as ``explain --format html``).

The release worker adds each decided run (:meth:`RunPageStore.record`: a row built and two
appends under a lock); pages are built only when someone asks, on the telemetry server's threads.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from otel_footprint.annotate.form import AnnotateOptions, witness_policy
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.sdk.settings import RunPageSettings
from otel_footprint.sdk.verdict_metrics import NONE, check_1_result
from otel_footprint.service.annotation import Decision


@dataclass(frozen=True, slots=True)
class RunRow:
    """One decided run leg as the list shows it."""

    run_id: str
    agent: str
    mode: str
    tone: str
    check: str
    """Check 1 in one word (``footprint.check.decided_delivered.result``)."""
    sentence: str
    decided_unix_nano: int
    complete: bool


def _decided(row: RunRow) -> int:
    return row.decided_unix_nano


@dataclass(frozen=True, slots=True)
class Filters:
    """What the list is narrowed to (None: any)."""

    agent: str | None = None
    tone: str | None = None
    check: str | None = None

    def keeps(self, row: RunRow) -> bool:
        return (
            (self.agent is None or row.agent == self.agent)
            and (self.tone is None or row.tone == self.tone)
            and (self.check is None or row.check == self.check)
        )


@dataclass(frozen=True, slots=True)
class Listing:
    """One page of the list: its rows (newest first) and what the filters can choose from."""

    rows: tuple[RunRow, ...]
    matching: int
    """Rows that pass the filters (the page shows at most ``page_size`` of them)."""
    held: int
    filters: Filters
    agents: tuple[str, ...]
    tones: tuple[str, ...]
    checks: tuple[str, ...]
    refresh_seconds: float
    explained: frozenset[str]
    """Run ids whose full view is still held."""


class RunPageRenderer(Protocol):
    """Draws the two pages; given by the command that starts the hop (the layers above it)."""

    def listing(self, listing: Listing) -> str: ...

    def run(self, legs: Sequence[RunVerdict]) -> str: ...


class RunPageStore:
    """The newest ``runs`` rows and the newest ``explained`` runs' verdicts (at most
    ``max_passes`` passes between them; the oldest go first)."""

    def __init__(
        self,
        settings: RunPageSettings,
        renderer: RunPageRenderer,
        options: AnnotateOptions | None = None,
    ) -> None:
        self.settings = settings
        self.renderer = renderer
        self._options = options or AnnotateOptions()
        self._keep_words = self._options.witness == "keep"
        """Under processing.witness hash/drop the full view (which quotes the prompt's words)
        is not kept; the rows' sentences are scrubbed as the query service's are."""
        self._lock = threading.Lock()
        self._rows: collections.deque[RunRow] = collections.deque(maxlen=settings.runs)
        self._legs: collections.OrderedDict[str, list[RunVerdict]] = collections.OrderedDict()
        self._passes = 0

    def record(self, decision: Decision) -> None:
        """Add a decided run leg (only runs the engine decided are listed)."""
        verdict = decision.verdict
        if verdict is None:
            return
        row = self._row(verdict, decision)
        with self._lock:
            self._rows.append(row)
            if not self._keep_words:
                return
            legs = self._legs.pop(verdict.run_id, [])
            legs.append(verdict)
            self._legs[verdict.run_id] = legs
            self._passes += len(verdict.passes)
            while len(self._legs) > self.settings.explained or (
                len(self._legs) > 1 and self._passes > self.settings.max_passes
            ):
                _, dropped = self._legs.popitem(last=False)
                self._passes -= sum(len(v.passes) for v in dropped)
            # A run id used again and again (an agent that never changes it) keeps its newest
            # legs only: the newest leg stays even when it alone is over the bound.
            while len(legs) > 1 and self._passes > self.settings.max_passes:
                self._passes -= len(legs.pop(0).passes)

    def _row(self, verdict: RunVerdict, decision: Decision) -> RunRow:
        account = verdict.account
        sentence = account.summary.sentence if account is not None else ""
        if sentence and not self._keep_words:
            sentence = witness_policy(verdict, self._options).scrub(sentence)
        return RunRow(
            run_id=verdict.run_id,
            agent=decision.agent,
            mode=verdict.mode or NONE,
            tone=account.summary.tone if account is not None else NONE,
            check=check_1_result(verdict),
            sentence=sentence,
            decided_unix_nano=decision.decided_unix_nano,
            complete=verdict.complete,
        )

    def listing(self, filters: Filters, limit: int | None = None) -> Listing:
        """The newest rows passing ``filters``, at most ``limit`` (and the page size)."""
        size = min(limit or self.settings.page_size, self.settings.page_size)
        with self._lock:
            rows = list(self._rows)
            explained = frozenset(self._legs)
        # Newest decided first: rows are recorded in release order, which is not the order the
        # decisions ended in when a long run's decision is sliced between others' (ties keep the
        # newest recorded first).
        rows.reverse()
        rows.sort(key=_decided, reverse=True)
        kept = [r for r in rows if filters.keeps(r)]
        return Listing(
            rows=tuple(kept[:size]),
            matching=len(kept),
            held=len(rows),
            filters=filters,
            agents=tuple(sorted({r.agent for r in rows})),
            tones=tuple(sorted({r.tone for r in rows})),
            checks=tuple(sorted({r.check for r in rows})),
            refresh_seconds=self.settings.refresh,
            explained=explained,
        )

    def legs(self, run_id: str) -> list[RunVerdict] | None:
        """The run's decided legs, oldest first, while its full view is held."""
        with self._lock:
            legs = self._legs.get(run_id)
            return list(legs) if legs is not None else None
