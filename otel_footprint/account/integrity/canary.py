"""Dev posture (``footprint.integrity.config`` ``posture: dev``): canaries and the liveness alarm.

A canary is one planted defect per check, run through the check's own pure function: a check that
no longer catches it is broken, whatever the run looked like. Canaries are counted apart
(``Row.synthetic``), never as findings. The liveness alarm names an armed check that met no subject
at all in a run that did work (its row says ``unreachable`` in every posture; dev posture also
raises it as an alarm, the upstream's dead-checker theorem). Both are alarms, not findings: they say the checker, not the
run, may be wrong. Observe posture (the default) runs neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache

from otel_footprint.account.integrity.argument import check_arguments
from otel_footprint.account.integrity.claim import check_claims
from otel_footprint.account.integrity.columns import check_columns
from otel_footprint.account.integrity.dangling import check_dangling
from otel_footprint.account.integrity.invariant import check_compose, check_wire
from otel_footprint.account.integrity.lookup import check_lookups
from otel_footprint.account.integrity.model import ParkState, Row
from otel_footprint.account.integrity.recency import check_recency
from otel_footprint.account.integrity.tally import Tally
from otel_footprint.runs.integrity_inputs import (
    Answer,
    ClaimDeclaration,
    Execution,
    Grounding,
    IntegrityInputs,
    PassInputs,
    Settings,
    SettledFact,
    ToolDeclaration,
)
from otel_footprint.runs.outputs import CallView, ChosenCall, FrameMessage, OfferedTool, Ref

_REF = Ref("0" * 31 + "1", "0" * 15 + "1")
_TOOL = "canary_tool"
_GROUND = "canary_ground"
_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}}


def _view(
    tools: tuple[str, ...],
    messages: tuple[FrameMessage, ...] = (),
    output: tuple[FrameMessage, ...] = (),
) -> CallView:
    offered = tuple(OfferedTool(name, _SCHEMA) for name in tools)
    return CallView(
        _REF.trace_id, _REF.span_id, "gen_ai", offered, _REF, (), messages, _REF, output
    )


def _inputs(**overrides: object) -> IntegrityInputs:
    base: dict[str, object] = {
        "trace_id": _REF.trace_id,
        "run_span_id": None,
        "passes": (),
        "declarations": {},
        "settings": Settings(),
        "executions": (),
    }
    base.update(overrides)
    return IntegrityInputs(**base)  # type: ignore[arg-type]


def _declared(*, columns: Mapping[str, object] | None = None) -> dict[str, ToolDeclaration]:
    return {_TOOL: ToolDeclaration(_TOOL, (_GROUND,), columns, _REF)}


def _wire() -> Tally:
    pass_ = PassInputs(1, _view((_TOOL,)), wire_manifest=(_TOOL, "canary_ghost"), wire_ref=_REF)
    return check_wire(_inputs(passes=(pass_,)))


def _compose() -> Tally:
    park = {1: ParkState(1, {"canary_map": (_TOOL,)})}
    return check_compose(_inputs(passes=(PassInputs(1, _view((_TOOL,))),)), park, shadow=False)


def _dangling() -> Tally:
    first = _view((_TOOL,), messages=(FrameMessage(0, "user", ("hello",)),))
    second = PassInputs(2, first, dropped=(_GROUND,), dropped_ref=_REF)
    return check_dangling(
        _inputs(passes=(PassInputs(1, first, dropped=()), second), declarations=_declared())
    )


def _argument() -> Tally:
    invented = ChosenCall("c1", _TOOL, {"id": "canary-invented-0001"}, True, _REF)
    view = _view(
        (_TOOL,),
        messages=(FrameMessage(0, "user", ("hello",)),),
        output=(FrameMessage(0, "assistant", (), (invented,)),),
    )
    return check_arguments(_inputs(passes=(PassInputs(1, view),), declarations=_declared()))


def _claim() -> Tally:
    fact = SettledFact("canary", "v", 1, _TOOL, "c1", 1, None, _REF)
    return check_claims(
        _inputs(
            claims=(ClaimDeclaration("v", "canary", "v", _REF),),
            facts=(fact,),
            answer=Answer('{"v": 2}', _REF),
        )
    )


def _lookup() -> Tally:
    producer = Execution(_GROUND, "c1", 1, 0, {}, False, '["canary-id-0001"]', None, None, _REF)
    consumer = Execution(_TOOL, "c2", 2, 1, {"id": "canary-id-0001"}, False, "[]", None, None, _REF)
    return check_lookups(
        _inputs(
            declarations=_declared(),
            settings=Settings(notice_empty_lookups=True),
            executions=(producer, consumer),
        )
    )


def _columns() -> tuple[Tally, Tally]:
    rows = Execution(_TOOL, "c1", 1, 0, {}, False, '[{"n":"x"}]', None, None, _REF)
    return check_columns(
        _inputs(
            declarations=_declared(columns={"n": "number", "gone": "string"}),
            settings=Settings(check_column_types="warn"),
            executions=(rows,),
        )
    )


def _recency() -> Tally:
    reading = Grounding(0, 2, 1, 2, 0, False, _REF)
    return check_recency(
        _inputs(settings=Settings(notice_prior_turn_evidence=True), grounding=reading)
    )


_CANARIES: Mapping[tuple[str, str], Callable[[], Tally]] = {
    ("invariant-violation", "wire"): _wire,
    ("invariant-violation", "compose"): _compose,
    ("dangling-reference", "compose"): _dangling,
    ("unsupported-argument", "choice"): _argument,
    ("unsupported-claim", "claim"): _claim,
    ("empty-lookup", "write"): _lookup,
    ("column-type-mismatch", "write"): lambda: _columns()[0],
    ("missing-column", "write"): lambda: _columns()[1],
    ("prior-turn-evidence", "claim"): _recency,
}


@lru_cache(maxsize=1)
def caught() -> Mapping[tuple[str, str], bool]:
    """Whether each check catches its own planted defect (the fixtures never change: once)."""
    return {key: bool(run().findings) for key, run in _CANARIES.items()}


def dev_alarms(rows: tuple[Row, ...], silent: frozenset[tuple[str, str]]) -> tuple[str, ...]:
    """The alarms of a dev-posture run: a canary a check did not catch, and an armed check that
    met no subject at all (``silent``) while the run did work. A check that met subjects and found
    them all out of scope did run: that is no alarm."""
    out: list[str] = []
    canaries = caught()
    for row in rows:
        name = f"{row.check}@{row.seam}"
        if not canaries.get((row.check, row.seam), False):
            out.append(f"{name}: its canary was not caught (0 of 1)")
        if (row.check, row.seam) in silent:
            out.append(f"{name}: armed, but met no subject in a run that did work")
    return tuple(out)
