"""The integrity checks in a person's words (``commands/integrity_words.py``): calls, not passes;
one reason over a range of calls, not one per call; plural where plural."""

from __future__ import annotations

import re

import pytest

from otel_footprint import semconv
from otel_footprint.account.integrity import Encounter, IntegrityResult, Row
from otel_footprint.account.integrity.common import tools_missing
from otel_footprint.account.integrity.texts import WHYS
from otel_footprint.commands.integrity_words import (
    CHECK_WORDS,
    REASON_WORDS,
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
    ("noted", "text"),
    [
        (Encounter("unreachable", 4, "tools-unrecorded", ()), "the tools offered on calls 4–6 are not in the record"),
        (Encounter("unreachable", 4, "frame-unrecorded", ()), "the messages shown on calls 4–6 are not in the record"),
        (
            Encounter("unreachable", 4, "tools-unreadable", ("gen_ai.tool.definitions",)),
            "the tools offered on calls 4–6 are recorded but cannot be read (gen_ai.tool.definitions: cut or not JSON)",
        ),
        (Encounter("unreachable", 4, "choice-unrecorded", ()), "the tools the model chose on calls 4–6 are not in the record"),
        (Encounter("unreachable", 4, "no-second-view", ()), "nothing records the tools actually sent on calls 4–6"),
        (Encounter("unreachable", 4, "nothing-held", ()), "no parked map held tools back on calls 4–6"),
        (
            Encounter("unreachable", 4, "enums-unrecorded", ("get_host",)),
            "the schema of 'get_host' offered at calls 4–6 is not in the record, so a value nothing served cannot be told from a member of an enum it declares",
        ),
        # A reason that names no call keeps the checks' own words.
        (Encounter("unreachable", 4, "unanswered", ("c7",)), "call c7 did not answer"),
    ],
)  # fmt: skip
def test_reasons_say_calls(noted: Encounter, text: str) -> None:
    assert reason_words(noted, [4, 5, 6]) == text


def test_every_reason_that_names_a_pass_has_words_that_say_calls() -> None:
    """A reason naming the model call ("pass 4", "this pass") is worded by its id; any other reason
    keeps the checks' sentence, which must then name no pass."""
    assert set(REASON_WORDS) <= set(WHYS)
    for reason, sentence in WHYS.items():
        if reason not in REASON_WORDS:
            assert not re.search(r"\{at\}|\bthis pass\b", sentence), reason
    for reason, words in REASON_WORDS.items():
        values = tuple(f"v{i}" for i in range(WHYS[reason].count("{") - WHYS[reason].count("{at}")))
        said = reason_words(Encounter("unreachable", 4, reason, values), [4, 5])
        assert "calls 4–5" in said and not re.search(r"\bpass\b", said), (reason, words)


def _unreachable_compose(calls: range) -> IntegrityResult:
    # The reason as the compose check writes it when the tool list was not captured.
    bare = CallView("t", "s", "gen_ai", None, None, None, None, None, None)
    noted = [Encounter("unreachable", i, tools_missing(PassInputs(i, bare))[0]) for i in calls]
    row = Row(
        "invariant-violation",
        "compose",
        unreachable=len(noted),
        why=tuple(e.reason or "" for e in noted[:3]),
        armed=True,
    )
    rows = tuple(
        row if (kind, seam) == ("invariant-violation", "compose") else Row(kind, seam)  # type: ignore[arg-type]
        for kind, seam in semconv.INTEGRITY_ROWS
    )
    encounters = {("invariant-violation", "compose"): tuple(noted)}
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
