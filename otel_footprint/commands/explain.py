"""``otel-footprint explain``: every run's engagement timeline and account, from files.

Inputs are OTLP JSON files (one trace or log export request per line, as the Collector ``file``
exporter writes them, hex or base64 ids; or one pretty-printed request) or agentfootprint NDJSON
recordings (detected, converted by the importer).
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_footprint import semconv
from otel_footprint.account.integrity import (
    IntegrityResult,
    combined_tone,
    row_explanation,
    signal_ids,
    summary_sentence,
)
from otel_footprint.bridges.otlpjson import ids_to_base64
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import PassVerdict, RunVerdict
from otel_footprint.kernel.jsoncodec import change_to_json, record_to_json
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.kernel.types import EngagementChange, MapEngagementRecord, ParkedChange
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView, SpanEventView, log_record_event
from otel_footprint.runs.store import MemoryRunStore

FORMATS = ("text", "json", "html")


class InputError(ValueError):
    """An input file that cannot be read; the message names the file and the line."""


@dataclass(slots=True)
class Loaded:
    """Everything read from the inputs: trace requests and log requests."""

    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    logs: list[ExportLogsServiceRequest] = field(default_factory=list)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-footprint explain``."""
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="OTLP JSON file (one trace or log export request per line, as the Collector file "
        "exporter writes) or agentfootprint NDJSON recording (detected)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="output format (default: text)"
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Explain every run of the inputs; 0 on success, 2 on unreadable input."""
    try:
        loaded = load_inputs(Path(p) for p in args.inputs)
    except InputError as error:
        print(f"otel-footprint explain: {error}", file=sys.stderr)
        return 2
    verdicts = explain_requests(loaded)
    document = {"runs": [verdict_to_json(v) for v in verdicts]}
    if args.format == "json":
        json.dump(document, out, ensure_ascii=False, indent=2)
        out.write("\n")
    elif args.format == "html":
        out.write(render_html(verdicts))
    else:
        out.write(render_text(verdicts))
    return 0


# ── reading inputs ───────────────────────────────────────────────────────────────────────────


def _is_recording(first: Any) -> bool:
    kind = first.get("type") if isinstance(first, dict) else None
    return isinstance(kind, str) and kind.startswith(semconv.UPSTREAM_PREFIX)


def _parse_otlp(document: Any, where: str, loaded: Loaded) -> None:
    if not isinstance(document, dict):
        raise InputError(f"{where}: expected an OTLP JSON object")
    # The Collector file exporter writes hex ids; the protobuf JSON mapping reads base64.
    ids_to_base64(document)
    try:
        if "resourceSpans" in document or "resource_spans" in document:
            loaded.traces.append(json_format.ParseDict(document, ExportTraceServiceRequest()))
        elif "resourceLogs" in document or "resource_logs" in document:
            loaded.logs.append(json_format.ParseDict(document, ExportLogsServiceRequest()))
        # Metrics and unknown documents are not ours to read; they are skipped quietly.
    except json_format.ParseError as error:
        raise InputError(f"{where}: not an OTLP export request ({error})") from None


def load_inputs(paths: Iterable[Path]) -> Loaded:
    """Read every input file into export requests (recordings through the importer)."""
    loaded = Loaded()
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{path}: cannot read ({error})") from None
        lines = text.splitlines()
        numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
        if not numbered:
            continue
        try:
            first = json.loads(numbered[0][1])
        except json.JSONDecodeError:
            first = None
        if _is_recording(first):
            loaded.traces.extend(_import_recording(path, lines))
            continue
        if first is None:
            # Not line-delimited: one pretty-printed export request.
            try:
                document = json.loads(text)
            except json.JSONDecodeError as error:
                raise InputError(
                    f"{path}: line {numbered[0][0]} is not JSON ({error.msg})"
                ) from None
            _parse_otlp(document, str(path), loaded)
            continue
        for number, line in numbered:
            try:
                document = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}: line {number} is not JSON ({error.msg})") from None
            _parse_otlp(document, f"{path}: line {number}", loaded)
    return loaded


def _import_recording(path: Path, lines: Sequence[str]) -> list[ExportTraceServiceRequest]:
    from otel_footprint.bridges.agentfootprint import RecordingError, recording_to_requests

    try:
        return recording_to_requests(lines)
    except RecordingError as error:
        raise InputError(f"{path}: {error}") from None


def explain_requests(loaded: Loaded, options: EngineOptions | None = None) -> list[RunVerdict]:
    """Group every span into run legs and decide them in start order, sharing one run store."""
    views = [
        OtlpSpanView(span)
        for request in loaded.traces
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    logs: dict[str, list[SpanEventView]] = {}
    for request in loaded.logs:
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                for record in scope.log_records:
                    event = log_record_event(record)
                    if event is not None and record.span_id:
                        logs.setdefault(record.span_id.hex(), []).append(event)
    store = MemoryRunStore()
    chosen = options or EngineOptions()
    return [decide_run(leg, store, chosen) for leg in group_runs(views, logs)]


# ── JSON ─────────────────────────────────────────────────────────────────────────────────────


def _pass_json(verdict: PassVerdict, mode: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "iteration": verdict.iteration,
        "spanId": verdict.span_id,
        "engagedMaps": list(verdict.engaged_maps),
        "parkedMaps": list(verdict.parked_maps),
        "servedWhileParked": list(verdict.served_while_parked),
        "changes": [change_to_json(c) for c in verdict.changes],
        "parkedInjectionIds": list(verdict.parked_injection_ids),
        "parkedToolNames": list(verdict.parked_tool_names),
        "servedCharsWhileParked": verdict.served_chars_while_parked,
        "rode": list(verdict.served),
        "records": [record_to_json(r) for r in verdict.records],
    }
    if mode == "verify":
        body["reported"] = [change_to_json(c) for c in verdict.reported]
        body["mismatch"] = verdict.mismatch
    return body


def verdict_to_json(verdict: RunVerdict) -> dict[str, Any]:
    """One run as the ``explain --format json`` contract shapes it (plus a few extra keys)."""
    body: dict[str, Any] = {
        "runId": verdict.run_id,
        "traceId": verdict.trace_id,
        "runSpanId": verdict.run_span_id,
        "mode": verdict.mode,
        "complete": verdict.complete,
        "resumed": verdict.resumed,
        "passes": [_pass_json(p, verdict.mode) for p in verdict.passes],
        "engagement": [record_to_json(r) for r in verdict.engagement],
        "reasons": [
            {"code": r.code, "message": r.message, **({"spanId": r.span_id} if r.span_id else {})}
            for r in verdict.reasons
        ],
        "findings": list(verdict.findings),
    }
    if verdict.integrity is not None:
        body["integrity"] = integrity_json(verdict.integrity)
    account = verdict.account
    if account is None:
        body["checks"] = {}
        body["signals"] = []
        body["summary"] = {
            "sentence": "The account was not computed for this run.",
            "tone": "unknown",
        }
        return body
    checks: dict[str, Any] = {}
    for check in account.checks:
        entry: dict[str, Any] = {"status": check.state}
        if check.outcome is not None:
            entry["outcome"] = check.outcome
        entry["pointers"] = [p.render() for p in check.pointers]
        if check.sentence is not None:
            entry["sentence"] = check.sentence
        entry["label"] = check.label
        checks[check.check_id] = entry
    body["checks"] = checks
    body["signals"] = [s.signal_id for s in account.signals]
    if verdict.integrity is not None:  # the same fold the run span carries
        body["signals"] += [i for i in signal_ids(verdict.integrity) if i not in body["signals"]]
    body["signalDetails"] = [
        {"id": s.signal_id, "check": s.check_id, "tone": s.tone, "sentence": s.sentence}
        for s in account.signals
    ]
    body["summary"] = {
        "sentence": account.summary.sentence,
        "tone": combined_tone(account.summary.tone, verdict.integrity),
    }
    body["lines"] = [
        {
            "row": line.row,
            "template": line.template_id,
            "text": line.text,
            "status": line.status,
            "source": line.source,
            "chips": [chip.text for chip in line.chips],
            "pointers": [p.render() for p in line.pointers],
            **({"item": True} if line.item else {}),
        }
        for line in account.lines
    ]
    return body


# ── text ─────────────────────────────────────────────────────────────────────────────────────

_ROW_TITLES = {
    "asked": "You asked",
    "understood": "It understood",
    "checked": "It checked",
    "not-checked": "It did not check",
    "found": "It found",
    "how-sure": "How sure",
    "anything-wrong": "Anything wrong",
}


def describe_change(change: EngagementChange) -> str:
    """A change in words: ``engaged by lexical (witness "zone")``."""
    if isinstance(change, ParkedChange):
        text = f"{change.map_id} PARKED (rested on {change.by}, {change.idle_calls} idle calls)"
    else:
        how = (
            "re-engaged"
            if change.reengaged
            else "upgraded"
            if change.upgraded
            else "changed tenant"
            if change.tenant_changed
            else "engaged"
        )
        text = f"{change.map_id} {how} by {change.by}"
        if change.at is not None:
            text += f" at {change.at}"
        if change.founded_by is not None:
            text += f" (founded {change.founded_by})"
    if change.witness is not None:
        text += f' witness "{change.witness}"'
    return text


def _standing(records: Sequence[MapEngagementRecord]) -> str:
    if not records:
        return "-"
    return ", ".join(
        f"{r.map_id}: {'PARKED' if r.standing == 'parked' else 'engaged'} {r.by} idle {r.idle}"
        for r in records
    )


def _rode(verdict: PassVerdict) -> str:
    names = ["park card" if i == PARK_CARD_ID else i for i in verdict.served]
    return ", ".join(names) if names else "-"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def render_run_text(verdict: RunVerdict) -> str:
    """One run as readable text: pass table, final records, account lines, reasons, findings."""
    mode = verdict.mode or "no engagement"
    state = "complete" if verdict.complete else "incomplete"
    resumed = ", resumed leg" if verdict.resumed else ""
    out = [f"Run {verdict.run_id}  (trace {verdict.trace_id}, {mode} mode, {state}{resumed})"]
    if verdict.passes:
        rows: list[list[str]] = [["pass", "span", "rode", "standing", "changes"]]
        for p in verdict.passes:
            changes = "; ".join(describe_change(c) for c in p.changes) or "-"
            if p.served_while_parked:
                changes += (
                    f"; still rode while parked: {', '.join(p.served_while_parked)} "
                    f"({p.served_chars_while_parked} chars)"
                )
            if p.mismatch:
                reported = "; ".join(describe_change(c) for c in p.reported) or "nothing"
                changes += f"; MISMATCH: the agent reported {reported}"
            rows.append(
                [
                    str(p.iteration),
                    p.span_id or "(no span)",
                    _rode(p),
                    _standing(p.records),
                    changes,
                ]
            )
        out.extend(_table(rows))
    for record in verdict.engagement:
        out.append(
            f"  final: {record.map_id} {record.standing} by {record.by} since {record.since}"
            f" (founded {record.founded_by} at {record.founded_at}"
            + (f" on {record.founded_on}" if record.founded_on else "")
            + f"; idle {record.idle})"
        )
    if verdict.account is not None:
        current = None
        for line in verdict.account.lines:
            if line.row != current:
                current = line.row
                out.append(f"  {_ROW_TITLES.get(line.row, line.row)}:")
            chips = "".join(f" [{chip.text}]" for chip in line.chips)
            bullet = "      - " if line.item else "    "
            out.append(f"{bullet}{line.text}{chips}")
        summary = verdict.account.summary
        out.append(f"  Summary ({summary.tone}): {summary.sentence}")
    if verdict.integrity is not None:
        out.extend(integrity_text_lines(verdict.integrity))
    for finding in verdict.findings:
        out.append(f"  Finding: {finding}")
    for reason in verdict.reasons:
        out.append(f"  Reason {reason.code}: {reason.message}")
    return "\n".join(out) + "\n"


def render_text(verdicts: Sequence[RunVerdict]) -> str:
    """Every run, separated by blank lines."""
    if not verdicts:
        return "No agent runs found in the input.\n"
    return "\n".join(render_run_text(v) for v in verdicts)


# ── html ─────────────────────────────────────────────────────────────────────────────────────


def render_html(verdicts: Sequence[RunVerdict]) -> str:
    """A small static page: one table per run (no scripts, no external resources)."""
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>otel-footprint explain</title>",
        "<style>body{font-family:sans-serif}table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}"
        ".parked{background:#fde8e8}</style></head><body>",
    ]
    for verdict in verdicts:
        parts.append(
            f"<h2>Run {e(verdict.run_id)}</h2><p>trace {e(verdict.trace_id)} · "
            f"{e(verdict.mode or 'no engagement')} mode · "
            f"{'complete' if verdict.complete else 'incomplete'}</p>"
        )
        if verdict.passes:
            parts.append(
                "<table><tr><th>pass</th><th>span</th><th>rode</th><th>standing</th>"
                "<th>changes</th></tr>"
            )
            for p in verdict.passes:
                css = " class='parked'" if p.parked_maps else ""
                changes = "; ".join(describe_change(c) for c in p.changes) or "-"
                parts.append(
                    f"<tr{css}><td>{p.iteration}</td><td>{e(p.span_id or '')}</td>"
                    f"<td>{e(_rode(p))}</td><td>{e(_standing(p.records))}</td>"
                    f"<td>{e(changes)}</td></tr>"
                )
            parts.append("</table>")
        if verdict.account is not None:
            parts.append("<ul>")
            for line in verdict.account.lines:
                chips = "".join(f" <b>[{e(c.text)}]</b>" for c in line.chips)
                parts.append(
                    f"<li>{e(_ROW_TITLES.get(line.row, line.row))}: {e(line.text)}{chips}</li>"
                )
            parts.append("</ul>")
            parts.append(f"<p><i>{e(verdict.account.summary.sentence)}</i></p>")
        if verdict.integrity is not None:
            parts.append(integrity_html(verdict.integrity))
        for finding in verdict.findings:
            parts.append(f"<p>Finding: {e(finding)}</p>")
        for reason in verdict.reasons:
            parts.append(f"<p>Reason {e(reason.code)}: {e(reason.message)}</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


# ── integrity (issue 17): its own section in every format ─────────────────────────────────────


def integrity_json(result: IntegrityResult) -> dict[str, Any]:
    """The integrity rows, findings (with evidence pointers), excusals and verify disagreements."""
    return {
        "state": result.state,
        "summary": summary_sentence(result),
        "rows": [
            {
                "check": row.check,
                "seam": row.seam,
                "state": row.state,
                "armed": row.armed,
                "checked": row.checked,
                "findings": row.findings,
                "notApplicable": row.not_applicable,
                "unreachable": row.unreachable,
                "why": list(row.why),
                "explanation": row_explanation(row, result),
            }
            for row in result.rows
        ],
        "findings": [
            {
                "kind": f.kind,
                "seam": f.seam,
                "subjects": [s.render() for s in f.subjects],
                "predicate": f.predicate,
                "iteration": f.iteration,
                "advisory": f.advisory,
                "message": f.message,
                "evidence": [ref.render() for ref in f.evidence],
            }
            for f in result.findings
        ],
        "externalGroundsUsed": [
            {
                "tool": x.tool,
                "callId": x.call_id,
                "path": x.path,
                "value": x.value,
                "source": x.source,
                "iteration": x.iteration,
            }
            for x in result.excusals
        ],
        **(
            {
                "verified": True,
                "disagreements": [
                    {"identity": d.identity, "side": d.side, "iteration": d.iteration}
                    for d in result.disagreements
                ],
            }
            if result.verified
            else {}
        ),
    }


def integrity_text_lines(result: IntegrityResult) -> list[str]:
    """The integrity section of the text form (nothing when no check is armed)."""
    if not result.armed:
        return []
    out = [f"  Integrity ({result.state}): {summary_sentence(result)}"]
    for row in result.rows:
        if row.armed:
            out.append(f"    {row.check}@{row.seam}: {row.state} — {row_explanation(row, result)}")
    for finding in result.findings:
        mark = "advisory" if finding.advisory else "finding"
        at = f" (pass {finding.iteration})" if finding.iteration is not None else ""
        out.append(f"    - {mark}{at}: {finding.message}")
    for d in result.disagreements:
        out.append(f"    - verify: {d.side}: {d.identity}")
    return out


def integrity_html(result: IntegrityResult) -> str:
    """The integrity section of the HTML form (empty when no check is armed)."""
    if not result.armed:
        return ""
    e = html.escape
    parts = [f"<h3>Integrity ({e(result.state)})</h3><p>{e(summary_sentence(result))}</p><ul>"]
    for row in result.rows:
        if row.armed:
            parts.append(
                f"<li>{e(row.check)}@{e(row.seam)}: <b>{e(row.state)}</b> — "
                f"{e(row_explanation(row, result))}</li>"
            )
    parts.append("</ul>")
    if result.findings:
        parts.append("<ol>")
        for finding in result.findings:
            mark = "advisory" if finding.advisory else finding.kind
            parts.append(f"<li><b>{e(mark)}</b>: {e(finding.message)}</li>")
        parts.append("</ol>")
    return "".join(parts)
