"""Replays the upstream reference vectors for the engagement reducer and reports every difference.

``otel-footprint conformance engagement FILE.jsonl`` calls ``run_conformance_engagement``; the
replay itself (``replay_engagement``) reads lines and returns a ``Report``, with no other I/O.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, Literal, TextIO, cast

from otel_footprint.commands.errors import CommandError
from otel_footprint.kernel.jsoncodec import (
    JsonShapeError,
    advance_to_json,
    engagement_from_json,
    pass_from_json,
    plan_from_json,
)
from otel_footprint.kernel.lease import advance_engagement
from otel_footprint.kernel.plan import parked_member_ids
from otel_footprint.kernel.types import EngagementPlan

# The expected fields of a step; ``parkedMemberIds`` is optional in the format (a replayer that
# lacks the helper may skip it), the other four are required.
_REQUIRED_EXPECTED: Final = ("next", "parkedInjectionIds", "parkedToolNames", "changes")
_OPTIONAL_EXPECTED: Final = ("parkedMemberIds",)

_VALUE_CHARS: Final = 160
"""Longest rendering of one value in a diff line; a whole record list would drown the diff."""

DEFAULT_KEPT_FINDINGS: Final = 1000
"""Findings a ``Report`` keeps; the rest are counted, so a wholly broken file stays bounded."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One failed pass (a ``mismatch``) or one input that could not be replayed (``unreadable``)."""

    kind: Literal["mismatch", "unreadable"]
    line: int
    """1-based line number in the vectors file."""
    scenario: str | None
    step: int | None
    """0-based step index within the scenario, when the finding is about one step."""
    details: tuple[str, ...]
    """Diff lines (``path: expected X, got Y``) or the reason the input is unreadable."""

    def render(self) -> str:
        """A readable block: a heading naming scenario, step and line, then one detail per line."""
        where = f"line {self.line}"
        if self.scenario is not None:
            step = "" if self.step is None else f" step {self.step}"
            where = f"{self.scenario}{step} ({where})"
        label = "MISMATCH" if self.kind == "mismatch" else "UNREADABLE"
        return "\n".join([f"{label} {where}", *(f"  {detail}" for detail in self.details)])


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of a replay, counted in passes (steps)."""

    passed: int
    failed: int
    scenarios: int
    findings: tuple[Finding, ...]
    omitted_findings: int = 0

    @property
    def ok(self) -> bool:
        """True when something was replayed and nothing failed."""
        return self.failed == 0 and self.passed > 0

    def summary(self) -> str:
        """The closing line: ``N passed, M failed``."""
        return f"{self.passed} passed, {self.failed} failed"


_ABSENT: Final = object()
"""Marks a key or list item present on one side of a comparison only."""


def _render(value: object) -> str:
    if value is _ABSENT:
        return "<absent>"
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _same_scalar(expected: object, got: object) -> bool:
    # JSON ``true`` and ``1`` are different values, although Python's ``True == 1``.
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    return expected == got


def json_diff(expected: object, got: object, path: str) -> list[str]:
    """Every difference between two JSON values, one ``path: expected X, got Y`` line each.

    Objects are compared key by key (a key on one side only is a difference; key order is not);
    lists are compared in order, item by item.
    """
    out: list[str] = []
    _diff_into(expected, got, path, out)
    return out


def _diff_into(expected: object, got: object, path: str, out: list[str]) -> None:
    if isinstance(expected, dict) and isinstance(got, dict):
        exp = cast(dict[str, object], expected)
        gotd = cast(dict[str, object], got)
        for key in [*exp, *(k for k in gotd if k not in exp)]:
            _diff_into(exp.get(key, _ABSENT), gotd.get(key, _ABSENT), f"{path}.{key}", out)
        return
    if isinstance(expected, list) and isinstance(got, list):
        exp_items = cast(list[object], expected)
        got_items = cast(list[object], got)
        if len(exp_items) != len(got_items):
            out.append(f"{path}: expected {len(exp_items)} item(s), got {len(got_items)}")
        for index in range(max(len(exp_items), len(got_items))):
            _diff_into(
                exp_items[index] if index < len(exp_items) else _ABSENT,
                got_items[index] if index < len(got_items) else _ABSENT,
                f"{path}[{index}]",
                out,
            )
        return
    if isinstance(expected, dict | list) or isinstance(got, dict | list):
        same = expected == got and type(expected) is type(got)
    else:  # a side marked absent equals nothing on the other
        same = _same_scalar(expected, got)
    if not same:
        out.append(f"{path}: expected {_render(expected)}, got {_render(got)}")


def _replay_step(plan: EngagementPlan, step: object) -> list[str]:
    """The differences of one step (empty when it passes); raises ``JsonShapeError`` if malformed."""
    if not isinstance(step, dict):
        raise JsonShapeError(f"expected a step object, got {type(step).__name__}")
    fields = cast(dict[str, object], step)
    for key in ("pass", "prior", *_REQUIRED_EXPECTED):
        if key not in fields:
            raise JsonShapeError(f"missing required key {key!r}")
    pass_ = pass_from_json(fields["pass"], "pass")
    prior = engagement_from_json(fields["prior"], "prior")
    advance = advance_engagement(plan, prior, pass_)
    got: dict[str, object] = dict(advance_to_json(advance))
    got["parkedMemberIds"] = list(parked_member_ids(plan, advance.next))
    differences: list[str] = []
    for key in (*_REQUIRED_EXPECTED, *_OPTIONAL_EXPECTED):
        if key in fields:
            differences.extend(json_diff(fields[key], got[key], key))
    return differences


def _unreadable_line(line: str) -> str | None:
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates are how undecodable bytes arrive (``surrogateescape``).
        return "not valid UTF-8"
    if "\x00" in line:
        return "binary data, not text"  # JSON text never holds a NUL byte
    return None


def replay_engagement(
    lines: Iterable[str],
    on_finding: Callable[[Finding], None] | None = None,
) -> Report:
    """Replay every step of every scenario (one JSON scenario per line) with its STORED prior.

    Each step is one pass: it passes when ``next``, ``parkedInjectionIds``, ``parkedToolNames``,
    ``changes`` and (when present) ``parkedMemberIds`` equal the reducer's output under the
    key-presence rule. An unreadable line counts as one failure (or one per step when only its
    plan is bad). Blank lines are skipped. ``on_finding`` sees each finding as it happens.
    """
    passed = failed = scenarios = omitted = 0
    kept: list[Finding] = []

    def report(finding: Finding) -> None:
        nonlocal omitted
        if on_finding is not None:
            on_finding(finding)
        if len(kept) < DEFAULT_KEPT_FINDINGS:
            kept.append(finding)
        else:
            omitted += 1

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        problem = _unreadable_line(line)
        scenario: object = None
        if problem is None:
            try:
                scenario = json.loads(line)
            except json.JSONDecodeError as error:
                problem = f"not valid JSON ({error})"
            except RecursionError:
                problem = "JSON nested too deeply to read"
        if problem is None and not isinstance(scenario, dict):
            problem = "a scenario must be a JSON object"
        if problem is not None:
            failed += 1
            report(Finding("unreadable", number, None, None, (problem,)))
            continue
        fields = cast(dict[str, object], scenario)
        raw_name = fields.get("name")
        name = raw_name if isinstance(raw_name, str) else f"<unnamed scenario on line {number}>"
        steps = fields.get("steps")
        if not isinstance(steps, list):
            failed += 1
            report(Finding("unreadable", number, name, None, ("'steps' must be a list",)))
            continue
        step_list = cast(list[object], steps)
        try:
            plan = plan_from_json(fields.get("plan"), "plan")
        except JsonShapeError as error:
            failed += max(1, len(step_list))
            report(Finding("unreadable", number, name, None, (str(error),)))
            continue
        scenarios += 1
        for index, step in enumerate(step_list):
            try:
                differences = _replay_step(plan, step)
            except JsonShapeError as error:
                failed += 1
                report(Finding("unreadable", number, name, index, (f"steps[{index}]: {error}",)))
                continue
            if differences:
                failed += 1
                report(Finding("mismatch", number, name, index, tuple(differences)))
            else:
                passed += 1
    return Report(passed, failed, scenarios, tuple(kept), omitted)


def _text_lines(stream: BinaryIO) -> Iterator[str]:
    # Decoded line by line so one bad byte sequence costs one line, not the file; a UTF-8 byte
    # order mark (Windows editors) is not part of the first line.
    for number, raw in enumerate(stream):
        line = raw.decode("utf-8", "surrogateescape")
        yield line.removeprefix("\ufeff") if number == 0 else line


def _not_vectors(path: str, findings: Sequence[Finding], failed: int) -> CommandError:
    """Why a file with no scenario in it is not a vectors file, in one line (exit 2)."""
    name = "stdin" if path == "-" else path
    if not findings:
        empty = path == "-" or Path(path).stat().st_size == 0
        what = "it is empty" if empty else "nothing but blank lines"
        return CommandError(f"{name}: no scenarios in it ({what}); expected {_VECTORS_SHAPE}")
    first = findings[0]
    reason = first.details[0] if first.details else "unreadable"
    if reason == "not valid UTF-8":
        reason = "binary data, not UTF-8 text"
    more = "" if failed <= 1 else f" (and {failed - 1} more unreadable)"
    return CommandError(
        f"{name}: not engagement vectors: line {first.line}: {reason}{more}; expected {_VECTORS_SHAPE}"
    )


_VECTORS_SHAPE: Final = "one JSON scenario per line ({name, plan, steps})"


def run_conformance_engagement(path: str, out: TextIO) -> int:
    """Replay the vectors in ``path`` (``-`` = stdin), print each finding and the summary line.

    Returns the exit code: 0 when every pass matched, 1 on any failure. Input that is not a vectors
    file at all (empty, binary, no line a scenario) raises :class:`CommandError` (exit 2, one line
    on stderr, nothing on stdout), as a file that cannot be opened does.
    """
    # Findings are held until a scenario has been read, so a file that is no vectors file at all
    # prints nothing on stdout; after that each is printed as it happens (a long replay streams).
    held: list[Finding] = []
    streaming = False

    def show(finding: Finding) -> None:
        nonlocal streaming
        if not streaming and finding.step is not None:  # a scenario was read and replayed
            streaming = True
            for early in held:
                print(early.render(), file=out)
            held.clear()
        if streaming:
            print(finding.render(), file=out)
        elif len(held) < DEFAULT_KEPT_FINDINGS:
            held.append(finding)

    if path == "-":
        report = replay_engagement(_text_lines(sys.stdin.buffer), show)
    else:
        try:
            with Path(path).open("rb") as stream:
                report = replay_engagement(_text_lines(stream), show)
        except OSError as error:
            raise CommandError(f"cannot read {path}: {error.strerror or error}") from None
    if report.scenarios == 0 and not streaming:
        raise _not_vectors(path, held, report.failed)
    for early in held:
        print(early.render(), file=out)
    if report.omitted_findings:
        print(f"({report.omitted_findings} findings not kept in the report)", file=out)
    print(report.summary(), file=out)
    return 0 if report.ok else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-footprint conformance engagement``."""
    parser.add_argument("file", metavar="VECTORS.jsonl", help="the vectors file, or - for stdin")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """``otel-footprint conformance engagement FILE``: replay, report, exit non-zero on failure."""
    return run_conformance_engagement(str(args.file), out)
