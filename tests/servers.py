"""Server subprocesses the tests start: one base (its log in a file, stopped by its own pid only),
``otel-footprint serve`` as a subprocess, and a private redis-server.

The hop is started through the ``otel-footprint`` console command of this environment, so the
product's module layout can change without breaking the suites that use it (unit and e2e).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]

T = TypeVar("T")


def poll(fetch: Callable[[], T], done: Callable[[T], bool], *, timeout: float, what: str) -> T:
    """Call ``fetch`` until ``done(result)``; fail after ``timeout`` s naming ``what`` and the last
    result (ingestion and startup are asynchronous)."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}; last: {result!r}"[:4000]
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


class Process:
    """A server subprocess this test started: its log in a file, stopped by its own pid only."""

    def __init__(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.argv = list(argv)
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, stdout: int | None = None) -> subprocess.Popen[bytes]:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=stdout if stdout is not None else log,
                stderr=log,
                env=self.env,
                cwd=str(REPO),
            )
        return self.proc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.stderr()[-chars:]

    def stderr(self) -> str:
        """Everything the process wrote to its log so far."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL (a crash), then reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, SIGKILL after ``timeout`` s; the exit code (None when never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    terminate = stop

    @contextlib.contextmanager
    def stopped_cleanly(self, timeout: float = 30.0) -> Iterator[Process]:
        """Yield the process; on the way out stop it (SIGTERM) and require exit code 0: a
        fixture's server must shut down cleanly, not merely go away."""
        try:
            yield self
        finally:
            code = self.stop(timeout)
            assert code == 0, f"{self.argv[0]} exited {code} on SIGTERM; stderr:\n{self.tail()}"


def otel_footprint_command() -> str:
    """The ``otel-footprint`` console command of this environment (beside its python)."""
    candidate = Path(sys.executable).with_name("otel-footprint")
    return str(candidate) if candidate.exists() else "otel-footprint"


class HopProcess(Process):
    """``otel-footprint serve`` on loopback; ``grpc``/``http``/``telemetry`` once it said ready."""

    def __init__(
        self,
        data_dir: Path,
        forward: str | None,
        *args: str,
        grpc: str = "127.0.0.1:0",
        http: str = "127.0.0.1:0",
        env: Mapping[str, str] | None = None,
    ) -> None:
        argv = [otel_footprint_command(), "serve", "--grpc", grpc, "--http", http]
        argv += ["--telemetry", "127.0.0.1:0", "--data-dir", str(data_dir)]
        argv += ["--forward", forward] if forward is not None else []
        super().__init__([*argv, *args], data_dir.parent / f"{data_dir.name}-stderr.log", env)
        self.data_dir = data_dir
        self.addresses: dict[str, str] = {}

    def start(self, timeout: float = 60.0) -> HopProcess:
        """Start and wait for ``ready`` (the bound addresses come first, one ``name host:port`` a
        line); AssertionError with the log when it exits or times out first."""
        proc = self.spawn(stdout=subprocess.PIPE)
        said_ready = threading.Event()
        done = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                parts = raw.decode(errors="replace").split()
                if parts == ["ready"]:
                    said_ready.set()
                    done.set()
                elif len(parts) == 2:
                    self.addresses[parts[0]] = parts[1]
            done.set()

        threading.Thread(target=pump, daemon=True).start()
        if not done.wait(timeout) or not said_ready.is_set():
            self.kill()
            raise AssertionError(f"otel-footprint serve did not become ready:\n{self.tail()}")
        return self

    @property
    def grpc(self) -> str:
        return self.addresses["grpc"]

    @property
    def http(self) -> str:
        return self.addresses["http"]

    @property
    def telemetry(self) -> str:
        return self.addresses["telemetry"]

    def metrics(self) -> Samples:
        """The Prometheus exposition as ``{'name{labels}': value}``."""
        with urllib.request.urlopen(f"http://{self.telemetry}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        out = Samples()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def metric(self, name: str) -> float:
        """The sum over labels of one metric."""
        return sum(v for k, v in self.metrics().items() if k.partition("{")[0] == name)


class Samples(dict[str, float]):
    """Prometheus samples by ``name{labels}``; label order does not matter in a lookup."""

    @staticmethod
    def _key(key: object) -> object:
        if not isinstance(key, str) or "{" not in key:
            return key
        name, _, labels = key.partition("{")
        parts = sorted(p for p in labels.rstrip("}").split(",") if p)
        return name + "{" + ",".join(parts) + "}"

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(str(self._key(key)), value)

    def __getitem__(self, key: str) -> float:
        return super().__getitem__(str(self._key(key)))

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(str(self._key(key)), default)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))


def redis_server(workdir: Path, password: str | None = None) -> tuple[Process, str]:
    """A private redis-server on a free loopback port (no persistence): the process and its URL
    (skips the test when no redis-server is installed)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    port = free_ports(1)[0]
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(workdir), *(["--requirepass", password] if password else [])]
    process = Process(argv, workdir / "redis.log")
    process.spawn()

    def up() -> bool:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        return not process.alive()  # exited: stop waiting, say so below

    poll(up, bool, timeout=10, what="redis-server")
    if not process.alive():
        raise AssertionError(f"redis-server exited at start:\n{process.tail()}")
    auth = f":{password}@" if password else ""
    return process, f"redis://{auth}127.0.0.1:{port}/0"
