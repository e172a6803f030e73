"""What the account folds over: one run leg's ordered events, its tool calls, and what came before.

The engine (``runs/``) builds an :class:`AccountInput` per leg with :func:`leg_input`; a verdict seen
in an earlier leg of the same run travels between legs as :class:`CarriedVerdict` JSON in the run
store (:func:`otel_footprint.account.understood.verdict_to_carry` makes it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias, TypeVar, cast

from otel_footprint import semconv
from otel_footprint.account.model import Pointer
from otel_footprint.account.view import LegView
from otel_footprint.codec import EventPointer, FootprintEvent, quick_init

Origin: TypeAlias = Literal["event", "held", "carried"]
"""Where a routing verdict was read: this leg's ``skill.turn_routed``, the state a resumed leg
holds (the upstream's held verdict), or an earlier leg of the run this processor itself saw."""

_T = TypeVar("_T")

CARRIED_KIND = "otel-footprint/carried-verdict"
CARRIED_SHAPE = 1
CARRIED_TEXT_CHARS = 2_000
"""A carried string longer than this is not carried (the run store keeps small values)."""


class ToolCall(NamedTuple):
    """One tool call of the leg, read from its ``execute_tool`` span (the engine builds one per
    call of every run: a named tuple, immutable and about a third of the cost of a frozen
    dataclass)."""

    name: str | None
    """``gen_ai.tool.name``; None when no span or event names the tool."""
    call_id: str | None
    """``gen_ai.tool.call.id`` (joins ``tools.absent`` / ``tools.coverage_declared`` payloads)."""
    arguments: str | None
    """``gen_ai.tool.call.arguments`` as recorded (JSON text), None when not captured."""
    result: str | None
    """``gen_ai.tool.call.result``: what the MODEL read. None when the result was not captured."""
    error: bool
    """The span's status is ERROR (the call failed)."""
    status: str | None
    """The tool's own declared status when the agent recorded one (upstream ``tool_end.status``,
    e.g. ``absent``); None otherwise."""
    trace_id: str
    span_id: str
    """The tool span: evidence pointers to the result name it, with no event."""
    iteration: int | None
    """``footprint.pass.iteration``: the pass whose model output asked for the call."""
    result_at: Pointer | None = None
    """Where ``result`` was read when not the span's ``gen_ai.tool.call.result`` (a call read
    from a model call's output: its result is in a later call's input messages)."""


@quick_init
@dataclass(frozen=True, slots=True)
class HeldState:
    """The ``state`` and ``pausedWith`` objects a resumed leg's ``pause.resume`` event carries."""

    state: Mapping[str, Any] | None
    paused_with: Mapping[str, Any] | None
    event: EventPointer
    """The ``pause.resume`` event: state pointers name its ``footprint.state`` attribute."""

    @property
    def complete(self) -> bool:
        """Both objects were shipped (the upstream's "the paused state is held")."""
        return self.state is not None and self.paused_with is not None


@quick_init
@dataclass(frozen=True, slots=True)
class Score:
    """One entry of a routing verdict's ranked scores (only what the scores line reads)."""

    id: str | None
    """The skill id when it is a string."""
    score: float | None
    """The score when it is a finite number."""


@quick_init
@dataclass(frozen=True, slots=True)
class RoutingVerdict:
    """The turn-start routing verdict, from whichever source held it, with its evidence."""

    by: str
    origin: Origin
    to: str | None = None
    from_: str | None = None
    decisive: bool | None = None
    scorer: str | None = None
    witness: str | None = None
    """The person's words the rule matched (``witness.text``)."""
    offered: int | None = None
    """How many skills the menu offered (``offered`` length)."""
    decider_model: str | None = None
    top: Score | None = None
    """The first score record (the upstream filters non-records out before indexing)."""
    next: Score | None = None
    others_equal: bool = False
    """Every score after the first equals ``next.score`` (compared as JSON values)."""
    pointers: tuple[tuple[str, Pointer], ...] = ()
    """Evidence per field: ``by``, ``to``, ``from``, ``witness``, ``deciderModel``,
    ``scores/0/score``, ``scores/1/score``, ``scores/1/id``."""

    def at(self, key: str) -> Pointer | None:
        """The pointer of one field, if the verdict's source has it."""
        # A plain loop: asked for every line of the row, over a handful of fields.
        for field_key, pointer in self.pointers:
            if field_key == key:
                return pointer
        return None

    def ats(self, *keys: str) -> tuple[Pointer, ...]:
        """The pointers of the fields that have one, in order."""
        found = [self.at(k) for k in keys]
        return tuple([p for p in found if p is not None])


@quick_init
@dataclass(frozen=True, slots=True)
class Declarations:
    """What the app declares beside the record (reference §4.1 ``declarations``)."""

    app_decides: bool = False
    """``routing.appDecides``: the app itself may decide a skill (its decision is not recorded)."""
    skill_labels: tuple[tuple[str, str], ...] = ()
    """``skills.<id>.label``: how a skill is named in sentences (a recorded node title wins)."""
    rows_at: tuple[tuple[str, str], ...] = ()
    """``tools.<name>.rowsAt``: the key of an object result that holds its rows."""

    def label_of(self, skill_id: str) -> str | None:
        """The app's label for a skill id."""
        return next((label for sid, label in self.skill_labels if sid == skill_id), None)

    def rows_at_of(self, tool: str | None) -> str | None:
        """The declared rows key of a tool's object results."""
        return next((key for name, key in self.rows_at if name == tool), None)

    @classmethod
    def of(
        cls,
        *,
        app_decides: bool = False,
        skill_labels: Mapping[str, str] | None = None,
        rows_at: Mapping[str, str] | None = None,
    ) -> Declarations:
        """Keyword form with plain mappings."""
        return cls(
            app_decides,
            tuple((skill_labels or {}).items()),
            tuple((rows_at or {}).items()),
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Declarations:
        """The upstream declarations shape: ``{routing: {appDecides}, skills: {<id>: {label}},
        tools: {<name>: {rowsAt}}}``. Unknown keys are ignored; wrong types raise ValueError."""
        app_decides = _section(data.get("routing"), "routing").get("appDecides", False)
        if not isinstance(app_decides, bool):
            raise ValueError("declarations: routing.appDecides must be true or false")
        labels = _strings_under(data, "skills", "label")
        rows = _strings_under(data, "tools", "rowsAt")
        return cls.of(app_decides=app_decides, skill_labels=labels, rows_at=rows)


def _section(value: object, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"declarations: {path} must be an object")
    return cast(Mapping[str, Any], value)


def _strings_under(data: Mapping[str, Any], section: str, key: str) -> dict[str, str]:
    """``{<name>: <section>.<name>.<key>}`` for every entry that declares ``key``."""
    found: dict[str, str] = {}
    for name, spec in _section(data.get(section), section).items():
        value = _section(spec, f"{section}.{name}").get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"declarations: {section}.{name}.{key} must be a string")
        found[name] = value
    return found


@quick_init
@dataclass(frozen=True, slots=True)
class CarriedVerdict:
    """The routing verdict an EARLIER leg of the same run had, kept in the run store.

    Its pointers stay in the earlier leg's trace, so a resumed leg's account links to the evidence
    the processor saw there (the upstream, reading one leg's record, cannot).
    """

    verdict: RoutingVerdict
    question: str | None = None
    """The earlier leg's ``turn_start.userPrompt`` (the resumed leg has no turn_start)."""
    question_pointer: Pointer | None = None

    @property
    def trace_id(self) -> str | None:
        """The trace the verdict was read in."""
        where = self.verdict.at("by")
        return where.trace_id if where is not None else None

    def to_json(self) -> str:
        """Compact JSON (camelCase, absent fields left out) for the run store."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object :meth:`to_json` writes."""
        v = self.verdict
        verdict: dict[str, Any] = {
            "by": v.by,
            "origin": v.origin,
            **present_fields(
                ("to", v.to),
                ("from", v.from_),
                ("decisive", v.decisive),
                ("scorer", v.scorer),
                ("witness", v.witness),
                ("offered", v.offered),
                ("deciderModel", v.decider_model),
            ),
        }
        for key, score in (("top", v.top), ("next", v.next)):
            if score is not None:
                verdict[key] = present_fields(("id", score.id), ("score", score.score))
        verdict["othersEqual"] = v.others_equal
        verdict["pointers"] = {k: pointer_to_dict(p) for k, p in v.pointers}
        out: dict[str, Any] = {"kind": CARRIED_KIND, "shape": CARRIED_SHAPE, "verdict": verdict}
        if self.question is not None:
            out["question"] = self.question
        if self.question_pointer is not None:
            out["questionPointer"] = pointer_to_dict(self.question_pointer)
        return out

    @classmethod
    def from_json(cls, text: str | bytes) -> CarriedVerdict:
        """Read :meth:`to_json` output; raises :class:`CarriedVerdictError` naming the bad path."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CarriedVerdictError(f"carried verdict: not JSON ({exc})") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> CarriedVerdict:
        """Read :meth:`to_dict` output."""
        top = _obj(data, "$")
        if top.get("kind") != CARRIED_KIND or top.get("shape") != CARRIED_SHAPE:
            raise CarriedVerdictError(
                f"$: not a {CARRIED_KIND} of shape {CARRIED_SHAPE} "
                f"(kind={top.get('kind')!r}, shape={top.get('shape')!r})"
            )
        raw = _obj(top.get("verdict"), "$.verdict")
        origin = raw.get("origin")
        if origin not in ("event", "held", "carried"):
            raise CarriedVerdictError(f"$.verdict.origin: unknown origin {origin!r}")
        pointers_raw = _obj(raw.get("pointers", {}), "$.verdict.pointers")
        verdict = RoutingVerdict(
            by=_req_str(raw, "by", "$.verdict"),
            origin=cast(Origin, origin),
            to=_opt(raw, "to", str, "$.verdict"),
            from_=_opt(raw, "from", str, "$.verdict"),
            decisive=_opt(raw, "decisive", bool, "$.verdict"),
            scorer=_opt(raw, "scorer", str, "$.verdict"),
            witness=_opt(raw, "witness", str, "$.verdict"),
            offered=_opt(raw, "offered", int, "$.verdict"),
            decider_model=_opt(raw, "deciderModel", str, "$.verdict"),
            top=_score(raw.get("top"), "$.verdict.top"),
            next=_score(raw.get("next"), "$.verdict.next"),
            others_equal=_opt(raw, "othersEqual", bool, "$.verdict") or False,
            pointers=tuple(
                (key, pointer_from_dict(p, f"$.verdict.pointers.{key}"))
                for key, p in pointers_raw.items()
            ),
        )
        question_pointer = top.get("questionPointer")
        return cls(
            verdict=verdict,
            question=_opt(top, "question", str, "$"),
            question_pointer=(
                pointer_from_dict(question_pointer, "$.questionPointer")
                if question_pointer is not None
                else None
            ),
        )


class CarriedVerdictError(ValueError):
    """Stored carried-verdict JSON that is not this module's shape; the message names the path."""


def present_fields(*fields: tuple[str, object]) -> dict[str, Any]:
    """The (key, value) pairs whose value is present, in order: absent (None) fields are left
    out of the JSON, never written as ``null``."""
    return {key: value for key, value in fields if value is not None}


def pointer_to_dict(pointer: Pointer) -> dict[str, Any]:
    """A pointer as camelCase JSON (absent fields left out)."""
    return {
        "traceId": pointer.trace_id,
        "spanId": pointer.span_id,
        **present_fields(
            ("eventName", pointer.event_name),
            ("eventIndex", pointer.event_index),
            ("attribute", pointer.attribute),
            ("jsonPath", pointer.json_path),
        ),
    }


def pointer_from_dict(data: object, path: str) -> Pointer:
    """The inverse of :func:`pointer_to_dict`."""
    obj = _obj(data, path)
    return Pointer(
        trace_id=_req_str(obj, "traceId", path),
        span_id=_req_str(obj, "spanId", path),
        event_name=_opt(obj, "eventName", str, path),
        event_index=_opt(obj, "eventIndex", int, path),
        attribute=_opt(obj, "attribute", str, path),
        json_path=_opt(obj, "jsonPath", str, path),
    )


def _obj(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise CarriedVerdictError(f"{path}: expected an object")
    return cast(Mapping[str, Any], value)


def _req_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise CarriedVerdictError(f"{path}.{key}: expected a string")
    return value


def _opt(obj: Mapping[str, Any], key: str, kind: type[_T], path: str) -> _T | None:
    value = obj.get(key)
    if value is None:
        return None
    # bool is an int in Python: an int field must not accept true/false, nor a bool field 1.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CarriedVerdictError(f"{path}.{key}: expected {kind.__name__}")
    return value


def _score(value: object, path: str) -> Score | None:
    if value is None:
        return None
    obj = _obj(value, path)
    score = obj.get("score")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score)
    ):
        raise CarriedVerdictError(f"{path}.score: expected a finite number")
    return Score(_opt(obj, "id", str, path), score)


@quick_init
@dataclass(frozen=True, slots=True)
class ObservedTurn:
    """What an observed run's instrumentation recorded of the turn (no recorder events): the
    person's question as the first model call was shown it, and the answer its last call gave."""

    question: str | None
    question_pointer: Pointer | None
    answered: bool
    """The last model call answered (text, no tool call asked for)."""


@dataclass(frozen=True, slots=True)
class AccountInput:
    """One run leg as the account reads it. Build with :func:`leg_input` unless testing flags."""

    events: tuple[FootprintEvent, ...]
    """The leg's footprint events in order (time, then span order)."""
    tool_calls: tuple[ToolCall, ...] = ()
    answered: bool = False
    """An ``agent.turn_end`` is recorded (the record shows the run finishing)."""
    answering_iteration: int | None = None
    """The iteration of the leg's last pass (the model call that answered, or the latest one)."""
    resumed: bool = False
    """A resumed leg: a ``pause.resume`` event, or a turn_end with no turn_start."""
    held: HeldState | None = None
    carried: CarriedVerdict | None = None
    """The verdict an earlier leg of the same run had (used on resumed legs only)."""
    declarations: Declarations = field(default_factory=Declarations)
    observed: ObservedTurn | None = None
    """An observed run (read from its instrumentation alone): what it recorded of the turn."""
    unrecorded_passes: tuple[int, ...] = ()
    """Passes whose tool calls are recorded nowhere (``tool-calls-unrecorded``): their calls are
    missing from ``tool_calls``, so a check over every call cannot be complete."""
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """What the account's readers derive from this input once and share (the indexed leg, the
    routing verdict): ``account_for`` and ``verdict_to_carry`` read the same leg. A cache only:
    every value in it is a pure function of the fields above, which are frozen."""


def held_state_of(events: Iterable[FootprintEvent]) -> HeldState | None:
    """The state and pausedWith objects of the leg's first ``pause.resume``, when shipped."""
    for event in events:
        if event.type != semconv.T_PAUSE_RESUME:
            continue
        state = event.payload.get("state")
        paused = event.payload.get("pausedWith")
        state_obj = cast(Mapping[str, Any], state) if isinstance(state, Mapping) else None
        paused_obj = cast(Mapping[str, Any], paused) if isinstance(paused, Mapping) else None
        if state_obj is None and paused_obj is None:
            return None
        return HeldState(state_obj, paused_obj, event.pointer)
    return None


def leg_input(
    events: Iterable[FootprintEvent],
    tool_calls: Iterable[ToolCall] = (),
    *,
    answering_iteration: int | None,
    carried: CarriedVerdict | None = None,
    declarations: Declarations | None = None,
    observed: ObservedTurn | None = None,
    unrecorded_passes: tuple[int, ...] = (),
    by_type: Mapping[str, Sequence[FootprintEvent]] | None = None,
) -> AccountInput:
    """An :class:`AccountInput` with ``answered``, ``resumed`` and ``held`` read off the events.

    ``answering_iteration`` is the engine's: the ``footprint.pass.iteration`` of the leg's last
    pass span (None when the leg has no pass). ``carried`` comes from the run store. ``by_type``:
    the events already indexed by type (the engine's :class:`~otel_footprint.runs.passes.RunFacts`).
    """
    ordered = tuple(events)
    view = LegView(ordered, by_type)  # indexed once; the account's readers share it (``memo``)
    answered = view.has(semconv.T_TURN_END) or (observed is not None and observed.answered)
    resumed = view.has(semconv.T_PAUSE_RESUME) or (
        observed is None and answered and not view.has(semconv.T_TURN_START)
    )
    resume = view.first(semconv.T_PAUSE_RESUME)
    inp = AccountInput(
        events=ordered,
        tool_calls=tuple(tool_calls),
        answered=answered,
        answering_iteration=answering_iteration,
        resumed=resumed,
        held=held_state_of((resume,)) if resume is not None else None,
        carried=carried,
        declarations=declarations if declarations is not None else Declarations(),
        observed=observed,
        unrecorded_passes=unrecorded_passes,
    )
    inp.memo["view"] = view
    return inp
