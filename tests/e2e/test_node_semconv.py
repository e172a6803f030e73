"""The Node.js clients spell no schema name themselves: they take every name (and the payload codec)
from ``@otel-footprint/recorder``, whose names are generated from semconv.py (tests/test_js_vectors.py
keeps them in step). No Node.js is needed to run these."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_footprint import semconv

from .conftest import NODE_PROJECT

CLIENTS = [NODE_PROJECT / "agent.mjs", NODE_PROJECT / "openai_agent.mjs"]


@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.name)
def test_every_name_the_client_uses_exists_in_semconv(client: Path) -> None:
    source = client.read_text()
    assert re.search(r"names as N\b[^;]*from '@otel-footprint/recorder'", source)
    used = set(re.findall(r"\bN\.([A-Z0-9_]+)\b", source))
    assert used, "the client reads no names"
    assert sorted(used - set(semconv.all_names())) == []


@pytest.mark.parametrize("client", CLIENTS, ids=lambda p: p.name)
def test_client_spells_no_schema_name(client: Path) -> None:
    source = client.read_text()
    literals = re.findall(
        r"""['"`]((?:footprint|agentfootprint|gen_ai|openinference)\.[^'"`]*)""", source
    )
    assert literals == [], f"{client} spells schema names by hand: {literals}"


def test_the_fixture_has_no_codec_of_its_own() -> None:
    source = (NODE_PROJECT / "agent.mjs").read_text()
    assert "import { encodePayload, names as N } from '@otel-footprint/recorder'" in source
    assert "function encodeValue" not in source and "snakeCase" not in source
    assert not (NODE_PROJECT / "semconv.json").exists()
