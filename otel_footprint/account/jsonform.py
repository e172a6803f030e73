"""The whole account as plain JSON data (camelCase), and its size against the reference's bound.

``explain --format json`` writes its own, smaller contract shape (commands/explain.py), not this one.
"""

from __future__ import annotations

import json
from typing import Any

from otel_footprint.account.input import present_fields
from otel_footprint.account.model import AccountResult, Chip, Line, RoutingFacts


def _chip(c: Chip) -> dict[str, str]:
    return {"mark": c.mark, "text": c.text, "tone": c.tone}


def _line(line: Line) -> dict[str, Any]:
    out: dict[str, Any] = {
        "row": line.row,
        "template": line.template_id,
        "text": line.text,
        "status": line.status,
        "source": line.source,
    }
    if line.pointers:
        out["pointers"] = [p.render() for p in line.pointers]
    if line.chips:
        out["chips"] = [_chip(c) for c in line.chips]
    if line.missing is not None:
        out["missing"] = line.missing
    if line.item:
        out["item"] = True
    return out


def _routing(facts: RoutingFacts) -> dict[str, Any]:
    out: dict[str, Any] = {
        "configured": facts.configured,
        "delivered": list(facts.delivered),
        "refusals": [{"requestedId": r.requested_id, "by": r.by} for r in facts.refusals],
    }
    if facts.refusals_omitted:
        out["refusalsOmitted"] = facts.refusals_omitted
    if facts.verdict is not None:
        v = facts.verdict
        out["verdict"] = {
            "by": v.by,
            "origin": v.origin,
            **present_fields(
                ("from", v.from_), ("to", v.to), ("decisive", v.decisive), ("scorer", v.scorer)
            ),
        }
    if facts.scores is not None:
        s = facts.scores
        out["scores"] = {
            "top": s.top,
            "next": s.next,
            "nextId": s.next_id,
            "allOthersEqual": s.all_others_equal,
        }
    if facts.before_pause is not None:
        out["beforePause"] = facts.before_pause
    return out


def account_to_dict(result: AccountResult) -> dict[str, Any]:
    """Every line, check, signal and the summary as JSON-ready data."""
    checks: dict[str, Any] = {}
    for check in result.checks:
        entry: dict[str, Any] = {"status": check.state, "label": check.label}
        if check.outcome is not None:
            entry["outcome"] = check.outcome
        if check.sentence is not None:
            entry["sentence"] = check.sentence
        entry["pointers"] = [p.render() for p in check.pointers]
        checks[check.check_id] = entry
    out: dict[str, Any] = {
        "lines": [_line(line) for line in result.lines],
        "checks": checks,
        "signals": [
            {
                "id": s.signal_id,
                "check": s.check_id,
                "tone": s.tone,
                "sentence": s.sentence,
                "pointers": [p.render() for p in s.pointers],
            }
            for s in result.signals
        ],
        "summary": {
            "template": result.summary.template_id,
            "sentence": result.summary.sentence,
            "tone": result.summary.tone,
        },
    }
    if result.summary.appended:
        out["summary"]["appended"] = list(result.summary.appended)
    if result.routing is not None:
        out["routing"] = _routing(result.routing)
    if result.unread:
        out["unread"] = result.unread
    return out


def account_json_size(result: AccountResult) -> int:
    """Bytes of the compact UTF-8 JSON form (the reference bounds an account at 128 KB)."""
    text = json.dumps(account_to_dict(result), ensure_ascii=False, separators=(",", ":"))
    return len(text.encode())
