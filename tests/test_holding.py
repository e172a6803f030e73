"""The run-holding core in isolation (ints for ids, strings for items, times passed in)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_footprint.runs.holding import HoldLimits, Release, RunHolding, reason_for
from otel_footprint.runs.recognize import SpanRole


@dataclass(frozen=True)
class Item:
    name: str
    parent_id: int = 0
    runish: bool = True
    size: int = 100


Core = RunHolding[int, Item, str]


def hold(
    core: Core, trace: int, span: int, parent: int, role: SpanRole, client: str | None = None
) -> list[Release[int, Item, str]]:
    releases: list[Release[int, Item, str]] = []
    item = Item(f"{trace}/{span}", parent)
    core.hold(trace, span, role, item, now=0.0, client=client, releases=releases)
    core.enforce(releases)
    return releases


def test_one_flooding_client_evicts_its_own_traces_not_the_others() -> None:
    core: Core = RunHolding(HoldLimits(max_runs=50))
    for trace in range(1, 6):
        assert hold(core, trace, 1, 0, SpanRole.RUN, client="quiet") == []
    evicted: list[Release[int, Item, str]] = []
    for trace in range(100, 10_100):  # one request's worth of one-span agent traces
        evicted += hold(core, trace, 1, 5, SpanRole.PASS, client="flood")
    assert evicted and all(r.trace_id >= 100 for r in evicted)
    assert all((r.cause, r.limit) == ("overflow", "runs") for r in evicted)
    assert all(core.is_held(trace) for trace in range(1, 6))


def test_room_says_full_before_a_limit_releases_anything() -> None:
    core: Core = RunHolding(HoldLimits(max_runs=10, max_bytes=10_000))
    for trace in range(1, 9):
        assert core.room()
        assert hold(core, trace, 1, 0, SpanRole.RUN) == []
    assert core.room()
    assert hold(core, 9, 1, 0, SpanRole.RUN) == []
    assert not core.room()  # 9 of 10 runs held: new input is refused, nothing was shed


def test_runs_released_but_not_yet_written_count_against_max_bytes() -> None:
    """Issue 13 (defect 4): released runs the adapter still holds in memory (deciding, writing
    out) are memory too: back-pressure answers before they and the held runs pass the bound."""
    core: Core = RunHolding(HoldLimits(max_bytes=10_000))
    for trace in range(1, 50):
        assert hold(core, trace, 1, 0, SpanRole.RUN) == []
    assert core.bytes_held == 4_900 and core.room()
    core.releasing_bytes = 4_100  # e.g. a poll handed the worker this much to decide
    assert not core.room()
    core.releasing_bytes = 0
    assert core.room()


def test_what_the_adapter_keeps_outside_the_buffer_counts_against_max_bytes() -> None:
    """Issue 13 (defect 4): batches waiting for the forwarder and recent accounts are memory too
    (the adapter says how much, :attr:`RunHolding.outside_bytes`): they push back with the runs
    held and releasing, and the decision cache yields to them."""
    # The cache's own share as large as the limit: here it yields to what the runs leave.
    core: Core = RunHolding(HoldLimits(max_bytes=10_000, cache_bytes=10_000, release_grace=0.0))
    outside = [0]
    core.outside_bytes = lambda: outside[0]
    for trace in range(1, 41):
        assert hold(core, trace, 1, 0, SpanRole.RUN) == []
    core.releasing_bytes = 1_000
    assert core.used_bytes() == 5_000 and core.room()
    outside[0] = 4_000  # e.g. the journal's outbound batches in memory
    assert core.used_bytes() == 9_000 and not core.room()
    outside[0] = 3_000
    assert core.room()
    assert len(core.poll(1.0)) == 40 and core.bytes_held == 0
    core.remember(1, {1: "note"}, size=5_000)  # within the 10,000 - 1,000 - 3,000 left
    assert core.knows(1) and core.cache_bytes == 5_000
    outside[0] = 4_500
    core.remember(2, {1: "note"}, size=0)  # the cache is trimmed on its next use
    assert not core.knows(1) and core.cache_bytes == 0


def test_the_decision_cache_yields_to_held_runs_within_max_bytes() -> None:
    """Issue 13 (defect 4): remembered notes are memory max_bytes bounds; the cache keeps only
    what held and releasing runs leave of it (oldest decided trace first), never refusing input."""
    core: Core = RunHolding(HoldLimits(max_bytes=10_000, cache_bytes=10_000, release_grace=0.0))
    for trace in range(1, 11):
        hold(core, trace, 1, 0, SpanRole.RUN)
        assert [r.trace_id for r in core.poll(1.0)] == [trace]
        core.remember(trace, {1: "note"}, size=1_000)
    assert core.cached_traces() == 10 and core.cache_bytes == 10_000
    assert core.room()  # the cache never causes back-pressure
    for trace in range(100, 130):  # 3,000 bytes of held runs: 3 cached traces must go
        hold(core, trace, 1, 0, SpanRole.PASS)
    assert core.bytes_held == 3_000
    assert core.cached_traces() == 7 and core.cache_bytes == 7_000
    assert not core.knows(1) and not core.knows(3) and core.knows(4)
    core.releasing_bytes = 2_000
    core.enforce([])
    assert core.cache_bytes <= 10_000 - 3_000 - 2_000


def test_the_decision_cache_keeps_to_its_own_share_of_max_bytes() -> None:
    """Issue 13: the cache has its own byte share of the one limit (an eighth unless set), so a
    cache filling what idle runs leave cannot take the process past the bound when they return."""
    assert HoldLimits(max_bytes=80_000).cache_budget == 10_000
    assert HoldLimits(max_bytes=80_000, cache_bytes=3_000).cache_budget == 3_000
    core: Core = RunHolding(HoldLimits(max_bytes=80_000, release_grace=0.0))
    for trace in range(1, 31):
        hold(core, trace, 1, 0, SpanRole.RUN)
        assert [r.trace_id for r in core.poll(1.0)] == [trace]
        core.remember(trace, {1: "note"}, size=1_000)
    assert core.bytes_held == 0  # nothing held: the room left is the whole limit, yet
    assert core.cached_traces() == 10 and core.cache_bytes == 10_000
    assert core.knows(30) and core.knows(21) and not core.knows(20)  # oldest first
    core.shrink_cache(2_500)
    assert core.cached_traces() == 2 and core.knows(30) and core.knows(29)
    with pytest.raises(ValueError, match="cache_bytes must be >= 0"):
        HoldLimits(cache_bytes=-1)


def test_an_unbounded_restore_releases_recovered_runs_when_due_not_as_overflow() -> None:
    core: Core = RunHolding(HoldLimits(max_runs=2, release_grace=1.0))
    core.bounded = False
    for trace in range(1, 6):
        assert hold(core, trace, 1, 0, SpanRole.RUN) == []
        assert hold(core, trace, 2, 1, SpanRole.PASS) == []
    core.bounded = True
    assert core.runs_held == 5 and not core.room()
    released = core.poll(1.0)
    assert sorted(r.trace_id for r in released) == [1, 2, 3, 4, 5]
    assert {r.cause for r in released} == {"ended"}


def test_a_started_run_groups_its_children_and_waits_for_its_end() -> None:
    core: Core = RunHolding(HoldLimits(release_grace=1.0, max_wait=100.0))
    core.run_started(7, 1, 0.0, [])
    assert hold(core, 7, 2, 1, SpanRole.PASS) == []
    assert core.poll(50.0) == []  # the run span has not ended
    core.hold(7, 1, SpanRole.RUN, Item("7/1"), now=60.0, releases=[])
    (release,) = core.poll(61.0)
    (unit,) = release.units
    assert unit.run_span == Item("7/1") and sorted(m.name for m in unit.members) == ["7/1", "7/2"]
    assert core.route(7, 3, 1, False) == "late"


def test_limits_name_the_bad_setting() -> None:
    with pytest.raises(ValueError, match="max_runs must be >= 1"):
        HoldLimits(max_runs=0)
    with pytest.raises(ValueError, match="max_wait must be > 0"):
        HoldLimits(max_wait=0)


def test_one_reason_table() -> None:
    assert reason_for("ended", None, run_span=True) is None
    assert reason_for("root", None, run_span=True) is None
    root = reason_for("root", None, run_span=False)
    assert root is not None and root.code == "missing-spans"
    overflow = reason_for("overflow", "bytes", run_span=True)
    assert overflow is not None and overflow.code == "overflow" and "bytes" in overflow.message


def test_the_shared_empty_map_is_never_written() -> None:
    from otel_footprint.runs import holding

    core: Core = RunHolding(HoldLimits(release_grace=1.0, max_runs=3))
    for trace in range(1, 8):
        hold(core, trace, 1, 0, SpanRole.RUN)
        hold(core, trace, 2, 1, SpanRole.PASS)
        core.hold_event(trace, 2, "event", size=5, now=0.0, releases=[])
    for release in core.poll(2.0):
        core.remember(release.trace_id, {2: "note"})
    assert core.route(5, 3, 2, False) == "late"
    core.release_everything(3.0)
    assert holding._EMPTY == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=120))
def test_a_limit_releases_the_oldest_trace_of_the_client_holding_the_most(
    steps: list[tuple[int, bool]],
) -> None:
    """The victim law, against a plain model of who holds what (the core finds it in O(1))."""
    core: Core = RunHolding(HoldLimits(max_runs=8, release_grace=0.5, max_wait=1e9))
    held: dict[str, list[int]] = {}  # the model: each client's held traces, oldest first
    for trace, (client_no, finish) in enumerate(steps, start=1):
        client = f"c{client_no}"
        if finish and held.get(client):
            # A root span ends the client's oldest trace: released as due, not by a limit.
            done = held[client].pop(0)
            hold(core, done, 99, 0, SpanRole.PASS, client=client)
            assert [r.trace_id for r in core.poll(10.0 * trace)] == [done]
        counts = {c: len(ts) for c, ts in held.items() if ts}
        full = sum(counts.values()) >= 8
        released = hold(core, trace, 1, 5, SpanRole.PASS, client=client)
        if full:
            (release,) = released
            owner = next(c for c, ts in held.items() if release.trace_id in ts)
            assert counts[owner] == max(counts.values())
            assert release.trace_id == held[owner][0]
            held[owner].pop(0)
        else:
            assert released == []
        held.setdefault(client, []).append(trace)
    assert core.runs_held == sum(len(ts) for ts in held.values())
