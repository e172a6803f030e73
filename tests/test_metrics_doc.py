"""docs/metrics.md's PromQL is real PromQL and answers on the live series what the page says.

Every ``promql`` line and every alert ``expr`` parses with ``promql-parser`` (broken controls must
not), names only series and labels a real ``serve`` exposes on ``/metrics``, and, evaluated on the
scrape of a ``serve`` that decided the demo's five runs, gives the answers the page states. The
evaluator knows the few forms the page uses: selectors with matchers, ``increase`` / ``rate`` over a
window (one scrape: the hop's whole life fits in the window, so ``increase`` is the counter's
value), ``sum by``, and arithmetic or comparison with a number or a vector of the same labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from otel_footprint import semconv as sc
from tests.hop_demo import SHADOW_RIDING_CHARS, demo_hop
from tests.servers import HopProcess
from tests.test_service_support import Sink

promql_parser = pytest.importorskip("promql_parser", reason="pip install promql-parser (dev)")

DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
AGENT = "ops-assistant"
NOT_ON_THE_DEMO = {
    "footprint_verdict_integrity_findings_total",
    "footprint_verdict_names_folded_total",
}

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]


COLLECTOR_WAY = "## The Collector way"


def _blocks(info: str, collector: bool = False) -> list[str]:
    hop, _, collector_way = DOC.read_text().partition(COLLECTOR_WAY)
    return re.findall(rf"```{info}\n(.*?)```", collector_way if collector else hop, re.S)


def promql_lines(collector: bool = False) -> list[str]:
    """The queries over the hop's series (or, ``collector``, over the Collector recipe's)."""
    blocks = _blocks("promql", collector)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def alert_rules() -> list[dict[str, Any]]:
    (block,) = _blocks("yaml")
    return [rule for group in yaml.safe_load(block)["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Vector]]:
    sink = Sink().start()
    hop: HopProcess = demo_hop(tmp_path_factory.mktemp("metrics-doc") / "data", sink.endpoint)
    try:
        import urllib.request

        with urllib.request.urlopen(f"http://{hop.telemetry}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        hop.kill()
        sink.stop()
    series: dict[str, Vector] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    yield series


# ── the evaluator ─────────────────────────────────────────────────────────────────────────────


def _selector(node: Any, series: dict[str, Vector]) -> Vector:
    out: Vector = {}
    for labels, value in series.get(node.name, {}).items():
        as_dict = dict(labels)
        keep = True
        for m in node.matchers.matchers:
            have, op = as_dict.get(m.name, ""), str(m.op)
            if op == "MatchOp.Equal":
                keep &= have == m.value
            elif op == "MatchOp.NotEqual":
                keep &= have != m.value
            elif op == "MatchOp.Re":
                keep &= re.fullmatch(m.value, have) is not None
            elif op == "MatchOp.NotRe":
                keep &= re.fullmatch(m.value, have) is None
            else:
                raise NotImplementedError(op)
        if keep:
            out[labels] = value
    return out


def evaluate(node: Any, series: dict[str, Vector]) -> Vector | float:
    kind = type(node).__name__
    if kind == "NumberLiteral":
        return float(node.val)
    if kind == "ParenExpr":
        return evaluate(node.expr, series)
    if kind == "VectorSelector":
        return _selector(node, series)
    if kind == "Call" and node.func.name in ("increase", "rate"):
        (matrix,) = node.args
        window = matrix.range.total_seconds()
        vector = _selector(matrix.vector_selector, series)
        per = 1.0 if node.func.name == "increase" else window
        return {labels: value / per for labels, value in vector.items()}
    if kind == "AggregateExpr" and str(node.op) == "sum":
        inner = evaluate(node.expr, series)
        assert isinstance(inner, dict)
        keep = set(node.modifier.labels) if node.modifier is not None else set()
        assert node.modifier is None or str(node.modifier.type).endswith("By")
        grouped: Vector = {}
        for labels, value in inner.items():
            key = frozenset((k, v) for k, v in labels if k in keep)
            grouped[key] = grouped.get(key, 0.0) + value
        return grouped
    if kind == "BinaryExpr":
        return _binary(str(node.op), evaluate(node.lhs, series), evaluate(node.rhs, series))
    raise NotImplementedError(kind)


_OPS = {
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _binary(op: str, lhs: Vector | float, rhs: Vector | float) -> Vector:
    if op in _OPS:  # a filter: the vector's samples for which the comparison holds
        assert isinstance(lhs, dict) and isinstance(rhs, float)
        return {k: v for k, v in lhs.items() if _OPS[op](v, rhs)}
    assert op == "/" and isinstance(lhs, dict) and isinstance(rhs, dict)
    return {k: v / rhs[k] for k, v in lhs.items() if rhs.get(k)}


def _run(query: str, series: dict[str, Vector]) -> dict[tuple[str, ...], float]:
    result = evaluate(promql_parser.parse(query), series)
    assert isinstance(result, dict)
    return {tuple(v for _, v in sorted(labels)): value for labels, value in result.items()}


# ── the tests ─────────────────────────────────────────────────────────────────────────────────


def test_every_query_and_alert_expression_parses() -> None:
    queries = promql_lines() + promql_lines(collector=True)
    queries += [rule["expr"] for rule in alert_rules()]
    assert len(queries) >= 10
    for query in queries:
        promql_parser.parse(query)


@pytest.mark.parametrize(
    "broken",
    [
        "sum by (gen_ai_agent_name) (increase(footprint_verdict_runs_total[1h])",
        'footprint_verdict_runs_total{gen_ai_agent_name="a"',
        "increase(footprint_verdict_runs_total[1 hour])",
        "sum by gen_ai_agent_name (footprint_verdict_runs_total)",
    ],
)
def test_broken_controls_do_not_parse(broken: str) -> None:
    with pytest.raises(ValueError):
        promql_parser.parse(broken)


def _selectors(node: Any) -> Iterator[Any]:
    kind = type(node).__name__
    if kind == "VectorSelector":
        yield node
    elif kind == "MatrixSelector":
        yield node.vector_selector
    for child in ("expr", "lhs", "rhs"):
        if hasattr(node, child) and getattr(node, child) is not None:
            yield from _selectors(getattr(node, child))
    for arg in getattr(node, "args", None) or ():
        yield from _selectors(arg)


def _exposed(metric: sc.Metric) -> tuple[str, set[str]]:
    """A row's Prometheus name and labels (the OpenTelemetry exporter's rule: dots become
    underscores, a counter gains ``_total``)."""
    name = metric.name.replace(".", "_") + ("_total" if metric.kind == "counter" else "")
    return name, {key.replace(".", "_") for key in metric.attributes}


def test_every_series_and_label_is_a_verdict_row_and_live_on_a_hop(
    samples: dict[str, Vector],
) -> None:
    rows = dict(_exposed(m) for m in sc.VERDICT_METRICS)
    # Labelled counters appear once counted: the demo counts runs and riding, no finding or fold.
    for name in rows:
        live = name in samples
        assert live == (name not in NOT_ON_THE_DEMO), name
        for labels in samples.get(name, {}):
            assert {k for k, _ in labels} == rows[name], name
    queries = promql_lines() + [rule["expr"] for rule in alert_rules()]
    for query in queries:
        node = promql_parser.parse(query)
        names = {selector.name for selector in _selectors(node)}
        for selector in _selectors(node):
            assert selector.name in rows, f"{query}: {selector.name} is no verdict series"
            for matcher in selector.matchers.matchers:
                assert matcher.name in rows[selector.name], (query, matcher.name)
        for by in re.findall(r"by \(([^)]*)\)", query):
            for label in (x.strip() for x in by.split(",")):
                assert any(label in rows[n] for n in names), (query, label)


def test_the_queries_answer_what_the_page_says_on_the_demo(samples: dict[str, Vector]) -> None:
    q = promql_lines()
    failing, share, chars, calls, tones, integrity = q
    assert _run(failing, samples) == {(AGENT,): 1.0}
    assert _run(share, samples) == {(AGENT,): 0.2}
    assert _run(chars, samples) == {("skill-map", AGENT): SHADOW_RIDING_CHARS}
    assert _run(calls, samples) == {("skill-map", AGENT): 27.0}
    assert _run(tones, samples) == {
        ("ok", AGENT): 1.0,  # labels in name order: footprint_summary_tone, gen_ai_agent_name
        ("warn", AGENT): 1.0,
        ("bad", AGENT): 1.0,
        ("unknown", AGENT): 2.0,
    }
    assert _run(integrity, samples) == {}


def test_the_alerts_that_fire_on_the_demo(samples: dict[str, Vector]) -> None:
    firing = {rule["alert"]: _run(rule["expr"], samples) for rule in alert_rules()}
    assert firing == {
        "FootprintCheck1Failing": {(AGENT,): 1.0},
        "FootprintParkedSkillsRiding": {("skill-map", AGENT): SHADOW_RIDING_CHARS},
        "FootprintIntegrityContradiction": {},
        "FootprintVerdictNamesFolded": {},
    }
