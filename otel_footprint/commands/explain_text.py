"""``explain``'s text form (and the demo's): the finding first, then a compact timeline.

Per run: one verdict line (the tone in words and the summary sentence), the run's trace and mode,
the timeline of its calls with repeated calls folded ("calls 5–30: same as call 4"), the checks in
one line and the integrity result in one sentence. The account behind the verdict (its rows, each
map's final standing, what rode while parked, every integrity check) only with ``--account``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from otel_footprint.commands.explain_words import (
    ROW_TITLES,
    check_outcome,
    collapse,
    describe_change,
    failing_calls,
    riding_totals,
    rode_text,
    round_numbers,
    standing_text,
    verdict_sentence,
    verdict_tone,
    verdict_word,
)
from otel_footprint.commands.integrity_words import row_words, summary_words
from otel_footprint.engine.verdict import PassVerdict, RunVerdict

COLUMNS = ("call", "span", "rode", "standing", "changes")


def _pass_row(p: PassVerdict, failed: str | None) -> list[str]:
    changes = "; ".join(([failed] if failed else []) + [describe_change(c) for c in p.changes])
    if p.served_while_parked:
        changes += "; " if changes else ""
        changes += (
            f"still rode while parked: {', '.join(p.served_while_parked)} "
            f"({p.served_chars_while_parked:,} chars)"
        )
    if p.mismatch:
        reported = "; ".join(describe_change(c) for c in p.reported) or "nothing"
        changes += f"; MISMATCH: the agent reported {reported}"
    return [
        str(p.iteration),
        p.span_id or "(no span)",
        rode_text(p),
        standing_text(p.records),
        changes or "-",
    ]


def _state(p: PassVerdict) -> tuple[object, ...]:
    """What a call gave the model and left standing: equal states fold into one line."""
    return (
        rode_text(p),
        standing_text(p.records),
        p.served_while_parked,
        p.served_chars_while_parked,
    )


def _folds(p: PassVerdict, shown: PassVerdict, failed: Mapping[int, str]) -> bool:
    """A call that changes nothing, did not fail, and leaves everything as ``shown`` did."""
    return (
        not p.changes
        and not p.mismatch
        and p.iteration not in failed
        and _state(p) == _state(shown)
    )


def timeline_rows(
    passes: Sequence[PassVerdict], failed: Mapping[int, str]
) -> list[list[str] | str]:
    """One row per call, except that calls which change nothing and leave everything as the call
    shown before them are folded into one line: ``calls 5–30: same as call 4``. ``failed``: what
    failed on which call (``check 1 failed``), said first in its changes; a failed call is never
    folded."""
    rows: list[list[str] | str] = []
    shown: PassVerdict | None = None
    i = 0
    while i < len(passes):
        j = i
        while shown is not None and j < len(passes) and _folds(passes[j], shown, failed):
            j += 1
        if shown is None or j == i:
            shown = passes[i]
            rows.append(_pass_row(shown, failed.get(shown.iteration)))
            i += 1
            continue
        first, last = passes[i].iteration, passes[j - 1].iteration
        calls = f"call {first}" if first == last else f"calls {first}–{last}"
        rows.append(f"{calls}: same as call {shown.iteration}")
        i = j
    return rows


def _table(rows: Sequence[list[str] | str]) -> list[str]:
    cells = [row for row in rows if isinstance(row, list)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return [
        "  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        if isinstance(row, list)
        else f"  {row}"
        for row in rows
    ]


def _header(verdict: RunVerdict) -> list[str]:
    tone = verdict_tone(verdict)
    word = verdict_word([verdict], tone)
    mode = verdict.mode or "no engagement"
    calls = len(verdict.passes)
    about = [
        f"trace {verdict.trace_id}",
        f"{mode} mode",
        f"{calls} call{'' if calls == 1 else 's'}",
        "all spans present" if verdict.complete else "spans missing",
    ]
    if verdict.resumed:
        about.append("resumed leg")
    return [
        f"Run {verdict.run_id} — {word}: {verdict_sentence(verdict)}",
        "  " + " · ".join(about),
    ]


def _account(verdict: RunVerdict) -> list[str]:
    out: list[str] = []
    for record in verdict.engagement:
        out.append(
            f"  final: {record.map_id} {record.standing} by {record.by} since {record.since}"
            f" (founded {record.founded_by} at {record.founded_at}"
            + (f" on {record.founded_on}" if record.founded_on else "")
            + f"; idle {record.idle})"
        )
    out.extend(f"  rode while parked: {total}" for total in riding_totals(verdict))
    if verdict.account is None:
        return out
    current = None
    lines = collapse(
        verdict.account.lines,
        lambda line: (line.row, line.text, tuple(c.text for c in line.chips), line.item),
    )
    for line, count in lines:
        if line.row != current:
            current = line.row
            out.append(f"  {ROW_TITLES.get(line.row, line.row)}:")
        chips = "".join(f" [{chip.text}]" for chip in line.chips)
        times = f" (×{count})" if count > 1 else ""
        bullet = "      - " if line.item else "    "
        out.append(f"{bullet}{round_numbers(line.text)}{chips}{times}")
    return out


def _integrity(verdict: RunVerdict, account: bool) -> list[str]:
    result = verdict.integrity
    if result is None or not result.armed:
        return []
    if not account:
        if result.state == "not-applicable":
            return []
        return [f"  Integrity: {round_numbers(summary_words(result))}"]
    out = [f"  Integrity: {round_numbers(summary_words(result))}"]
    out.extend(f"    - {round_numbers(row_words(r, result))}" for r in result.rows if r.armed)
    for finding in result.findings:
        mark = "worth a look" if finding.advisory else "found"
        at = f" on call {finding.iteration}" if finding.iteration is not None else ""
        out.append(f"    - {mark}{at}: {finding.message}")
    for d in result.disagreements:
        side = "only the agent reported" if d.side == "reported-only" else "only the evidence gives"
        out.append(f"    - verify mode, {side}: {d.identity}")
    out.extend(f"    - development alarm: {alarm}" for alarm in result.alarms)
    return out


def render_run_text(verdict: RunVerdict, account: bool = False) -> str:
    """One run as text: the verdict, the compact timeline, the checks, the integrity sentence;
    with ``account`` also the account's rows, the final standing and every integrity check."""
    out = _header(verdict)
    if verdict.passes:
        rows: list[list[str] | str] = [list(COLUMNS)]
        rows.extend(timeline_rows(verdict.passes, failing_calls(verdict)))
        out.extend(_table(rows))
    if account:
        out.extend(_account(verdict))
    if verdict.account is not None:
        checks = " · ".join(
            f"{n} {c.check_id}: {check_outcome(c.state, c.label)}"
            for n, c in enumerate(verdict.account.checks, start=1)
        )
        out.append(f"  Checks: {checks}")
    out.extend(_integrity(verdict, account))
    for finding in verdict.findings:
        out.append(f"  Finding: {round_numbers(finding)}")
    for reason in verdict.reasons:
        out.append(f"  Reason {reason.code}: {reason.message}")
    return "\n".join(out) + "\n"


def render_text(verdicts: Sequence[RunVerdict], account: bool = False) -> str:
    """Every run, separated by blank lines."""
    if not verdicts:
        return "No agent runs found in the input.\n"
    return "\n".join(render_run_text(v, account) for v in verdicts)
