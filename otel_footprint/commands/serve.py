"""``otel-footprint serve``: the OTLP hop as a command (flags > config file > OTEL_EXPORTER_OTLP_*).

Prints the bound addresses on stdout once listening (``grpc HOST:PORT``, ``http HOST:PORT``,
``telemetry HOST:PORT``, then ``ready``), runs until SIGTERM/SIGINT, then shuts down gracefully.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import socket
import threading
from pathlib import Path
from types import FrameType
from typing import TextIO

from otel_footprint.commands.errors import CommandError
from otel_footprint.service import config as configuration
from otel_footprint.service import jsonlog

EXIT_CONFIG = 2
EXIT_STARTUP = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` flags (contract: --config, --grpc, --http, --forward, --forward-protocol, --data-dir)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help="YAML config file (receivers / processing / exporters / service)",
    )
    parser.add_argument(
        "--grpc",
        metavar="HOST:PORT",
        help="OTLP/gRPC listen address (default 127.0.0.1:4317; port 0 = any free port)",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="OTLP/HTTP listen address (default 127.0.0.1:4318; port 0 = any free port)",
    )
    parser.add_argument(
        "--forward",
        metavar="URL",
        help="the next hop: host:port or http(s)://host:port for gRPC, an http(s) URL for OTLP/HTTP",
    )
    parser.add_argument(
        "--forward-protocol",
        choices=configuration.PROTOCOLS,
        help="protocol to the next hop (default: grpc, or http/protobuf for a /v1/traces URL)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="journal, run store and lock file (default $XDG_STATE_HOME/otel-footprint)",
    )
    parser.add_argument(
        "--telemetry",
        metavar="HOST:PORT",
        help="health and Prometheus metrics listen address (default 127.0.0.1:13133)",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override any config key, e.g. --set processing.annotate=false (repeatable)",
    )
    parser.add_argument(
        "--check-config", action="store_true", help="validate the configuration, print it, and exit"
    )


def _config(args: argparse.Namespace) -> configuration.HopConfig:
    flags = configuration.flag_layer(
        grpc=args.grpc,
        http=args.http,
        forward=args.forward,
        forward_protocol=args.forward_protocol,
        data_dir=args.data_dir,
        telemetry=args.telemetry,
        sets=args.sets,
    )
    return configuration.load(args.config, flags, os.environ)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the hop until a signal; the exit status is 0 after a graceful stop."""
    try:
        cfg = _config(args)
    except configuration.ConfigError as exc:
        raise CommandError(f"configuration: {exc}", EXIT_CONFIG) from None
    jsonlog.configure(cfg.service.telemetry.logs.level)
    if args.check_config:
        print(f"configuration OK (sources: {', '.join(cfg.sources) or 'defaults'})", file=out)
        print(f"grpc {cfg.receivers.protocols.grpc.endpoint}", file=out)
        print(f"http {cfg.receivers.protocols.http.endpoint}", file=out)
        print(f"forward {cfg.exporter.protocol} {cfg.exporter.traces_target}", file=out)
        return 0

    _check_data_dir(cfg.data_dir)
    # gRPC's C core prints its own "Failed to add port" line before our message when a port is
    # taken: find out first, and say it once, cleanly.
    _check_free(cfg.receivers.protocols.grpc.endpoint, "OTLP/gRPC")
    from otel_footprint.commands.run_page import RunPageHtml
    from otel_footprint.service.hop import Hop, StartupError

    _tune_gc()
    hop = Hop(cfg, run_page=RunPageHtml())
    stop = threading.Event()
    signals_seen = 0

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            # A second signal: leave now. The journal keeps everything acknowledged.
            os.write(2, b"otel-footprint serve: error: interrupted again while stopping; left at "
                     b"once (the journal keeps what was acknowledged)\n")  # fmt: skip
            os._exit(130)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            bound = hop.start()
        except StartupError as exc:  # Hop.start released what it had acquired
            raise CommandError(str(exc), EXIT_STARTUP) from None
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise CommandError(
                f"cannot start: {exc.strerror or exc}{where}", EXIT_STARTUP
            ) from None
        for line in (
            f"grpc {bound.grpc}",
            f"http {bound.http}",
            f"telemetry {bound.telemetry}",
            f"forward {cfg.exporter.protocol} {cfg.exporter.traces_target}",
            "ready",
        ):
            print(line, file=out, flush=True)
        # Everything built so far (modules, config, compiled schemas) lives as long as the process:
        # keep it out of every later collection.
        gc.freeze()
        while not stop.wait(0.5):
            pass
        drained = hop.stop()
        print(
            "stopped" if drained else "stopped (undelivered batches stay in the journal)",
            file=out,
            flush=True,
        )
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _check_data_dir(data_dir: Path) -> None:
    """A data directory that is a file, sits under a file or cannot be written: one clear line."""
    for parent in (data_dir, *data_dir.parents):
        if parent.exists() and not parent.is_dir():
            what = "is a file" if parent == data_dir else f"is under {parent}, which is a file"
            raise CommandError(
                f"data directory {data_dir} {what}, not a directory; give --data-dir DIR",
                EXIT_CONFIG,
            )
        if parent.exists():
            break
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(
            f"cannot create data directory {data_dir}: {exc.strerror or exc}", EXIT_CONFIG
        ) from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise CommandError(
            f"data directory {data_dir} is not writable by this user; give --data-dir DIR",
            EXIT_CONFIG,
        )


def _check_free(address: configuration.HostPort, what: str) -> None:
    """Bind ``address`` once with a plain socket: a taken port is reported before gRPC tries."""
    if address.port == 0:
        return
    try:
        infos = socket.getaddrinfo(
            address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise CommandError(f"cannot listen for {what} on {address}: {exc.strerror}") from None
    for family, kind, proto, _name, sockaddr in infos[:1]:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                raise CommandError(
                    f"cannot listen for {what} on {address}: {exc.strerror or exc}",
                    EXIT_STARTUP,
                ) from None


GC_THRESHOLDS = (50_000, 20, 100)
"""The hop allocates many short-lived objects per span (freed by reference counting, rarely in
cycles) while holding many long-lived ones (buffered runs); CPython's default first threshold
(700 allocations) runs the cycle collector thousands of times per second over that heap. Measured
in-process on the benchmark workload: about 9% of the annotating path's time at the defaults,
about 1% with these."""


def _tune_gc() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
