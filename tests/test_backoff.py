"""The laws of the senders' one backoff policy (otel_footprint/annotate/backoff.py).

Every background sender (the hop's forwarder, both Phoenix posters) waits by this policy, so its
laws are the senders' laws: the base delay climbs from ``initial`` to ``maximum`` and never falls,
jitter stays within its fraction, and a server hint is a floor capped at 60 s.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_footprint.annotate.backoff import HINT_CAP, Backoff
from otel_footprint.annotate.phoenix import post_annotations

_EPS = 1e-9

intervals = st.tuples(
    st.floats(min_value=0.001, max_value=30.0), st.floats(min_value=1.0, max_value=1000.0)
).map(lambda t: (t[0], max(t[0], t[1])))
attempts = st.integers(min_value=0, max_value=200)
jitters = st.sampled_from([0.0, 0.1, 0.2, 0.5])
hints = st.none() | st.floats(min_value=0.0, max_value=10_000.0)


@given(intervals, attempts, jitters, st.integers(min_value=0, max_value=2**32))
def test_delay_within_initial_and_maximum_times_jitter(
    bounds: tuple[float, float], attempt: int, jitter: float, seed: int
) -> None:
    initial, maximum = bounds
    policy = Backoff(initial, maximum, jitter=jitter)
    delay = policy.delay(attempt, uniform=random.Random(seed).uniform)
    assert initial * (1 - jitter) - _EPS <= delay <= maximum * (1 + jitter) + _EPS


@given(intervals, attempts)
def test_base_is_monotone_and_bounded(bounds: tuple[float, float], attempt: int) -> None:
    initial, maximum = bounds
    policy = Backoff(initial, maximum, jitter=0.2)
    assert policy.base(0) == initial
    assert initial <= policy.base(attempt) <= policy.base(attempt + 1) <= maximum
    # Doubling until the cap: each step is twice the last or the cap itself.
    assert policy.base(attempt + 1) in (maximum, policy.base(attempt) * 2)


@given(intervals, attempts, jitters, hints, st.integers(min_value=0, max_value=2**32))
def test_hint_is_a_floor_capped_at_60s(
    bounds: tuple[float, float], attempt: int, jitter: float, hint: float | None, seed: int
) -> None:
    initial, maximum = bounds
    policy = Backoff(initial, maximum, jitter=jitter)
    without = policy.delay(attempt, uniform=random.Random(seed).uniform)
    with_hint = policy.delay(attempt, hint, uniform=random.Random(seed).uniform)
    if hint is None:
        assert with_hint == without
    else:
        assert with_hint == max(without, min(hint, HINT_CAP))
        assert with_hint >= min(hint, HINT_CAP)
        # A hint past the cap never lengthens the wait beyond the cap or the policy's own delay.
        assert with_hint <= max(without, HINT_CAP)


@given(st.floats(min_value=0.0, max_value=5.0), st.integers(min_value=1, max_value=12))
def test_bounded_sender_waits_max_attempts_minus_one_doubling_times(
    initial: float, max_attempts: int
) -> None:
    waits = list(Backoff(initial, max_attempts=max_attempts).delays())
    assert waits == [initial * 2**k for k in range(max_attempts - 1)]


def test_bad_bounds_are_refused() -> None:
    for kwargs in (
        {"initial": -1.0},
        {"initial": 2.0, "maximum": 1.0},
        {"initial": 1.0, "jitter": 1.0},
        {"initial": 1.0, "max_attempts": 0},
    ):
        with pytest.raises(ValueError):
            Backoff(**kwargs)  # type: ignore[arg-type]
    assert Backoff(1.0).maximum == math.inf


def test_phoenix_poster_sleeps_by_the_policy() -> None:
    """Nothing listens on the port: every try fails (retryable), and the waits are the policy's."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    slept: list[float] = []
    result = post_annotations(
        f"http://127.0.0.1:{port}",
        [{"span_id": "00" * 8, "name": "footprint.x"}],
        max_attempts=4,
        retry_delay=0.25,
        timeout=1.0,
        sleep=slept.append,
    )
    assert (result.posted, result.failed) == (0, 1)
    assert slept == list(Backoff(0.25, max_attempts=4).delays()) == [0.25, 0.5, 1.0]


def test_forwarder_backs_off_by_the_policy_from_its_settings(tmp_path: Path) -> None:
    from otel_footprint.service import config as c
    from otel_footprint.service.forward import FORWARD_JITTER, Forwarder
    from otel_footprint.service.journal import Journal
    from otel_footprint.service.metrics import HopMetrics

    cfg = c.load(
        None,
        c.flag_layer(
            forward="127.0.0.1:1",
            sets=[
                "exporters.otlp.retry.initial_interval=250ms",
                "exporters.otlp.retry.max_interval=3s",
            ],
        ),
        {"XDG_STATE_HOME": str(tmp_path / "state")},
    ).exporter
    journal = Journal(tmp_path / "queue")
    forwarder = Forwarder(cfg, journal, HopMetrics())
    try:
        assert forwarder.backoff == Backoff(0.25, 3.0, jitter=FORWARD_JITTER)
        assert FORWARD_JITTER == 0.2
        assert [forwarder.backoff.base(k) for k in range(6)] == [0.25, 0.5, 1.0, 2.0, 3.0, 3.0]
        assert forwarder.backoff.delay(0, hint=120.0) == HINT_CAP
    finally:
        forwarder.sender.close()
        journal.close()
