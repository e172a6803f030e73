"""Write the settings tables of README.md and docs/deploy.md from the one model (sdk/settings.py).

``python scripts/settings_docs.py`` rewrites the text between the ``<!-- ... settings: begin`` and
``<!-- ... settings: end -->`` markers; ``--check`` only reports (exit 1) when a table is stale.
tests/test_settings.py runs the same comparison.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from otel_footprint.sdk import settings

ROOT = Path(__file__).resolve().parent.parent


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000):d}ms" if seconds else "0s"


def format_size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def _default(f: msgspec.inspect.Field, unit: str | None) -> Any:
    value = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
    if isinstance(value, float) and unit == "duration":
        return format_duration(value)
    if isinstance(value, int) and unit == "size":
        return format_size(value)
    return value


def inprocess_table() -> str:
    """The README's table of the in-process variables."""
    rows = ["| variable | default | what it sets |", "|---|---|---|"]
    for f, meta in settings.fields(settings.InProcessSettings):
        env = meta["env"]
        name = (
            env[0] if len(env) == 1 else "OTEL_EXPORTER_OTLP_(TRACES_)" + env[1].rsplit("_", 1)[1]
        )
        rows.append(f"| `{name}` | `{yaml_scalar(f.default)}` | {meta['doc']} |")
    return "\n".join(rows) + "\n"


def hop_yaml(model: type[msgspec.Struct] = settings.HopSettings, indent: str = "") -> str:
    """docs/deploy.md's block: every key of the hop's file with its default, unit, env and flag."""
    lines: list[str] = []
    for f, meta in settings.fields(model):
        section = settings.section_of(f.type)
        if section is not None:
            lines.append(f"{indent}{f.name}:")
            lines.append(hop_yaml(section, indent + "  ").rstrip("\n"))
            continue
        value = _default(f, meta["unit"])
        shown = "" if value is None else " " + yaml_scalar(value)
        notes = [meta["doc"]]
        if meta["unit"]:
            notes.append(meta["unit"])
        if meta["env"]:
            notes.append("env " + ", ".join(meta["env"]))
        if meta["flag"]:
            notes.append("flag " + meta["flag"])
        lines.append(f"{indent}{f.name}:{shown}  # " + "; ".join(notes))
    return "\n".join(lines) + "\n"


def yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, settings.HostPort):
        return str(value)
    text = str(value)
    return f'"{text}"' if text.endswith(":") or "#" in text else text


def _readme() -> str:
    return (
        "### In-process settings (`footprint_otlp` exporter)\n\n"
        + inprocess_table()
        + "\nThe `setup(...)` helper and `FootprintSpanProcessor` take the same bounds as arguments. "
        "The hop\n(`serve`) has its own configuration file: see [`docs/deploy.md`](docs/deploy.md).\n"
    )


def _deploy() -> str:
    return "```yaml\n" + hop_yaml() + "```\n"


TABLES: dict[tuple[str, str], Callable[[], str]] = {
    ("README.md", "in-process settings"): _readme,
    ("docs/deploy.md", "hop settings"): _deploy,
}


def regenerate(text: str, marker: str, body: str) -> str:
    """``text`` with the block after ``<!-- marker: begin ... -->`` replaced by ``body``."""
    head, sep, rest = text.partition(f"<!-- {marker}: begin")
    if not sep:
        raise ValueError(f"no '<!-- {marker}: begin' marker")
    opening, _, rest = rest.partition("-->\n")
    _, sep, tail = rest.partition(f"<!-- {marker}: end -->")
    if not sep:
        raise ValueError(f"no '<!-- {marker}: end -->' marker")
    return f"{head}<!-- {marker}: begin{opening}-->\n{body}<!-- {marker}: end -->{tail}"


def main(argv: list[str]) -> int:
    stale = []
    for (name, marker), render in TABLES.items():
        path = ROOT / name
        text = path.read_text(encoding="utf-8")
        new = regenerate(text, marker, render())
        if new != text:
            stale.append(name)
            if "--check" not in argv:
                path.write_text(new, encoding="utf-8")
    if stale and "--check" in argv:
        print(f"stale settings tables in {', '.join(stale)}: run scripts/settings_docs.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
