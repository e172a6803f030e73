"""Run stores for the hop (``RunStore``: bytes by key): embedded SQLite by default, Redis when shared.

They hold what a later leg of a run needs from an earlier one (the engine's state). One instance
uses SQLite in its data directory; instances behind the ``loadbalancing`` exporter share Redis
(see docs/deploy.md), because a resumed leg is a new trace and may land on another instance.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from otel_footprint.service import jsonlog

_log = jsonlog.get("runstore")


def open_sqlite(path: Path) -> sqlite3.Connection:
    """A SQLite file for the hop's state (run state, accounts): WAL, shared across threads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # 0600: run state and accounts quote the user's prompt. SQLite gives its -wal and -shm files
    # the database file's mode, so creating the file private first covers them too.
    for existing in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if existing.exists():
            existing.chmod(0o600)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    # NORMAL is durable across a process crash in WAL mode (only an OS crash can lose the tail).
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def write_rows(db: sqlite3.Connection, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """``sql`` for every row in one transaction (one WAL commit for many rows), or none of them."""
    db.execute("BEGIN")
    try:
        db.executemany(sql, rows)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


class SqliteRunStore:
    """``get``/``put`` of opaque bytes by key in one SQLite file (WAL mode, safe across threads).

    Writes are kept in memory until :meth:`flush` (the hop flushes at each group commit of its
    journal, before it retires the input the state came from), when ``max_pending`` keys wait, or
    at :meth:`close`; ``get`` sees them at once. One transaction per flush instead of one per run:
    each statement is a WAL write and a GIL round trip on the hop's single decision thread.
    """

    def __init__(self, path: Path, table: str = "run_state", *, max_pending: int = 1024) -> None:
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self.path = path
        self._table = table
        self._lock = threading.Lock()
        self._pending: dict[str, bytes] = {}
        self._max_pending = max_pending
        self._db = open_sqlite(path)
        self._db.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "key TEXT PRIMARY KEY, value BLOB NOT NULL, updated REAL NOT NULL DEFAULT (julianday('now')))"
        )

    def get(self, key: str) -> bytes | None:
        with self._lock:
            pending = self._pending.get(key)
            if pending is not None:
                return pending
            row = self._db.execute(
                f"SELECT value FROM {self._table} WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._pending.pop(key, None)  # re-inserted last: flush order follows write order
            self._pending[key] = bytes(value)
            if len(self._pending) >= self._max_pending:
                self._write_pending()

    def flush(self) -> None:
        """Write every pending value in one transaction (durable against a process crash)."""
        with self._lock:
            self._write_pending()

    def _write_pending(self) -> None:
        # Called with the lock held.
        if not self._pending:
            return
        try:
            write_rows(
                self._db,
                f"INSERT INTO {self._table} (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated = julianday('now')",
                list(self._pending.items()),
            )
        finally:
            # Dropped even when the write failed (disk full, ...): memory stays bounded, and the
            # error reaches the caller (the hop logs it and goes on without this state).
            self._pending.clear()

    def keys(self, limit: int = 1000) -> list[str]:
        """The most recently written keys, newest first."""
        with self._lock:
            self._write_pending()
            rows = self._db.execute(
                f"SELECT key FROM {self._table} ORDER BY updated DESC LIMIT ?", (limit,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        with self._lock:
            try:
                self._write_pending()
            finally:
                self._db.close()


class RedisRunStore:
    """A run store shared by several hops (scale-out): Redis ``GET``/``SET`` through redis-py.

    A resumed leg is a new trace, so the ``loadbalancing`` exporter may route it to another hop;
    that hop reads the earlier leg's state here. redis-py brings the connection pool, TLS
    (``rediss://``, with its ``ssl_*`` URL parameters), ACL users and timeouts; it is the optional
    ``redis`` extra (``pip install 'otel-footprint[redis]'``). An unreachable Redis degrades to "no
    earlier leg" (the engine then says so with a reason) instead of failing the run.
    """

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = "otel-footprint:",
        ttl: float = 7 * 86400,
        timeout: float = 2.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ValueError(f"not a redis:// URL: {url!r}")
        try:
            import redis
        except ImportError as exc:  # the config refuses kind: redis without it; a library user
            raise RuntimeError(REDIS_MISSING) from exc
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            health_check_interval=30,
        )
        self.key_prefix = key_prefix
        self.ttl = int(ttl)

    def get(self, key: str) -> bytes | None:
        try:
            value = self._client.get(self.key_prefix + key)
        except self._errors as exc:
            _log.warning("run store unreachable; deciding without it", extra={"error": str(exc)})
            return None
        return value if isinstance(value, bytes) else None

    def put(self, key: str, value: bytes) -> None:
        try:
            self._client.set(self.key_prefix + key, value, ex=self.ttl if self.ttl > 0 else None)
        except self._errors as exc:
            _log.warning(
                "run store unreachable; a later leg will not see this one",
                extra={"error": str(exc)},
            )

    def close(self) -> None:
        self._client.close()


REDIS_MISSING = (
    "processing.run_store.kind: redis needs redis-py, the optional redis extra: "
    "pip install 'otel-footprint[redis]'"
)
