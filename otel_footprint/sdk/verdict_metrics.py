"""Verdicts as metrics, for both delivery paths: what each decided run leg adds to the
``VERDICT_*`` rows of semconv's table (runs by agent, mode, tone and check 1; integrity findings by
row; what rode while parked by agent and map).

The hop counts on its own MeterProvider (``service/metrics.py``: ``/metrics`` and the OTLP push), the
in-process path on the application's (``FootprintSpanProcessor(meter_provider=...)``). Label values
come from names the agents choose, so they are bounded: past ``max_names`` distinct agent names (and,
apart, map names) every new one is counted under ``_other``, and ``footprint.verdict.names.folded``
says how many values were folded.
"""

from __future__ import annotations

import threading
from typing import Protocol

from opentelemetry.metrics import Meter, MeterProvider

from otel_footprint import semconv
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.runs.spans import SpanView
from otel_footprint.sdk.metrics import Counter

DEFAULT_MAX_NAMES = 100
"""Distinct agent names (and, apart, map names) a path counts under their own value."""
UNKNOWN_AGENT = "unknown"
"""The agent value of a run span without ``gen_ai.agent.name``."""
NONE = "none"
"""The mode or tone value of a run decided without a plan or without an account."""


def agent_of(run_span: SpanView | None) -> str:
    """The agent a run belongs to: its run span's ``gen_ai.agent.name`` (else ``unknown``)."""
    name = run_span.attribute(semconv.GEN_AI_AGENT_NAME) if run_span is not None else None
    return name if isinstance(name, str) and name else UNKNOWN_AGENT


def check_1_result(verdict: RunVerdict) -> str:
    """Check 1 (decided-delivered) in one word: its label when reachable, else its state."""
    if verdict.account is None:
        return "not-run"
    check = next((c for c in verdict.account.checks if c.check_id == "decided-delivered"), None)
    if check is None:
        return "not-run"
    return check.label if check.state == "reachable" else check.state


class _Names:
    """The first ``limit`` distinct names keep their value; later ones become ``_other``."""

    def __init__(self, limit: int, kind: str, folded: Counter) -> None:
        self._known: set[str] = set()
        self._limit = limit
        self._kind = kind
        self._folded = folded

    def __call__(self, name: str) -> str:
        # Called with VerdictMetrics' lock held.
        if name in self._known:
            return name
        if len(self._known) < self._limit:
            self._known.add(name)
            return name
        self._folded.inc(1, self._kind)
        return semconv.METRIC_OTHER


class VerdictMetrics:
    """The verdict counters on one meter; :meth:`record` adds a decided run leg."""

    def __init__(self, meter: Meter, max_names: int = DEFAULT_MAX_NAMES) -> None:
        if max_names < 1:
            raise ValueError(f"max_names must be at least 1, not {max_names}")
        self.runs = Counter(meter, semconv.VERDICT_RUNS)
        self.integrity_findings = Counter(meter, semconv.VERDICT_INTEGRITY_FINDINGS)
        self.served_chars_while_parked = Counter(meter, semconv.VERDICT_SERVED_CHARS_WHILE_PARKED)
        self.served_calls_while_parked = Counter(meter, semconv.VERDICT_SERVED_CALLS_WHILE_PARKED)
        self.names_folded = Counter(meter, semconv.VERDICT_NAMES_FOLDED)
        self._lock = threading.Lock()
        self._agents = _Names(max_names, "agent", self.names_folded)
        self._maps = _Names(max_names, "map", self.names_folded)

    def record(self, verdict: RunVerdict, agent: str) -> None:
        """Count one decided run leg of ``agent``."""
        self.add(tally(verdict, agent))

    def add(self, counted: Tally) -> None:
        """Count a leg from its :func:`tally` (decided here, or in the decision process)."""
        agent, mode, tone, check, findings, riding = counted
        with self._lock:
            agent = self._agents(agent)
            maps = [(self._maps(map_id), chars, calls) for map_id, chars, calls in riding]
        self.runs.inc(1, agent, mode, tone, check)
        for row in findings:
            self.integrity_findings.inc(1, agent, row)
        for map_id, chars, calls in maps:
            self.served_chars_while_parked.inc(chars, agent, map_id)
            self.served_calls_while_parked.inc(calls, agent, map_id)


Tally = tuple[str, str, str, str, tuple[str, ...], tuple[tuple[str, int, int], ...]]
"""What one leg adds, as plain data (it crosses the decision process's pipe): agent, mode, tone,
check 1, the integrity findings' rows, and per map the characters and calls that rode parked."""


def tally(verdict: RunVerdict, agent: str) -> Tally:
    """The leg's :data:`Tally`."""
    account = verdict.account
    findings = verdict.integrity.findings if verdict.integrity is not None else ()
    return (
        agent,
        verdict.mode or NONE,
        account.summary.tone if account is not None else NONE,
        check_1_result(verdict),
        tuple(f"{f.kind}@{f.seam}" for f in findings),
        tuple((r.map_id, r.chars, r.passes) for r in verdict.rode_while_parked),
    )


class VerdictRecorder(Protocol):
    """What a decider hands each decided leg to (:class:`VerdictMetrics`, :class:`Tallies`)."""

    def record(self, verdict: RunVerdict, agent: str) -> None: ...


class Tallies:
    """The decision process's recorder: keeps the tallies until the answer carries them back."""

    def __init__(self) -> None:
        self._kept: list[Tally] = []

    def record(self, verdict: RunVerdict, agent: str) -> None:
        self._kept.append(tally(verdict, agent))

    def take(self) -> list[Tally]:
        kept, self._kept = self._kept, []
        return kept


def verdict_metrics_on(meter_provider: MeterProvider | None) -> VerdictMetrics | None:
    """The in-process path's verdict counters on the application's MeterProvider (None: none)."""
    if meter_provider is None:
        return None
    return VerdictMetrics(meter_provider.get_meter("otel_footprint.sdk"))
