"""``column-type-mismatch`` and ``missing-column`` @write: the declared columns of a rowset.

A tool that declares ``resultColumns`` (``footprint.tool.declared``) and a run that switched the
check on (``footprint.integrity.config`` ``checkColumnTypes`` warn / enforce) get their returned
rows judged: a declared column in no row is *missing*; a column whose value in some rows is not of
the declared type (or is empty while not ``nullable``) is a *mismatch*. Detection only: a result
refused under ``enforce`` happened in the agent; its findings say the model was shown the refusal,
and a record that holds only the refusal (not the tool's rows) is ``unreachable``.

Rows are read from the recorded result as JSON (docs/design.md, "Integrity: fidelity"): a JSON
``null`` is "no value" (a JavaScript NaN arrives as null); an undefined key is an absent key; a
date is a string that parses as ISO 8601, RFC 2822 or a bare four-digit year.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from otel_footprint.account.integrity.common import clip, compact_json
from otel_footprint.account.integrity.model import Disposition, Finding, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import Execution, IntegrityInputs

TYPES = frozenset({"number", "string", "boolean", "date"})
_YEAR = re.compile(r"^\s*[+-]?\d{4}\s*$")
_ABSENT = object()


def parses_as_date(text: str) -> bool:
    """The documented stand-in for ``Date.parse``: ISO 8601 (``Z`` allowed), RFC 2822, or a bare
    four-digit year."""
    if _YEAR.match(text):
        return True
    candidate = text.strip()
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        datetime.fromisoformat(candidate)
        return True
    except ValueError:
        pass
    try:
        parsedate_to_datetime(text)
        return True
    except (TypeError, ValueError, IndexError):
        return False


def matches(kind: str, value: Any) -> bool:
    if kind == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "date":
        return isinstance(value, str) and parses_as_date(value)
    return False


def type_name(value: Any) -> str:
    if value is _ABSENT:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float) and math.isnan(value):
        return "the number NaN"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _declared(spec: Any) -> tuple[str, bool] | None:
    if isinstance(spec, str) and spec in TYPES:
        return spec, False
    if isinstance(spec, Mapping) and spec.get("type") in TYPES:
        nullable = spec.get("nullable")
        return str(spec["type"]), nullable is True
    return None


_REFUSAL_LEAD = "Result rejected:"
"""How the upstream's refusal under ``enforce`` begins (what the model was served instead)."""


def _rows(execution: Execution, enforce: bool) -> list[dict[str, Any]] | str | None:
    """The rows, ``None`` when the result is not recorded, ``"refused"`` when the record holds
    the refusal served in place of rows (under ``enforce``: the tool's own rows are then not in
    the record), ``"not-rows"`` when it is no rowset."""
    if execution.result_text is None:
        return None
    try:
        value = json.loads(execution.result_text)
    except json.JSONDecodeError:
        refused = execution.shape == "rowset" or execution.result_text.startswith(_REFUSAL_LEAD)
        return "refused" if enforce and refused else "not-rows"
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return value
    return "not-rows"


def _plural(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def check_columns(inputs: IntegrityInputs) -> tuple[Tally, Tally]:
    """(column-type-mismatch, missing-column): one encounter per declaring call, on both rows."""
    declared = {n: d.result_columns for n, d in inputs.declarations.items() if d.result_columns}
    if inputs.settings.check_column_types == "off":
        return unarmed("columns-off"), unarmed("columns-off")
    if not declared:
        return unarmed("no-columns"), unarmed("no-columns")
    mismatch, missing = Tally(), Tally()
    armed = [e for e in inputs.executions if e.name in declared]
    if not armed:
        for tally in (mismatch, missing):
            if inputs.calls_unknown:
                tally.note("unreachable", None, "calls-unknown")
            else:
                tally.note("not-applicable", None, "no-column-call")
        return mismatch, missing
    enforce = inputs.settings.check_column_types == "enforce"
    for execution in armed:
        it = execution.iteration
        rows = _rows(execution, enforce) if not execution.failed else "not-rows"
        if rows is None or isinstance(rows, str):
            why = {None: "result-unrecorded", "refused": "refused-rows"}.get(rows, "not-rows")
            state: Disposition = "not-applicable" if rows == "not-rows" else "unreachable"
            mismatch.note(state, it, why, execution.call_id)
            missing.note(state, it, why, execution.call_id)
            continue
        found_missing: list[Finding] = []
        found_mismatch: list[Finding] = []
        columns = declared[execution.name] or {}
        for column, spec in columns.items():
            decl = _declared(spec)
            if decl is None:
                continue
            kind, nullable = decl
            subject = Subject("tool", execution.name)
            if not any(column in row for row in rows):
                found_missing.append(
                    Finding(
                        "missing-column",
                        "write",
                        (subject,),
                        say(
                            "columns.missing",
                            tool=execution.name,
                            column=column,
                            type=kind,
                            rows=_plural(len(rows)),
                            callId=execution.call_id or "?",
                        ),
                        (
                            Witness(subject, column, kind, "footprint.tool.declared"),
                            Witness(
                                subject, column, "in no row", "the recorded result", execution.ref
                            ),
                        ),
                        predicate=column,
                        iteration=it,
                    )
                )
                continue
            bad: list[Any] = []
            for row in rows:
                value = row.get(column, _ABSENT)
                if value is _ABSENT or value is None:
                    if not nullable:
                        bad.append(value)
                elif not matches(kind, value):
                    bad.append(value)
            if not bad:
                continue
            first = bad[0]
            absent_first = first is _ABSENT or first is None
            sample = "no such key" if first is _ABSENT else clip(compact_json(first))
            got = type_name(first)
            if kind == "date" and isinstance(first, str):
                got = "a string that does not parse as a date"
            found_mismatch.append(
                Finding(
                    "column-type-mismatch",
                    "write",
                    (subject,),
                    say(
                        "columns.mismatch",
                        tool=execution.name,
                        column=column,
                        type=kind,
                        bad=len(bad),
                        rows=_plural(len(rows)),
                        sample=sample,
                        got=got,
                        hint=say("columns.hint") if absent_first and not nullable else "",
                        callId=execution.call_id or "?",
                    ),
                    (
                        Witness(subject, column, kind, "footprint.tool.declared"),
                        Witness(
                            subject,
                            column,
                            f"{len(bad)} of {len(rows)}: {got}",
                            "the recorded result",
                            execution.ref,
                        ),
                    ),
                    predicate=column,
                    iteration=it,
                )
            )
        if enforce:  # the agent refused these rows: the sentence says what the model saw
            refused = say("columns.refused")
            found_mismatch = [replace(f, message=f"{f.message} {refused}") for f in found_mismatch]
            found_missing = [replace(f, message=f"{f.message} {refused}") for f in found_missing]
        mismatch.judged(found_mismatch, it)
        missing.judged(found_missing, it)
    return mismatch, missing
