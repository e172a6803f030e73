"""Every example script runs, and every Markdown code block marked ```` ```python run ```` runs.

``extract_run_blocks`` / ``run_markdown_blocks`` are the helpers for documentation: blocks of one
file run in order in one fresh interpreter, sharing one namespace (like a reader pasting them into
one session), each block compiled under ``<file>:<line>`` so a failure points at the Markdown.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# Documents with runnable blocks; the README must always be one of them (its example is the
# in-process quick start, and a README whose example stopped running is a broken README).
MARKDOWN = [
    p
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    if p.exists() and "```python run" in p.read_text(encoding="utf-8")
]
TIMEOUT_S = 60

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")

# A document whose blocks need an optional extra says so in an HTML comment
# (``<!-- requires: openai (pip install -e '.[integrations]') -->``); without the module its
# blocks are skipped with that reason, so the README's plain test command passes on a fresh
# machine while CI (which installs the extras) runs them.
_REQUIRES = re.compile(r"<!--\s*requires:\s*(?P<module>[\w.]+)\s*(?P<why>\([^)]*\))?\s*-->")

_DRIVER = """
import json, sys
namespace = {"__name__": "__main__"}
for origin, source in json.load(sys.stdin):
    exec(compile(source, origin, "exec"), namespace)
"""


def extract_run_blocks(markdown: str) -> list[tuple[int, str]]:
    """``(first code line, code)`` of each fenced block whose info string is ``python run``."""
    blocks: list[tuple[int, str]] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        fence, indent = opened["fence"], len(opened["indent"])
        wanted = opened["info"].split() == ["python", "run"]
        body: list[str] = []
        index += 1
        start = index + 1  # 1-based line of the first code line
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            line = lines[index]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
            index += 1
        index += 1
        if wanted:
            blocks.append((start, "\n".join(body) + "\n"))
    return blocks


def run_markdown_blocks(
    path: Path, timeout: float = TIMEOUT_S, *, text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``python run`` blocks of ``path`` (or of ``text``, a version of it) in order in one
    new interpreter (cwd = repo root)."""
    source = path.read_text() if text is None else text
    blocks = [(f"{path.name}:{line}", code) for line, code in extract_run_blocks(source)]
    return subprocess.run(
        [sys.executable, "-c", _DRIVER],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def test_extract_run_blocks_reads_only_marked_blocks() -> None:
    text = "\n".join(
        [
            "# Title",
            "```python run",
            "x = 1",
            "```",
            "```python",
            "not run",
            "```",
            "````python run",
            "print('```')",
            "````",
            "  ```python   run",
            "  y = 2",
            "  ```",
        ]
    )
    assert extract_run_blocks(text) == [(3, "x = 1\n"), (9, "print('```')\n"), (12, "y = 2\n")]


def test_a_failing_block_points_at_its_markdown_line(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "text\n\n```python run\nvalue = 41\n```\n\n```python run\nassert value == 42\n```\n"
    )
    result = run_markdown_blocks(doc)
    assert result.returncode != 0
    assert 'File "doc.md:8"' in result.stderr


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example should show what it did"


@pytest.mark.parametrize("doc", MARKDOWN, ids=[p.name for p in MARKDOWN])
def test_markdown_run_blocks_run(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for needed in _REQUIRES.finditer(text):
        if importlib.util.find_spec(needed["module"]) is None:
            pytest.skip(f"{doc.name} needs {needed['module']} {needed['why'] or ''}".rstrip())
    assert extract_run_blocks(text), f"{doc.name}: no block parsed"
    result = run_markdown_blocks(doc)
    assert result.returncode == 0, result.stderr


def test_the_readme_has_runnable_examples() -> None:
    assert ROOT / "README.md" in MARKDOWN


def test_react_loop_example_spans_are_a_decidable_run() -> None:
    """The example's spans are one run whose plan and routed skill the engine reads."""
    engine = pytest.importorskip("otel_footprint.engine.decide")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_footprint.runs.group import group_runs
    from otel_footprint.runs.spans import SdkSpanView

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        react_loop = importlib.import_module("react_loop")
    finally:
        sys.path.remove(str(ROOT / "examples"))
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    react_loop.react_loop(provider.get_tracer("t"), "please refund my order")
    (leg,) = group_runs([SdkSpanView(s) for s in exporter.get_finished_spans()])
    verdict = engine.decide_run(leg)
    assert verdict.mode == "shadow"
    assert [p.iteration for p in verdict.passes] == [1, 2]
    assert verdict.passes[0].engaged_maps == ("skill-map",)
    assert verdict.parked_maps == ()
