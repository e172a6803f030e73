"""Write the settings tables of README.md and docs/deploy.md from the one model (sdk/settings.py).

``python scripts/settings_docs.py`` rewrites the text between the ``<!-- ... settings: begin`` and
``<!-- ... settings: end -->`` markers; ``--check`` only reports (exit 1) when a table is stale.
tests/test_settings.py runs the same comparison.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from otel_footprint.sdk import settings

ROOT = Path(__file__).resolve().parent.parent


def _readme() -> str:
    return (
        "### In-process settings (`footprint_otlp` exporter)\n\n"
        + settings.inprocess_table()
        + "\nThe `setup(...)` helper and `FootprintSpanProcessor` take the same bounds as arguments. "
        "The hop\n(`serve`) has its own configuration file: see [`docs/deploy.md`](docs/deploy.md).\n"
    )


def _deploy() -> str:
    return "```yaml\n" + settings.hop_yaml() + "```\n"


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
