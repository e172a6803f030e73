"""The live run page's HTML (``serve``'s ``/runs``): the recent runs, newest first, and each run's
view, which is ``explain --format html``'s own page for that run's legs (one renderer for both).

Like explain's page it carries no script and loads nothing: the list reloads itself (a meta
refresh, so the filters in its address stay), the filters are a plain GET form, and links are
relative so the page also works behind a proxy that mounts it under a prefix.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Sequence
from datetime import UTC, datetime

from otel_footprint.commands.explain_html import render_html
from otel_footprint.engine.verdict import RunVerdict
from otel_footprint.service.runpage import Listing, RunRow

_TONES = {"bad", "warn", "ok", "unknown"}

_CSS = """
:root{--bad:#b42318;--bad-bg:#fef3f2;--warn:#b54708;--warn-bg:#fffaeb;--ok:#067647;
--ok-bg:#ecfdf3;--unknown:#475467;--unknown-bg:#f2f4f7;--line:#d0d5dd;--ink:#101828;
--muted:#667085}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
margin:0;background:#f9fafb}
main{max-width:1180px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 2px}.sub{color:var(--muted);margin:0 0 14px}
a{color:#175cd3}code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
form{display:flex;gap:12px;align-items:end;flex-wrap:wrap;margin:0 0 12px}
label{font-size:12px;color:var(--muted);display:flex;flex-direction:column;gap:2px}
table{width:100%;border-collapse:collapse;background:#fff;border:1px solid var(--line)}
td,th{padding:7px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:#f9fafb}
tr.run td:first-child{border-left:5px solid var(--t)}
.tone-bad{--t:var(--bad);--tb:var(--bad-bg)}.tone-warn{--t:var(--warn);--tb:var(--warn-bg)}
.tone-ok{--t:var(--ok);--tb:var(--ok-bg)}.tone-unknown{--t:var(--unknown);--tb:var(--unknown-bg)}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;
white-space:nowrap;color:var(--t);background:var(--tb);border:1px solid var(--t)}
.muted{color:var(--muted);font-size:12px}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _tone_class(tone: str) -> str:
    return f"tone-{tone if tone in _TONES else 'unknown'}"


def _when(unix_nano: int) -> str:
    return datetime.fromtimestamp(unix_nano / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _select(name: str, label: str, values: Sequence[str], chosen: str | None) -> str:
    options = ["<option value=''>any</option>"]
    for value in values:
        selected = " selected" if value == chosen else ""
        options.append(f"<option value='{_e(value)}'{selected}>{_e(value)}</option>")
    return f"<label>{_e(label)}<select name='{name}'>{''.join(options)}</select></label>"


def _row(row: RunRow, explained: bool) -> str:
    sentence = _e(row.sentence or "(no account)")
    if explained:
        href = "runs/" + urllib.parse.quote(row.run_id, safe="")
        sentence = f"<a class='open' href='{_e(href)}'>{sentence}</a>"
    else:
        sentence += " <span class='muted'>(full view no longer held)</span>"
    incomplete = "" if row.complete else " <span class='muted'>incomplete</span>"
    return (
        f"<tr class='run {_tone_class(row.tone)}' data-run='{_e(row.run_id)}' "
        f"data-tone='{_e(row.tone)}' data-decided='{row.decided_unix_nano}'>"
        f"<td class='muted'>{_e(_when(row.decided_unix_nano))}</td>"
        f"<td><span class='badge'>{_e(row.tone)}</span></td>"
        f"<td>{sentence}{incomplete}</td>"
        f"<td>{_e(row.agent)}</td><td>{_e(row.mode)}</td><td>{_e(row.check)}</td>"
        f"<td><code>{_e(row.run_id)}</code></td></tr>"
    )


class RunPageHtml:
    """The :class:`~otel_footprint.service.runpage.RunPageRenderer` ``serve`` hands the hop."""

    def listing(self, listing: Listing) -> str:
        f = listing.filters
        refresh = max(1, round(listing.refresh_seconds))
        parts = [
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width,initial-scale=1'>",
            f"<meta http-equiv='refresh' content='{refresh}'>",
            "<title>otel-footprint: recent runs</title>",
            f"<style>{_CSS}</style></head><body><main>",
            "<h1>Recent runs</h1>",
            "<p class='sub'>The runs this hop decided, newest first; open one for its full "
            f"account. This page reloads every {refresh} s.</p>",
            "<form method='get' action='runs'>",
            _select("agent", "agent", listing.agents, f.agent),
            _select("tone", "tone", listing.tones, f.tone),
            _select("check", "check 1", listing.checks, f.check),
            "<button type='submit'>Filter</button></form>",
            f"<p class='muted' id='counts'>{len(listing.rows)} shown of {listing.matching} "
            f"matching; {listing.held} runs held.</p>",
        ]
        if not listing.rows:
            parts.append("<p>No decided run matches yet.</p>")
        else:
            parts.append(
                "<table><thead><tr><th>decided</th><th>tone</th><th>verdict</th><th>agent</th>"
                "<th>mode</th><th>check 1</th><th>run</th></tr></thead><tbody>"
            )
            parts.extend(_row(r, r.run_id in listing.explained) for r in listing.rows)
            parts.append("</tbody></table>")
        parts.append("</main></body></html>\n")
        return "".join(parts)

    def run(self, legs: Sequence[RunVerdict]) -> str:
        page = render_html(legs)
        back = "<p><a class='back' href='../runs'>&larr; recent runs</a></p>"
        return page.replace("<main>", "<main>" + back, 1)
