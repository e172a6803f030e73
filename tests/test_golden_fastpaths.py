"""The decision path's indexed look-ups give exactly the answers of the plain scans they replace.

``latest_batch`` (binary search over the iterations that dispatched tools) and the pass of a tool
span without an iteration (binary search over the passes' start times) were scans of every batch /
every pass on every pass: quadratic in a long run. Here each is checked against the scan, as a law.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from otel_footprint.runs.passes import Batch, Batches, _PassStarts, latest_batch


def _scan_latest(batches: dict[int, Batch], before: int) -> Batch | None:
    candidates = [it for it, batch in batches.items() if it < before and batch.tool_names]
    return batches[max(candidates)] if candidates else None


@given(
    st.dictionaries(st.integers(-3, 40), st.booleans(), max_size=25),
    st.integers(-5, 45),
)
def test_latest_batch_is_the_scan(asked: dict[int, bool], before: int) -> None:
    plain = {
        it: Batch(it, ("t",) if has_tools else (), (), None) for it, has_tools in asked.items()
    }
    assert latest_batch(Batches(plain), before) == _scan_latest(plain, before)
    assert latest_batch(plain, before) == _scan_latest(plain, before)


@dataclass(frozen=True)
class _View:
    span_id: str
    start_time_unix_nano: int


def _scan_pass(views: list[_View], iterations: dict[str, int], start: int) -> int | None:
    best: tuple[int, int] | None = None
    for view in views:
        if view.start_time_unix_nano <= start:
            key = (view.start_time_unix_nano, iterations[view.span_id])
            if best is None or key > best:
                best = key
    return best[1] if best is not None else None


@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 20)), max_size=30),
    st.lists(st.integers(-2, 32), min_size=1, max_size=10),
)
def test_pass_of_a_tool_span_is_the_scan(passes: list[tuple[int, int]], tools: list[int]) -> None:
    views = [_View(f"s{n}", start) for n, (start, _) in enumerate(passes)]
    iterations = {f"s{n}": iteration for n, (_, iteration) in enumerate(passes)}
    index = _PassStarts(views, iterations)  # type: ignore[arg-type]
    for start in tools:
        assert index.latest_at_or_before(start) == _scan_pass(views, iterations, start)
