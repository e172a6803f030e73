"""The ``otel-footprint`` command line: one subcommand per job, each implemented in its own module.

Each command module exposes ``add_arguments(parser)`` and ``run(args, out) -> int``; this file only
wires them, importing a module when its command is used so ``--help`` stays fast.
"""

from __future__ import annotations

from otel_footprint.commands import interrupt

if interrupt.is_console_script() or __name__ == "__main__":  # or python -m ...commands.cli
    # First, before the other imports: a Ctrl-C during them is one line too (commands/interrupt.py).
    interrupt.take_over()

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Protocol, TextIO, cast

from otel_footprint import __version__
from otel_footprint.commands.errors import EXIT_BAD_INPUT, EXIT_FAILED, CommandError, error_line


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


def build_parser(
    argv: Sequence[str], subparsers: dict[str, argparse.ArgumentParser]
) -> argparse.ArgumentParser:
    """The full parser; only the command named in ``argv`` has its module imported.

    ``subparsers`` receives each command's parser by module, so an error in a
    command's arguments is reported with that command's usage."""
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
        sub.set_defaults(_module=module, _prog=sub.prog)
        subparsers[module] = sub
        if list(path) == wanted[: len(path)]:
            _load(module).add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the console script; returns the process exit status.

    Every failure ends in one line on stderr in one style (``commands/errors.py``), never a
    traceback; argument errors show the usage of the command they belong to."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    subparsers: dict[str, argparse.ArgumentParser] = {}
    parser = build_parser(args_list, subparsers)
    args, extra = parser.parse_known_args(args_list)
    if extra:
        # An unknown flag of a command: that command's usage, not the top-level one.
        sub = subparsers.get(getattr(args, "_module", ""), parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    prog = getattr(args, "_prog", parser.prog)
    interrupt.command_started(prog)
    try:
        return _load(args._module).run(args, out or sys.stdout)
    except BrokenPipeError:
        # The reader went away (``explain ... | head``): not an error of ours. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except CommandError as error:
        print(error_line(prog, str(error)), file=sys.stderr)
        return error.status
    except RecursionError:
        # Only input nests without bound here (JSON, YAML, protobuf); the commands name the file
        # where they can, this is the guard for the paths they do not.
        print(error_line(prog, "the input is nested too deeply to read"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(interrupt.line(prog), file=sys.stderr)
        interrupt.said()
        interrupt.leave_if_taken_over()
        return interrupt.EXIT_INTERRUPTED
    except Exception as error:  # the last guard: one line, never a traceback
        if os.environ.get("OTEL_FOOTPRINT_TRACEBACK"):
            raise
        print(
            error_line(
                prog,
                f"unexpected {type(error).__name__}: {error} "
                "(set OTEL_FOOTPRINT_TRACEBACK=1 to see where)",
            ),
            file=sys.stderr,
        )
        return EXIT_FAILED
    finally:
        interrupt.command_ended()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
