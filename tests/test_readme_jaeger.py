"""The README's "See it in Jaeger in a minute" is honest (issue 23): the quick path runs the released
Jaeger (its image, with its UI) at the release ``scripts/jaeger.sh`` pins; the from-source build is
said to serve the API only, and where the UI comes from is said plainly; both paths search the same
thing. ``tests/e2e/test_jaeger_e2e.py`` runs the from-source path live."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from e2e.otel_stack import tags_field

REPO = Path(__file__).resolve().parents[1]
RELEASES = {"v1.76.0": "2.13.0"}
"""Jaeger tags each release twice: ``v1.N`` for the Go module, ``v2.M`` for the binary and image."""


def _section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## See it in Jaeger in a minute\n(.*?)(?=^## )", readme, re.M | re.S)
    assert match, "README.md has no '## See it in Jaeger in a minute' section"
    return match.group(1)


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", _section(), re.M | re.S)


def test_the_quick_path_runs_the_released_jaeger_at_the_pinned_release() -> None:
    go_mod = (REPO / "scripts" / "jaeger" / "go.mod").read_text()
    pinned = re.search(r"github\.com/jaegertracing/jaeger (v\d+\.\d+\.\d+)", go_mod)
    assert pinned, "scripts/jaeger/go.mod pins no jaeger module"
    assert pinned.group(1) in RELEASES, f"add the image tag of {pinned.group(1)} to RELEASES"
    released, _ = _blocks("sh")
    [docker] = [line for line in released.splitlines() if line.startswith("docker run")]
    args = shlex.split(docker)
    assert args[-1] == f"jaegertracing/jaeger:{RELEASES[pinned.group(1)]}", docker
    # Published on loopback only: the UI and OTLP port a user opens, nothing more.
    published = [args[i + 1] for i, arg in enumerate(args) if arg == "-p"]
    assert published == ["127.0.0.1:16686:16686", "127.0.0.1:4317:4317"], published
    assert "otel-footprint demo --endpoint http://127.0.0.1:4317" in released
    assert "http://127.0.0.1:16686" in released


def test_the_section_says_where_the_ui_comes_from_and_what_the_build_serves() -> None:
    words = " ".join(_section().split())
    assert "**Where the UI comes from:**" in words
    assert "serves the API only, not the UI" in words
    assert "ui assets not embedded in the binary" in words
    assert "**Time:**" in words


def test_the_from_source_search_is_the_ui_search() -> None:
    """The curl line asks the API for exactly what the UI's Tags field sends for the search."""
    [search] = _blocks("jaeger")
    _, from_source = _blocks("sh")
    tags = re.search(r"--data-urlencode '(tags=[^']*)'", from_source)
    assert tags, from_source
    assert json.loads(tags.group(1).removeprefix("tags=")) == tags_field(search.strip())
    assert "service=otel-footprint-demo" in from_source
    assert "service **otel-footprint-demo**" in _section()
