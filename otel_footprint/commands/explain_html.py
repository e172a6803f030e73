"""``explain --format html``: one self-contained page a person opens to understand agent runs.

No scripts from anywhere, no fonts, no images: inline CSS only, so the page works from a file, an
e-mail attachment or an air-gapped machine. From the top down:

- **At a glance**: one row per run, coloured by the summary's tone, with the sentence that says what
  went wrong (or that nothing did) and a strip of its calls.
- **Per run** (the legs of a resumed run together under one heading): the summary; a timeline with a
  lane per mounted map (engaged / parked bands, what rode while parked, the change points with their
  witness and evidence grade); the three checks coloured by outcome with their evidence; the
  account's rows (repeated lines folded with a count); the integrity checks in words; the calls
  (repeated rows folded).

A call a failed check points at (``explain_words.failures``) is drawn failed — red, with a cross — in
the strip, the lanes and the call table, whatever its standing, so a failed run never looks green.
Evidence chips say in words which span and what on it (``call 2 · the skill put in the prompt``);
they link to the span: into Jaeger (``/trace/<trace>?uiFind=<span>``) or Phoenix
(``/redirects/spans/<span>``) when a base URL is given, else to the call's row on this page.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from otel_footprint.account.integrity import IntegrityResult, Row, row_explanation
from otel_footprint.account.model import Chip, Line, Pointer
from otel_footprint.commands.evidence_words import evidence_place, evidence_words
from otel_footprint.commands.explain_words import (
    CHECK_TITLES,
    ROW_TITLES,
    check_outcome,
    collapse,
    describe_change,
    engagement_story,
    failing_calls,
    failures,
    grade,
    riding_totals,
    rode_ids,
    rode_text,
    round_numbers,
    standing_text,
    verdict_sentence,
    verdict_tone,
    verdict_word,
)
from otel_footprint.commands.integrity_words import (
    CHECK_WORDS,
    OUTCOME_WORDS,
    calls_text,
    row_outcome,
    row_reasons,
    summary_words,
)
from otel_footprint.engine.verdict import PassVerdict, RunVerdict
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.kernel.types import ParkedChange


@dataclass(frozen=True, slots=True)
class Links:
    """Where evidence pointers lead: a Jaeger or Phoenix UI base URL, else this page."""

    jaeger: str | None = None
    phoenix: str | None = None

    def span(self, trace_id: str, span_id: str) -> str:
        if self.jaeger:
            return f"{self.jaeger.rstrip('/')}/trace/{trace_id}?uiFind={span_id}"
        if self.phoenix:
            return f"{self.phoenix.rstrip('/')}/redirects/spans/{span_id}"
        return f"#span-{span_id}"

    def trace(self, trace_id: str) -> str | None:
        if self.jaeger:
            return f"{self.jaeger.rstrip('/')}/trace/{trace_id}"
        if self.phoenix:
            return f"{self.phoenix.rstrip('/')}/redirects/traces/{trace_id}"
        return None


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


_CSS = """
:root{--bad:#b42318;--bad-bg:#fef3f2;--warn:#b54708;--warn-bg:#fffaeb;--ok:#067647;
--ok-bg:#ecfdf3;--unknown:#475467;--unknown-bg:#f2f4f7;--line:#d0d5dd;--ink:#101828;
--muted:#667085;--engaged:#12b76a;--parked:#98a2b3;--ride:#f04438;--card:#7a5af8}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
margin:0;background:#f9fafb}
main{max-width:1180px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 2px}h2{font-size:18px;margin:0}h3{font-size:15px;margin:18px 0 6px}
.sub{color:var(--muted);margin:0 0 16px}
a{color:#175cd3}code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
table.glance{width:100%;border-collapse:collapse;background:#fff;border:1px solid var(--line);
border-radius:8px;overflow:hidden}
.glance td,.glance th{padding:8px 10px;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
.glance th{font-size:12px;color:var(--muted);font-weight:600;background:#f9fafb}
.glance tr:last-child td{border-bottom:0}
.glance .what{font-size:14px}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;
white-space:nowrap}
.tone-bad{--t:var(--bad);--tb:var(--bad-bg)}.tone-warn{--t:var(--warn);--tb:var(--warn-bg)}
.tone-ok{--t:var(--ok);--tb:var(--ok-bg)}.tone-unknown,.tone-plain{--t:var(--unknown);
--tb:var(--unknown-bg)}
.badge{color:var(--t);background:var(--tb);border:1px solid var(--t)}
section.run{background:#fff;border:1px solid var(--line);border-left:6px solid var(--t);
border-radius:8px;margin:22px 0;padding:14px 18px}
.headline{font-size:16px;font-weight:600;color:var(--t);background:var(--tb);padding:8px 12px;
border-radius:6px;margin:10px 0}
.meta{color:var(--muted);font-size:12px}.meta span{margin-right:12px}
.leg{border-top:1px dashed var(--line);margin-top:14px;padding-top:8px}
.strip{display:flex;gap:1px;min-width:120px;height:14px;margin-top:3px}
.strip i,.lane i{flex:1 1 0;min-width:2px;background:var(--unknown-bg)}
.lane{display:flex;gap:1px;height:26px;align-items:stretch;position:relative}
.st-engaged{background:var(--engaged)!important}.st-parked{background:var(--parked)!important}
.st-ride{background:repeating-linear-gradient(135deg,var(--ride) 0 4px,#fda29b 4px 8px)!important}
.st-card{box-shadow:inset 0 -5px 0 var(--card)}
.st-fail{background:var(--bad)!important;color:#fff;display:flex;align-items:center;
justify-content:center;overflow:hidden;font-size:11px;font-weight:700;line-height:1}
.st-fail::after{content:'✕'}
.mark{outline:2px solid var(--ink);outline-offset:-2px}
.mm{outline:3px solid var(--bad);outline-offset:-3px}
.tl{display:grid;grid-template-columns:150px 1fr;gap:4px 10px;align-items:center;margin:6px 0}
.tl .name{font-weight:600;font-size:13px;overflow:hidden;text-overflow:ellipsis}
.ticks{display:flex;gap:1px;font-size:10px;color:var(--muted)}
.ticks b{flex:1 1 0;min-width:2px;font-weight:400;text-align:center;overflow:visible}
.chars{display:flex;gap:1px;height:30px;align-items:flex-end}
.chars i{flex:1 1 0;min-width:2px;background:var(--ride)}
ul.changes{margin:4px 0 0 0;padding-left:18px}ul.changes li{margin:2px 0}
.key{display:flex;flex-wrap:wrap;gap:14px;font-size:12px;color:var(--muted);margin:6px 0}
.key i{display:inline-block;width:14px;height:12px;vertical-align:-2px;margin-right:4px}
.checks{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:10px}
.check{border:1px solid var(--t);background:var(--tb);border-radius:6px;padding:8px 10px}
.check .title{font-weight:600;font-size:13px}.check .out{color:var(--t);font-weight:700}
.rows dt{font-weight:600;margin-top:8px}.rows dd{margin:2px 0 0 14px}
.chip{display:inline-block;font-size:11px;padding:0 6px;border-radius:4px;margin-left:6px;
color:var(--t);background:var(--tb);border:1px solid var(--t)}
.count{color:var(--muted);font-size:12px;margin-left:6px}
.ev{font-size:11px;margin-left:6px;white-space:nowrap}
table.passes{border-collapse:collapse;font-size:12px;width:100%}
.passes td,.passes th{border-bottom:1px solid #eaecf0;padding:3px 6px;text-align:left;
vertical-align:top}
.passes tr.parked td{background:#f9fafb}.passes tr.failed td{background:var(--bad-bg)}
.passes tr.failed td:first-child{box-shadow:inset 4px 0 0 var(--bad)}.passes tr.ride td{background:var(--bad-bg)}
details summary{cursor:pointer;color:#175cd3;margin:8px 0}
.story{color:var(--muted);font-size:12px;margin-top:2px}
.finding{border-left:3px solid var(--warn);padding-left:8px;margin:6px 0}
.reason{color:var(--muted);font-size:12px}
"""


def render_html(verdicts: Sequence[RunVerdict], links: Links | None = None) -> str:
    """The whole page: at a glance, then one section per run (its legs together)."""
    chosen = links or Links()
    runs = _by_run(verdicts)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        "<title>otel-footprint explain</title>",
        f"<style>{_CSS}</style></head><body><main>",
        "<h1>Agent runs, explained</h1>",
        "<p class='sub'>What each run's record shows: which skills were given to the model on "
        "each call, when the engagement kernel parks (or would have parked) a skill map nobody "
        "used, and whether the checks found anything wrong.</p>",
    ]
    if not runs:
        parts.append("<p>No agent runs were found in the input.</p>")
    else:
        parts += [_glance(runs), _key(), *(_run_section(legs, chosen) for legs in runs)]
    parts.append("</main></body></html>\n")
    return "".join(parts)


def _by_run(verdicts: Sequence[RunVerdict]) -> list[list[RunVerdict]]:
    """Legs of the same run id together, in first-seen order."""
    grouped: dict[str, list[RunVerdict]] = {}
    for verdict in verdicts:
        grouped.setdefault(verdict.run_id, []).append(verdict)
    return list(grouped.values())


def _run_tone(legs: Sequence[RunVerdict]) -> str:
    """The worst tone of the run's legs; an earlier leg that only paused (its summary: the record
    does not show the run finishing) is continued by the next one, so it does not count."""
    order = ["bad", "warn", "unknown", "ok", "plain"]
    counted = [
        v
        for i, v in enumerate(legs)
        if i == len(legs) - 1
        or v.account is None
        or v.account.summary.template_id != "summary.unfinished"
        or v.account.signals
    ]
    tones = [verdict_tone(v) for v in counted]
    return min(tones, key=lambda t: order.index(t) if t in order else len(order))


def _anchor(run_id: str) -> str:
    return "run-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id)


def _glance(runs: Sequence[Sequence[RunVerdict]]) -> str:
    rows = [
        "<h3>At a glance</h3><table class='glance'><tr><th>run</th><th>verdict</th>"
        "<th>what the record shows</th><th>calls</th></tr>"
    ]
    for legs in runs:
        tone = _run_tone(legs)
        last = legs[-1]
        sentence = verdict_sentence(last)
        calls = sum(len(v.passes) for v in legs)
        strip = "".join(_strip(v) for v in legs)
        stories = [engagement_story(v) for v in legs]
        if len(legs) > 1:
            stories = [f"leg {i}: {t}" for i, t in enumerate(stories, start=1) if t]
        told = " / ".join(t for t in stories if t)
        story = f"<div class='story'>{_e(told)}</div>" if told else ""
        rows.append(
            f"<tr class='tone-{_e(tone)} glance-run' data-tone='{_e(tone)}'>"
            f"<td><a href='#{_anchor(last.run_id)}'>{_e(last.run_id)}</a>"
            f"<div class='meta'>{_e(last.mode or 'no engagement')} mode"
            f"{f', {len(legs)} legs' if len(legs) > 1 else ''}</div></td>"
            f"<td><span class='badge'>{_e(verdict_word(legs, tone))}</span></td>"
            f"<td class='what'>{_e(sentence)}{story}{strip}</td><td>{calls}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _cell_class(
    verdict: PassVerdict, map_id: str | None, riding_ids: set[str], failed: bool = False
) -> str:
    """One pass as a cell: engaged / parked / riding while parked (+ the park card); a call a
    failed check points at is drawn failed, whatever its standing."""
    classes = ["st-fail"] if failed else []
    standing = {r.map_id: r.standing for r in verdict.records}
    states = [standing.get(map_id)] if map_id is not None else list(standing.values())
    rode_parked = (
        bool(set(verdict.served_while_parked) & riding_ids)
        if map_id
        else bool(verdict.served_while_parked)
    )
    if rode_parked:
        classes.append("st-ride")
    elif "parked" in states:
        classes.append("st-parked")
    elif "engaged" in states:
        classes.append("st-engaged")
    if PARK_CARD_ID in rode_ids(verdict):
        classes.append("st-card")
    if any(c.map_id == map_id or map_id is None for c in verdict.changes):
        classes.append("mark")
    if verdict.mismatch:
        classes.append("mm")
    return " ".join(classes)


def _call_title(p: PassVerdict, failed: dict[int, str], what: str = "") -> str:
    said = [s for s in (what, failed.get(p.iteration, "")) if s]
    return f"call {p.iteration}" + (f": {_e('; '.join(said))}" if said else "")


def _strip(verdict: RunVerdict) -> str:
    if not verdict.passes:
        return ""
    failed = failing_calls(verdict)
    cells = "".join(
        f"<i class='{_cell_class(p, None, set(), p.iteration in failed)}' "
        f"title='{_call_title(p, failed)}'></i>"
        for p in verdict.passes
    )
    return f"<div class='strip' aria-label='passes of {_e(verdict.run_id)}'>{cells}</div>"


KEY: tuple[tuple[str | None, str], ...] = (
    ("st-engaged", "map engaged (its skills ride)"),
    ("st-parked", "map parked (its skills left out)"),
    ("st-fail", "a check failed on this call"),
    ("st-ride", "parked, but its skills still rode (shadow mode: the cost)"),
    ("st-card", "the park card rode"),
    ("mark", "the kernel changed the map's standing"),
    ("mm", "verify mode: the agent's own kernel decided otherwise"),
    (None, "letters under a lane: the first letter of each skill given to the model on that call "
     "(▪ = the park card)"),
    (None, "“a guess” = lexical, semantic or assumed evidence, which parks when nothing uses it"),
)  # fmt: skip
"""The page's key: the cell marks (a class each) and how to read the lanes, in words."""


def _key() -> str:
    spans = []
    for css, words in KEY:
        # Outline and underline marks are drawn on a light cell, the fills as they are.
        light = " style='background:#eee'" if css in ("st-card", "mark", "mm") else ""
        mark = f"<i class='{css}'{light}></i>" if css else ""
        spans.append(f"<span>{mark}{_e(words)}</span>")
    return f"<div class='key'>{''.join(spans)}</div>"


def _pointer_link(pointer: Pointer, links: Links, verdict: RunVerdict) -> str:
    """An evidence chip: which span (``call 2``, ``the run``) and what on it, in words; the raw
    pointer in its tooltip."""
    target = links.span(pointer.trace_id, pointer.span_id)
    words = _chip_words(pointer, verdict)
    return f"<a class='ev' href='{_e(target)}' title='{_e(pointer.render())}'>{_e(words)}</a>"


def _chip_words(pointer: Pointer, verdict: RunVerdict) -> str:
    place = evidence_place(pointer, verdict)
    if pointer.event_name is None and pointer.attribute is None:
        return place  # the span itself
    return f"{place} · {evidence_words(pointer)}"


def _pointers(
    pointers: Sequence[Pointer], links: Links, verdict: RunVerdict, limit: int = 3
) -> str:
    # Two scores of one routing read the same in words: one chip for both.
    distinct: dict[str, Pointer] = {}
    for pointer in pointers:
        distinct.setdefault(_chip_words(pointer, verdict), pointer)
    pointers = list(distinct.values())
    shown = "".join(_pointer_link(p, links, verdict) for p in pointers[:limit])
    more = len(pointers) - limit
    return shown + (f"<span class='count'>+{more}</span>" if more > 0 else "")


def _chip(chip: Chip) -> str:
    return f"<span class='chip tone-{_e(chip.tone)}'>{_e(chip.text)}</span>"


def _run_section(legs: Sequence[RunVerdict], links: Links) -> str:
    tone = _run_tone(legs)
    first = legs[0]
    parts = [
        f"<section class='run tone-{_e(tone)}' id='{_anchor(first.run_id)}' "
        f"data-run='{_e(first.run_id)}'>",
        f"<h2>{_e(first.run_id)} <span class='badge'>{_e(verdict_word(legs, tone))}</span></h2>",
    ]
    for index, verdict in enumerate(legs, start=1):
        if len(legs) > 1:
            paused = index < len(legs)
            state = "paused here; continues in the next leg" if paused else "resumed"
            parts.append(f"<div class='leg'><h3>Leg {index} of {len(legs)} · {state}</h3>")
        parts.append(_leg(verdict, links))
        if len(legs) > 1:
            parts.append("</div>")
    parts.append("</section>")
    return "".join(parts)


def _leg(verdict: RunVerdict, links: Links) -> str:
    trace_link = links.trace(verdict.trace_id)
    trace = (
        f"<a class='mono' href='{_e(trace_link)}'>{_e(verdict.trace_id)}</a>"
        if trace_link
        else f"<span class='mono'>{_e(verdict.trace_id)}</span>"
    )
    spans = "all spans present" if verdict.complete else "spans missing or run not decided whole"
    tone = verdict_tone(verdict)
    parts = [
        f"<div class='meta'><span>trace {trace}</span>"
        f"<span>{_e(verdict.mode or 'no engagement')} mode</span>"
        f"<span>{len(verdict.passes)} calls</span><span>{_e(spans)}</span></div>",
        f"<div class='headline tone-{_e(tone)}'>{_e(verdict_sentence(verdict))}</div>",
    ]
    parts += (f"<p class='finding'>{_e(round_numbers(f))}</p>" for f in verdict.findings)
    if verdict.passes:
        parts.append(_timeline(verdict, links))
    if verdict.account is not None:
        parts += [_checks(verdict, links), _rows(verdict, links)]
    if verdict.integrity is not None and verdict.integrity.armed:
        parts.append(_integrity(verdict.integrity))
    if verdict.passes:
        parts.append(_pass_table(verdict, links))
    parts.append(_evidence(verdict, links))
    if verdict.reasons:
        parts.append("<h3>Why the record could not be read whole</h3><ul>")
        parts += (
            f"<li class='reason'><code>{_e(r.code)}</code> {_e(r.message)}</li>"
            for r in verdict.reasons
        )
        parts.append("</ul>")
    return "".join(parts)


def _maps(verdict: RunVerdict) -> list[str]:
    seen: dict[str, None] = {}
    for p in verdict.passes:
        for record in p.records:
            seen.setdefault(record.map_id, None)
    return list(seen)


def _timeline(verdict: RunVerdict, links: Links) -> str:
    passes = verdict.passes
    riding = {r.map_id: set(r.ids) for r in verdict.rode_while_parked}
    parts = ["<h3>Timeline: one cell per model call</h3><div class='tl timeline'>"]
    step = max(1, len(passes) // 15)
    ticks = "".join(
        f"<b>{p.iteration if (i % step == 0 or i == len(passes) - 1) else ''}</b>"
        for i, p in enumerate(passes)
    )
    parts.append(f"<div class='meta'>call</div><div class='ticks'>{ticks}</div>")
    failed = failing_calls(verdict)
    for map_id in _maps(verdict):
        cells = "".join(
            f"<i class='{_cell_class(p, map_id, riding.get(map_id, set()), p.iteration in failed)}'"
            f" title='{_call_title(p, failed, standing_text(p.records))}'></i>"
            for p in passes
        )
        parts.append(
            f"<div class='name' title='{_e(map_id)}'>{_e(map_id)}</div>"
            f"<div class='lane' data-map='{_e(map_id)}'>{cells}</div>"
        )
    rode = "".join(
        f"<i style='height:{_bar(p.served_chars_while_parked, verdict)}%' "
        f"title='call {p.iteration}: {p.served_chars_while_parked:,} characters'></i>"
        for p in passes
    )
    if verdict.rode_while_parked:
        parts.append(
            f"<div class='name'>chars riding while parked</div><div class='chars'>{rode}</div>"
        )
    given = "".join(f"<b title='call {p.iteration}'>{_e(_initials(p))}</b>" for p in passes)
    parts.append(f"<div class='meta'>given to the model</div><div class='ticks'>{given}</div>")
    parts.append("</div>")
    parts += (
        f"<p class='finding riding'><b>Rode while parked:</b> {_e(line)}</p>"
        for line in riding_totals(verdict)
    )
    changes = [(p, c) for p in passes for c in p.changes]
    mismatches = [p for p in passes if p.mismatch]
    if changes or mismatches or failed:
        parts.append("<ul class='changes'>")
        for what, (calls, sentence) in failures(verdict).items():
            parts.append(
                f"<li class='tone-bad failed-call'><b>{_e(calls_text(calls))} · {_e(what)}</b>: "
                f"{_e(sentence)}</li>"
            )
        for p, change in changes:
            verb = "parked" if isinstance(change, ParkedChange) else "engaged"
            detail = (
                f"after {change.idle_calls} idle calls, resting on {grade(change.by)} evidence"
                if isinstance(change, ParkedChange)
                else f"evidence: {grade(change.by)}"
            )
            witness = f", witness “{_e(change.witness)}”" if change.witness else ""
            where = (
                f" <a class='ev mono' href='{_e(links.span(p.trace_id, p.span_id))}'>span</a>"
                if p.span_id
                else ""
            )
            parts.append(
                f"<li><b>call {p.iteration}</b> · {_e(change.map_id)} <b>{verb}</b> "
                f"({_e(describe_change(change))}) — {_e(detail)}{witness}{where}</li>"
            )
        for p in mismatches:
            reported = "; ".join(describe_change(c) for c in p.reported) or "nothing"
            parts.append(
                f"<li class='tone-bad'><b>call {p.iteration} · MISMATCH</b>: the agent reported "
                f"{_e(reported)}; the evidence gives "
                f"{_e('; '.join(describe_change(c) for c in p.changes) or 'nothing')}</li>"
            )
        parts.append("</ul>")
    return "".join(parts)


def _initials(verdict: PassVerdict) -> str:
    ids = rode_ids(verdict)
    return "".join("▪" if i == PARK_CARD_ID else i[:1] for i in ids[:2])


def _bar(chars: int, verdict: RunVerdict) -> int:
    top = max((p.served_chars_while_parked for p in verdict.passes), default=0)
    return round(100 * chars / top) if top else 0


_OUTCOME = {"pass": "ok", "fail": "bad"}


def _checks(verdict: RunVerdict, links: Links) -> str:
    account = verdict.account
    assert account is not None
    parts = ["<h3>Checks</h3><div class='checks'>"]
    for check in account.checks:
        tone = _OUTCOME.get(check.label, "unknown") if check.state == "reachable" else "unknown"
        word = check_outcome(check.state, check.label).lower()
        if check.state == "unreachable":
            word += " on this record"
        sentence = check.sentence or {
            "unreachable": "What this check needs is not in the record.",
            "not-applicable": "Nothing in this run for this check to judge.",
        }.get(check.state, "")
        parts.append(
            f"<div class='check tone-{tone}' data-check='{_e(check.check_id)}' "
            f"data-outcome='{_e(check.label)}'>"
            f"<div class='title'>{_e(CHECK_TITLES.get(check.check_id, check.check_id))}</div>"
            f"<div class='out'>{_e(word)}</div><div>{_e(round_numbers(sentence))}</div>"
            f"<div>{_pointers(check.pointers, links, verdict)}</div></div>"
        )
    parts.append("</div>")
    return "".join(parts)


# An integrity row's state -> the tone its card is drawn in (an advisory's failure only warns).
_ROW_TONE = {"pass": "ok", "fail": "bad", "unreachable": "unknown", "not-applicable": "plain"}


def _integrity(result: IntegrityResult) -> str:
    """The integrity checks (what each call was offered and what it acted on): one card per armed
    row, named in words (its ``check@seam`` id in the tooltip), then the findings."""
    parts = [
        "<h3>Integrity: what the model was offered and what it acted on</h3>",
        f"<p>{_e(round_numbers(summary_words(result)))}</p><div class='checks'>",
    ]
    for row in result.rows:
        if not row.armed:
            continue
        outcome = row_outcome(row)
        tone = "warn" if outcome == "advisory" else _ROW_TONE.get(row.state, "unknown")
        name = CHECK_WORDS.get((row.check, row.seam), row.check)
        parts.append(
            f"<div class='check tone-{tone}' data-integrity='{_e(row.check)}@{_e(row.seam)}' "
            f"data-outcome='{_e(row.state)}'><div class='title' title='{_e(row.check)}@"
            f"{_e(row.seam)}'>{_e(name[:1].upper() + name[1:])}</div>"
            f"<div class='out'>{_e(OUTCOME_WORDS[outcome])}</div>"
            f"<div>{_e(round_numbers(_row_body(row, result)))}</div></div>"
        )
    parts.append("</div>")
    if result.findings:
        parts.append("<ul>")
        for finding in result.findings:
            name = CHECK_WORDS.get((finding.kind, finding.seam), finding.kind)
            mark = f"worth a look: {name}" if finding.advisory else name
            at = f" (call {finding.iteration})" if finding.iteration is not None else ""
            parts.append(f"<li><b>{_e(mark)}</b>{_e(at)}: {_e(finding.message)}</li>")
        parts.append("</ul>")
    return "".join(parts)


def _row_body(row: Row, result: IntegrityResult) -> str:
    """What a card says under its outcome: the finding, the calls judged, or why not judged."""
    if row.state == "fail":
        return row_explanation(row, result)
    reasons = row_reasons(row, result)
    if reasons:
        text = "; ".join(reasons)
        return text[:1].upper() + text[1:] + "."
    judged = [
        e.iteration
        for e in result.encounters.get((row.check, row.seam), ())
        if e.disposition == "pass" and e.iteration is not None
    ]
    where = f" on {calls_text(judged)}" if judged else ""
    return f"Judged{where}; nothing contradicted."


def _line_key(line: Line) -> tuple[str, str, tuple[str, ...], bool]:
    return (line.row, line.text, tuple(c.text for c in line.chips), line.item)


def _rows(verdict: RunVerdict, links: Links) -> str:
    assert verdict.account is not None
    parts = ["<h3>The account</h3><dl class='rows'>"]
    current = None
    for line, count in collapse(verdict.account.lines, _line_key):
        if line.row != current:
            current = line.row
            parts.append(f"<dt>{_e(ROW_TITLES.get(line.row, line.row))}</dt>")
        chips = "".join(_chip(c) for c in line.chips)
        times = f"<span class='count'>×{count}</span>" if count > 1 else ""
        indent = " style='margin-left:30px'" if line.item else ""
        parts.append(
            f"<dd{indent}>{_e(round_numbers(line.text))}{times}{chips}"
            f"{_pointers(line.pointers, links, verdict, 2)}</dd>"
        )
    parts.append("</dl>")
    return "".join(parts)


def _evidence(verdict: RunVerdict, links: Links) -> str:
    """Every span a pointer names that the pass table does not: the run span, tool spans."""
    claims: dict[str, dict[str, None]] = {}
    fields: dict[str, dict[str, None]] = {}

    def add(pointers: Sequence[Pointer], claim: str) -> None:
        for pointer in pointers:
            claims.setdefault(pointer.span_id, {}).setdefault(claim, None)
            fields.setdefault(pointer.span_id, {}).setdefault(evidence_words(pointer), None)

    account = verdict.account
    if account is not None:
        for check in account.checks:
            add(check.pointers, CHECK_TITLES.get(check.check_id, check.check_id))
        for line in account.lines:
            add(line.pointers, line.text)
    for rode in verdict.rode_while_parked:
        add(rode.pointers, f"{', '.join(rode.ids)} rode while parked")
    passes = {p.span_id for p in verdict.passes if p.span_id}
    listed = [span for span in claims if span not in passes]
    if not listed:
        return ""
    rows = []
    for span_id in listed:
        role = "the run span" if span_id == verdict.run_span_id else "span"
        said = "; ".join(list(claims[span_id])[:2])
        more = len(claims[span_id]) - 2
        rows.append(
            f"<tr><td id='span-{_e(span_id)}'><a class='mono' "
            f"href='{_e(links.span(verdict.trace_id, span_id))}'>{_e(span_id)}</a> "
            f"<span class='meta'>{role}</span></td>"
            f"<td>{_e(', '.join(fields[span_id]))}</td>"
            f"<td>{_e(round_numbers(said))}{f' (+{more})' if more > 0 else ''}</td></tr>"
        )
    return (
        f"<details><summary>Evidence spans ({len(listed)})</summary><table class='passes'>"
        "<tr><th>span</th><th>what on it</th><th>what it backs</th></tr>"
        + "".join(rows)
        + "</table></details>"
    )


def _pass_key(p: PassVerdict) -> tuple[object, ...]:
    return (
        rode_text(p),
        standing_text(p.records),
        bool(p.changes),
        p.served_while_parked,
        p.mismatch,
    )


def _pass_table(verdict: RunVerdict, links: Links) -> str:
    parts = [
        f"<details open><summary>Every call ({len(verdict.passes)}; repeated rows folded)</summary>"
        "<table class='passes'><tr><th>call</th><th>span</th><th>rode</th><th>standing</th>"
        "<th>changes</th></tr>"
    ]
    failed = failing_calls(verdict)
    rows = collapse(verdict.passes, lambda p: (*_pass_key(p), failed.get(p.iteration)))
    for first, count in rows:
        index = verdict.passes.index(first)
        run = verdict.passes[index : index + count]
        label = (
            f"{first.iteration}"
            if count == 1
            else f"{first.iteration}–{run[-1].iteration} (×{count})"
        )
        said = [describe_change(c) for c in first.changes]
        if first.served_while_parked:
            each = " each" if count > 1 else ""
            said.append(
                f"still rode while parked: {', '.join(first.served_while_parked)} "
                f"({first.served_chars_while_parked:,} chars{each})"
            )
        if first.iteration in failed:
            said.insert(0, failed[first.iteration])
        changes = "; ".join(said) or "-"
        css = (
            "failed"
            if first.iteration in failed
            else "ride"
            if first.served_while_parked
            else "parked"
            if first.parked_maps
            else ""
        )
        ids = "".join(f"<span id='span-{_e(p.span_id)}'></span>" for p in run if p.span_id)
        span = (
            f"<a class='mono' href='{_e(links.span(first.trace_id, first.span_id))}'>"
            f"{_e(first.span_id)}</a>"
            if first.span_id
            else "(no span)"
        )
        parts.append(
            f"<tr class='{css}'><td>{ids}{_e(label)}</td><td>{span}</td>"
            f"<td>{_e(rode_text(first))}</td><td>{_e(standing_text(first.records))}</td>"
            f"<td>{_e(changes)}</td></tr>"
        )
    parts.append("</table></details>")
    return "".join(parts)
