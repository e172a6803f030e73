"""docs/queries.md stays true to semconv.py: every name it uses exists, every output name has a query
in Jaeger, Tempo and Phoenix, example values are in their vocabulary, and each backend's query form
respects that backend's rules (scopes, arrays as JSON text, Phoenix's leaf prefixes and keywords)."""

from __future__ import annotations

import json
import keyword
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_footprint import semconv as sc
from otel_footprint.account import model as account_model
from otel_footprint.account.templates import CHIPS, TEMPLATES
from otel_footprint.commands.scenarios import run_scenarios
from otel_footprint.kernel import types as kernel_types
from otel_footprint.sdk.processor import FootprintSpanProcessor

DOC = Path(__file__).resolve().parents[1] / "docs" / "queries.md"

# ── what semconv.py says ─────────────────────────────────────────────────────────────────────

NAMES = sc.all_names()
EVALUATION_NAMES = (
    frozenset(sc.evaluation_name(c) for c in sc.CHECK_IDS) | sc.INTEGRITY_EVALUATION_NAMES
)
VALID_NAMES = frozenset(NAMES.values()) | EVALUATION_NAMES

OUTPUT_PREFIXES = (
    "ENG_",
    "RUN_",
    "CHECK_",
    "SIGNALS",
    "SUMMARY",
    "EV_ENGAGEMENT_",
    "EV_EVALUATION_RESULT",
    "EVAL_",
    "CH_",
    "MISMATCH_",
    "EV_ACCOUNT_LINE",
    "LINE_",
    "LINK_EVIDENCE",
    "ANNOTATION_",
    "PASS_ITERATION",
    "EV_RUN_FINDING",
    "FINDING_",
)
OUTPUT = frozenset(v for k, v in NAMES.items() if k.startswith(OUTPUT_PREFIXES))
"""The output contract (and the bookkeeping written with it): each needs a query in the doc."""

EVENT_NAMES = frozenset(v for k, v in NAMES.items() if k.startswith("EV_"))
EVENT_ATTRIBUTES = frozenset(
    v
    for k, v in NAMES.items()
    if k.startswith(("CH_", "MISMATCH_", "LINE_", "FINDING_", "IF_"))
    or k in ("EVAL_NAME", "EVAL_SCORE_LABEL", "EVAL_SCORE_VALUE", "EVAL_EXPLANATION")
)
LINK_ATTRIBUTES = frozenset({sc.LINK_EVIDENCE})
SPAN_ATTRIBUTES = (
    frozenset(v for k, v in NAMES.items() if not k.startswith("EV_"))
    - EVENT_ATTRIBUTES
    - LINK_ATTRIBUTES
)
"""Names used as span attributes (``footprint.engagement.mismatch`` is also an event name)."""
SPAN_OUTPUT = OUTPUT & SPAN_ATTRIBUTES

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
        sc.LINE_POINTERS,
        sc.LINE_CHIPS,
        sc.MISMATCH_REPORTED,
        sc.MISMATCH_DERIVED,
        sc.LINK_EVIDENCE,
    }
)
INTS = frozenset(
    {
        sc.PASS_ITERATION,
        sc.RUN_PASSES,
        sc.RUN_SERVED_PASSES_WHILE_PARKED,
        sc.RUN_FINDINGS,
        sc.RUN_SERVED_CHARS_WHILE_PARKED,
        sc.ENG_SERVED_CHARS_WHILE_PARKED,
        sc.CH_IDLE_CALLS,
        sc.CH_ITERATION,
        sc.ANNOTATION_DROPPED_EVENTS,
        sc.ANNOTATION_DROPPED_LINKS,
    }
)
BOOLS = frozenset(
    {
        sc.RUN_COMPLETE,
        sc.RUN_RESUMED,
        sc.ENG_MISMATCH,
        sc.CH_REENGAGED,
        sc.CH_UPGRADED,
        sc.CH_TENANT_CHANGED,
    }
)
NUMBERS = frozenset({sc.EVAL_SCORE_VALUE})

LEAF_PREFIXED = {
    longer: shorter
    for longer in SPAN_OUTPUT
    for shorter in SPAN_OUTPUT
    if longer.startswith(shorter + ".")
}
"""Phoenix stores these under a key with a dot in it (see docs/e2e.md): bracket path only."""


def _literals(tp: object) -> frozenset[str]:
    """The string values of a Literal type (through Optional / unions)."""
    if typing.get_origin(tp) is typing.Literal:
        return frozenset(str(a) for a in typing.get_args(tp))
    return frozenset(v for arg in typing.get_args(tp) for v in _literals(arg))


_CHECK_HINTS = typing.get_type_hints(account_model.CheckResult)
CHECK_STATES = _literals(account_model.CheckState)
SIGNAL_IDS = _literals(account_model.SignalId)
TEMPLATE_IDS = frozenset(TEMPLATES)

VOCABULARY: dict[str, frozenset[str]] = {
    sc.CHECK_DECIDED_DELIVERED: CHECK_STATES,
    sc.CHECK_EXISTENCE: CHECK_STATES,
    sc.CHECK_EMPTY_RESULTS: CHECK_STATES,
    sc.CHECK_DECIDED_DELIVERED_OUTCOME: _literals(_CHECK_HINTS["outcome"]),
    sc.EVAL_SCORE_LABEL: _literals(_CHECK_HINTS["label"]),
    sc.EVAL_NAME: EVALUATION_NAMES,
    sc.RUN_MODE: frozenset({sc.MODE_VERIFY, sc.MODE_SHADOW}),
    sc.SUMMARY_TONE: _literals(account_model.Tone),
    sc.SIGNALS: SIGNAL_IDS | frozenset(f"integrity.{check}" for check, _ in sc.INTEGRITY_ROWS),
    sc.LINE_ROW: _literals(account_model.RowId),
    sc.LINE_STATUS: _literals(account_model.FactStatus),
    sc.LINE_TEMPLATE: TEMPLATE_IDS,
    sc.LINE_CHIPS: frozenset(f"{c.mark}: {c.text}" for c in CHIPS.values()),
    sc.CH_BY: _literals(kernel_types.Strength),
    sc.CH_FOUNDED_BY: _literals(kernel_types.Strength),
    sc.LINK_EVIDENCE: frozenset(sc.CHECK_IDS) | SIGNAL_IDS | TEMPLATE_IDS,
    sc.GEN_AI_OPERATION_NAME: frozenset(
        {sc.OP_INVOKE_AGENT, sc.OP_EXECUTE_TOOL, *sc.MODEL_CALL_OPERATIONS}
    ),
}
REASON_CODE = re.compile(r"[a-z][a-z0-9-]*")

# ── reading the markdown ─────────────────────────────────────────────────────────────────────

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")
_NAME = r"(?:footprint|gen_ai)\.[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*(?:@[a-z]+)?"
_TOKEN = re.compile(rf"(?<![\w-])({_NAME})(\.\*)?")
_BRACKETS = re.compile(r"attributes((?:\[\s*(['\"])[^'\"\]]*\2\s*\])+)")
_KEY = re.compile(r"\[\s*(['\"])([^'\"\]]*)\1\s*\]")
_LITERAL = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|\[[^\]]*\]|[^\s&|)\]},;]+"
_COMPARE = re.compile(rf"({_NAME})[\"']?[ \t]*(==|!=(?!~)|=(?![=~])|:)[ \t]*({_LITERAL})")
_MEMBER = re.compile(rf"('[^']*')\s+(?:not\s+)?in\s+({_NAME})(?![\w.-])")
_TUPLE = re.compile(rf"({_NAME})\s+(?:not\s+)?in\s+\(([^)]*)\)")
_ANNOTATION = re.compile(
    rf"annotations\[(['\"])([^'\"]+)\1\]\.(label|score)\s*(==|!=|<=|>=|<|>)\s*({_LITERAL})"
)
_EVENT_VALUE = re.compile(
    r"event:name\s*=\s*\"([^\"]*)\"|(?<![\w.\"])event=(\S+)|\[\"name\"\]\s*==\s*\"([^\"]*)\""
)
_EVENT_TUPLE = re.compile(r"\[\"name\"\]\s+in\s+\(([^)]*)\)")
_INT = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

PHOENIX_FAMILY = ("phoenix", "http", "python")
BACKENDS = {"Jaeger": ("jaeger",), "Tempo": ("traceql",), "Phoenix": PHOENIX_FAMILY}


@dataclass(frozen=True, slots=True)
class Code:
    """A fenced block (``info`` = its language) or an inline code span (``info`` = "inline")."""

    info: str
    text: str
    line: int


def code_of(markdown: str) -> list[Code]:
    """Every fenced block and every inline code span outside them, with its starting line."""
    out: list[Code] = []
    spans: list[tuple[int, int]] = []
    for match in _FENCE.finditer(markdown):
        line = markdown.count("\n", 0, match.start()) + 1
        out.append(Code(match.group(1), match.group(2), line))
        spans.append(match.span())
    rest = list(markdown)
    for start, end in spans:
        rest[start:end] = [" " if c != "\n" else c for c in markdown[start:end]]
    prose = "".join(rest)
    for match in _INLINE.finditer(prose):
        out.append(Code("inline", match.group(1), prose.count("\n", 0, match.start()) + 1))
    return out


def resolve_brackets(text: str) -> str:
    """``attributes['footprint']['summary.tone']`` -> ``footprint.summary.tone`` (for reading names)."""
    return _BRACKETS.sub(lambda m: ".".join(k for _, k in _KEY.findall(m.group(1))), text)


def names_in(text: str) -> Iterator[tuple[str, bool]]:
    """(name, is a ``.*`` glob) for every footprint/gen_ai name, bracket paths resolved."""
    for match in _TOKEN.finditer(resolve_brackets(text)):
        yield match.group(1), match.group(2) is not None


def _lines(code: Code) -> Iterator[str]:
    for raw in code.text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            yield line


def _unquote(literal: str) -> tuple[str, bool]:
    """(value, was quoted)."""
    if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "\"'":
        inner = literal[1:-1]
        return inner, True
    return literal, False


# ── the checks ───────────────────────────────────────────────────────────────────────────────


def _check_value(name: str, literal: str, where: str) -> list[str]:
    """Problems with one example value of ``name``."""
    problems: list[str] = []
    value, quoted = _unquote(literal)
    array_text = (value if quoted else literal).replace('\\"', '"')
    if name in ARRAYS and array_text.startswith("["):
        try:
            elements = json.loads(array_text)
        except json.JSONDecodeError:
            return [f"{where}: {name} value {literal} is not a JSON array"]
        if not isinstance(elements, list) or not all(isinstance(e, str) for e in elements):
            return [f"{where}: {name} value {literal} is not a JSON array of strings"]
        for element in elements:
            problems += _check_value(name, json.dumps(element, ensure_ascii=False), where)
        return problems
    if quoted and value.startswith('"') and value.endswith('"') and len(value) >= 2:
        value = value[1:-1]  # '"skill-map"': an element with its JSON quotes (Phoenix membership)
    if name in INTS:
        if quoted or not _INT.fullmatch(value):
            problems.append(f"{where}: {name} is an int, example value {literal} is not")
    elif name in BOOLS:
        if quoted or value not in ("true", "false", "True", "False"):
            problems.append(f"{where}: {name} is a bool, example value {literal} is not")
    elif name in NUMBERS:
        if quoted or not _NUMBER.fullmatch(value):
            problems.append(f"{where}: {name} is a number, example value {literal} is not")
    elif name in VOCABULARY and value not in VOCABULARY[name]:
        problems.append(
            f"{where}: {name} = {value!r} is not in its vocabulary {sorted(VOCABULARY[name])}"
        )
    elif name == sc.RUN_REASONS and not REASON_CODE.fullmatch(value):
        problems.append(f"{where}: {value!r} is not a reason code")
    return problems


def value_problems(code: Code) -> list[str]:
    """Example values outside their name's vocabulary or type, and unknown event names."""
    where = f"line {code.line} ({code.info})"
    text = resolve_brackets(code.text)
    problems: list[str] = []
    if code.info != "jaeger":  # jaeger_problems reads those lines as the UI does (logfmt)
        for name, _, literal in _COMPARE.findall(text):
            problems += _check_value(name, literal, where)
    for literal, name in _MEMBER.findall(text):
        inner, _ = _unquote(literal)
        if inner.startswith('"'):  # exact membership; a bare substring test has no vocabulary
            problems += _check_value(name, literal, where)
    for name, items in _TUPLE.findall(text):
        for item in re.findall(_LITERAL, items):
            problems += _check_value(name, item, where)
    for _, evaluation, field, _, literal in _ANNOTATION.findall(text):
        if evaluation not in EVALUATION_NAMES:
            problems.append(f"{where}: annotation {evaluation!r} is not a check's evaluation name")
        problems += _check_value(
            sc.EVAL_SCORE_LABEL if field == "label" else sc.EVAL_SCORE_VALUE, literal, where
        )
    events = [a or b or c for a, b, c in _EVENT_VALUE.findall(text)]
    for items in _EVENT_TUPLE.findall(text):
        events += [_unquote(i)[0] for i in re.findall(_LITERAL, items)]
    for event in events:
        if event not in EVENT_NAMES:
            problems.append(f"{where}: event name {event!r} is not an event constant in semconv.py")
    return problems


def unknown_names(code: Code) -> list[str]:
    """footprint.* / gen_ai.* names that semconv.py does not define."""
    problems = []
    for name, glob in names_in(code.text):
        # A ``.*`` after a name is a glob (``footprint.map.*``) or a regexp's tail (``name.*``).
        known = name in VALID_NAMES or (glob and any(v.startswith(name + ".") for v in VALID_NAMES))
        if not known:
            problems.append(f"line {code.line} ({code.info}): {name}{'.*' if glob else ''}")
    return problems


_STRINGS = re.compile(r"\"(?:[^\"\\]|\\.)*\"")


def traceql_problems(code: Code) -> list[str]:
    """Each name carries the scope it lives in: ``span.``, ``event.`` or ``link.``."""
    problems = []
    for line in _lines(code):
        bare = _STRINGS.sub('""', line)
        for match in _TOKEN.finditer(bare):
            name = match.group(1)
            before = bare[: match.start()]
            scope = re.search(r"(span|event|link|resource)?\.$", before)
            want = (
                "event"
                if name in EVENT_ATTRIBUTES
                else "link"
                if name in LINK_ATTRIBUTES
                else "span"
            )
            if scope is None:
                problems.append(f"line {code.line} (traceql): {name} has no scope")
            elif scope.group(1) not in (want, None):
                problems.append(
                    f"line {code.line} (traceql): {name} needs {want}., not {scope.group(1)}."
                )
    return problems


def logfmt_pairs(line: str) -> list[tuple[str, str | None]]:
    """The Jaeger UI's reading of its Tags field (the ``logfmt`` npm parser): a quote toggles quoting
    and is dropped, a backslash makes the next character literal, an unescaped ``=`` is dropped;
    ``(key, None)`` for a bare key."""
    pairs: list[tuple[str, str | None]] = []
    key = value = ""
    in_key = in_value = in_quote = False
    i = 0
    while i <= len(line):
        char = line[i] if i < len(line) else ""
        if (char == " " and not in_quote) or i == len(line):
            if in_key and key:
                pairs.append((key, None))
            elif in_value:
                pairs.append((key, value))
                value = ""
            if i == len(line):
                break
            in_key = in_value = in_quote = False
        if char == "=":
            in_key, in_value = False, True
        elif char == "\\":
            i += 1
            value += line[i] if i < len(line) else ""
        elif char == '"':
            in_quote = not in_quote
        elif char != " " and not in_value and not in_key:
            in_key, key = True, char
        elif in_key:
            key += char
        elif in_value:
            value += char
        i += 1
    return pairs


def jaeger_problems(code: Code) -> list[str]:
    """``key=value`` pairs as the UI parses them; arrays as JSON text; event names under ``event``."""
    problems = []
    for line in _lines(code):
        where = f"line {code.line} (jaeger) {line!r}"
        for key, value in logfmt_pairs(line):
            if value is None:
                problems.append(f"{where}: {key!r} is not key=value")
            elif key == "event":
                if value not in EVENT_NAMES:
                    problems.append(f"{where}: event={value} is not an event name")
            elif key not in VALID_NAMES:
                problems.append(f"{where}: {key} is not a semconv name")
            elif key in EVENT_NAMES and key not in SPAN_ATTRIBUTES:
                problems.append(f"{where}: {key} is an event name: search it as event={key}")
            elif len(value) > 255:
                problems.append(f"{where}: values over 255 characters are not searchable")
            elif key in ARRAYS:
                try:
                    elements = json.loads(value)
                except json.JSONDecodeError:
                    elements = None
                if not isinstance(elements, list):
                    problems.append(
                        f"{where}: {key} is an array: Jaeger matches its JSON text, the UI reads "
                        f'{value!r} (escape the JSON quotes as \\")'
                    )
                    continue
                for element in elements:
                    problems += _check_value(key, json.dumps(element, ensure_ascii=False), where)
            elif value.startswith("["):
                problems.append(f"{where}: {key} is not an array")
            else:
                problems += _check_value(key, value, where)
    return problems


def _expected_brackets(name: str) -> list[str]:
    sibling = LEAF_PREFIXED.get(name)
    if sibling is None:
        return name.split(".")
    parent = sibling.split(".")[:-1]
    return [*parent, name[len(".".join(parent)) + 1 :]]


def phoenix_problems(code: Code) -> list[str]:
    """Conditions Phoenix 20.26.1 cannot evaluate as written (see docs/e2e.md)."""
    problems = []
    for line in _lines(code):
        where = f"line {code.line} (phoenix) {line!r}"
        for match in _BRACKETS.finditer(line):
            keys = [k for _, k in _KEY.findall(match.group(1))]
            name = ".".join(keys)
            if keys != _expected_brackets(name):
                problems.append(f"{where}: Phoenix stores {name} at {_expected_brackets(name)}")
        dotted = _BRACKETS.sub("attributes", line)
        dotted = re.sub(r"'[^']*'", "''", dotted)
        dotted = re.sub(r"annotations\[[^\]]*\]", "annotations", dotted)
        for name, _ in names_in(dotted):
            if name not in SPAN_ATTRIBUTES:
                problems.append(f"{where}: {name} is on an event or link: Phoenix cannot filter it")
            elif name in LEAF_PREFIXED:
                problems.append(
                    f"{where}: {name} needs the bracket path {_expected_brackets(name)}"
                )
            elif any(keyword.iskeyword(part) for part in name.split(".")):
                problems.append(f"{where}: {name} has a Python keyword: use the bracket form")
        for literal, name in _MEMBER.findall(resolve_brackets(line)):
            if name in ARRAYS and not _unquote(literal)[0].startswith('"'):
                problems.append(
                    f"{where}: {literal} in {name} is a substring test on the JSON text; "
                    "quote the element"
                )
    return problems


_REST_ATTRIBUTE = re.compile(r"[?&]attribute=([^:&\s]+):([^&\s]+(?: [^&\s]+)*)")


def rest_problems(code: Code) -> list[str]:
    """``attribute=key:value`` filters Phoenix's REST API can match."""
    problems = []
    for line in _lines(code):
        where = f"line {code.line} (http) {line!r}"
        for name, literal in _REST_ATTRIBUTE.findall(line):
            if name in ARRAYS or name in LEAF_PREFIXED or name in EVENT_ATTRIBUTES:
                problems.append(f"{where}: the REST filter cannot match {name}")
            elif name not in INTS | BOOLS | NUMBERS and not literal.startswith('"'):
                problems.append(f"{where}: JSON-quote the string value of {name}")
    return problems


def missing_queries(codes: list[Code]) -> list[str]:
    """Output names with no query for one of the three backends."""
    seen: dict[str, set[str]] = {backend: set() for backend in BACKENDS}
    for code in codes:
        for backend, infos in BACKENDS.items():
            if code.info in infos:
                seen[backend] |= {name for name, glob in names_in(code.text) if not glob}
    return [
        f"{name}: no {backend} query"
        for name in sorted(OUTPUT)
        for backend in BACKENDS
        if name not in seen[backend]
    ]


CHECKS: dict[str, Callable[[Code], list[str]]] = {
    "traceql": traceql_problems,
    "jaeger": jaeger_problems,
    "phoenix": phoenix_problems,
    "http": rest_problems,
}


def problems_of(markdown: str) -> list[str]:
    """Everything wrong with a cookbook text (empty when it is right)."""
    codes = code_of(markdown)
    problems: list[str] = []
    for code in codes:
        problems += unknown_names(code)
        problems += value_problems(code)
        check = CHECKS.get(code.info)
        if check is not None:
            problems += check(code)
    return problems


# ── the tests ────────────────────────────────────────────────────────────────────────────────


def test_the_doc_uses_only_semconv_names_and_valid_values() -> None:
    problems = problems_of(DOC.read_text(encoding="utf-8"))
    assert problems == [], "\n".join(problems)


def test_every_output_name_has_a_query_in_each_backend() -> None:
    missing = missing_queries(code_of(DOC.read_text(encoding="utf-8")))
    assert missing == [], "\n".join(missing)


def test_the_doc_has_queries_for_all_three_backends() -> None:
    infos = [c.info for c in code_of(DOC.read_text(encoding="utf-8"))]
    for info in ("jaeger", "traceql", "phoenix", "http", "python"):
        assert infos.count(info) >= 3, info


def test_python_blocks_compile() -> None:
    for code in code_of(DOC.read_text(encoding="utf-8")):
        if code.info == "python":
            compile(code.text, f"docs/queries.md:{code.line}", "exec")


def test_the_output_set_is_the_contract() -> None:
    # A guard on this test itself: the contract names of architecture.md are all required.
    for name in (
        sc.ENG_PARKED_MAPS,
        sc.ENG_SERVED_WHILE_PARKED,
        sc.ENG_MISMATCH,
        sc.EV_ENGAGEMENT_PARKED,
        sc.CH_IDLE_CALLS,
        sc.RUN_MODE,
        sc.CHECK_DECIDED_DELIVERED_OUTCOME,
        sc.SUMMARY_TONE,
        sc.EV_EVALUATION_RESULT,
        sc.EVAL_EXPLANATION,
        sc.EV_ACCOUNT_LINE,
        sc.LINK_EVIDENCE,
    ):
        assert name in OUTPUT
    assert sc.METRIC_PROCESSOR_SPANS not in OUTPUT
    assert LEAF_PREFIXED == {
        sc.CHECK_DECIDED_DELIVERED_OUTCOME: sc.CHECK_DECIDED_DELIVERED,
        sc.SUMMARY_TONE: sc.SUMMARY,
    }
    assert {"reachable", "unreachable", "not-applicable"} == CHECK_STATES
    assert VOCABULARY[sc.CHECK_DECIDED_DELIVERED_OUTCOME] == {"delivered", "not-delivered"}
    assert VOCABULARY[sc.EVAL_SCORE_LABEL] == {"pass", "fail", "unknown"}
    assert VOCABULARY[sc.RUN_MODE] == {"verify", "shadow"}


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, tuple | list):
        return "array"
    return "string"


def test_declared_types_match_what_the_writer_writes() -> None:
    """The type tables above agree with the annotations the real processor writes."""
    memory = InMemorySpanExporter()
    processor = FootprintSpanProcessor(memory, grace_seconds=0.05)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        run_scenarios(provider.get_tracer("docs"))
        assert processor.force_flush(30_000)
    finally:
        provider.shutdown()
    observed: dict[str, set[str]] = {}
    for span in memory.get_finished_spans():
        items = list((span.attributes or {}).items())
        items += [kv for e in span.events for kv in (e.attributes or {}).items()]
        items += [kv for link in span.links for kv in (link.attributes or {}).items()]
        for key, value in items:
            if key in OUTPUT:
                observed.setdefault(key, set()).add(_kind(value))
    assert len(observed) >= 30, sorted(observed)
    for name, kinds in observed.items():
        declared = (
            "array"
            if name in ARRAYS
            else "int"
            if name in INTS
            else "bool"
            if name in BOOLS
            else "number"
            if name in NUMBERS
            else "string"
        )
        assert kinds == {declared}, f"{name}: written as {kinds}, declared {declared}"


# The checker itself must catch each kind of mistake (otherwise a clean doc proves nothing).
BAD_SNIPPETS = [
    ("`footprint.run.nonexistent`", "footprint.run.nonexistent"),
    ('```traceql\n{ span.footprint.check.decided_delivered = "delivered" }\n```', "vocabulary"),
    ("```jaeger\nfootprint.check.decided_delivered.outcome=delivred\n```", "vocabulary"),
    ("```phoenix\nfootprint.run.mode == 'shadwo'\n```", "vocabulary"),
    ("```phoenix\n'\"bogus-signal\"' in footprint.signals\n```", "vocabulary"),
    ("```phoenix\nfootprint.run.passes == '30'\n```", "is an int"),
    ("```jaeger\nfootprint.run.complete=yes\n```", "is a bool"),
    ("```phoenix\nannotations['footprint.checked'].label == 'fail'\n```", "evaluation name"),
    ("```phoenix\nannotations['footprint.existence'].label == 'ok'\n```", "vocabulary"),
    (
        '```traceql\n{ event:name = "footprint.engagement.parkd" }\n```',
        "footprint.engagement.parkd",
    ),
    ("```traceql\n{ span.footprint.engagement.idle_calls = 3 }\n```", "needs event."),
    ('```traceql\n{ footprint.run.mode = "shadow" }\n```', "no scope"),
    ("```jaeger\nfootprint.engagement.parked_maps=skill-map\n```", "is an array"),
    ('```jaeger\nfootprint.engagement.parked_maps=["skill-map"]\n```', "escape the JSON quotes"),
    ('```jaeger\nfootprint.signals=[\\"bogus\\"]\n```', "vocabulary"),
    ("```jaeger\nfootprint.engagement.parked=1\n```", "event name"),
    ("```phoenix\nfootprint.pass.iteration == 4\n```", "Python keyword"),
    ("```phoenix\nfootprint.summary.tone == 'bad'\n```", "bracket path"),
    ("```phoenix\nattributes['footprint']['summary']['tone'] == 'bad'\n```", "stores"),
    ("```phoenix\nfootprint.engagement.idle_calls > 2\n```", "cannot filter"),
    ("```phoenix\n'skill' in footprint.engagement.parked_maps\n```", "substring"),
    ('```http\nGET /v1/projects/p/spans?attribute=footprint.signals:"x"\n```', "cannot match"),
    ("```http\nGET /v1/projects/p/spans?attribute=footprint.run.mode:shadow\n```", "JSON-quote"),
    ('```traceql\n{ span.footprint.line.row = "asked" }\n```', "needs event."),
]


@pytest.mark.parametrize(("snippet", "expected"), BAD_SNIPPETS)
def test_the_checker_catches(snippet: str, expected: str) -> None:
    problems = problems_of(snippet)
    assert any(expected in p for p in problems), problems


def test_the_checker_reports_missing_backends() -> None:
    text = '```traceql\n{ span.footprint.run.mode = "shadow" }\n```\n'
    missing = missing_queries(code_of(text))
    assert f"{sc.RUN_MODE}: no Jaeger query" in missing
    assert f"{sc.RUN_MODE}: no Phoenix query" in missing
    assert f"{sc.RUN_MODE}: no Tempo query" not in missing
    assert f"{sc.SIGNALS}: no Tempo query" in missing
