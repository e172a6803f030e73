"""Rules several integrity checks share: string leaves, the length fence, clipping, grounding.

The fidelity decisions of docs/design.md ("Integrity: fidelity over JSON traces") live here:
lengths are counted in UTF-16 code units as the upstream counts them (so the 4-character fence and
the 80-character clip agree with an agent that ran the checks itself), and object keys are walked
in JavaScript's order (integer-like keys first, ascending; then the rest in insertion order), so
leaf order — and with it finding order and which filing wins the dedup — matches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from otel_footprint import semconv
from otel_footprint.runs.integrity_inputs import PassInputs

MIN_CHECKED_LENGTH = 4
"""Shorter string values are never judged (too short to tell an invented id from a word)."""
MAX_QUOTED_CHARS = 80
"""A value quoted in a sentence is cut to this many UTF-16 units (the last one an ellipsis)."""
ENUM_DEPTH = 8

_ARRAY_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")
_JS_MAX_INDEX = 2**32 - 2


def utf16_len(text: str) -> int:
    """The length JavaScript's ``.length`` gives: UTF-16 code units (astral characters count 2)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def clip(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` UTF-16 units, the last one "…"; never splits a surrogate pair."""
    if utf16_len(text) <= limit:
        return text
    out: list[str] = []
    used = 0
    for ch in text:
        width = 2 if ord(ch) > 0xFFFF else 1
        if used + width > limit - 1:
            break
        out.append(ch)
        used += width
    return "".join(out) + "…"


def js_keys(obj: Mapping[str, Any]) -> list[str]:
    """Own keys in JavaScript's enumeration order: array-index keys ascending, then the rest."""
    index_keys = [k for k in obj if _ARRAY_INDEX.match(k) and int(k) <= _JS_MAX_INDEX]
    index_keys.sort(key=int)
    chosen = set(index_keys)
    return index_keys + [k for k in obj if k not in chosen]


def string_leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(dot path, string) for every string leaf, objects walked in JavaScript key order.

    Numbers, booleans and null are never leaves. ``{"filter": {"hosts": ["a"]}}`` gives
    ``("filter.hosts.0", "a")``.
    """
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key in js_keys(value):
            yield from string_leaves(value[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from string_leaves(item, f"{path}.{index}" if path else str(index))


def checked_leaves(arguments: Any) -> Iterator[tuple[str, str]]:
    """String leaves long enough to judge: (path, trimmed value)."""
    for path, raw in string_leaves(arguments):
        value = raw.strip()
        if utf16_len(value) >= MIN_CHECKED_LENGTH:
            yield path, value


def identifier_like(value: str) -> bool:
    """A value that names something rather than says something: one token, no whitespace (an id,
    a code, a key). What an observed run's argument check judges (``argument.py``)."""
    return not any(ch.isspace() for ch in value)


def enum_values(schema: Any, depth: int = 0) -> frozenset[str]:
    """Every string member of any ``enum`` anywhere in a JSON schema (flat, to depth 8)."""
    if depth > ENUM_DEPTH:
        return frozenset()
    found: set[str] = set()
    if isinstance(schema, Mapping):
        members = schema.get("enum")
        if isinstance(members, list):
            found.update(m for m in members if isinstance(m, str))
        for item in schema.values():
            if isinstance(item, Mapping | list):
                found |= enum_values(item, depth + 1)
    elif isinstance(schema, list):
        for item in schema:
            found |= enum_values(item, depth + 1)
    return frozenset(found)


def lowered(texts: Iterable[str]) -> tuple[str, ...]:
    return tuple(t.lower() for t in texts if t)


def grounded_in(needle: str, corpus: Iterable[str]) -> bool:
    """Case-insensitive substring: ``needle`` (already lower-cased) inside any corpus string."""
    return any(needle in text for text in corpus)


def compact_json(value: Any) -> str:
    """A value as ``JSON.stringify`` writes it: no spaces, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def names(items: Iterable[str]) -> str:
    return ", ".join(items)


TOOL_KEYS = (semconv.GEN_AI_TOOL_DEFINITIONS, semconv.OI_TOOLS_PREFIX, semconv.TL_FUNCTIONS_PREFIX)
FRAME_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.OI_INPUT_MESSAGES_PREFIX,
    semconv.TL_PROMPT_PREFIX,
)


def tools_missing(pass_: PassInputs) -> tuple[str, ...]:
    """Why a pass's offered list cannot be read: a reason id and its values (``Tally.note``)."""
    return _missing("tools", pass_, TOOL_KEYS)


def frame_missing(pass_: PassInputs) -> tuple[str, ...]:
    """Why a pass's frame cannot be read (content capture off, or the attribute cut)."""
    return _missing("frame", pass_, FRAME_KEYS)


def _missing(what: str, pass_: PassInputs, keys: tuple[str, ...]) -> tuple[str, ...]:
    """Not recorded at all, or recorded but unreadable (typically cut by an attribute length
    limit, which breaks its JSON)."""
    unreadable = pass_.unreadable()  # (none: the common case, capture off, asked at every pass)
    cut = [k for k in unreadable if k.startswith(keys)] if unreadable else ()
    return (f"{what}-unreadable", ", ".join(cut)) if cut else (f"{what}-unrecorded",)
