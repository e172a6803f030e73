"""Plain words first: every term the demo, ``explain`` (text and HTML) and the integrity checks
print has an entry in ``docs/glossary.md`` — the terms taken from the code's own tables (columns,
chips, grades, signals, tones, rows, checks, integrity checks and outcomes, evidence words, the
page's key) and from the demo's printed text and page (headings, column heads, labels); removing
an entry fails the test. Also: ``explain --help`` explains the text format's columns, the docs cite
nothing outside the repository, and the ``rode`` column agrees with the account.
"""

from __future__ import annotations

import html
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from otel_footprint import semconv
from otel_footprint.account.model import SignalId, Tone
from otel_footprint.account.templates import CHIPS
from otel_footprint.commands.cli import main
from otel_footprint.commands.evidence_words import (
    EVIDENCE_ATTRIBUTES,
    EVIDENCE_EVENTS,
    EVIDENCE_FIELDS,
    EVIDENCE_SPAN,
    PLACES,
)
from otel_footprint.commands.explain_html import KEY
from otel_footprint.commands.explain_text import COLUMNS
from otel_footprint.commands.explain_words import (
    CHECK_TITLES,
    ROW_TITLES,
    TONE_WORDS,
    check_outcome,
)
from otel_footprint.commands.integrity_words import CHECK_WORDS, OUTCOME_WORDS
from otel_footprint.kernel.ladder import LADDER

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")


def _code(word: str) -> str:
    """A term the glossary must show as code (`word`): names and words printed verbatim."""
    return f"`{word}`"


def table_terms() -> list[str]:
    """Every term the code's tables print; a backticked one must appear as code."""
    terms: list[str] = []
    terms += [_code(column) for column in COLUMNS]
    terms += [_code(c.text) for c in CHIPS.values()]
    terms += [_code(grade) for grade in LADDER]
    terms += [_code(signal) for signal in get_args(SignalId)]
    terms += [_code(tone) for tone in get_args(Tone) if tone != "plain"]
    terms += [word for word in TONE_WORDS.values() if word] + ["costly"]
    terms += list(ROW_TITLES.values())
    terms += [_code(check) for check in CHECK_TITLES]
    outcomes = [("reachable", "pass"), ("reachable", "fail"), ("unreachable", "unknown")]
    outcomes += [("not-applicable", "unknown")]
    terms += [_code(check_outcome(state, label)) for state, label in outcomes]
    terms += [_code("verify"), _code("shadow"), _code("no engagement")]
    for check, seam in semconv.INTEGRITY_ROWS:
        terms += [_code(f"{check}@{seam}"), CHECK_WORDS[(check, seam)]]
    terms += [_code(word) for word in OUTCOME_WORDS.values()]
    terms += [*EVIDENCE_FIELDS.values(), *EVIDENCE_EVENTS.values(), *EVIDENCE_ATTRIBUTES.values()]
    terms += [EVIDENCE_SPAN, *(_code(place) for place in PLACES)]
    for css, words in KEY:  # a mark's words whole; a reading hint by its lead
        terms.append(words if css else re.split(r":| = ", words, maxsplit=1)[0])
    terms += ["agentfootprint", "upstream", "park card", "idle N", "witness", "all spans present"]
    terms += ["resumed leg", _code("calls 5–30: same as call 4"), "--account"]
    return terms


def printed_terms(text: str, page: str) -> list[str]:
    """The fixed words the demo's text and page print: the page's headings, column heads, labels
    and folded-row summaries, the text's line heads."""
    found = re.findall(r"<h[13][^>]*>([^<]+)<", page)
    found += re.findall(r"<th>([^<]+)</th>", page)
    found += [t.split("(")[0] for t in re.findall(r"<summary>([^<]+)</summary>", page)]
    found += re.findall(r"<div class='(?:name|meta)'>([a-z][a-z ]+)</div>", page)
    found += re.findall(r"<b>([A-Z][^<:]+):?</b>", page)
    found += re.findall(r"^  (Checks|Integrity|Finding|Reason)\b", text, flags=re.M)
    for about in re.findall(r"^  trace \S+ · (.*)$", text, flags=re.M):
        found += [item for item in about.split(" · ") if not re.match(r"\d+ calls?$", item)]
    return sorted({html.unescape(t).strip() for t in found if t.strip()})


def missing_terms(glossary: str, text: str, page: str) -> list[str]:
    """The terms printed or tabled that ``glossary`` does not explain."""
    folded = glossary.lower()
    missing = [t for t in table_terms() if t not in glossary and t.lower() not in folded]
    missing += [t for t in printed_terms(text, page) if t.lower() not in folded]
    return missing


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The demo's text (with --account) and its HTML page."""
    spans = tmp_path_factory.mktemp("glossary") / "demo.jsonl"
    text = io.StringIO()
    assert main(["demo", "--account", "-o", str(spans)], text) == 0
    page = io.StringIO()
    assert main(["explain", str(spans), "--format", "html"], page) == 0
    return text.getvalue(), page.getvalue()


def test_every_printed_term_is_in_the_glossary(printed: tuple[str, str]) -> None:
    text, page = printed
    assert len(printed_terms(text, page)) > 20  # the extraction found the page's words
    assert missing_terms(GLOSSARY, text, page) == []


def test_every_integrity_check_has_words() -> None:
    assert set(CHECK_WORDS) == set(semconv.INTEGRITY_ROWS)


def _without(term: str) -> str:
    """The glossary with every line that mentions ``term`` taken out."""
    needle = term.strip("`").lower()
    return "\n".join(line for line in GLOSSARY.splitlines() if needle not in line.lower())


@pytest.mark.parametrize(
    "term",
    [
        "`call`",  # a column
        "`coverage not declared`",  # a chip
        "`could not run`",  # a check's result
        "a parked map's tools still offered to the model",  # an integrity check
        "`could not be judged`",  # an integrity result
        "the skill put in the prompt",  # an evidence chip
        "a check failed on this call",  # the page's key
        "agentfootprint",
        "upstream",
        "Timeline",  # a heading the page prints
        "given to the model",  # a label the page prints
    ],
)
def test_a_missing_entry_fails(printed: tuple[str, str], term: str) -> None:
    text, page = printed
    missing = missing_terms(_without(term), text, page)
    assert any(term.strip("`").lower() in m.lower() for m in missing), (term, missing)


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
