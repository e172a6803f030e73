"""docs/schema.md and semconv.py name the same footprint.* strings: neither may drift from the other."""

from __future__ import annotations

import re
from pathlib import Path

from otel_footprint import semconv

SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "schema.md"
# A footprint.* name in prose; "agentfootprint." (preceded by a letter) is the upstream's, not ours.
_NAME = re.compile(r"(?<![A-Za-z0-9_.:/-])footprint\.[A-Za-z0-9_.\-]*[A-Za-z0-9_]")


def _constants() -> set[str]:
    return {
        value
        for value in semconv.all_names().values()
        if value.startswith(semconv.PREFIX) and value != semconv.PREFIX
    }


def _documented() -> set[str]:
    text = SCHEMA.read_text(encoding="utf-8")
    names = set()
    for match in _NAME.finditer(text):
        following = text[match.end() : match.end() + 2]
        if following.startswith(("<", "*")) or following in (".<", ".*"):
            continue  # a prefix mentioned in prose, e.g. footprint.<check id>
        names.add(match.group(0))
    return names


def test_every_semconv_name_is_documented() -> None:
    missing = sorted(_constants() - _documented())
    assert not missing, f"add these to docs/schema.md: {missing}"


def test_every_documented_name_exists_in_semconv() -> None:
    evaluation_names = {semconv.evaluation_name(check) for check in semconv.CHECK_IDS}
    unknown = sorted(_documented() - _constants() - evaluation_names)
    assert not unknown, f"docs/schema.md names these, semconv.py does not: {unknown}"


def test_the_name_pattern_reads_prose_the_way_a_reader_does() -> None:
    found = [
        m.group(0)
        for m in _NAME.finditer(
            "see `footprint.run.id`, agentfootprint.context.injected and footprint.<type>; "
            "`footprint.decided-delivered`."
        )
    ]
    assert found == ["footprint.run.id", "footprint.decided-delivered"]
