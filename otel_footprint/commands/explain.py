"""``otel-footprint explain``: every run's engagement timeline and account, from files or stdin.

Reads what people have (``bridges/traceinput.py``): OTLP JSON or protobuf (the Collector ``file``
exporter's output, ``demo -o``, ``import -o``), a trace downloaded from the Jaeger UI or Tempo, or an
agentfootprint NDJSON recording; ``-`` is stdin. Anything else is refused with the reason (exit 2).
Three views of the same verdicts: ``text`` (below), ``json`` (the contract shape) and ``html``
(``explain_html.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from otel_footprint.account.integrity import (
    IntegrityResult,
    combined_tone,
    row_explanation,
    signal_ids,
    summary_sentence,
)
from otel_footprint.bridges.traceinput import KINDS, InputError, Loaded, read_inputs
from otel_footprint.commands.explain_text import render_run_text, render_text
from otel_footprint.commands.explain_words import describe_change, rode_ids
from otel_footprint.engine.decide import EngineOptions, decide_run
from otel_footprint.engine.verdict import PassVerdict, RunVerdict
from otel_footprint.kernel.jsoncodec import change_to_json, record_to_json
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.spans import OtlpSpanView, SpanEventView, log_record_event
from otel_footprint.runs.store import MemoryRunStore

__all__ = [
    "InputError",
    "Loaded",
    "describe_change",
    "explain_requests",
    "load_inputs",
    "render_run_text",
    "render_text",
    "verdict_to_json",
]

FORMATS = ("text", "json", "html")

COLUMNS_HELP = """the text format (docs/glossary.md has every word it prints): each run starts with its
verdict (the tone in words, then the one-sentence summary), then its timeline, column by column:
  call      the model call's number in the run (spans call it the pass)
  span      the model-call span's id (find it in your tracing UI)
  rode      what was given to the model on that call on behalf of the mounted maps
            (skill ids; "park card" = the short note that stands in for a parked map)
  standing  each map after the call: engaged or PARKED, the evidence it rests on
            (explicit > structural > semantic > lexical > assumed; the last three are
            guesses) and "idle N" = calls in a row where nothing used the map
  changes   what the kernel changed on that call (engaged / PARKED, witness = the
            user's words that matched); "still rode while parked" = shadow mode's cost
"calls 5-30: same as call 4": those calls changed nothing and left everything as call 4
did. After the table: the checks (passed, FAILED, could not run, does not apply) and the
integrity checks in one sentence; --account adds the account's rows, each map's final
standing, what rode while parked and every integrity check."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-footprint explain``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = COLUMNS_HELP
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help=f"a file ({KINDS}; told apart by content), or - for stdin",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="output format (default: text)"
    )
    parser.add_argument(
        "--account",
        action="store_true",
        help="text: also print the account behind each verdict (its rows, the final standing, "
        "every integrity check)",
    )
    parser.add_argument(
        "--jaeger-url",
        metavar="URL",
        help="html: link evidence to this Jaeger UI (e.g. http://127.0.0.1:16686)",
    )
    parser.add_argument(
        "--phoenix-url",
        metavar="URL",
        help="html: link evidence to this Phoenix UI (e.g. http://127.0.0.1:6006)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Explain every run of the inputs; 0 on success, 2 on unreadable input."""
    from otel_footprint.commands.errors import CommandError

    for flag, url in (("--jaeger-url", args.jaeger_url), ("--phoenix-url", args.phoenix_url)):
        if url is not None and not url.startswith(("http://", "https://")):
            raise CommandError(f"{flag} {url!r}: expected an http:// or https:// URL")
    try:
        loaded = load_inputs(args.inputs)
    except InputError as error:
        raise CommandError(str(error)) from None
    verdicts = explain_requests(loaded)
    if args.format == "json":
        document = {"runs": [verdict_to_json(v) for v in verdicts]}
        json.dump(document, out, ensure_ascii=False, indent=2)
        out.write("\n")
    elif args.format == "html":
        from otel_footprint.commands.explain_html import Links, render_html

        out.write(render_html(verdicts, Links(jaeger=args.jaeger_url, phoenix=args.phoenix_url)))
    else:
        out.write(render_text(verdicts, account=args.account))
    return 0


# ── reading inputs ───────────────────────────────────────────────────────────────────────────


def load_inputs(names: Iterable[str | Path]) -> Loaded:
    """Read every input (``-`` = stdin) into export requests; :class:`InputError` says why not."""
    named: list[tuple[str, bytes]] = []
    for name in names:
        text = str(name)
        if text == "-":
            named.append(("stdin", sys.stdin.buffer.read()))
            continue
        try:
            named.append((text, Path(text).read_bytes()))
        except OSError as error:
            raise InputError(f"{text}: cannot read ({error.strerror or error})") from None
    return read_inputs(named)


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
    legs = group_runs(views, logs, observed=chosen.observed)
    return [decide_run(leg, store, chosen) for leg in legs]


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
        "rode": list(rode_ids(verdict)),
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
        "rodeWhileParked": [
            {
                "map": r.map_id,
                "ids": list(r.ids),
                "passes": r.passes,
                "chars": r.chars,
                "charsById": dict(r.chars_by_id),
                "firstIteration": r.first_iteration,
                "lastIteration": r.last_iteration,
                "pointers": [p.render() for p in r.pointers],
            }
            for r in verdict.rode_while_parked
        ],
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
        **(
            {
                "posture": "dev",
                "alarms": list(result.alarms),
                "canariesCaught": {f"{r.check}@{r.seam}": r.synthetic for r in result.rows},
            }
            if result.posture == "dev"
            else {}
        ),
    }
