"""The integrity checks in a person's words (``commands/integrity_words.py``): calls, not passes;
one reason over a range of calls, not one per call; plural where plural."""

from __future__ import annotations

import re

import pytest

from otel_footprint import semconv
from otel_footprint.account.integrity import Encounter, IntegrityResult, Row
from otel_footprint.account.integrity.common import tools_missing
from otel_footprint.commands.integrity_words import (
    CHECK_WORDS,
    calls_text,
    reason_words,
    row_reasons,
    row_words,
    summary_words,
)
from otel_footprint.runs.integrity_inputs import PassInputs
from otel_footprint.runs.outputs import CallView


@pytest.mark.parametrize(
    ("calls", "text"),
    [
        ([3], "call 3"),
        ([4, 5, 6], "calls 4–6"),
        ([1, 3, 5], "calls 1, 3 and 5"),
        ([9, 4, 5, 6, 4], "calls 4–6 and 9"),
    ],
)
def test_calls_fold_into_ranges(calls: list[int], text: str) -> None:
    assert calls_text(calls) == text


@pytest.mark.parametrize(
    ("why", "text"),
    [
        ("the tools offered at pass # is not in the record", "the tools offered on calls 4–6 are not in the record"),
        ("the messages shown at pass # is not in the record", "the messages shown on calls 4–6 are not in the record"),
        (
            "the tools offered at pass # is recorded but not readable (gen_ai.tool.definitions: cut or not JSON)",
            "the tools offered on calls 4–6 are recorded but cannot be read (gen_ai.tool.definitions: cut or not JSON)",
        ),
        ("which tools pass # chose is not in the record", "the tools the model chose on calls 4–6 are not in the record"),
        ("pass # has no second view of the tools sent", "nothing records the tools actually sent on calls 4–6"),
        ("no parked map holds tools back at this pass", "no parked map held tools back on calls 4–6"),
        # A reason the table does not know still says calls.
        ("the widget of pass # is odd at this pass", "the widget of calls 4–6 is odd at this call"),
    ],
)  # fmt: skip
def test_reasons_say_calls(why: str, text: str) -> None:
    assert reason_words(why, [4, 5, 6]) == text


def _unreachable_compose(calls: range) -> IntegrityResult:
    # The reason as the compose check writes it when the tool list was not captured.
    bare = CallView("t", "s", "gen_ai", None, None, None, None, None, None)
    whys = [tools_missing(PassInputs(i, bare)) for i in calls]
    row = Row(
        "invariant-violation", "compose", unreachable=len(whys), why=tuple(whys[:3]), armed=True
    )
    rows = tuple(
        row if (kind, seam) == ("invariant-violation", "compose") else Row(kind, seam)  # type: ignore[arg-type]
        for kind, seam in semconv.INTEGRITY_ROWS
    )
    encounters = {
        ("invariant-violation", "compose"): tuple(
            Encounter("unreachable", i, w) for i, w in zip(calls, whys, strict=True)
        )
    }
    return IntegrityResult(rows, (), encounters=encounters)


def test_a_row_that_could_not_be_judged_reads_as_one_sentence() -> None:
    result = _unreachable_compose(range(4, 31))
    row = result.row("invariant-violation", "compose")
    assert row_reasons(row, result) == ["the tools offered on calls 4–30 are not in the record"]
    assert row_words(row, result) == (
        "a parked map's tools still offered to the model: could not be judged "
        "(the tools offered on calls 4–30 are not in the record)"
    )
    sentence = summary_words(result)
    assert sentence.startswith("Nothing contradicted, but one check could not be judged: ")
    assert not re.search(r"\bpass\b|@|\bis not in the record", sentence), sentence


def test_every_check_has_words() -> None:
    assert set(CHECK_WORDS) == set(semconv.INTEGRITY_ROWS)
