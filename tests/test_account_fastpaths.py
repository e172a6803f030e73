"""The account's and the annotation form's fast paths give exactly the answers of the plain code.

``Writer.say`` fills its template from the variables in place and skips ranking a single voucher;
``calls_of`` parses each distinct result text once; a leg's view and routing verdict are read once
per input and shared; the annotation builders put a pass span's attributes at once and return a
list that needs no cut as it is. Each is checked against the plain rule it replaces, as a law.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from _shared import recordings
from hypothesis import given
from hypothesis import strategies as st

from otel_footprint.account.account import account_for
from otel_footprint.account.checks import calls_of
from otel_footprint.account.input import AccountInput, ToolCall, leg_input
from otel_footprint.account.model import Chip, Line, Pointer
from otel_footprint.account.pointers import bounded
from otel_footprint.account.templates import TEMPLATES, FillError, fill, placeholders, weakest
from otel_footprint.account.understood import routing_verdict_of, verdict_to_carry
from otel_footprint.account.view import LegView, leg_view
from otel_footprint.account.writer import Var, Writer
from otel_footprint.annotate.form import AnnotateOptions, _Builder, _Shaper, clip
from otel_footprint.bridges.agentfootprint import recording_to_requests
from otel_footprint.engine.decide import _account_tool_calls
from otel_footprint.runs.group import group_runs
from otel_footprint.runs.passes import read_run
from otel_footprint.runs.spans import OtlpSpanView

_TEMPLATE_IDS = sorted(TEMPLATES)
_SOURCES = st.sampled_from([None, "person", "library", "tool:find", "model", "app", "odd"])
_POINTERS = st.builds(
    Pointer,
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(["s1", "s2", "s3"]),
    st.sampled_from([None, "footprint.turn_start"]),
    st.sampled_from([None, 0, 1]),
)
_TEXTS = st.text(alphabet="ab{}x ", max_size=12)


def _plain_say(
    writer_unread: list[int],
    row: str,
    template_id: str,
    values: dict[str, Var] | None,
    *,
    status: str,
    pointers: list[Pointer],
    chips: list[Chip],
    missing: str | None,
    item: bool,
    basis: list[str],
) -> Line:
    """``Writer.say`` as it was written before the fast paths (the reference)."""
    values = values or {}
    try:
        text = fill(template_id, {k: v.text for k, v in values.items()} if values else {})
    except FillError:
        writer_unread[0] += 1
        return Line(
            row=row,  # type: ignore[arg-type]
            template_id="unreadable.line",
            text=TEMPLATES["unreadable.line"].text,
            status="not-recorded",
            source="library",
            missing="unreadable",
            item=item,
        )
    sources = [TEMPLATES[template_id].voucher, *basis]
    every = [*pointers]
    if values:
        sources += [v.source for v in values.values() if v.source is not None]
        every += [v.pointer for v in values.values() if v.pointer is not None]
    return Line(
        row=row,  # type: ignore[arg-type]
        template_id=template_id,
        text=text,
        status=status,  # type: ignore[arg-type]
        source=weakest(sources),
        pointers=bounded(every) if every else (),
        chips=tuple(chips),
        missing=missing,
        item=item,
    )


@st.composite
def _say_args(draw: st.DrawFn) -> tuple[str, dict[str, Var] | None, list[Pointer], list[str]]:
    template_id = draw(st.sampled_from(_TEMPLATE_IDS))
    names = sorted(placeholders(template_id))
    # Sometimes every placeholder, sometimes some missing (an unreadable line), sometimes extra.
    chosen = draw(st.lists(st.sampled_from([*names, "extra"]), unique=True))
    values = {
        name: Var(draw(_TEXTS), draw(_SOURCES), draw(st.none() | _POINTERS)) for name in chosen
    }
    pointers = draw(st.lists(_POINTERS, max_size=3))
    basis = draw(st.lists(st.sampled_from(["library", "tool:x", "app", "model"]), max_size=2))
    empty_as_none: bool = draw(st.booleans())
    return template_id, (None if not values and empty_as_none else values), pointers, basis


@given(_say_args(), st.booleans())
def test_say_is_the_plain_say(
    args: tuple[str, dict[str, Var] | None, list[Pointer], list[str]], item: bool
) -> None:
    template_id, values, pointers, basis = args
    chips = [Chip("m", "t")]
    writer = Writer()
    unread = [0]
    got = writer.say(
        "found", template_id, values, pointers=pointers, chips=chips, item=item, basis=basis
    )
    want = _plain_say(
        unread,
        "found",
        template_id,
        values,
        status="recorded",
        pointers=pointers,
        chips=chips,
        missing=None,
        item=item,
        basis=basis,
    )
    assert got == want
    assert writer.unread == unread[0]
    # The sentence alone is the same fill, and counts an unreadable template the same way.
    text_writer = Writer()
    try:
        expected = fill(template_id, {k: v.text for k, v in (values or {}).items()})
    except FillError:
        expected = TEMPLATES["unreadable.line"].text
    assert text_writer.text(template_id, values) == expected
    assert text_writer.unread == unread[0]


def _call(result: str | None, n: int, *, name: str = "find") -> ToolCall:
    return ToolCall(name, f"c{n}", None, result, False, None, "t" * 32, f"{n:016x}", n)


_RESULTS = ["[]", "[1, 2]", ' [{"a": 1}]', "{bad", "plain text", '{"rows": []}', "[1", "  {}"]


@given(st.lists(st.sampled_from([*_RESULTS, None]), min_size=1, max_size=12))
def test_each_result_judged_as_if_alone(results: list[str | None]) -> None:
    """Parsing each distinct result text once gives every call the verdict it has alone."""
    calls = [_call(r, i) for i, r in enumerate(results)]
    together, _ = calls_of(AccountInput((), tuple(calls)), LegView(()))
    for call, judged in zip(calls, together, strict=True):
        alone, _ = calls_of(AccountInput((), (call,)), LegView(()))
        assert judged == alone[0]
        if call.result is not None and judged.emptiness in ("non-empty", "undeclared-empty"):
            assert judged.rows == len(json.loads(call.result))


def test_the_leg_is_indexed_once_and_shared() -> None:
    inp = leg_input((), [_call("[]", 1)], answering_iteration=1)
    view = leg_view(inp)
    assert leg_view(inp) is view  # built by leg_input, read by every reader
    assert account_for(inp) == account_for(inp)
    assert routing_verdict_of(inp) is None and verdict_to_carry(inp) is None
    # A copy with other fields is another input: its own view, never the first one's.
    other = replace(inp, tool_calls=())
    assert leg_view(other) is not view
    assert other == replace(other)  # the cache takes no part in equality
    assert inp.memo and inp == leg_input((), [_call("[]", 1)], answering_iteration=1)


@pytest.mark.parametrize("path", recordings(), ids=lambda p: p.stem)
def test_the_engine_hands_the_legs_own_index(path: Path) -> None:
    """The account of a leg handed the engine's index (``RunFacts.by_type``) is the account of
    the same leg indexed by the account itself."""
    lines = path.read_text(encoding="utf-8").splitlines()
    views = [
        OtlpSpanView(span)
        for request in recording_to_requests(lines)
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    for run in group_runs(views):
        facts = read_run(run)
        calls = _account_tool_calls(facts)
        last = max((p.iteration for p in facts.passes), default=None)
        handed = leg_input(facts.events, calls, answering_iteration=last, by_type=facts.by_type)
        own = leg_input(facts.events, calls, answering_iteration=last)
        assert account_for(handed) == account_for(own)


@given(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 3)), max_size=12),
    st.integers(1, 10),
    st.booleans(),
)
def test_put_all_is_put_in_order(pairs: list[tuple[str, int]], cap: int, filled: bool) -> None:
    options = AnnotateOptions(max_attributes_per_span=cap)
    at_once, one_by_one = _Builder(options), _Builder(options)
    if filled:
        for builder in (at_once, one_by_one):
            builder.put("z", 0)
    at_once.put_all(pairs)
    for key, value in pairs:
        one_by_one.put(key, value)
    assert list(at_once.attributes.items()) == list(one_by_one.attributes.items())


@given(
    st.lists(st.text(alphabet="ab…", max_size=8), max_size=6),
    st.integers(1, 6),
    st.integers(1, 5),
    st.sampled_from(["keep", "hash", "drop"]),
)
def test_strings_and_values_are_the_plain_shaping(
    items: list[str], value_chars: int, count: int, witness: str
) -> None:
    options = AnnotateOptions(
        witness=witness,  # type: ignore[arg-type]
        max_value_chars=value_chars,
        max_text_chars=value_chars + 1,
        max_list_items=count,
    )
    shaper = _Shaper(options, ("ab",))
    plain = tuple(clip(shaper.scrub(i), value_chars) for i in items[:count])
    assert shaper.strings(tuple(items)) == plain
    assert shaper.strings(iter(items)) == plain
    for text in items:
        assert shaper.value(text) == clip(shaper.scrub(text), value_chars)
        assert shaper.text(text) == clip(shaper.scrub(text), value_chars + 1)
