"""Plain words first: every column, chip, grade, signal and tone ``explain`` prints has an entry in
``docs/glossary.md``; ``explain --help`` explains the text format's columns; the docs cite nothing
outside the repository; and the ``rode`` column agrees with the account.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from otel_footprint.account.model import SignalId, Tone
from otel_footprint.account.templates import CHIPS
from otel_footprint.commands.cli import main
from otel_footprint.commands.explain_text import COLUMNS
from otel_footprint.commands.explain_words import CHECK_TITLES, ROW_TITLES, TONE_WORDS
from otel_footprint.kernel.ladder import LADDER

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")


def _entries() -> set[str]:
    """The first cell of every glossary table row, without backticks."""
    return {
        cell.strip().strip("`")
        for cell in re.findall(r"^\| ([^|]+?) \|", GLOSSARY, flags=re.MULTILINE)
    }


@pytest.mark.parametrize("word", [c.text for c in CHIPS.values()])
def test_every_chip_is_in_the_glossary(word: str) -> None:
    assert f"`{word}`" in GLOSSARY


def test_every_column_grade_signal_tone_row_and_check_is_in_the_glossary() -> None:
    entries = _entries()
    for column in COLUMNS:
        assert column in entries, column
    for grade in LADDER:
        assert f"`{grade}`" in GLOSSARY, grade
    for signal in get_args(SignalId):
        assert signal in GLOSSARY, signal
    for tone in get_args(Tone):
        if tone != "plain":
            assert f"`{tone}`" in GLOSSARY, tone
            assert TONE_WORDS[tone] in GLOSSARY, TONE_WORDS[tone]
    for title in ROW_TITLES.values():
        assert title in entries, title
    for check in CHECK_TITLES:
        assert f"`{check}`" in GLOSSARY, check
    for word in ("park card", "idle N", "witness", "all spans present", "resumed leg"):
        assert word in GLOSSARY, word


def test_explain_help_explains_the_columns() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "otel_footprint.commands.cli", "explain", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0
    for column in COLUMNS:
        assert re.search(rf"^\s+{column}\s+\S", done.stdout, flags=re.MULTILINE), column
    assert "docs/glossary.md" in done.stdout


def test_the_docs_cite_nothing_outside_the_repository() -> None:
    docs = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        for pattern in (r"\bshared/(spec|design|recordings|conformance)", r"/work/"):
            assert not re.search(pattern, text), f"{doc.name} cites {pattern}"
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            path = (doc.parent / target).resolve()
            assert path.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
            assert path.exists(), f"{doc.name} links to missing {target}"


def test_rode_agrees_with_the_account_when_another_skill_was_given() -> None:
    out = io.StringIO()
    assert main(["demo", "--scenario", "routed-not-delivered", "--account"], out) == 0
    text = out.getvalue()
    rows = [line.split() for line in text.splitlines() if re.match(r"\s+\d+\s+[0-9a-f]{16}", line)]
    assert [row[2] for row in rows] == ["shipping", "shipping"]
    assert "it got the shipping skill in its place" in text
    assert (
        "  Checks: 1 decided-delivered: FAILED · 2 existence: does not apply · 3 empty-results: passed"
        in text
    )


def test_the_example_prints_its_verdict() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "react_loop.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "verdict (ok): This report found nothing in the record." in done.stdout
    assert "check 1 (the decided skill reached the model): reachable, delivered" in done.stdout
