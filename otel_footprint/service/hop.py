"""One running hop: wires config, journal, run store, pipeline, forwarder, receivers and operations.

Start order makes the journal the source of truth: it is opened (and replayed) before anything
listens, and on stop the receivers close first, then the buffer is flushed and the forward queue
drained until the shutdown deadline; whatever was not forwarded stays in the journal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from msgspec import structs

from otel_footprint.annotate.form import AnnotateOptions
from otel_footprint.engine.decide import EngineOptions
from otel_footprint.runs.model import RunStore
from otel_footprint.runs.store import MemoryRunStore
from otel_footprint.sdk.settings import ProcessingSettings
from otel_footprint.service import jsonlog, nexthop
from otel_footprint.service.annotation import (
    AnnotationStage,
    Decision,
    FootprintAnnotation,
    NoAnnotation,
)
from otel_footprint.service.buffer import BufferLimits
from otel_footprint.service.config import HopConfig, HostPort, serves_accounts
from otel_footprint.service.deadletter import FILE_NAME as DEAD_LETTER_FILE
from otel_footprint.service.deadletter import DeadLetterFile
from otel_footprint.service.forward import Forwarder
from otel_footprint.service.journal import Journal, Replay
from otel_footprint.service.memory import MemoryGuard, limit_malloc_arenas
from otel_footprint.service.metrics import HopMetrics, otlp_reader
from otel_footprint.service.ops import OpsServer
from otel_footprint.service.phoenix import PhoenixAnnotations
from otel_footprint.service.pipeline import Pipeline, PipelineOptions, memory_shares
from otel_footprint.service.receivers import GrpcReceiver, HttpReceiver
from otel_footprint.service.runpage import RunPageRenderer, RunPageStore
from otel_footprint.service.runstore import RedisRunStore, SqliteRunStore
from otel_footprint.service.verdicts import VerdictLog

if TYPE_CHECKING:
    from otel_footprint.service.query import QueryService

_log = jsonlog.get("hop")


class StartupError(RuntimeError):
    """The hop cannot start (data directory in use, address in use, a forwarding loop, ...)."""


_T = TypeVar("_T")

DRAIN_RESERVE = 2.0
"""At shutdown, deciding stops this long (or a quarter of ``shutdown_timeout``, if less) before
the deadline, so what was decided can still be forwarded; the rest waits in the journal."""


def _bind(what: str, endpoint: HostPort, listen: Callable[[], _T]) -> _T:
    """``listen()``, with a bind failure reported as a :class:`StartupError` naming the listener."""
    try:
        return listen()
    except (OSError, RuntimeError) as exc:
        raise StartupError(f"cannot listen for {what} on {endpoint}: {exc}") from exc


def buffer_limits(proc: ProcessingSettings) -> BufferLimits:
    """The run buffer's limits: ``processing.*`` are the holding core's by name, and
    ``processing.decision_cache.max_X`` is its ``cache_X``."""
    same = ("release_grace", "max_wait", "max_runs", "max_bytes", "max_spans_per_run")
    cache = {"cache_" + k[4:]: v for k, v in structs.asdict(proc.decision_cache).items()}
    return BufferLimits(**{k: getattr(proc, k) for k in same}, **cache)


def annotate_options(proc: ProcessingSettings) -> AnnotateOptions:
    """What the annotation writes: ``processing.witness`` and ``processing.account_lines``."""
    return AnnotateOptions(witness=proc.witness, include_lines=proc.account_lines)


@dataclass(frozen=True, slots=True)
class Bound:
    grpc: HostPort
    http: HostPort
    telemetry: HostPort


class Hop:
    """The ``serve`` process's components; :meth:`start` then :meth:`stop`."""

    def __init__(
        self,
        cfg: HopConfig,
        stage: AnnotationStage | None = None,
        run_page: RunPageRenderer | None = None,
    ) -> None:
        self.cfg = cfg
        telemetry = cfg.service.telemetry
        push = telemetry.metrics.otlp
        self.metrics = HopMetrics(
            *([otlp_reader(push, push.endpoint)] if push.endpoint else []),
            max_names=telemetry.metrics.max_names,
        )
        self._stage = stage
        self._run_page_renderer = run_page if telemetry.run_page.enabled else None
        """Draws the run page (``commands/run_page.py``); None: no run page."""
        self.run_page: RunPageStore | None = None
        self._lock_fd: int | None = None
        self._started = time.monotonic()
        self._stopping = False
        self.bound: Bound | None = None
        self.store: RunStore | None = None
        self.verdicts: VerdictLog | None = None
        self.phoenix: PhoenixAnnotations | None = None
        self.query: QueryService | None = None
        self._stack: contextlib.ExitStack | None = None
        self._deadline = 0.0
        """Monotonic time by which the queue must be drained (set by :meth:`stop`)."""
        self._grace = 0.0
        self._drained = True
        self._pending_at_stop = 0
        self._stop_seconds: dict[str, float] = {}

    # -- start ---------------------------------------------------------------------------------

    def _lock_data_dir(self, data_dir: Path) -> None:
        # 0700: the journal, run state and accounts hold span content and prompt words.
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        data_dir.chmod(0o700)
        fd = os.open(data_dir / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StartupError(
                f"data directory {data_dir} is in use by another otel-footprint serve; "
                "give each instance its own --data-dir"
            ) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _check_loop(self, bound: list[HostPort]) -> None:
        exp = self.cfg.exporter
        from urllib.parse import urlsplit

        target = exp.traces_target if "://" in exp.traces_target else f"//{exp.traces_target}"
        parts = urlsplit(target)
        for addr in bound:
            same_host = parts.hostname in (addr.host, "localhost", "127.0.0.1") and addr.is_loopback
            if same_host and parts.port == addr.port:
                raise StartupError(
                    f"the forward endpoint {exp.traces_target} is this hop's own receiver {addr}; "
                    "forward to the next hop instead"
                )

    def start(self) -> Bound:
        """Open everything in order; each step registers its own undoing, so a failed start
        releases what it had acquired, and :meth:`stop` unwinds the same stack in reverse."""
        with contextlib.ExitStack() as stack:
            bound = self._start(stack)
            self._stack = stack.pop_all()
        return bound

    def _start(self, stack: contextlib.ExitStack) -> Bound:
        cfg = self.cfg
        data_dir = cfg.data_dir
        self._lock_data_dir(data_dir)
        stack.callback(self._unlock)
        stack.callback(self.metrics.shutdown)
        limit_malloc_arenas()  # before the receivers' and workers' threads allocate
        replay = self._open_state(stack)
        self._build_pipeline()
        self.pipeline.recover(replay)
        # /health answers from here on, and (its stop registered before the delivery path's)
        # keeps answering "stopping" until everything held was flushed and drained.
        self.ops = _bind(
            "health/metrics",
            cfg.service.telemetry.endpoint,
            lambda: OpsServer(
                cfg.service.telemetry.endpoint,
                self.metrics,
                self.health,
                self.run_page,
                cfg.token,
            ),
        )
        stack.callback(self.ops.stop)
        self._start_delivery(stack)
        grpc_bound, http_bound = self._start_receivers(stack)
        ops_bound = self.ops.start()
        self._check_loop([grpc_bound, http_bound])
        self.bound = Bound(grpc_bound, http_bound, ops_bound)
        nexthop.warn_if_unreachable(cfg.exporter)
        _log.info(
            "otel-footprint serve started",
            extra={
                "grpc": str(grpc_bound),
                "http": str(http_bound),
                "telemetry": str(ops_bound),
                "forward": f"{cfg.exporter.protocol} {cfg.exporter.traces_target}",
                "annotate": cfg.processing.annotate,
                "phoenix_annotations": (
                    self.phoenix.cfg.endpoint if self.phoenix is not None else None
                ),
                "data_dir": str(data_dir),
                "config_sources": list(cfg.sources),
            },
        )
        return self.bound

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _open_state(self, stack: contextlib.ExitStack) -> Replay:
        """The journal (replayed), the run store and the verdict log; returns the replay."""
        cfg = self.cfg
        proc, queue = cfg.processing, cfg.exporter.otlp.queue
        self.journal = Journal(
            cfg.data_dir / "queue",
            segment_bytes=queue.segment_size,
            max_bytes=queue.max_size,
            fsync=queue.fsync,
            cache_bytes=memory_shares(proc.max_bytes)[0],
        )
        replay = self.journal.open()
        stack.callback(self._close_journal)
        store_path = proc.run_store.path
        assert store_path is not None  # resolved by config.build
        if proc.run_store.kind == "sqlite":
            self.store = SqliteRunStore(store_path)
        elif proc.run_store.kind == "redis":
            assert proc.run_store.url is not None
            self.store = RedisRunStore(
                proc.run_store.url, key_prefix=proc.run_store.key_prefix, ttl=proc.run_store.ttl
            )
        else:
            self.store = MemoryRunStore()
        if isinstance(self.store, SqliteRunStore | RedisRunStore):
            stack.callback(self.store.close)
        # Accounts stay per instance even with a shared Redis store: the query service answers for
        # the runs this hop decided. Only a memory store keeps them in memory too.
        accounts = store_path.with_name("accounts.sqlite")
        in_memory = proc.run_store.kind == "memory"
        self.verdicts = VerdictLog(
            None if in_memory else accounts,
            proc.recent_verdicts,
            max_bytes=memory_shares(proc.max_bytes)[1],
            options=annotate_options(proc),
        )
        stack.callback(self.verdicts.close)
        return replay

    def _close_journal(self) -> None:
        self._pending_at_stop = self.journal.outbound_count
        self.journal.close()

    def _build_pipeline(self) -> None:
        cfg = self.cfg
        proc = cfg.processing
        assert self.store is not None and self.verdicts is not None
        stage = self._stage
        if stage is None:
            stage = (
                FootprintAnnotation(
                    self.store,
                    engine_options=EngineOptions(observed=proc.observed_runs),
                    annotate_options=annotate_options(proc),
                )
                if proc.annotate
                else NoAnnotation()
            )
        limits = buffer_limits(proc)
        hooks: list[Callable[[], None]] = [self.verdicts.flush]
        if isinstance(self.store, SqliteRunStore):
            hooks.append(self.store.flush)
        decided: list[Callable[[Decision], None]] = []
        telemetry = cfg.service.telemetry.endpoint
        if self._run_page_renderer is not None and not (
            telemetry.is_loopback or cfg.token is not None
        ):
            # The page quotes the user's prompt: off loopback only behind the bearer token, as
            # the query service's accounts.
            _log.warning(
                "run page not served: the telemetry endpoint is off loopback without a bearer "
                "token, and the page quotes the user's prompt",
                extra={"telemetry": str(telemetry)},
            )
        elif self._run_page_renderer is not None:
            self.run_page = RunPageStore(
                cfg.service.telemetry.run_page, self._run_page_renderer, annotate_options(proc)
            )
            decided.append(self.run_page.record)
        self.phoenix = None
        if cfg.phoenix_annotations is not None and proc.annotate:
            self.phoenix = PhoenixAnnotations(cfg.phoenix_annotations, self.metrics)
        self.pipeline = Pipeline(
            PipelineOptions(
                annotate=proc.annotate,
                forward_logs=cfg.exporter.logs_target is not None,
                limits=limits,
            ),
            self.journal,
            stage,
            self.metrics,
            self.verdicts,
            commit_hooks=hooks,
            decided_hooks=decided,
            phoenix=self.phoenix,
            memory=MemoryGuard(proc.memory_limit or proc.max_bytes),
        )
        self.dead_letter = DeadLetterFile(
            cfg.data_dir / DEAD_LETTER_FILE,
            cfg.exporter.otlp.dead_letter.max_size,
            fsync=cfg.exporter.otlp.queue.fsync,
        )
        self.forwarder = Forwarder(
            cfg.exporter,
            self.journal,
            self.metrics,
            on_settled=self.phoenix.settled if self.phoenix is not None else None,
            dead_letter=self.dead_letter,
        )

    def _start_delivery(self, stack: contextlib.ExitStack) -> None:
        """Phoenix poster, forwarder and release worker; stopped (in reverse) after the pipeline
        was flushed and the queue drained until the shutdown deadline."""
        if self.phoenix is not None:
            phoenix = self.phoenix
            self.phoenix.start()
            # What is left of the deadline (at least a second) for annotations already due.
            stack.callback(lambda: phoenix.stop(max(self._deadline, time.monotonic() + 1.0)))
        self.forwarder.start()
        stack.callback(self._timed("forwarder", lambda: self.forwarder.stop(self._deadline)))
        stack.callback(self._timed("drain", self._drain))
        self.pipeline.start()
        stack.callback(self._timed("decide", lambda: self.pipeline.flush(self._decide_deadline)))

    def _drain(self) -> None:
        self._drained = self.forwarder.drain(self._deadline)

    @property
    def _decide_deadline(self) -> float:
        """When deciding stops at shutdown: the last quarter of ``shutdown_timeout`` (at most
        :data:`DRAIN_RESERVE`) is kept for forwarding what was decided."""
        timeout = self.cfg.service.shutdown_timeout
        return self._deadline - min(DRAIN_RESERVE, timeout / 4)

    def _timed(self, step: str, stop: Callable[[], None]) -> Callable[[], None]:
        """``stop`` timed into the stop log line (``stop_seconds`` by step)."""

        def timed() -> None:
            started = time.monotonic()
            try:
                stop()
            finally:
                self._stop_seconds[step] = round(time.monotonic() - started, 3)

        return timed

    def _start_receivers(self, stack: contextlib.ExitStack) -> tuple[HostPort, HostPort]:
        cfg = self.cfg
        token, protocols = cfg.token, cfg.receivers.protocols
        self.http = HttpReceiver(protocols.http, self.pipeline, self.metrics, token=token)
        self.grpc = GrpcReceiver(
            protocols.grpc,
            self.pipeline,
            self.metrics,
            token=token,
            workers=cfg.receivers.grpc_workers,
        )
        self.query = self._query_service()
        grpc_bound = _bind("OTLP/gRPC", protocols.grpc.endpoint, self.grpc.start)
        stack.callback(lambda: self.grpc.stop(self._grace))
        http_bound = _bind("OTLP/HTTP", protocols.http.endpoint, self.http.start)
        stack.callback(self._timed("receivers", self._stop_receivers))
        if self.verdicts is not None:
            stack.callback(self.verdicts.end_streams)
        if self.query is not None:
            stack.callback(self.query.close)
        return grpc_bound, http_bound

    def _stop_receivers(self) -> None:
        """Both receivers stop taking requests at once and finish the ones under way within
        the grace (one after the other, their graces added up to half the shutdown timeout)."""
        grpc_stopped = self.grpc.server.stop(self._grace)
        self.http.stop(self._grace)
        grpc_stopped.wait(self._grace + 0.5)

    def _query_service(self) -> QueryService | None:
        cfg = self.cfg
        assert self.verdicts is not None
        if not serves_accounts(cfg):
            _log.warning(
                "query service not served: the gRPC receiver is off loopback without a "
                "bearer token, and accounts quote the user's prompt",
                extra={"grpc": str(cfg.receivers.protocols.grpc.endpoint)},
            )
            return None
        try:
            from otel_footprint.service.query import QueryService

            query = QueryService(self.verdicts, self.grpc.check_auth)
            self.grpc.server.add_generic_rpc_handlers((query.handler(),))
        except (ImportError, RuntimeError) as exc:
            # The generated code needs the protobuf/grpcio it was generated with; OTLP works without it.
            _log.warning(
                "query service disabled: its generated code cannot load", extra={"error": str(exc)}
            )
            return None
        return query

    # -- health --------------------------------------------------------------------------------

    def health(self) -> tuple[bool, dict[str, Any]]:
        ok = not self._stopping and self.pipeline.is_running
        pending, disk = self.journal.sizes()
        details: dict[str, Any] = {
            "uptime_seconds": round(time.monotonic() - self._started, 3),
            "runs_held": self.pipeline.buffer.core.runs_held,
            "spans_held": self.pipeline.buffer.core.spans_held,
            "queue_batches": self.journal.outbound_count,
            # The same numbers as the queue_bytes / queue_disk_bytes metrics: pending payload
            # bytes, and what the segment files take on disk (compaction keeps it near pending).
            "queue_bytes": pending,
            "queue_disk_bytes": disk,
            "queue_blocked": self.journal.blocked,
            "dead_letter_bytes": self.dead_letter.size,
            "forward_last_error": self.forwarder.last_error,
        }
        if self._stopping:
            details["stopping"] = True
        return ok, details

    # -- stop ----------------------------------------------------------------------------------

    def stop(self) -> bool:
        """Graceful shutdown; True when everything held was forwarded before the deadline.

        Unwinds the start stack: receivers close, the buffer is flushed, the queue drained until
        ``service.shutdown_timeout``; whatever was not forwarded stays in the journal. Stopping a
        hop that never started (or already stopped) does nothing.
        """
        if self._stack is None:
            return self._drained
        self._stopping = True
        self._deadline = time.monotonic() + self.cfg.service.shutdown_timeout
        self._grace = min(2.0, self.cfg.service.shutdown_timeout / 4)
        stack, self._stack = self._stack, None
        started = time.monotonic()
        stack.close()
        _log.info(
            "otel-footprint serve stopped",
            extra={
                "drained": self._drained,
                "pending_batches": self._pending_at_stop,
                "seconds": round(time.monotonic() - started, 3),
                "seconds_by_step": self._stop_seconds,
            },
        )
        return self._drained
