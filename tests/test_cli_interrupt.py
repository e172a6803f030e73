"""Ctrl-C at any moment of any command: one line, exit 130, never a traceback (issue 23, edges).

The real console script in its own process, SIGINT sent at several delays: at once (the
interpreter starting, the imports of the first seconds), while the command waits on its input,
and for ``serve`` after ``ready`` (a graceful stop, exit 0). ``commands/interrupt.py`` says why.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("otel-footprint")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason=f"no console script at {SCRIPT}")

DELAYS = (0.0, 0.03, 0.1, 0.3, 0.7, 1.5, 3.0)
"""Seconds after the start: from the interpreter's first milliseconds to a command waiting."""

COMMANDS = {
    # Each waits on stdin (left open) once started, so a late Ctrl-C lands inside the command.
    "explain": ("explain", "-"),
    "import": ("import", "agentfootprint", "-"),
    "conformance": ("conformance", "engagement", "-"),
    # The heaviest imports (the SDK, the exporters); it may finish before a late signal.
    "demo": ("demo", "--scenario", "routed-delivered"),
}


def _interrupt(args: tuple[str, ...], delay: float, tmp_path: Path) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    with subprocess.Popen(
        [str(SCRIPT), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    ) as process:
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            raise AssertionError(f"still running 60 s after Ctrl-C: {err.decode()}") from None
        return process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _prog(args: tuple[str, ...]) -> str:
    words = args[:2] if args[0] in ("import", "conformance") else args[:1]
    return " ".join(("otel-footprint", *words))


_PACKAGE = Path(__file__).resolve().parents[1] / "otel_footprint"
_CLI = _PACKAGE / "commands" / "cli.py"
TAKE_OVER_LINE = next(
    n for n, text in enumerate(_CLI.read_text().splitlines(), 1) if "take_over()" in text
)
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_FIRST_MODULES = ("otel_footprint/__init__.py", "otel_footprint/commands/__init__.py",
                  "otel_footprint/commands/interrupt.py")  # fmt: skip


def _before_take_over(err: str) -> bool:
    """A traceback from before the console script reached ``interrupt.take_over()``: Python's own
    start (``site``), the console-script wrapper's ``import re``, the few lines before ours."""
    for path, line in _FRAME.findall(err):
        # A frame is ours by where it lives, not by its name: the checkout itself may sit in a
        # folder called otel_footprint (CI's clone does), and the console script lives in it.
        if not Path(path).resolve().is_relative_to(_PACKAGE):
            continue
        path = path.replace("\\", "/")
        if path.endswith(_FIRST_MODULES):
            continue
        if path.endswith("otel_footprint/commands/cli.py") and int(line) <= TAKE_OVER_LINE:
            continue
        return False
    return True


def _outcome(args: tuple[str, ...], delay: float, status: int, err: str) -> str:
    """``ours`` (one line, 130), ``early`` (before any line of ours ran), ``done``; else fails."""
    if status == -signal.SIGINT and err == "":
        return (
            "early"  # before the interpreter's own handler: the kernel's default, as a shell's 130
        )
    if "Traceback" in err:
        assert _before_take_over(err), f"Ctrl-C after {delay} s: a traceback in our code\n{err}"
        return "early"
    if status == 0 and args[0] == "demo" and err == "":
        return "done"  # it finished before the signal came
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 130, (delay, status, err)
    assert len(lines) == 1, (delay, err)
    # Before the command is parsed the line names the program; after, the command.
    assert lines[0] in (f"{_prog(args)}: error: interrupted", "otel-footprint: error: interrupted")
    return "ours"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_ctrl_c_is_one_line_and_exit_130(command: str, tmp_path: Path) -> None:
    args = COMMANDS[command]
    outcomes = {}
    for delay in DELAYS:
        status, _, err = _interrupt(args, delay, tmp_path)
        outcomes[delay] = _outcome(args, delay, status, err)
    # At least the later moments, during the imports or the command itself, were ours.
    assert "ours" in outcomes.values(), outcomes


@pytest.mark.parametrize("delay", (0.05, 0.3))
def test_ctrl_c_while_serve_starts_is_one_line(delay: float, tmp_path: Path) -> None:
    args = ("serve", "--forward", "127.0.0.1:9", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0")
    status, out, err = _interrupt((*args, "--telemetry", "127.0.0.1:0"), delay, tmp_path)
    if "Traceback" in err:
        assert _before_take_over(err), err
        return
    if "ready" in out:  # the signal came after start: a graceful stop
        assert status == 0 and "stopped" in out, (status, out, err)
        return
    assert status == 130, (status, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] in (
        "otel-footprint serve: error: interrupted",
        "otel-footprint: error: interrupted",
    )
    assert len([line for line in lines if "error:" in line]) == 1, err


def test_a_second_ctrl_c_leaves_at_once(tmp_path: Path) -> None:
    """The first Ctrl-C raises in the command; one more while it cleans up leaves at once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with subprocess.Popen(
        [str(SCRIPT), "explain", "-"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    ) as process:
        time.sleep(2.0)
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err.decode()


@pytest.mark.slow  # a bound on time: well under the exporter's 10 s timeout it would wait out
def test_ctrl_c_while_the_demo_sends_leaves_within_the_cleanup_grace(tmp_path: Path) -> None:
    """An endpoint that accepts connections and never answers: the demo's exporter would wait out
    its timeout while unwinding; the process leaves after ``CLEANUP_SECONDS`` instead."""
    import socket

    from otel_footprint.commands.interrupt import CLEANUP_SECONDS

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        with subprocess.Popen(
            [str(SCRIPT), "demo", "--endpoint", f"http://127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        ) as process:
            time.sleep(4.0)  # imported, scenarios run, the exporter waiting on the silent port
            process.send_signal(signal.SIGINT)
            sent = time.monotonic()
            _, err = process.communicate(timeout=60)
            took = time.monotonic() - sent
    text = err.decode()
    assert "Traceback" not in text, text
    assert process.returncode == 130, text
    assert text.splitlines() == ["otel-footprint demo: error: interrupted"], text
    assert took < CLEANUP_SECONDS + 4.0, took


def test_a_second_ctrl_c_while_serve_stops_is_one_line(tmp_path: Path) -> None:
    """``serve`` stops gracefully on the first signal; a second one while it drains (a span held
    for a next hop that is not there) leaves at once, with one line, not silently."""
    from test_service_support import sdk_client

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    args = ["serve", "--forward", "127.0.0.1:9", "--data-dir", str(tmp_path / "data"),
            "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--telemetry", "127.0.0.1:0"]  # fmt: skip
    with subprocess.Popen(
        [str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path
    ) as process:
        assert process.stdout is not None
        bound = {}
        for raw in process.stdout:
            words = raw.decode().split()
            if words == ["ready"]:
                break
            if len(words) == 2:
                bound[words[0]] = words[1]
        client = sdk_client(bound["grpc"])
        with client.tracer.start_as_current_span("GET /orders"):
            pass  # not an agent run: forwarded at once, to a next hop that refuses
        client.flush()
        client.shutdown()
        process.send_signal(signal.SIGINT)
        time.sleep(1.0)  # draining: the forward to 127.0.0.1:9 retries until the shutdown bound
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    text = err.decode()
    assert "Traceback" not in text, text
    plain = [line for line in text.splitlines() if not line.startswith("{")]  # the JSON log
    assert process.returncode == 130, text
    assert plain == [
        "otel-footprint serve: error: interrupted again while stopping; left at once "
        "(the journal keeps what was acknowledged)"
    ], text
