"""The one neutral annotation form: what to write on which span, derived from a RunVerdict.

Both writers (OTLP protobuf in place, SDK span copies) consume :class:`SpanNote`s, so the hop and the
in-process processor write byte-for-byte the same names and values. Pure functions, frozen data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from otel_footprint import semconv
from otel_footprint.account.integrity import (
    Finding,
    IntegrityResult,
    combined_tone,
    row_explanation,
    signal_ids,
    summary_sentence,
)
from otel_footprint.account.integrity.report import pass_states, row_label, unreachable_rows
from otel_footprint.account.model import AccountResult, Pointer
from otel_footprint.codec import AttributeValue, checked_after_built, quick_init
from otel_footprint.engine.verdict import PassVerdict, RunVerdict
from otel_footprint.kernel.types import EngagementChange, ParkedChange
from otel_footprint.runs.group import RunSpans
from otel_footprint.runs.model import Reason
from otel_footprint.runs.recognize import SpanRole
from otel_footprint.runs.slices import STEP_SPANS, Steps, finish
from otel_footprint.runs.spans import SpanView

WitnessPolicy: TypeAlias = Literal["keep", "hash", "drop"]
Anchor: TypeAlias = Literal["start", "end"]
Pairs: TypeAlias = tuple[tuple[str, AttributeValue], ...]

ELLIPSIS = "…"
WITNESS_DROPPED = "[witness withheld]"


@checked_after_built
@dataclass(frozen=True, slots=True)
class AnnotateOptions:
    """Limits and privacy of what is written. Defaults keep every value indexable by backends."""

    witness: WitnessPolicy = "keep"
    """The person's matched words: kept, replaced by ``sha256:<16 hex>``, or withheld."""
    max_value_chars: int = 255
    """Searchable string values (attributes, list items) stay under 256 characters (Jaeger's index)."""
    max_text_chars: int = 1000
    """Sentences carried in event attributes (line text, evaluation explanation)."""
    max_list_items: int = 64
    """Items of one string-array value."""
    max_events_per_span: int = 48
    """Events this form adds to one span (the SDK keeps 128 in total by default)."""
    max_attributes_per_span: int = 40
    """Attributes this form adds to one span."""
    max_links: int = 32
    """Evidence links on the run span."""
    max_pointers_per_line: int = 12
    include_lines: bool = True
    """Write the account's lines as ``footprint.account.line`` events on the run span."""

    def __post_init__(self) -> None:
        if self.witness not in ("keep", "hash", "drop"):
            raise ValueError(f"witness must be 'keep', 'hash' or 'drop', got {self.witness!r}")
        for name in (
            "max_value_chars",
            "max_text_chars",
            "max_list_items",
            "max_events_per_span",
            "max_attributes_per_span",
            "max_links",
            "max_pointers_per_line",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@quick_init
@dataclass(frozen=True, slots=True)
class NoteEvent:
    """One span event to add. Its time is the span's start (decided before the call) or end."""

    name: str
    attributes: Pairs = ()
    anchor: Anchor = "end"


@quick_init
@dataclass(frozen=True, slots=True)
class NoteLink:
    """A span link to add (lowercase hex ids)."""

    trace_id: str
    span_id: str
    attributes: Pairs = ()


@quick_init
@dataclass(frozen=True, slots=True)
class SpanNote:
    """What to add to one span. A key already on the span is replaced, never duplicated."""

    attributes: Pairs = ()
    events: tuple[NoteEvent, ...] = ()
    links: tuple[NoteLink, ...] = ()

    def attribute_map(self) -> dict[str, AttributeValue]:
        """The attributes as a dict (later pairs win, as the writers apply them)."""
        return dict(self.attributes)

    def merged(self, other: SpanNote) -> SpanNote:
        """This note then ``other``: ``other``'s attribute values win, events and links append."""
        attrs = dict(self.attributes)
        for key, value in other.attributes:
            if key == semconv.RUN_REASONS and key in attrs:
                value = _union_strings(attrs[key], value)
            attrs[key] = value
        return SpanNote(tuple(attrs.items()), self.events + other.events, self.links + other.links)


# ── value shaping ─────────────────────────────────────────────────────────────────────────────


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in "…" when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + ELLIPSIS


def hash_witness(text: str) -> str:
    """``sha256:`` + the first 16 hex digits of the UTF-8 text's SHA-256 (stable, not reversible)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _union_strings(a: AttributeValue, b: AttributeValue) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in (a, b):
        items: Sequence[object] = (value,) if isinstance(value, str | bool | int | float) else value
        for item in items:
            seen.setdefault(str(item), None)
    return tuple(seen)


class _Shaper:
    """Applies the options' limits and witness policy to every value written."""

    __slots__ = ("_count", "_keep", "_limit", "options", "witnesses")

    def __init__(self, options: AnnotateOptions, witnesses: tuple[str, ...] = ()) -> None:
        self.options = options
        self.witnesses = witnesses
        # Read for every list written (five per pass span): kept at hand.
        self._limit = options.max_value_chars
        self._count = options.max_list_items
        self._keep = options.witness == "keep"

    def witness(self, text: str) -> str | None:
        if self.options.witness == "drop":
            return None
        if self.options.witness == "hash":
            return hash_witness(text)
        return clip(text, self.options.max_value_chars)

    def scrub(self, text: str) -> str:
        """A sentence with the known witnesses replaced per policy (the account quotes them)."""
        if self._keep:
            return text
        for witness in self.witnesses:
            if witness and witness in text:
                replacement = (
                    hash_witness(witness) if self.options.witness == "hash" else WITNESS_DROPPED
                )
                text = text.replace(witness, replacement)
        return text

    def value(self, text: str) -> str:
        if self._keep and len(text) <= self._limit:
            return text  # what clip(scrub(text)) gives: nothing to replace, nothing to cut
        return clip(self.scrub(text), self._limit)

    def text(self, text: str) -> str:
        limit = self.options.max_text_chars
        if self._keep and len(text) <= limit:
            return text
        return clip(self.scrub(text), limit)

    def strings(self, items: Iterable[str]) -> tuple[str, ...]:
        """A string-array value: at most ``max_list_items`` items, each scrubbed and clipped."""
        if type(items) is not tuple:
            items = tuple(items)
        if not items:
            return items
        limit, count = self._limit, self._count
        # Most lists need no cut: then written as they are (the lengths are read in C).
        if self._keep and len(items) <= count and max(map(len, items)) <= limit:
            return items
        kept = items[:count] if self._keep else tuple(self.scrub(item) for item in items[:count])
        return tuple([item if len(item) <= limit else clip(item, limit) for item in kept])


class _Builder:
    """Collects one span's note while enforcing the per-span caps."""

    __slots__ = (
        "_max_attributes",
        "_max_events",
        "attributes",
        "dropped_events",
        "dropped_links",
        "events",
        "links",
        "options",
    )

    def __init__(self, options: AnnotateOptions) -> None:
        self.options = options
        self.attributes: dict[str, AttributeValue] = {}
        self.events: list[NoteEvent] = []
        self.links: list[NoteLink] = []
        self.dropped_events = 0
        self.dropped_links = 0
        self._max_attributes = options.max_attributes_per_span
        self._max_events = options.max_events_per_span

    def put(self, key: str, value: AttributeValue) -> None:
        # Past the cap a new key is left off uncounted: no output name says how many were cut.
        attributes = self.attributes
        if key in attributes or len(attributes) < self._max_attributes:
            attributes[key] = value

    def put_all(self, pairs: Sequence[tuple[str, AttributeValue]]) -> None:
        """:meth:`put` of each pair in order; on an empty builder with room for them all, at once."""
        attributes = self.attributes
        if not attributes and len(pairs) <= self._max_attributes:
            attributes.update(pairs)
            return
        for key, value in pairs:
            self.put(key, value)

    def event(self, event: NoteEvent) -> None:
        if len(self.events) < self._max_events:
            self.events.append(event)
        else:
            self.dropped_events += 1

    def note(self) -> SpanNote:
        if not self.dropped_events and not self.dropped_links:
            return SpanNote(tuple(self.attributes.items()), tuple(self.events), tuple(self.links))
        attrs = dict(self.attributes)
        # The drop counters bypass the attribute cap: a silent cut would read as "nothing more".
        if self.dropped_events:
            attrs[semconv.ANNOTATION_DROPPED_EVENTS] = self.dropped_events
        if self.dropped_links:
            attrs[semconv.ANNOTATION_DROPPED_LINKS] = self.dropped_links
        return SpanNote(tuple(attrs.items()), tuple(self.events), tuple(self.links))


# ── engagement changes ────────────────────────────────────────────────────────────────────────


def _change_event(change: EngagementChange, shaper: _Shaper) -> NoteEvent:
    attrs: list[tuple[str, AttributeValue]] = [
        (semconv.CH_MAP_ID, shaper.value(change.map_id)),
        (semconv.CH_ITERATION, change.iteration),
        (semconv.CH_BY, change.by),
    ]
    if isinstance(change, ParkedChange):
        attrs.append((semconv.CH_IDLE_CALLS, change.idle_calls))
        name = semconv.EV_ENGAGEMENT_PARKED
    else:
        attrs += [
            (semconv.CH_REENGAGED, change.reengaged),
            (semconv.CH_UPGRADED, change.upgraded),
            (semconv.CH_TENANT_CHANGED, change.tenant_changed),
        ]
        if change.at is not None:
            attrs.append((semconv.CH_AT, shaper.value(change.at)))
        if change.founded_by is not None:
            attrs.append((semconv.CH_FOUNDED_BY, change.founded_by))
        name = semconv.EV_ENGAGEMENT_ENGAGED
    if change.witness is not None:
        witness = shaper.witness(change.witness)
        if witness is not None:
            attrs.append((semconv.CH_WITNESS, witness))
    # The kernel decides before the model call, so the event sits at the pass span's start.
    return NoteEvent(name, tuple(attrs), anchor="start")


def describe_change(change: EngagementChange) -> str:
    """A short, witness-free rendering: ``parked skill-map at 4 by lexical after 3 idle calls``."""
    if isinstance(change, ParkedChange):
        return (
            f"parked {change.map_id} at {change.iteration} by {change.by} "
            f"after {change.idle_calls} idle calls"
        )
    flags = [
        flag
        for flag, on in (
            ("reengaged", change.reengaged),
            ("upgraded", change.upgraded),
            ("tenant-changed", change.tenant_changed),
        )
        if on
    ]
    text = f"engaged {change.map_id} at {change.iteration} by {change.by}"
    if change.at is not None:
        text += f" on {change.at}"
    return text + (f" ({', '.join(flags)})" if flags else "")


def witness_policy(verdict: RunVerdict, options: AnnotateOptions) -> _Shaper:
    """The options' witness policy for ``verdict``, for copies of it written elsewhere (the hop's
    query service): ``witness(text)`` for a witness field (None: withheld), ``scrub(text)`` for a
    sentence that may quote one. The same rule the annotation applies, so no copy says more."""
    return _Shaper(options, _witnesses_of(verdict))


def _witnesses_of(verdict: RunVerdict) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for pass_ in verdict.passes:
        for change in (*pass_.changes, *pass_.reported):
            if change.witness:
                found.setdefault(change.witness, None)
    for record in verdict.engagement:
        if record.witness:
            found.setdefault(record.witness, None)
    # Longest first, so a witness that contains another is replaced whole.
    return tuple(sorted(found, key=len, reverse=True))


def _pass_note(pass_: PassVerdict, verdict: RunVerdict, shaper: _Shaper, builder: _Builder) -> None:
    if verdict.mode is None or verdict.mode == semconv.MODE_OBSERVED:  # no kernel ran
        builder.put(semconv.PASS_ITERATION, pass_.iteration)
        return
    strings = shaper.strings
    engaged, parked, ids, tools, rode = (
        pass_.engaged_maps,
        pass_.parked_maps,
        pass_.parked_injection_ids,
        pass_.parked_tool_names,
        pass_.served_while_parked,
    )
    # Most of these lists are empty: written as they are, without a call each.
    pairs: list[tuple[str, AttributeValue]] = [
        (semconv.PASS_ITERATION, pass_.iteration),
        (semconv.ENG_ENGAGED_MAPS, strings(engaged) if engaged else ()),
        (semconv.ENG_PARKED_MAPS, strings(parked) if parked else ()),
        (semconv.ENG_PARKED_INJECTION_IDS, strings(ids) if ids else ()),
        (semconv.ENG_PARKED_TOOL_NAMES, strings(tools) if tools else ()),
        (semconv.ENG_SERVED_WHILE_PARKED, strings(rode) if rode else ()),
    ]
    if verdict.mode == semconv.MODE_SHADOW:
        pairs.append((semconv.ENG_SERVED_CHARS_WHILE_PARKED, pass_.served_chars_while_parked))
    if verdict.mode == semconv.MODE_VERIFY:
        pairs.append((semconv.ENG_MISMATCH, pass_.mismatch))
    builder.put_all(pairs)
    for change in pass_.changes:
        builder.event(_change_event(change, shaper))
    if pass_.mismatch:
        builder.event(
            NoteEvent(
                semconv.EV_ENGAGEMENT_MISMATCH,
                (
                    (semconv.CH_ITERATION, pass_.iteration),
                    (
                        semconv.MISMATCH_REPORTED,
                        shaper.strings(describe_change(c) for c in pass_.reported),
                    ),
                    (
                        semconv.MISMATCH_DERIVED,
                        shaper.strings(describe_change(c) for c in pass_.changes),
                    ),
                ),
                anchor="start",
            )
        )


# ── the run span: roll-ups, checks, lines, evidence links ─────────────────────────────────────


@dataclass(slots=True)
class _Evidence:
    """Evidence spans in first-claim order, each with the claims it backs (deduplicated)."""

    own_span_id: str | None
    spans: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)

    def add(self, claim: str, pointers: Sequence[Pointer]) -> None:
        for pointer in pointers:
            if not pointer.trace_id or not pointer.span_id or pointer.span_id == self.own_span_id:
                continue  # a link to the span carrying it says nothing
            self.spans.setdefault((pointer.trace_id, pointer.span_id), {}).setdefault(claim, None)


def _account_note(
    account: AccountResult, shaper: _Shaper, builder: _Builder, evidence: _Evidence
) -> None:
    options = shaper.options
    for check in account.checks:
        attribute = semconv.CHECK_ATTRIBUTE.get(check.check_id)
        if attribute is not None:
            builder.put(attribute, check.state)
        if (
            check.check_id == "decided-delivered"
            and check.state == "reachable"
            and check.outcome is not None
        ):
            builder.put(semconv.CHECK_DECIDED_DELIVERED_OUTCOME, check.outcome)
    builder.put(semconv.SIGNALS, shaper.strings(s.signal_id for s in account.signals))
    builder.put(semconv.SUMMARY, shaper.value(account.summary.sentence))
    builder.put(semconv.SUMMARY_TONE, account.summary.tone)

    for check in account.checks:
        attrs: list[tuple[str, AttributeValue]] = [
            (semconv.EVAL_NAME, semconv.evaluation_name(check.check_id)),
            (semconv.EVAL_SCORE_LABEL, check.label),
        ]
        if check.sentence:
            attrs.append((semconv.EVAL_EXPLANATION, shaper.text(check.sentence)))
        builder.event(NoteEvent(semconv.EV_EVALUATION_RESULT, tuple(attrs)))
        evidence.add(check.check_id, check.pointers)
    for signal in account.signals:
        evidence.add(signal.signal_id, signal.pointers)
    if not options.include_lines:
        for line in account.lines:
            evidence.add(line.template_id, line.pointers)
        return
    # One event per line (the account's longest loop): the options and methods are read once.
    max_pointers = options.max_pointers_per_line
    value, text, strings, add, event = (
        shaper.value,
        shaper.text,
        shaper.strings,
        evidence.add,
        builder.event,
    )
    for line in account.lines:
        pointers = line.pointers
        attrs = [
            (semconv.LINE_ROW, line.row),
            (semconv.LINE_TEMPLATE, value(line.template_id)),
            (semconv.LINE_TEXT, text(line.text)),
            (semconv.LINE_STATUS, line.status),
        ]
        if pointers:
            add(line.template_id, pointers)
            attrs.append(
                (semconv.LINE_POINTERS, strings([p.render() for p in pointers[:max_pointers]]))
            )
        if line.chips:
            attrs.append((semconv.LINE_CHIPS, strings([f"{c.mark}: {c.text}" for c in line.chips])))
        event(NoteEvent(semconv.EV_ACCOUNT_LINE, tuple(attrs)))


def _riding_note(verdict: RunVerdict, shaper: _Shaper, builder: _Builder) -> None:
    """Shadow mode's finding on the run span: passes, ids and per-map characters that rode."""
    rode = verdict.rode_while_parked
    builder.put(
        semconv.RUN_SERVED_PASSES_WHILE_PARKED,
        sum(1 for p in verdict.passes if p.served_while_parked),
    )
    if not rode:
        return
    ids = dict.fromkeys(i for r in rode for i in r.ids)
    builder.put(semconv.RUN_SERVED_WHILE_PARKED, shaper.strings(ids))
    maps = shaper.strings(r.map_id for r in rode)
    builder.put(semconv.RUN_SERVED_WHILE_PARKED_MAPS, maps)
    # Aligned with the (possibly capped) map list.
    builder.put(
        semconv.RUN_SERVED_CHARS_WHILE_PARKED_BY_MAP, tuple(r.chars for r in rode[: len(maps)])
    )


def _run_note(verdict: RunVerdict, shaper: _Shaper, builder: _Builder) -> None:
    if verdict.mode != semconv.MODE_OBSERVED:
        # An observed run's id is its run span's own id: written, it would name a run on a span
        # the agent never named, and our output read back would look like recorder input.
        builder.put(semconv.RUN_ID, shaper.value(verdict.run_id))
    builder.put(semconv.RUN_PASSES, len(verdict.passes))
    builder.put(semconv.RUN_PARKED_MAPS, shaper.strings(verdict.parked_maps))
    builder.put(semconv.RUN_COMPLETE, verdict.complete)
    if verdict.mode is not None:
        builder.put(semconv.RUN_MODE, verdict.mode)
    if verdict.mode == semconv.MODE_SHADOW:
        builder.put(
            semconv.RUN_SERVED_CHARS_WHILE_PARKED,
            sum(p.served_chars_while_parked for p in verdict.passes),
        )
        _riding_note(verdict, shaper, builder)
    builder.put(semconv.RUN_RESUMED, verdict.resumed)
    codes = tuple(dict.fromkeys(r.code for r in verdict.reasons))
    if codes:
        builder.put(semconv.RUN_REASONS, shaper.strings(codes))
    if verdict.findings:
        # What the upstream cannot see (e.g. a guess carried into the next turn as continuity):
        # a count to query by, and each sentence as an event to read.
        builder.put(semconv.RUN_FINDINGS, len(verdict.findings))
        for finding in verdict.findings:
            builder.event(
                NoteEvent(semconv.EV_RUN_FINDING, ((semconv.FINDING_TEXT, shaper.text(finding)),))
            )
    if verdict.account is None:
        return
    evidence = _Evidence(verdict.run_span_id)
    _account_note(verdict.account, shaper, builder, evidence)
    for (trace_id, span_id), claims in evidence.spans.items():
        if len(builder.links) == shaper.options.max_links:
            builder.dropped_links += 1
            continue
        builder.links.append(
            NoteLink(trace_id, span_id, ((semconv.LINK_EVIDENCE, shaper.strings(claims)),))
        )


# ── integrity (issue 17): rows on the run span, findings on the pass spans ──────────────────


def _finding_event(finding: Finding, shaper: _Shaper) -> NoteEvent:
    options = shaper.options
    attrs: list[tuple[str, AttributeValue]] = [
        (semconv.IF_KIND, finding.kind),
        (semconv.IF_SEAM, finding.seam),
        (semconv.IF_SUBJECTS, shaper.strings(s.render() for s in finding.subjects)),
        (semconv.IF_ADVISORY, finding.advisory),
        (semconv.IF_MESSAGE, shaper.text(finding.message)),
    ]
    if finding.predicate is not None:
        attrs.append((semconv.IF_PREDICATE, shaper.value(finding.predicate)))
    if finding.iteration is not None:
        attrs.append((semconv.IF_ITERATION, finding.iteration))
    evidence = [ref.render() for ref in finding.evidence[: options.max_pointers_per_line]]
    if evidence:
        attrs.append((semconv.IF_EVIDENCE, shaper.strings(evidence)))
    return NoteEvent(semconv.EV_INTEGRITY_FINDING, tuple(attrs))


_ROW_NAMES: dict[tuple[str, str], tuple[str, str]] = {
    (check, seam): (
        semconv.integrity_row_attribute(check, seam),
        semconv.integrity_evaluation_name(check, seam),
    )
    for check, seam in semconv.INTEGRITY_ROWS
}
"""Each integrity row's state attribute and evaluation name (a fixed set, written every run)."""


def _row_attribute(check: str, seam: str) -> str:
    names = _ROW_NAMES.get((check, seam))
    return names[0] if names is not None else semconv.integrity_row_attribute(check, seam)


def _row_evaluation_name(check: str, seam: str) -> str:
    names = _ROW_NAMES.get((check, seam))
    return names[1] if names is not None else semconv.integrity_evaluation_name(check, seam)


def _integrity_notes(
    result: IntegrityResult,
    verdict: RunVerdict,
    shaper: _Shaper,
    builder_for: Callable[[str], _Builder],
) -> None:
    """The integrity rows on the run span (an attribute each, and a ``gen_ai.evaluation.result``
    for each armed row),
    each finding as a ``footprint.integrity.finding`` event on its pass span (the run span when
    the pass has none), and the run's signals and summary tone with the findings folded in."""
    run_span_id = verdict.run_span_id
    if run_span_id is None:
        return
    run = builder_for(run_span_id)
    run.put(semconv.INTEGRITY_STATE, result.state)
    if not result.armed:
        return  # nothing armed: one attribute says so; no rows of nothing are written
    run.put(semconv.INTEGRITY_FINDINGS, len(result.contradictions))
    run.put(semconv.INTEGRITY_ADVISORIES, len(result.advisories))
    run.put(semconv.INTEGRITY_KINDS, shaper.strings(dict.fromkeys(f.kind for f in result.findings)))
    run.put(semconv.INTEGRITY_UNREACHABLE, shaper.strings(unreachable_rows(result)))
    run.put(semconv.INTEGRITY_SUMMARY, shaper.value(summary_sentence(result)))
    run.put_all([(_row_attribute(row.check, row.seam), row.state) for row in result.rows])
    if result.verified:
        run.put(semconv.INTEGRITY_MISMATCH, bool(result.disagreements))
    if result.alarms:
        run.put(semconv.INTEGRITY_ALARMS, shaper.strings(result.alarms))
    for row in result.rows:
        if not row.armed:
            continue  # its attribute says not-applicable; an event per unarmed row is only noise
        run.event(
            NoteEvent(
                semconv.EV_EVALUATION_RESULT,
                (
                    (semconv.EVAL_NAME, _row_evaluation_name(row.check, row.seam)),
                    (semconv.EVAL_SCORE_LABEL, row_label(row)),
                    (semconv.EVAL_EXPLANATION, shaper.text(row_explanation(row, result))),
                ),
            )
        )
    if verdict.account is not None:
        account = verdict.account
        signals = (*(s.signal_id for s in account.signals), *signal_ids(result))
        run.put(semconv.SIGNALS, shaper.strings(dict.fromkeys(signals)))
        run.put(semconv.SUMMARY_TONE, combined_tone(account.summary.tone, result))
    for iteration, state in pass_states(result).items():
        span_id = result.pass_spans.get(iteration)
        if span_id is not None and span_id != run_span_id:
            builder_for(span_id).put(semconv.INTEGRITY_STATE, state)
    per_pass: dict[str, list[Finding]] = {}
    for finding in result.findings:
        span_id = result.pass_spans.get(finding.iteration or 0) or run_span_id
        per_pass.setdefault(span_id, []).append(finding)
    for span_id, found in per_pass.items():
        target = builder_for(span_id)
        if span_id != run_span_id:
            target.put(semconv.INTEGRITY_FINDINGS, sum(1 for f in found if not f.advisory))
            target.put(semconv.INTEGRITY_ADVISORIES, sum(1 for f in found if f.advisory))
            target.put(
                semconv.INTEGRITY_KINDS, shaper.strings(dict.fromkeys(f.kind for f in found))
            )
        for finding in found:
            target.event(_finding_event(finding, shaper))
    for excusal in result.excusals:
        span_id = result.pass_spans.get(excusal.iteration) or run_span_id
        builder_for(span_id).event(
            NoteEvent(
                semconv.EV_INTEGRITY_GROUND_USED,
                (
                    (semconv.IF_SUBJECTS, (f"tool:{shaper.value(excusal.tool)}",)),
                    (semconv.IF_PATH, shaper.value(excusal.path)),
                    (semconv.IF_VALUE, shaper.value(excusal.value)),
                    (semconv.IF_SOURCE, shaper.value(excusal.source)),
                    (semconv.IF_ITERATION, excusal.iteration),
                ),
            )
        )
    for disagreement in result.disagreements:
        attrs: list[tuple[str, AttributeValue]] = [
            (
                semconv.IF_REPORTED if disagreement.side == "reported-only" else semconv.IF_DERIVED,
                (shaper.value(disagreement.identity),),
            )
        ]
        if disagreement.iteration is not None:
            attrs.append((semconv.IF_ITERATION, disagreement.iteration))
        if disagreement.ref is not None:
            attrs.append((semconv.IF_EVIDENCE, (disagreement.ref.render(),)))
        run.event(NoteEvent(semconv.EV_INTEGRITY_MISMATCH, tuple(attrs)))


def annotations_for(
    verdict: RunVerdict, options: AnnotateOptions | None = None
) -> dict[str, SpanNote]:
    """Every annotation of one decided run, by span id (16 lowercase hex digits).

    Pass spans get their engagement state and change events, the run span gets the roll-ups, the
    checks (attributes + ``gen_ai.evaluation.result`` events), the account's lines and the evidence
    links. A reason that names a span puts its code on that span too.
    """
    return finish(annotation_steps(verdict, options))


def annotation_steps(
    verdict: RunVerdict, options: AnnotateOptions | None = None
) -> Steps[dict[str, SpanNote]]:
    """:func:`annotations_for` in steps (one per :data:`STEP_SPANS` spans noted, and one each for the
    run span's and integrity's notes): see ``runs/slices.py``."""
    options = options or AnnotateOptions()
    shaper = _Shaper(options, _witnesses_of(verdict))
    builders: dict[str, _Builder] = {}

    def builder_for(span_id: str) -> _Builder:
        found = builders.get(span_id)
        if found is None:
            found = builders[span_id] = _Builder(options)
        return found

    for count, pass_ in enumerate(verdict.passes, 1):
        if pass_.span_id:
            _pass_note(pass_, verdict, shaper, builder_for(pass_.span_id))
        if not count % STEP_SPANS:
            yield None
    if verdict.run_span_id:
        _run_note(verdict, shaper, builder_for(verdict.run_span_id))
        yield None
    if verdict.integrity is not None:
        _integrity_notes(verdict.integrity, verdict, shaper, builder_for)
        yield None
    for reason in verdict.reasons:
        if reason.span_id and reason.span_id != verdict.run_span_id:
            target = builder_for(reason.span_id)
            prior = target.attributes.get(semconv.RUN_REASONS, ())
            target.put(semconv.RUN_REASONS, shaper.strings(_union_strings(prior, (reason.code,))))
    notes: dict[str, SpanNote] = {}
    for count, (span_id, b) in enumerate(builders.items(), 1):
        notes[span_id] = b.note()
        if not count % STEP_SPANS:
            yield None
    return notes


def unannotated_notes(
    spans: RunSpans | Iterable[SpanView | str],
    reason: Reason,
    *,
    run_span_id: str | None = None,
    run_id: str | None = None,
    complete: bool | None = False,
) -> dict[str, SpanNote]:
    """Notes for a run that cannot be annotated: the reason code on every span of it.

    ``spans`` is a grouped run, or span ids (hex) / span views. The run span — the grouped run's,
    ``run_span_id``, or each view recognised as a run span — also gets ``footprint.run.complete``
    (unless ``complete`` is None) and ``footprint.run.id`` when known and not already on it.
    """
    items: Iterable[SpanView | str]
    if isinstance(spans, RunSpans):
        items = spans.spans()
        run_span_id = run_span_id or spans.run_span_id
        run_id = run_id or (spans.run_id if spans.run_span is not None else None)
    else:
        items = spans
    limit = AnnotateOptions().max_value_chars
    code = clip(reason.code, limit)
    notes: dict[str, SpanNote] = {}
    for item in items:
        if isinstance(item, str):
            span_id, is_run, has_run_id = item, item == run_span_id, False
        else:
            span_id = item.span_id
            is_run = span_id == run_span_id or item.role is SpanRole.RUN
            has_run_id = is_run and item.attribute(semconv.RUN_ID) is not None
        attrs: list[tuple[str, AttributeValue]] = [(semconv.RUN_REASONS, (code,))]
        if is_run:
            if complete is not None:
                attrs.append((semconv.RUN_COMPLETE, complete))
            if run_id and not has_run_id:
                attrs.append((semconv.RUN_ID, clip(run_id, limit)))
        notes[span_id] = SpanNote(tuple(attrs))
    if run_span_id and run_span_id not in notes:
        notes[run_span_id] = SpanNote(
            ((semconv.RUN_REASONS, (code,)),)
            + (((semconv.RUN_COMPLETE, complete),) if complete is not None else ())
        )
    return notes


def merge_notes(*note_maps: Mapping[str, SpanNote]) -> dict[str, SpanNote]:
    """Several note maps into one; for a span in more than one, later values win."""
    out: dict[str, SpanNote] = {}
    for notes in note_maps:
        for span_id, note in notes.items():
            prior = out.get(span_id)
            out[span_id] = note if prior is None else prior.merged(note)
    return out


__all__ = [
    "AnnotateOptions",
    "NoteEvent",
    "NoteLink",
    "SpanNote",
    "WitnessPolicy",
    "annotation_steps",
    "annotations_for",
    "clip",
    "describe_change",
    "hash_witness",
    "merge_notes",
    "unannotated_notes",
]
