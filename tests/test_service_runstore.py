"""Run stores on real backends: SQLite in tmp, and Redis when a redis-server binary is installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import free_ports, redis_server

from otel_footprint.service.runstore import RedisRunStore, SqliteRunStore


def test_sqlite_store_keeps_values_across_reopen(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.sqlite")
    assert store.get("run-1") is None
    store.put("run-1", b"\x00leg-state")
    store.put("run-1", b"newer")
    store.close()
    again = SqliteRunStore(tmp_path / "runs.sqlite")
    assert again.get("run-1") == b"newer"
    assert again.keys() == ["run-1"]
    again.close()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, url = redis_server(tmp_path_factory.mktemp("redis"), password="pw")
    yield url
    process.stop()


def test_redis_store_is_shared_between_instances(redis_url: str) -> None:
    a = RedisRunStore(redis_url, key_prefix="t:")
    b = RedisRunStore(redis_url, key_prefix="t:")
    value = bytes(range(256)) * 4  # binary-safe
    a.put("run-9", value)
    assert b.get("run-9") == value
    assert b.get("missing") is None
    other_prefix = RedisRunStore(redis_url, key_prefix="u:")
    assert other_prefix.get("run-9") is None
    for store in (a, b, other_prefix):
        store.close()


def test_an_unreachable_redis_degrades_to_no_state() -> None:
    port = free_ports(1)[0]
    store = RedisRunStore(f"redis://127.0.0.1:{port}/0", timeout=0.5)
    store.put("run", b"x")  # logged, not raised: the run is still decided
    assert store.get("run") is None


def test_a_ttl_is_set_and_an_acl_user_url_is_read(redis_url: str) -> None:
    import redis

    store = RedisRunStore(redis_url, key_prefix="ttl:", ttl=60)
    store.put("run-1", b"v")
    raw = redis.Redis.from_url(redis_url)
    assert 0 < raw.ttl("ttl:run-1") <= 60
    raw.close()
    store.close()
    # The default user named explicitly (redis://default:pw@...) is the same account.
    named = RedisRunStore(redis_url.replace("://:pw@", "://default:pw@"), key_prefix="ttl:")
    assert named.get("run-1") == b"v"
    named.close()


def test_a_wrong_password_is_reported_as_no_state(redis_url: str) -> None:
    bad = RedisRunStore(redis_url.replace(":pw@", ":nope@"))
    assert bad.get("run-9") is None
    with pytest.raises(ValueError):
        RedisRunStore("http://not-redis:1")


def test_a_resumed_leg_on_another_hop_reads_the_shared_store(
    redis_url: str, tmp_path: Path
) -> None:
    """Scale-out: leg 1 decided by hop A, leg 2 (a new trace) by hop B, one Redis between them."""
    from test_service_support import HopProcess, Sink, attrs, emit_run, sdk_client

    from otel_footprint import semconv

    sink = Sink().start()
    shared = (
        "--set",
        "processing.run_store.kind=redis",
        "--set",
        f"processing.run_store.url={redis_url}",
        "--set",
        "processing.release_grace=200ms",
    )
    hop_a = HopProcess(tmp_path / "a", sink.endpoint, *shared).start()
    hop_b = HopProcess(tmp_path / "b", sink.endpoint, *shared).start()
    try:
        client_a, client_b = sdk_client(hop_a.grpc), sdk_client(hop_b.grpc)

        def annotated(span_id: str) -> dict[str, object]:
            assert sink.wait_for(
                lambda: any(
                    s.span_id.hex() == span_id and semconv.RUN_COMPLETE in attrs(s)
                    for s in sink.spans()
                ),
                15,
            )
            return next(attrs(s) for s in sink.spans() if s.span_id.hex() == span_id)

        _, leg1 = emit_run(
            client_a.tracer, "paused-run", passes=2, run_events=[semconv.EV_PAUSE_REQUEST]
        )
        client_a.flush()
        # Leg 2 is sent only once hop A has decided leg 1 (and so written its state to Redis): a
        # resumed leg that overtakes its earlier leg is a different case (no-prior-leg).
        annotated(leg1)
        _, leg2 = emit_run(
            client_b.tracer,
            "paused-run",
            passes=1,
            mounted=False,
            run_events=[semconv.EV_PAUSE_RESUME],
            first_iteration=3,
        )
        _, stray = emit_run(
            client_b.tracer,
            "never-seen",
            passes=1,
            mounted=False,
            run_events=[semconv.EV_PAUSE_RESUME],
            first_iteration=3,
        )
        client_b.flush()

        resumed = annotated(leg2)
        assert resumed[semconv.RUN_RESUMED] is True
        assert "no-prior-leg" not in resumed.get(semconv.RUN_REASONS, ())
        # The plan (maps.mounted) exists only in leg 1: hop B got it through Redis.
        assert resumed[semconv.RUN_MODE] == semconv.MODE_SHADOW
        control = annotated(stray)
        # Without an earlier leg in the store there is no plan to decide with.
        assert semconv.RUN_MODE not in control
        assert control[semconv.RUN_REASONS]
        client_a.shutdown()
        client_b.shutdown()
    finally:
        assert hop_a.terminate() == 0, hop_a.stderr()
        assert hop_b.terminate() == 0, hop_b.stderr()
        sink.stop()


def test_sqlite_store_writes_behind_until_flush_and_reads_its_own_writes(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.sqlite", max_pending=3)
    other = SqliteRunStore(tmp_path / "runs.sqlite")  # another connection sees the file only
    store.put("a", b"1")
    store.put("b", b"2")
    assert store.get("a") == b"1"  # pending, but visible to its own reads
    assert other.get("a") is None
    store.flush()
    assert (other.get("a"), other.get("b")) == (b"1", b"2")
    store.put("c", b"3")
    store.put("d", b"4")
    store.put("c", b"5")  # still 2 keys pending: the bound counts keys
    assert other.get("c") is None
    store.put("e", b"6")  # the third pending key writes them all
    assert (other.get("c"), other.get("d"), other.get("e")) == (b"5", b"4", b"6")
    store.close()
    other.close()


def test_verdict_log_writes_accounts_behind_and_queries_see_them(tmp_path: Path) -> None:
    from otel_footprint.engine.verdict import RunVerdict
    from otel_footprint.service.annotation import Decision
    from otel_footprint.service.verdicts import VerdictLog

    path = tmp_path / "accounts.sqlite"
    log = VerdictLog(path, max_unwritten=100)

    def decided(trace_id: str) -> Decision:
        verdict = RunVerdict("run-v", trace_id, "cd" * 8, None, True, (), ())
        return Decision(trace_id, "run-v", "cd" * 8, True, (), verdict, {}, 1, 5)

    log.publish(decided("ab" * 16))
    assert len(log.legs("run-v")) == 1  # a query first writes what is pending
    log.publish(decided("ef" * 16))
    log.close()  # close writes the rest
    again = VerdictLog(path)
    assert len(again.legs("run-v")) == 2
    again.close()


def test_verdict_log_keeps_its_accounts_within_its_byte_share(tmp_path: Path) -> None:
    """Issue 13 (defect 4): the recent accounts (StreamVerdicts' replay) and a memory store's
    accounts count against processing.max_bytes, so they are kept within a byte share of it,
    oldest going first; accounts waiting to be written count until they are."""
    from otel_footprint.engine.verdict import RunVerdict
    from otel_footprint.service.annotation import Decision
    from otel_footprint.service.verdicts import VerdictLog

    def decided(n: int) -> Decision:
        trace_id = f"{n:032x}"
        verdict = RunVerdict(f"run-{n}", trace_id, "cd" * 8, None, True, (), ())
        return Decision(trace_id, f"run-{n}", "cd" * 8, True, (), verdict, {}, 1, 5)

    memory = VerdictLog(None, recent=1000, max_bytes=2_000)
    for n in range(200):
        memory.publish(decided(n))
    assert 1_000 < memory.memory_bytes <= 2_000
    assert memory.legs("run-199") and not memory.legs("run-0")
    sub = memory.subscribe(replay_recent=1000)
    assert 1 < sub.qsize() < 100  # only the newest recent accounts are kept
    memory.close()

    stored = VerdictLog(
        tmp_path / "accounts.sqlite", recent=1000, max_unwritten=10_000, max_bytes=2_000
    )
    for n in range(200):
        stored.publish(decided(n))
    unbounded = stored.memory_bytes
    assert unbounded > 2 * 2_000  # not yet written: counted, and kept until written
    stored.flush()
    assert stored.memory_bytes <= 2_000 and stored.legs("run-0")
    stored.close()
