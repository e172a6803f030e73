"""Every TraceQL line the project ships parses with Grafana's own grammar, and the cookbook's queries
ask what their comments say on the demo's five runs.

Tempo cannot run here (AGPL), so the syntax is checked by ``@grafana/lezer-traceql`` (the parser of
Grafana's query editor, tests/node/traceql/parse.mjs, installed by scripts/node-install.sh), with
broken controls that must fail. The meaning is checked by a small evaluator of single selectors over
that same parse tree, with Tempo's documented rules (docs/queries.md: arrays match when any element
does, regexps are fully anchored, ``!= nil`` tests presence), against the spans the real processor
writes for the demo.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.commands.scenarios import run_scenarios
from otel_footprint.sdk.processor import FootprintSpanProcessor

ROOT = Path(__file__).resolve().parents[1]
PARSER = ROOT / "tests" / "node" / "traceql"
COOKBOOK = ROOT / "collector-config" / "tempo" / "verdicts.traceql"

# ── where TraceQL lines are ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Line:
    where: str
    text: str


def _doc_lines(path: Path) -> Iterator[Line]:
    inside = False
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if raw.startswith("```"):
            inside = raw.strip() == "```traceql"
            continue
        if inside and raw.strip() and not raw.lstrip().startswith("#"):
            yield Line(f"{path.relative_to(ROOT)}:{number}", raw.strip())


def _file_lines(path: Path) -> Iterator[Line]:
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if raw.strip() and not raw.startswith("#"):
            yield Line(f"{path.relative_to(ROOT)}:{number}", raw.strip())


def traceql_lines() -> list[Line]:
    """Every TraceQL line of docs/ (```traceql blocks) and collector-config/ (*.traceql)."""
    lines = [line for doc in sorted((ROOT / "docs").glob("*.md")) for line in _doc_lines(doc)]
    for path in sorted((ROOT / "collector-config").rglob("*.traceql")):
        lines.extend(_file_lines(path))
    return lines


# ── Grafana's parser (Node) ──────────────────────────────────────────────────────────────────

Tree = list[Any]
"""[node name, from, to, children]; a syntax error is named ERROR."""


@dataclass(frozen=True)
class Parsed:
    error: int | None
    tree: Tree


@pytest.fixture(scope="module")
def parse() -> Callable[[Sequence[str]], list[Parsed]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH (Grafana's TraceQL grammar runs on Node.js)")
    if not (PARSER / "node_modules" / "@grafana" / "lezer-traceql").is_dir():
        pytest.skip("tests/node/traceql is not installed: run scripts/node-install.sh")

    def run(queries: Sequence[str]) -> list[Parsed]:
        done = subprocess.run(
            [node, str(PARSER / "parse.mjs")],
            input=json.dumps(list(queries)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return [Parsed(a["error"], a["tree"]) for a in json.loads(done.stdout)]

    return run


BROKEN = (
    '{ span.footprint.run.mode = "shadow"',  # unclosed selector
    "{ span.footprint.run.passes > }",  # no value
    '{ span.footprint.run.mode == "shadow" }',  # == is not TraceQL
    "{ span.footprint.run.mode = 'shadow' }",  # single quotes are not strings
    '{ span.footprint.run.mode = "shadow" } | select(',  # unfinished pipeline
    "{ span.footprint.run.id = shadow run }",  # unquoted words
)


def test_every_traceql_line_parses_with_grafanas_grammar(parse: Any) -> None:
    lines = traceql_lines()
    assert len(lines) >= 60, len(lines)  # the docs' blocks and the cookbook were all found
    assert any(line.where.startswith("collector-config/") for line in lines)
    parsed = parse([line.text for line in lines])
    bad = [
        f"{line.where}: {line.text!r} fails to parse at column {p.error}"
        for line, p in zip(lines, parsed, strict=True)
        if p.error is not None
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("query", BROKEN)
def test_broken_controls_fail_to_parse(parse: Any, query: str) -> None:
    (parsed,) = parse([query])
    assert parsed.error is not None, f"{query!r} parsed: the grammar check cannot fail"


# ── a small evaluator of single selectors, on Grafana's parse tree ───────────────────────────


class NotEvaluatedError(Exception):
    """A query shape this evaluator does not run (structure, aggregates): checked by parse only."""


class UnsupportedError(Exception):
    """A query Tempo itself refuses or always answers with nothing (``= nil``)."""


NIL = object()


@dataclass(frozen=True)
class Scope:
    span: ReadableSpan
    event: Any = None
    link: Any = None


def _children(tree: Tree) -> list[Tree]:
    return list(tree[3])


def _selector(tree: Tree) -> Tree:
    """The FieldExpression of a lone ``{ ... }`` (``| select(...)`` allowed: it keeps the spans)."""
    (expression,) = _children(tree)
    parts = _children(expression)
    if len(parts) == 3 and parts[1][0] == "Pipe":
        right = _children(_children(parts[2])[0]) if _children(parts[2]) else []
        if not (right and right[0][0] == "SelectOperation"):
            raise NotEvaluatedError("a pipeline other than select()")
        parts = _children(parts[0])
    if len(parts) != 1 or parts[0][0] != "SpansetPipeline":
        raise NotEvaluatedError("structural or spanset operators")
    (spanset,) = _children(parts[0])
    if spanset[0] != "SpansetFilter" or len(_children(spanset)) != 1:
        raise NotEvaluatedError(spanset[0])
    return _children(spanset)[0]


def _uses(tree: Tree, name: str) -> bool:
    return tree[0] == name or any(_uses(c, name) for c in _children(tree))


def _static(tree: Tree, text: str) -> Any:
    kids = _children(tree)
    raw = text[tree[1] : tree[2]]
    if not kids:
        return {"nil": NIL, "true": True, "false": False}[raw]
    kind = kids[0][0]
    if kind == "String":
        return json.loads(raw)
    if kind == "Integer":
        return int(raw)
    if kind == "Float":
        return float(raw)
    raise NotEvaluatedError(kind)


def _field(tree: Tree, text: str, scope: Scope) -> Any:
    kind = tree[0]
    if kind == "IntrinsicField":
        name = text[tree[1] : tree[2]]
        if name != "event:name":
            raise NotEvaluatedError(name)
        return scope.event.name if scope.event is not None else None
    kind_node, ident = _children(tree)
    name = text[ident[1] : ident[2]]
    source = {
        "Span": scope.span.attributes,
        "Event": scope.event.attributes if scope.event is not None else None,
        "Link": scope.link.attributes if scope.link is not None else None,
        "Resource": scope.span.resource.attributes,
    }.get(kind_node[0], NIL)
    if source is NIL:
        raise NotEvaluatedError(kind_node[0])
    return (source or {}).get(name)


def _same_kind(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    numbers = (int, float)
    return (isinstance(a, numbers) and isinstance(b, numbers)) or type(a) is type(b)


def _one(op: str, value: Any, want: Any) -> bool:
    if op in ("=~", "!~"):
        return isinstance(value, str) and re.fullmatch(want, value) is not None
    if not _same_kind(value, want):
        return False
    return bool(
        {
            "=": value == want,
            "!=": value != want,
            ">": not isinstance(value, bool) and value > want,
            ">=": not isinstance(value, bool) and value >= want,
            "<": not isinstance(value, bool) and value < want,
            "<=": not isinstance(value, bool) and value <= want,
        }[op]
    )


def _compare(op: str, value: Any, want: Any) -> bool:
    if want is NIL:
        if op == "!=":
            return value is not None  # presence: an empty array is present
        raise UnsupportedError(f"'{op} nil' does not ask for absence in Tempo")
    if value is None:
        return False
    if isinstance(value, tuple | list):
        # Tempo (vParquet4+): = =~ and the orderings hold when any element does; != !~ when none
        # fails the positive form (so no element equals / matches).
        if op == "!=":
            return not any(_one("=", v, want) for v in value)
        if op == "!~":
            return not any(_one("=~", v, want) for v in value)
        return any(_one(op, v, want) for v in value)
    return _one(op, value, want)


def _evaluate(tree: Tree, text: str, scope: Scope) -> Any:
    kids = _children(tree)
    if tree[0] != "FieldExpression":
        raise NotEvaluatedError(tree[0])
    if len(kids) == 1:
        only = kids[0]
        if only[0] == "Static":
            return _static(only, text)
        if only[0] in ("AttributeField", "IntrinsicField"):
            return _field(only, text, scope)
        raise NotEvaluatedError(only[0])
    if len(kids) != 3:
        raise NotEvaluatedError("an operator form")
    left, op, right = kids
    if op[0] == "And":
        return bool(_evaluate(left, text, scope)) and bool(_evaluate(right, text, scope))
    if op[0] == "Or":
        return bool(_evaluate(left, text, scope)) or bool(_evaluate(right, text, scope))
    if op[0] != "FieldOp":
        raise NotEvaluatedError(op[0])
    return _compare(
        text[op[1] : op[2]], _evaluate(left, text, scope), _evaluate(right, text, scope)
    )


def matching_spans(parsed: Parsed, text: str, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The spans a lone selector returns: one whose span, or one of its events / links, matches."""
    expression = _selector(parsed.tree)
    found = []
    for span in spans:
        scopes = [Scope(span)]
        if _uses(expression, "Event") or _uses(expression, "IntrinsicField"):
            scopes = [Scope(span, event=e) for e in span.events]
        elif _uses(expression, "Link"):
            scopes = [Scope(span, link=link) for link in span.links]
        if any(_evaluate(expression, text, s) is True for s in scopes):
            found.append(span)
    return found


# ── the demo's spans and what each cookbook query means ──────────────────────────────────────


@pytest.fixture(scope="module")
def demo_spans() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    processor = FootprintSpanProcessor(memory, grace_seconds=0.05)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        run_scenarios(provider.get_tracer("traceql"))
        assert processor.force_flush(30_000)
    finally:
        provider.shutdown()
    return list(memory.get_finished_spans())


def _a(span: ReadableSpan) -> Any:
    return span.attributes or {}


def _events(span: ReadableSpan, name: str) -> list[Any]:
    return [e for e in span.events if e.name == name]


Meaning = Callable[[ReadableSpan], bool]

MEANINGS: dict[str, tuple[Meaning, int]] = {
    # query: (what its comment says, in Python over the written spans; how many demo spans match)
    '{ span.footprint.check.decided_delivered = "reachable" && '
    'span.footprint.check.decided_delivered.outcome = "not-delivered" }': (
        lambda s: _a(s).get(sc.CHECK_DECIDED_DELIVERED_OUTCOME) == "not-delivered",
        1,
    ),
    '{ span.footprint.check.decided_delivered = "reachable" && '
    'span.footprint.check.decided_delivered.outcome = "delivered" }': (
        lambda s: _a(s).get(sc.CHECK_DECIDED_DELIVERED_OUTCOME) == "delivered",
        1,
    ),
    '{ span.footprint.check.decided_delivered = "unreachable" }': (
        lambda s: _a(s).get(sc.CHECK_DECIDED_DELIVERED) == "unreachable",
        3,
    ),
    '{ span.footprint.check.decided_delivered = "not-applicable" }': (
        lambda s: _a(s).get(sc.CHECK_DECIDED_DELIVERED) == "not-applicable",
        0,
    ),
    '{ event:name = "gen_ai.evaluation.result" && event.gen_ai.evaluation.score.label = "fail" }': (
        lambda s: any(
            (e.attributes or {}).get(sc.EVAL_SCORE_LABEL) == "fail"
            for e in _events(s, sc.EV_EVALUATION_RESULT)
        ),
        1,
    ),
    '{ span.footprint.signals = "decided-not-delivered" }': (
        lambda s: "decided-not-delivered" in _a(s).get(sc.SIGNALS, ()),
        1,
    ),
    '{ span.footprint.summary.tone = "bad" }': (
        lambda s: _a(s).get(sc.SUMMARY_TONE) == "bad",
        1,
    ),
    '{ span.footprint.run.mode = "shadow" && span.footprint.run.served_chars_while_parked > 0 }': (
        lambda s: (
            _a(s).get(sc.RUN_MODE) == "shadow"
            and _a(s).get(sc.RUN_SERVED_CHARS_WHILE_PARKED, 0) > 0
        ),
        1,
    ),
    # "runs where any map was parked": stuck-30-shadow, stuck-30-verify, recovery-explicit-pick
    '{ span.footprint.run.parked_maps =~ ".+" }': (
        lambda s: len(_a(s).get(sc.RUN_PARKED_MAPS, ())) > 0,
        3,
    ),
    "{ span.footprint.engagement.mismatch = true }": (
        lambda s: _a(s).get(sc.ENG_MISMATCH) is True,
        0,
    ),
    '{ event:name = "footprint.engagement.parked" }': (
        lambda s: bool(_events(s, sc.EV_ENGAGEMENT_PARKED)),
        3,
    ),
    '{ event:name = "footprint.engagement.engaged" }': (
        lambda s: bool(_events(s, sc.EV_ENGAGEMENT_ENGAGED)),
        6,
    ),
    # "model calls that carried parked injections anyway": the shadow run's 27 riding passes
    '{ span.footprint.engagement.served_while_parked =~ ".+" }': (
        lambda s: len(_a(s).get(sc.ENG_SERVED_WHILE_PARKED, ())) > 0,
        27,
    ),
    "{ span.footprint.run.complete = false }": (
        lambda s: _a(s).get(sc.RUN_COMPLETE) is False,
        0,
    ),
    '{ span.footprint.run.reasons = "timeout" }': (
        lambda s: "timeout" in _a(s).get(sc.RUN_REASONS, ()),
        0,
    ),
    '{ span.footprint.run.reasons = "overflow" }': (
        lambda s: "overflow" in _a(s).get(sc.RUN_REASONS, ()),
        0,
    ),
    "{ span.footprint.run.resumed = true }": (
        lambda s: _a(s).get(sc.RUN_RESUMED) is True,
        0,
    ),
}


def test_every_cookbook_query_returns_what_its_comment_says_on_the_demo(
    parse: Any, demo_spans: list[ReadableSpan]
) -> None:
    queries = [line.text for line in _file_lines(COOKBOOK)]
    assert sorted(queries) == sorted(MEANINGS), "a cookbook query without its meaning here"
    for query, parsed in zip(queries, parse(queries), strict=True):
        meaning, count = MEANINGS[query]
        got = {s.context.span_id for s in matching_spans(parsed, query, demo_spans)}
        want = {s.context.span_id for s in demo_spans if meaning(s)}
        assert got == want, f"{query}: {len(got)} spans, its comment means {len(want)}"
        assert len(want) == count, f"{query}: {len(want)} demo spans, expected {count}"


def test_presence_on_an_array_written_empty_asks_the_wrong_question(
    parse: Any, demo_spans: list[ReadableSpan]
) -> None:
    """The control: the cookbook's former queries count every run and every pass of a plan."""
    old = {
        "{ span.footprint.run.parked_maps != nil }": 5,
        "{ span.footprint.engagement.served_while_parked != nil }": 69,
    }
    for (query, count), parsed in zip(old.items(), parse(list(old)), strict=True):
        assert len(matching_spans(parsed, query, demo_spans)) == count, query
    with pytest.raises(UnsupportedError):
        (parsed,) = parse(["{ span.footprint.run.parked_maps = nil }"])
        matching_spans(parsed, "{ span.footprint.run.parked_maps = nil }", demo_spans)


ARRAYS = frozenset(
    {
        sc.ENG_ENGAGED_MAPS,
        sc.ENG_PARKED_MAPS,
        sc.ENG_PARKED_INJECTION_IDS,
        sc.ENG_PARKED_TOOL_NAMES,
        sc.ENG_SERVED_WHILE_PARKED,
        sc.RUN_SERVED_WHILE_PARKED,
        sc.RUN_SERVED_WHILE_PARKED_MAPS,
        sc.RUN_SERVED_CHARS_WHILE_PARKED_BY_MAP,
        sc.RUN_PARKED_MAPS,
        sc.RUN_REASONS,
        sc.SIGNALS,
        sc.INTEGRITY_KINDS,
        sc.INTEGRITY_UNREACHABLE,
    }
)


def test_no_line_asks_presence_of_an_array_or_absence_with_nil(
    parse: Any, demo_spans: list[ReadableSpan]
) -> None:
    """Every line the evaluator can run runs on the demo without `= nil`, and none tests an array
    that is written ``[]`` for presence."""
    lines = traceql_lines()
    problems = []
    evaluated = 0
    for line, parsed in zip(lines, parse([line.text for line in lines]), strict=True):
        for array in ARRAYS:
            if re.search(rf"\.{re.escape(array)}\s*!=\s*nil\b", line.text):
                problems.append(f"{line.where}: presence of {array}, which is written []")
        try:
            matching_spans(parsed, line.text, demo_spans)
            evaluated += 1
        except NotEvaluatedError:
            continue
        except UnsupportedError as why:
            problems.append(f"{line.where}: {why}")
    assert not problems, "\n".join(problems)
    assert evaluated >= 40, evaluated
