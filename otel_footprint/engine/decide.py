"""The engine: replay the engagement kernel over a run leg's passes and say what it decides.

Verify mode (the agent ran the kernel itself) compares the agent's reported changes with the ones the
evidence gives; shadow mode (no kernel in the agent) says what the kernel would have parked and what
kept riding anyway. Resumed legs continue the earlier leg's engagement through the run store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from otel_footprint import semconv
from otel_footprint.account.account import account_for
from otel_footprint.account.input import (
    AccountInput,
    CarriedVerdict,
    CarriedVerdictError,
    ObservedTurn,
    leg_input,
)
from otel_footprint.account.input import ToolCall as AccountToolCall
from otel_footprint.account.integrity import ParkState, check_integrity
from otel_footprint.account.integrity.model import IntegrityResult
from otel_footprint.account.model import AccountResult, Pointer
from otel_footprint.account.pointers import json_path
from otel_footprint.account.riding import RodeWhileParked, with_riding
from otel_footprint.account.understood import verdict_to_carry
from otel_footprint.engine.observed import observed_turn
from otel_footprint.engine.riding import rode_while_parked
from otel_footprint.engine.verdict import Mode, PassVerdict, RunVerdict
from otel_footprint.kernel.ladder import is_tentative
from otel_footprint.kernel.lease import advance_engagement
from otel_footprint.kernel.park_card import PARK_CARD_ID
from otel_footprint.kernel.types import EngagedChange, EngagementPlan, MapEngagementRecord
from otel_footprint.runs.group import RunSpans, may_be_run_span, run_id_of, session_id_of
from otel_footprint.runs.integrity_inputs import read_integrity_inputs
from otel_footprint.runs.model import Reason, RunStore
from otel_footprint.runs.outputs import Ref
from otel_footprint.runs.passes import (
    Batch,
    Carry,
    PassFacts,
    RunFacts,
    batches_of,
    build_pass,
    decode_run_steps,
    expected_first_iteration,
    gap_reason,
    latest_batch,
    read_run_steps,
)
from otel_footprint.runs.slices import STEP_SPANS, Steps, Ticket, finish
from otel_footprint.runs.spans import SpanView
from otel_footprint.runs.store import LegState, SessionState, StateError, session_key

_log = logging.getLogger(__name__)

# Reasons that mean spans (or the state they depend on) are missing: the run is not complete.
INCOMPLETE_CODES = frozenset(
    {"missing-spans", "no-prior-leg", "no-model-call-span", "unattributed-tool", "timeout"}
)


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How :func:`decide_run` decides."""

    mode: Literal["auto", "verify", "shadow"] = "auto"
    """``auto``: verify when ``maps.mounted.enforced`` is true (or absent and the run has
    ``footprint.map.*`` events), else shadow."""
    account: bool = True
    """Compute the account (check 1 …) and hand its carried routing verdict to the next leg."""
    findings: bool = True
    """Look for cross-turn findings through the store (needs a store and a session id)."""
    integrity: bool = True
    """Run the integrity checks (offered tools, frames and calls against each other)."""
    observed: bool = True
    """Decide observed runs: a trace with no recorder input is read from its instrumentation
    alone (``runs/group.py``); off, such a trace is handed on undecided and unannotated."""


def decide_run(
    run: RunSpans, store: RunStore | None = None, options: EngineOptions = EngineOptions()
) -> RunVerdict:
    """Everything decided about one run leg. Never raises: an internal failure is a reason."""
    return finish(decide_run_steps(run, store, options))


def decide_run_steps(
    run: RunSpans,
    store: RunStore | None = None,
    options: EngineOptions = EngineOptions(),
    *,
    turn: Ticket | None = None,
) -> Steps[RunVerdict]:
    """:func:`decide_run` in steps (one per pass replayed, per :data:`STEP_SPANS` spans decoded or
    tool spans read),
    so a decision thread can interleave a long run with others (``runs/slices.py``); the same
    verdict. ``turn``: the decision's place in the run store's order, waited for before the
    first read or write of the store."""
    try:
        return (yield from _decide(run, store, options, turn))
    except Exception as error:  # the pipeline must forward spans whatever happens here
        _log.exception("deciding run %s failed", run.run_id)
        return RunVerdict(
            run_id=run.run_id,
            trace_id=run.trace_id,
            run_span_id=run.run_span_id,
            mode=None,
            complete=False,
            passes=(),
            engagement=(),
            reasons=(Reason("internal-error", f"{type(error).__name__}: {error}"),),
        )


def store_keys(runs: Iterable[RunSpans]) -> set[str]:
    """The run-store keys deciding ``runs`` may read or write (a :class:`Ticket` declares them)."""
    return run_span_keys(run.run_span for run in runs if run.run_span is not None)


def span_keys(spans: Iterable[SpanView]) -> Steps[set[str]]:
    """A superset of the run-store keys of the runs grouped from ``spans``, known before the
    grouping is (a long run's grouping takes several turns): the keys of every span grouping may
    make a run span. In steps, one per :data:`STEP_SPANS` spans."""
    keys: set[str] = set()
    for count, view in enumerate(spans, 1):
        if may_be_run_span(view):
            keys |= run_span_keys((view,))
        if not count % STEP_SPANS:
            yield None
    return keys


def run_span_keys(run_spans: Iterable[SpanView]) -> set[str]:
    """The run-store keys of the runs whose run spans are ``run_spans``."""
    keys: set[str] = set()
    for view in run_spans:
        keys.add(run_id_of(view))
        session = session_id_of(view)
        if session is not None:
            keys.add(session_key(session))
    return keys


def _load_leg(store: RunStore | None, run_id: str, reasons: list[Reason]) -> LegState | None:
    if store is None:
        return None
    data = store.get(run_id)
    if data is None:
        return None
    try:
        return LegState.from_bytes(data)
    except StateError as error:
        reasons.append(Reason("bad-state", f"the run store's state for {run_id}: {error}"))
        return None


def _mode_of(facts: RunFacts, enforced: bool | None, options: EngineOptions) -> Mode:
    if options.mode != "auto":
        return options.mode
    if enforced is not None:
        return "verify" if enforced else "shadow"
    return "verify" if facts.has_map_events else "shadow"


def _decide(
    run: RunSpans, store: RunStore | None, options: EngineOptions, turn: Ticket | None
) -> Steps[RunVerdict]:
    if run.run_span is None:
        return RunVerdict(
            run_id=run.run_id,
            trace_id=run.trace_id,
            run_span_id=None,
            mode=None,
            complete=False,
            passes=(),
            engagement=(),
            reasons=(run.reason,) if run.reason else (),
        )
    decoded = yield from decode_run_steps(run)
    # Whether the leg resumes decides how it is read (below), so it is asked of the events first.
    resumed = any(event.type == semconv.T_PAUSE_RESUME for event in decoded.events)
    reasons: list[Reason] = []
    if resumed and store is not None and turn is not None:
        yield from turn.wait()
    leg = _load_leg(store, run.run_id, reasons) if resumed else None
    continuable = leg is None or leg.decided
    if not continuable:
        reasons.append(
            Reason(
                "no-prior-leg",
                f"the earlier leg of run {run.run_id} (trace {leg.trace_id if leg else '?'}) "
                "could not be decided to its end, so this leg's engagement cannot be continued",
            )
        )
    carry: Carry | None = leg.carry if leg is not None and continuable else None
    # Pass spans without an iteration continue the earlier leg's numbering.
    facts = yield from read_run_steps(
        run, first_iteration=expected_first_iteration(carry), decoded=decoded
    )
    reasons[:0] = facts.reasons

    plan: EngagementPlan | None = facts.plan
    enforced = facts.enforced
    if plan is None and facts.plan_event is None and leg is not None and leg.plan is not None:
        plan, enforced = leg.plan, leg.enforced if enforced is None else enforced
    mode: Mode | None = None
    passes: list[PassVerdict] = []
    engagement: tuple[MapEngagementRecord, ...] = ()
    decided_all = True
    batches = batches_of(facts, carry)
    if run.observed:
        # No recorder input: no plan and no kernel to replay; each pass is numbered on its span.
        mode = "observed"
        passes = [_observed_pass(p, run.trace_id) for p in facts.passes]
    elif plan is None:
        reasons.append(
            Reason(
                "no-plan",
                "no footprint.maps.mounted event gives a usable plan"
                if facts.plan_event is None
                and semconv.T_MAPS_MOUNTED not in facts.undecodable_types
                else "the footprint.maps.mounted event of this run cannot be read (see the "
                "bad-attribute reason)",
                run.run_span_id,
            )
        )
    else:
        mode = _mode_of(facts, enforced, options)
        if continuable:
            passes, engagement, decided_all = yield from _replay(
                facts, plan, mode, carry, batches, reasons
            )
        else:
            decided_all = False

    verdict_reasons = tuple(_dedupe(reasons))
    complete = decided_all and not any(r.code in INCOMPLETE_CODES for r in verdict_reasons)
    findings: tuple[str, ...] = ()
    if store is not None and turn is not None and not run.observed:
        # (An observed run reads and writes no run store: it waits for no other decision.)
        yield from turn.wait()
    if options.findings and store is not None and not run.observed:
        findings = _cross_turn_findings(run, facts, passes, store)
    # The verdict is built once, from the parts below (a `dataclasses.replace` of it per part
    # cost ≈ 4.7 µs each); the reasons keep their order: the run's, integrity's, the account's.
    decided = tuple(passes)
    carried = leg.carried_verdict if leg is not None else None
    integrity: IntegrityResult | None = None
    if options.integrity:
        integrity, more = yield from _integrity_of(run.run_id, facts, plan, mode, decided)
        verdict_reasons += more
        yield None
    account: AccountResult | None = None
    if options.account:
        # Only a leg that pauses or resumes keeps leg state (`_remember`): the verdict to carry
        # is read for those alone.
        hand_on = store is not None and (facts.paused or facts.resumed)
        account, more, carried = _account_of(
            run.run_id, facts, leg, hand_on=hand_on, observed=observed_turn(facts)
        )
        verdict_reasons += more
        yield None
    rode: tuple[RodeWhileParked, ...] = ()
    if mode == "shadow" and plan is not None:
        # Shadow mode's finding: the per-map riding roll-up, and its signal in the account.
        rode = rode_while_parked(decided, plan)
        if rode and account is not None:
            account = with_riding(account, rode)
    verdict = RunVerdict(
        run.run_id,
        run.trace_id,
        run.run_span_id,
        mode,
        complete,
        decided,
        engagement,
        verdict_reasons,
        account,
        facts.resumed,
        findings,
        rode,
        integrity,
    )
    if store is not None and not run.observed:
        _remember(
            store,
            _Outcome(run, facts, plan, enforced, carry, batches, verdict, carried, decided_all),
        )
    return verdict


def _observed_pass(pass_facts: PassFacts, trace_id: str) -> PassVerdict:
    """An observed run's pass: its number and span, no engagement (no kernel ran)."""
    return PassVerdict(
        pass_facts.iteration, trace_id, pass_facts.span_id, (), (), (), (), (), 0, ()
    )


def _dedupe(reasons: Sequence[Reason]) -> list[Reason]:
    seen: set[Reason] = set()
    out: list[Reason] = []
    for reason in reasons:
        if reason not in seen:
            seen.add(reason)
            out.append(reason)
    return out


def _replay(
    facts: RunFacts,
    plan: EngagementPlan,
    mode: Mode,
    carry: Carry | None,
    batches: Mapping[int, Batch],
    reasons: list[Reason],
) -> Steps[tuple[list[PassVerdict], tuple[MapEngagementRecord, ...], bool]]:
    """Advance the kernel pass by pass (a step each: the kernel's state is ``prior``); stop (with
    a reason) at the first pass it cannot build."""
    prior: tuple[MapEngagementRecord, ...] | None = carry.engagement if carry else None
    verdicts: list[PassVerdict] = []
    members = frozenset(m for mounted in plan.maps for m in mounted.member_ids) | {PARK_CARD_ID}
    trace_id = facts.run.trace_id
    for index, pass_facts in enumerate(facts.passes):
        gap = gap_reason(facts, index, carry)
        if gap is not None:
            reasons.append(gap)
            return verdicts, prior or (), False
        pass_, problem = build_pass(facts, index, batches, carry)
        if pass_ is None:
            if problem is not None and problem not in reasons:
                reasons.append(problem)
            return verdicts, prior or (), False
        advance = advance_engagement(plan, prior, pass_)
        records = advance.next  # one per mounted map, in plan order
        served_parked: tuple[str, ...] = ()
        if mode == "shadow" and advance.parked_injection_ids:
            parked_ids = set(advance.parked_injection_ids)
            served_parked = tuple([i for i in pass_facts.active_ids if i in parked_ids])
        reported = pass_facts.reported if mode == "verify" else ()
        # Changes are frozen data that the codec round-trips exactly: equal data, equal JSON.
        mismatch = mode == "verify" and advance.changes != reported
        # Positional (a record built with keywords costs ≈ 1.3× here, once per pass); list
        # comprehensions: tuple(<generator>) costs more on these short lists.
        verdicts.append(
            PassVerdict(
                pass_facts.iteration,  # iteration
                trace_id,  # trace_id
                pass_facts.span_id,  # span_id
                tuple([r.map_id for r in records if r.standing == "engaged"]),  # engaged_maps
                tuple([r.map_id for r in records if r.standing == "parked"]),  # parked_maps
                advance.parked_injection_ids,  # parked_injection_ids
                advance.parked_tool_names,  # parked_tool_names
                served_parked,  # served_while_parked
                pass_facts.chars_of(served_parked) if served_parked else 0,  # its chars
                advance.changes,  # changes
                reported,  # reported
                mismatch,  # mismatch
                pass_facts.served,  # served
                records,
                _rode(pass_facts, members),  # rode
                tuple([(i, pass_facts.chars_of((i,))) for i in served_parked]),  # by id
            )
        )
        prior = advance.next
        yield None
    return verdicts, prior or (), True


def _rode(pass_facts: PassFacts, members: frozenset[str]) -> tuple[str, ...] | None:
    """The map members (and park card) whose injections the record shows on this pass."""
    if not pass_facts.injected:
        return None
    given = [
        row.source_id
        for row in pass_facts.injected
        if row.source_id in members and row.source not in ("user", "assistant", "tool-result")
    ]
    return tuple(dict.fromkeys(i for i in given if i is not None))


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What a decided leg leaves for the run store (:func:`_remember`)."""

    run: RunSpans
    facts: RunFacts
    plan: EngagementPlan | None
    enforced: bool | None
    carry: Carry | None
    batches: Mapping[int, Batch]
    verdict: RunVerdict
    carried: Mapping[str, Any] | None
    decided: bool

    @property
    def engagement(self) -> tuple[MapEngagementRecord, ...] | None:
        """The engagement the leg ended with (the carried one when it decided no pass)."""
        verdict, carry = self.verdict, self.carry
        return verdict.engagement if verdict.passes or carry is None else carry.engagement


def _remember(store: RunStore, outcome: _Outcome) -> None:
    """Write what the next leg (same run id) and the next turn (same session) need."""
    run, facts = outcome.run, outcome.facts
    if facts.paused or facts.resumed:
        store.put(run.run_id, _leg_state(outcome).to_bytes())
    session = run.session_id
    if session is not None and outcome.verdict.mode is not None:
        final_cursor = next(
            (p.current_node for p in reversed(facts.passes) if p.current_node is not None), None
        )
        store.put(
            session_key(session),
            SessionState(run.run_id, run.trace_id, outcome.engagement, final_cursor).to_bytes(),
        )


def _leg_state(outcome: _Outcome) -> LegState:
    """The leg's state for a leg that resumes it. Only a leg that paused (``pause.request``) has
    one; a resumed leg's own state is kept too (it may pause again). A run that never pauses, by
    far the most common, writes no leg state at all: nothing would ever read it."""
    facts, carry = outcome.facts, outcome.carry
    last = facts.passes[-1] if facts.passes else None
    last_iteration = last.iteration if last else (carry.last_iteration if carry else 0)
    batch = latest_batch(outcome.batches, last_iteration + 1)
    served = last.served if last else (carry.served if carry else ())
    return LegState(
        run_id=outcome.run.run_id,
        trace_id=outcome.run.trace_id,
        paused=facts.paused,
        carry=Carry(
            last_iteration=last_iteration,
            engagement=outcome.engagement if outcome.verdict.mode is not None else None,
            served=served,
            batch_iteration=batch.iteration if batch else None,
            batch=batch.tool_names if batch else (),
            batch_picks=batch.picks if batch else (),
            batch_cursor=batch.cursor if batch else None,
        ),
        decided=outcome.decided,
        plan=outcome.plan,
        enforced=outcome.enforced,
        carried_verdict=outcome.carried,
    )


def _cross_turn_findings(
    run: RunSpans, facts: RunFacts, passes: Sequence[PassVerdict], store: RunStore
) -> tuple[str, ...]:
    """A continuity founding that launders the previous turn's uncorroborated guess."""
    session = run.session_id
    if session is None or facts.resumed:
        return ()
    data = store.get(session_key(session))
    if data is None:
        return ()
    try:
        previous = SessionState.from_bytes(data)
    except StateError:
        return ()
    if previous.run_id == run.run_id or not previous.engagement:
        return ()
    earlier = {r.map_id: r for r in previous.engagement}
    move_by = {p.iteration: p.move_by for p in facts.passes}
    routed_continuity = any(
        e.type == semconv.T_TURN_ROUTED and e.payload.get("by") == "continuity"
        for e in facts.events
    )
    findings: list[str] = []
    for verdict in passes:
        for change in verdict.changes:
            if not isinstance(change, EngagedChange):
                continue
            if change.reengaged or change.upgraded or change.tenant_changed:
                continue
            by_continuity = move_by.get(change.iteration) == "continuity" or (
                routed_continuity and change.iteration == 1
            )
            before = earlier.get(change.map_id)
            if not by_continuity or before is None or not is_tentative(before.by):
                continue
            if is_tentative(change.by):
                continue
            findings.append(_continuity_sentence(change, before, previous, passes))
    return tuple(findings)


def _continuity_sentence(
    change: EngagedChange,
    before: MapEngagementRecord,
    previous: SessionState,
    passes: Sequence[PassVerdict],
) -> str:
    witness = f" (matched words “{before.witness}”)" if before.witness else ""
    guess = {
        "lexical": "a keyword guess",
        "semantic": "a scorer's guess",
        "assumed": "no stated reason",
    }
    standing = "parked" if before.standing == "parked" else f"idle for {before.idle} call(s)"
    later = [p for p in passes if p.iteration > change.iteration]
    rode = sum(1 for p in later if change.map_id in p.engaged_maps)
    tail = (
        f" It then rode {rode} more call(s) of this turn; a {change.by} engagement never parks."
        if rode
        else ""
    )
    return (
        f"Continuity laundered a guess: {change.map_id} was founded {change.by} on iteration "
        f"{change.iteration} because the cursor carried over from the previous turn "
        f"(run {previous.run_id}), but that turn had engaged it only on "
        f"{guess.get(before.by, before.by)}{witness} that nothing corroborated "
        f"({before.by}, {standing}).{tail}"
    )


def _account_tool_calls(facts: RunFacts) -> list[AccountToolCall]:
    # Positional: a record built with keywords costs about twice as much (one per tool call).
    return [
        AccountToolCall(
            call.name,  # name
            call.call_id,  # call_id
            call.arguments_text,  # arguments
            call.result,  # result
            call.failed,  # error
            call.status,  # status
            call.trace_id,  # trace_id
            call.span_id,  # span_id
            call.iteration,  # iteration
            _result_at(call.result_ref) if call.result_ref is not None else None,
        )
        for call in facts.tool_calls
    ]


def _result_at(ref: Ref) -> Pointer:
    """A model call's input message as an account pointer (attribute + message index)."""
    index = ref.message_index
    return Pointer(
        ref.trace_id,
        ref.span_id,
        None,
        None,
        ref.attribute,
        json_path(index) if index is not None else None,
    )


def _account_of(
    run_id: str,
    facts: RunFacts,
    leg: LegState | None,
    *,
    hand_on: bool = True,
    observed: ObservedTurn | None = None,
) -> tuple[AccountResult | None, tuple[Reason, ...], Mapping[str, Any] | None]:
    """The leg's account (None: none can be made), the reasons to add to the run's, and the
    carried routing verdict the next leg of this run should see (only read when ``hand_on``:
    without a run store there is no next leg to hand it to). Passes whose tool calls are not
    recorded make only what reads every call unreachable (the account is told which)."""
    carried_json = leg.carried_verdict if leg is not None else None
    reasons: tuple[Reason, ...] = ()
    try:
        carried = CarriedVerdict.from_dict(carried_json) if carried_json is not None else None
    except CarriedVerdictError as error:
        carried = None
        reasons = (Reason("bad-state", f"the carried routing verdict: {error}"),)
    last_pass = max((p.iteration for p in facts.passes), default=None)
    try:
        inp = leg_input(
            facts.events,
            _account_tool_calls(facts),
            answering_iteration=last_pass,
            carried=carried,
            observed=observed,
            unrecorded_passes=facts.unrecorded_passes,
            by_type=facts.by_type,
        )
        result = account_for(inp)
        next_carried = _next_carried(inp, carried_json) if hand_on else carried_json
    # A name of its own: a compiled build types a name by its first ``except`` clause.
    except Exception as failure:  # an account bug must not take the engagement verdict down
        _log.exception("the account of run %s failed", run_id)
        reason = Reason("account-failed", f"the account could not be computed: {failure}")
        return None, (*reasons, reason), carried_json
    return result, reasons, next_carried


def _next_carried(
    inp: AccountInput, previous: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The routing verdict (as carried-verdict JSON) the next leg of this run inherits."""
    carried = verdict_to_carry(inp)
    return previous if carried is None else carried.to_dict()


def _park_state(
    facts: RunFacts, plan: EngagementPlan | None, passes: Sequence[PassVerdict]
) -> dict[int, ParkState] | None:
    """The kernel's standing per pass as the integrity checks read it (None: no plan mounted)."""
    if plan is None:
        return None
    decided = {p.iteration: p for p in passes}
    state: dict[int, ParkState] = {}
    for pass_facts in facts.passes:
        verdict = decided.get(pass_facts.iteration)
        if verdict is None:
            state[pass_facts.iteration] = ParkState(pass_facts.iteration, {}, False)
            continue
        if not verdict.parked_maps:  # most passes: nothing parked, nothing held out
            state[verdict.iteration] = ParkState(verdict.iteration, {})
            continue
        parked_tools = set(verdict.parked_tool_names)
        state[verdict.iteration] = ParkState(
            verdict.iteration,
            {
                m.id: tuple([t for t in m.tool_names if t in parked_tools])
                for m in plan.maps
                if m.id in verdict.parked_maps
            },
        )
    return state


def _integrity_of(
    run_id: str,
    facts: RunFacts,
    plan: EngagementPlan | None,
    mode: Mode | None,
    passes: Sequence[PassVerdict],
) -> Steps[tuple[IntegrityResult | None, tuple[Reason, ...]]]:
    """The integrity checks' result and the reasons to add to the run's; a failure here is a
    reason, never a lost verdict. Two steps: reading the inputs, checking them."""
    try:
        inputs = read_integrity_inputs(facts)
        yield None
        park = _park_state(facts, plan, passes) if mode is not None else None
        result = check_integrity(inputs, park, shadow=mode == "shadow")
    except Exception as error:  # an integrity bug must not take the engagement verdict down
        _log.exception("the integrity checks of run %s failed", run_id)
        return None, (Reason("integrity-failed", f"the integrity checks could not run: {error}"),)
    # Inputs present but unreadable (a cut frame, a declaration that is not a map) are named on
    # the run, as every other attribute that cannot be read is.
    unreadable = [Reason("integrity-input", problem) for problem in inputs.problems]
    return result, tuple(_dedupe(unreadable)) if unreadable else ()
