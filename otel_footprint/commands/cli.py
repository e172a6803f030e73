"""The ``otel-footprint`` command line: one subcommand per job, each implemented in its own module.

Each command module exposes ``add_arguments(parser)`` and ``run(args, out) -> int``; this file only
wires them, importing a module when its command is used so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Protocol, TextIO, cast

from otel_footprint import __version__


class _Command(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...
    def run(self, args: argparse.Namespace, out: TextIO) -> int: ...


# (command path, module, one-line help)
_COMMANDS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("serve",), "otel_footprint.commands.serve", "run the OTLP hop (gRPC + HTTP in, OTLP out)"),
    (
        ("demo",),
        "otel_footprint.commands.demo",
        "run scripted agents through the in-process processor",
    ),
    (
        ("explain",),
        "otel_footprint.commands.explain",
        "print every run's account and engagement timeline",
    ),
    (
        ("import", "agentfootprint"),
        "otel_footprint.commands.import_recording",
        "turn an agentfootprint NDJSON recording into OTLP traces",
    ),
    (
        ("conformance", "engagement"),
        "otel_footprint.commands.conformance",
        "replay engagement-kernel reference vectors",
    ),
)


def _load(module: str) -> _Command:
    return cast(_Command, importlib.import_module(module))


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The full parser; only the command named in ``argv`` has its module imported."""
    parser = argparse.ArgumentParser(
        prog="otel-footprint",
        description="Explain AI-agent runs in the OpenTelemetry tracing stack you already run.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    wanted = [a for a in argv if not a.startswith("-")][:2]
    for path, module, help_text in _COMMANDS:
        if len(path) == 1:
            sub = top.add_parser(path[0], help=help_text, description=help_text)
        else:
            if path[0] not in groups:
                group = top.add_parser(path[0], help=f"{path[0]} commands")
                groups[path[0]] = group.add_subparsers(
                    dest=f"{path[0]}_command", metavar="KIND", required=True
                )
            sub = groups[path[0]].add_parser(path[1], help=help_text, description=help_text)
        sub.set_defaults(_module=module)
        if list(path) == wanted[: len(path)]:
            _load(module).add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the console script; returns the process exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    try:
        return _load(args._module).run(args, out or sys.stdout)
    except BrokenPipeError:
        # The reader went away (``explain ... | head``): not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
