"""The Node.js client spells no schema name itself: every name it uses is a key of semconv.py, and its
checked-in tests/node/semconv.json agrees with semconv.py (no Node.js needed to run these)."""

from __future__ import annotations

import json
import re

from otel_footprint import semconv

from .conftest import NODE_PROJECT

AGENT = NODE_PROJECT / "agent.mjs"
SNAPSHOT = NODE_PROJECT / "semconv.json"


def required_names() -> list[str]:
    source = AGENT.read_text()
    block = re.search(r"REQUIRED_NAMES = Object\.freeze\(\[(.*?)\]\)", source, re.DOTALL)
    assert block is not None, "agent.mjs no longer declares REQUIRED_NAMES"
    return re.findall(r"'([A-Z0-9_]+)'", block.group(1))


def test_every_name_the_node_agent_uses_exists_in_semconv() -> None:
    names = semconv.all_names()
    required = required_names()
    assert required, "REQUIRED_NAMES is empty"
    assert [k for k in required if k not in names] == []
    # Every N.KEY the script reads is declared (and so validated at start-up).
    used = set(re.findall(r"\bN\.([A-Z0-9_]+)\b", AGENT.read_text()))
    assert used - set(required) == set()


def test_checked_in_snapshot_matches_semconv() -> None:
    names = semconv.all_names()
    expected = {k: names[k] for k in sorted(required_names())}
    actual = json.loads(SNAPSHOT.read_text())
    assert actual == expected, (
        "tests/node/semconv.json is stale; regenerate it with:\n" + json.dumps(expected, indent=2)
    )


def test_node_agent_spells_no_schema_name() -> None:
    source = AGENT.read_text()
    literals = re.findall(
        r"""['"`]((?:footprint|agentfootprint|gen_ai|openinference)\.[^'"`]*)""", source
    )
    assert literals == [], f"agent.mjs spells schema names by hand: {literals}"
