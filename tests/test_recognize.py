"""The recognition rule's law for hostile values: a list or a map where a name belongs is absent."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from otel_footprint import semconv as sc
from otel_footprint.runs.recognize import ROLE_KEYS, role_of

_NAMES = st.sampled_from(
    [
        *(sc.OP_INVOKE_AGENT, sc.OP_CHAT, sc.OP_EXECUTE_TOOL, "AGENT", "agent", "LLM", "tool"),
        *sorted(sc.AI_SDK_RUN_OPERATIONS | sc.AI_SDK_MODEL_CALL_OPERATIONS),
        *(sc.AI_SDK_OP_TOOL_CALL, "chat", "completion", "r1", ""),
    ]
)
_ROLE_VALUES = st.one_of(_NAMES, st.integers(-2, 2), st.booleans(), st.floats(allow_nan=False))
_HOSTILE = st.one_of(
    st.lists(_NAMES, max_size=2),
    st.tuples(_NAMES),
    st.dictionaries(_NAMES, _NAMES, max_size=2),
    st.binary(max_size=4),
)


@given(
    st.dictionaries(st.sampled_from(sorted(ROLE_KEYS)), _ROLE_VALUES),
    st.sampled_from(sorted(ROLE_KEYS)),
    _HOSTILE,
)
def test_a_hostile_value_reads_as_absent(scalars: dict[str, Any], key: str, hostile: Any) -> None:
    """A span whose role key holds a list, a map or bytes has the role of the span without it."""
    without = {k: v for k, v in scalars.items() if k != key}
    assert role_of({**scalars, key: hostile}.get) is role_of(without.get)
