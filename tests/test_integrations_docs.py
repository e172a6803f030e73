"""docs/integrations.md as written: each recipe (a ```` ```python recipe ```` block) runs after the
common ```` ```python run ```` blocks, in a fresh interpreter of its own (a recipe instruments the
``openai`` client and undoes it, and undoing an instrumentation can leave its wrappers behind)."""

from __future__ import annotations

import re

import pytest
from test_examples import ROOT, run_markdown_blocks

DOC = ROOT / "docs" / "integrations.md"
_RECIPE = re.compile(r"^```python recipe$", re.MULTILINE)


def _recipes() -> list[int]:
    return [m.start() for m in _RECIPE.finditer(DOC.read_text(encoding="utf-8"))]


def test_the_doc_has_a_recipe_per_stack() -> None:
    assert len(_recipes()) == 5


@pytest.mark.parametrize("index", range(len(_recipes())))
def test_recipe_runs_as_written(index: int) -> None:
    pytest.importorskip("openai", reason="pip install -e '.[integrations]'")
    text = DOC.read_text(encoding="utf-8")
    start = _recipes()[index]
    # This recipe alone becomes a run block; the others stay out.
    chosen = text[:start] + "```python run" + text[start + len("```python recipe") :]
    result = run_markdown_blocks(DOC, text=chosen)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "footprint.pass.iteration" in result.stdout
