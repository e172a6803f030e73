"""The "It understood" row and check 1 (``decided-delivered``): was the decided skill delivered?

"Not delivered" is a claim of ABSENCE, so it needs proof (:func:`delivery_complete`): every
system-prompt composition of iterations 1..N is recorded and complete. Anything less and the check
is unreachable; a missing row is never read as "the skill was not given".

The verdict has ONE reader, :func:`routing_verdict_of`: this leg's ``skill.turn_routed``, else the
verdict a resumed leg's held state carries (the upstream's rule), else, beyond the upstream, the
verdict an earlier leg of the same run had, which this processor saw in that leg's trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Literal, NamedTuple, TypeAlias

from otel_footprint import semconv
from otel_footprint.account.input import (
    CARRIED_TEXT_CHARS,
    AccountInput,
    CarriedVerdict,
    RoutingVerdict,
    Score,
)
from otel_footprint.account.model import (
    CheckResult,
    CheckState,
    Line,
    Pointer,
    Refusal,
    RoutingFacts,
    ScoresFact,
    Signal,
    VerdictFact,
)
from otel_footprint.account.pointers import at_event, at_state, bounded
from otel_footprint.account.templates import (
    ID_CHARS,
    chip,
    count_phrase,
    cut,
    number_text,
    skill_phrase,
)
from otel_footprint.account.view import (
    LegView,
    as_int,
    as_list,
    as_num,
    as_obj,
    as_str,
    leg_view,
    same_json,
    strict_equal,
)
from otel_footprint.account.writer import Var, Writer
from otel_footprint.codec import FootprintEvent

MAX_REFUSALS = 12
"""Refusals listed in the routing facts; the rest are counted."""
MAX_REFUSAL_LINES = 3
"""Refusal LINES (distinct rules) in the row."""
LIBRARY_DECISIONS = frozenset({"entry", "intent", "continuity", "decider"})
"""Verdicts that decide a skill: only these make check 1 apply."""

SYSTEM_PROMPT = "system-prompt"


# ── the routing verdict ──────────────────────────────────────────────────────────────────────


_ScoreAt: TypeAlias = Callable[[int, str], Pointer]
"""Where score ``i``'s ``field`` lives: an event's ``footprint.scores`` or the held state."""


def _scores(
    raw: object, point: _ScoreAt
) -> tuple[Score | None, Score | None, bool, list[tuple[str, Pointer]]]:
    """The first two score RECORDS, whether all after the first equal the second, and pointers.

    Pointers keep each record's index in the recorded list (the JSON path must resolve).
    """
    records = [(i, r) for i, r in enumerate(as_list(raw) or []) if as_obj(r) is not None]
    if not records:
        return None, None, False, []
    pointers: list[tuple[str, Pointer]] = []
    i0, first = records[0]
    top = Score(as_str(first.get("id")), as_num(first.get("score")))
    pointers.append(("scores/0/score", point(i0, "score")))
    if len(records) < 2:
        return top, None, False, pointers
    i1, second = records[1]
    nxt = Score(as_str(second.get("id")), as_num(second.get("score")))
    pointers += [("scores/1/score", point(i1, "score")), ("scores/1/id", point(i1, "id"))]
    others_equal = all(strict_equal(r.get("score"), second.get("score")) for _, r in records[1:])
    return top, nxt, others_equal, pointers


def event_verdict(routed: FootprintEvent) -> RoutingVerdict | None:
    """The verdict of a ``skill.turn_routed`` event; None when its ``by`` cannot be read."""
    p = routed.payload
    by = as_str(p.get("by"))
    if by is None:
        return None
    decider = as_obj(p.get("decider"))
    witness = as_obj(p.get("witness"))
    offered = as_list(p.get("offered"))
    fields: list[tuple[str, Pointer]] = [("by", at_event(routed, "by"))]
    to = as_str(p.get("to"))
    from_ = as_str(p.get("from"))
    witness_text = as_str(witness.get("text")) if witness is not None else None
    model = as_str(decider.get("model")) if decider is not None else None
    if to is not None:
        fields.append(("to", at_event(routed, "to")))
    if from_ is not None:
        fields.append(("from", at_event(routed, "from")))
    if witness_text is not None:
        fields.append(("witness", at_event(routed, "witness", "text")))
    if model is not None:
        fields.append(("deciderModel", at_event(routed, "decider", "model")))
    top, nxt, others_equal, score_pointers = _scores(
        p.get("scores"), lambda i, f: at_event(routed, "scores", i, f)
    )
    decisive = p.get("decisive")
    return RoutingVerdict(  # positional: a record built with keywords costs twice as much
        by,
        "event",  # origin
        to,
        from_,
        decisive if isinstance(decisive, bool) else None,  # decisive
        as_str(p.get("scorer")),  # scorer
        witness_text,  # witness
        len(offered) if offered is not None else None,  # offered
        model,  # decider_model
        top,
        nxt,  # next
        others_equal,
        (*fields, *score_pointers),  # pointers
    )


def held_verdict(inp: AccountInput) -> RoutingVerdict | None:
    """The verdict committed before a pause, when the held state and pausedWith AGREE on it.

    Never guessed: either object missing, or the two disagreeing, means no held verdict. It never
    has ``decisive`` or the decider's model (the state does not keep them).
    """
    held = inp.held
    if not inp.resumed or held is None or held.state is None or held.paused_with is None:
        return None
    state, paused = held.state, held.paused_with
    route = as_obj(state.get("turnRoute"))
    if route is None or not same_json(route, paused.get("turnRoute")):
        return None
    by = as_str(route.get("by"))
    if by is None:
        return None
    scores_held = as_list(state.get("entryScores")) is not None and same_json(
        state.get("entryScores"), paused.get("entryScores")
    )
    scorer = (
        as_str(state.get("entryScorer"))
        if scores_held and same_json(state.get("entryScorer"), paused.get("entryScorer"))
        else None
    )
    witness = as_obj(route.get("witness"))
    witness_text = as_str(witness.get("text")) if witness is not None else None
    offered = as_list(route.get("offered"))
    to = as_str(route.get("to"))
    from_ = as_str(route.get("from"))
    fields: list[tuple[str, Pointer]] = [("by", at_state(held.event, "turnRoute", "by"))]
    if to is not None:
        fields.append(("to", at_state(held.event, "turnRoute", "to")))
    if from_ is not None:
        fields.append(("from", at_state(held.event, "turnRoute", "from")))
    if witness_text is not None:
        fields.append(("witness", at_state(held.event, "turnRoute", "witness", "text")))
    top, nxt, others_equal, score_pointers = (
        _scores(
            state.get("entryScores"),
            lambda i, f: at_state(held.event, "entryScores", i, f),
        )
        if scores_held
        else (None, None, False, [])
    )
    return RoutingVerdict(
        by=by,
        origin="held",
        to=to,
        from_=from_,
        scorer=scorer,
        witness=witness_text,
        offered=len(offered) if offered is not None else None,
        top=top,
        next=nxt,
        others_equal=others_equal,
        pointers=(*fields, *score_pointers),
    )


def _routing_verdict(inp: AccountInput, view: LegView) -> tuple[RoutingVerdict | None, int]:
    """The leg's verdict and how many unreadable ``skill.turn_routed`` were passed over; read
    once per input (the account and the verdict to carry both ask)."""
    found: tuple[RoutingVerdict | None, int] | None = inp.memo.get("routing")
    if found is None:
        found = inp.memo["routing"] = _read_routing_verdict(inp, view)
    return found


def _read_routing_verdict(inp: AccountInput, view: LegView) -> tuple[RoutingVerdict | None, int]:
    unread = 0
    routed = view.first(semconv.T_TURN_ROUTED)
    if routed is not None:
        verdict = event_verdict(routed)
        if verdict is not None:
            return verdict, 0
        unread = 1  # an unreadable `by` is passed over and counted, never read as "none"
    held = held_verdict(inp)
    if held is not None:
        return held, unread
    if inp.resumed and inp.carried is not None:
        return replace(inp.carried.verdict, origin="carried"), unread
    return None, unread


def routing_verdict_of(inp: AccountInput) -> RoutingVerdict | None:
    """The routing verdict of the leg: its first readable ``skill.turn_routed``, else (resumed
    legs) the held verdict, else (resumed legs) the verdict carried from an earlier leg."""
    return _routing_verdict(inp, leg_view(inp))[0]


def verdict_to_carry(inp: AccountInput) -> CarriedVerdict | None:
    """What a later leg of this run should carry: this leg's verdict (whatever its origin) and
    the question, with pointers into the trace where each was read. None when there is no
    verdict, or an id is too long to keep (a cut id could never match a delivered row)."""
    view = leg_view(inp)
    verdict, _ = _routing_verdict(inp, view)
    if verdict is None:
        return None
    if any(
        v is not None and len(v) > CARRIED_TEXT_CHARS
        for v in (verdict.by, verdict.to, verdict.from_)
    ):
        return None
    witness, scorer = _clip(verdict.witness), _clip(verdict.scorer)
    model = _clip(verdict.decider_model)
    top, nxt = _clip_score(verdict.top), _clip_score(verdict.next)
    if (witness, scorer, model, top, nxt) != (
        verdict.witness,
        verdict.scorer,
        verdict.decider_model,
        verdict.top,
        verdict.next,
    ):  # something was cut (rare): the verdict with the cut values
        verdict = replace(
            verdict, witness=witness, scorer=scorer, decider_model=model, top=top, next=nxt
        )
    start = view.first(semconv.T_TURN_START)
    prompt = as_str(start.payload.get("userPrompt")) if start is not None else None
    if prompt is not None and start is not None:
        return CarriedVerdict(verdict, _clip(prompt), at_event(start, "userPrompt"))
    if inp.carried is not None:
        return CarriedVerdict(verdict, inp.carried.question, inp.carried.question_pointer)
    return CarriedVerdict(verdict)


def _clip(text: str | None) -> str | None:
    return cut(text, CARRIED_TEXT_CHARS) if text is not None else None


def _clip_score(score: Score | None) -> Score | None:
    if score is None or score.id is None or len(score.id) <= CARRIED_TEXT_CHARS:
        return score
    return Score(_clip(score.id), score.score)


# ── delivery ─────────────────────────────────────────────────────────────────────────────────


def delivered_skills(view: LegView) -> dict[str, FootprintEvent]:
    """Skill id -> its FIRST system-prompt ``context.injected`` row, in first-delivered order."""
    first: dict[str, FootprintEvent] = {}
    for event in view.of(semconv.T_CONTEXT_INJECTED):
        p = event.payload
        if p.get("slot") != SYSTEM_PROMPT or p.get("source") != "skill":
            continue  # most rows are messages and tool results
        sid = p.get("sourceId")
        if isinstance(sid, str) and sid not in first:
            first[sid] = event
    return first


def delivery_complete(view: LegView, last_iteration: int | None) -> bool:
    """Every system-prompt composition of iterations 1..N is recorded and COMPLETE.

    For each i, the LAST system-prompt ``slot_composed`` of iteration i must exist, carry a
    composition id and an object ``sourceBreakdown``; its skill rows (same composition id,
    system-prompt, source skill, string sourceId) must number exactly ``skill.count`` (0 when the
    breakdown has no ``skill`` key).
    """
    if last_iteration is None or last_iteration < 1:
        return False
    compose_of: dict[int, FootprintEvent] = {}
    for event in view.of(semconv.T_SLOT_COMPOSED):
        iteration = as_int(event.payload.get("iteration"))
        if event.payload.get("slot") == SYSTEM_PROMPT and iteration is not None:
            compose_of[iteration] = event  # the last one wins
    if last_iteration > len(compose_of):
        return False  # some iteration has no composition (and a huge N costs nothing)
    rows = Counter(
        e.composition_id
        for e in view.of(semconv.T_CONTEXT_INJECTED)
        if e.payload.get("slot") == SYSTEM_PROMPT
        and e.payload.get("source") == "skill"
        and as_str(e.payload.get("sourceId")) is not None
    )
    for i in range(1, last_iteration + 1):
        compose = compose_of.get(i)
        if compose is None or compose.composition_id is None:
            return False
        breakdown = as_obj(compose.payload.get("sourceBreakdown"))
        if breakdown is None:
            return False
        if "skill" in breakdown:
            skill = as_obj(breakdown["skill"])
            expected = as_num(skill.get("count")) if skill is not None else None
            if expected is None:
                return False
        else:
            expected = 0
        if rows[compose.composition_id] != expected:
            return False
    return True


# ── refusals ─────────────────────────────────────────────────────────────────────────────────


class _Refusal(NamedTuple):
    requested_id: str
    by: str
    named: bool
    event: FootprintEvent
    field: str
    """The payload field the line points at (``requestedId`` or ``target``)."""


def _refusals(view: LegView) -> list[_Refusal]:
    found = [
        _Refusal(sid, "skill-graph", False, e, "requestedId")
        for e in view.of(semconv.T_SKILL_REJECTED)
        if (sid := as_str(e.payload.get("requestedId"))) is not None
    ]
    for e in view.of(semconv.T_PERMISSION_CHECK):
        p = e.payload
        target = as_str(p.get("target"))
        if p.get("capability") != semconv.CAPABILITY_SKILL_READ or target is None:
            continue
        if p.get("result") not in semconv.PERMISSION_REFUSING_RESULTS:
            continue
        sid = target.removeprefix(semconv.SKILL_TARGET_PREFIX)
        rule = as_str(p.get("policyRuleId"))
        found.append(_Refusal(sid, rule or "permission", rule is not None, e, "target"))
    return found


# ── the row ──────────────────────────────────────────────────────────────────────────────────


class Understood(NamedTuple):
    """The row's lines, check 1, its signal and the routing facts."""

    lines: tuple[Line, ...]
    check: CheckResult
    signal: Signal | None
    signal_line: Line | None
    """The signal's sentence as an "Anything wrong" line."""
    unreachable: Line | None
    """Why check 1 could not run, as an "Anything wrong" item."""
    facts: RoutingFacts
    verdict: RoutingVerdict | None
    unread: int


class _Skills:
    """Skill placeholders: a recorded node ``title`` wins over the app's declared label."""

    def __init__(self, view: LegView, inp: AccountInput) -> None:
        self._titles: dict[str, str] = {}
        declared = view.first(semconv.T_GRAPH_DECLARED)
        nodes = as_list(declared.payload.get("nodes")) if declared is not None else None
        for node in nodes or []:
            obj = as_obj(node)
            if obj is None:
                continue
            sid, title = as_str(obj.get("id")), as_str(obj.get("title"))
            if sid is not None and title is not None:
                self._titles.setdefault(sid, title)
        self._declarations = inp.declarations

    def var(self, skill_id: str, pointer: Pointer | None, source: str = "library") -> Var:
        label = self._titles.get(skill_id) or self._declarations.label_of(skill_id)
        return Var(skill_phrase(skill_id, label), source, pointer)


def read_understood(inp: AccountInput, view: LegView, writer: Writer) -> Understood:
    """The "It understood" row and check 1 for one leg (reference §4.4)."""
    configured_event = view.first(semconv.T_RUN_CONFIGURED)
    verdict, unread = _routing_verdict(inp, view)
    delivered = delivered_skills(view)
    graph = configured_event.payload.get("skillGraph") if configured_event is not None else None
    configured: Literal["graph", "none"] | None = (
        None if configured_event is None else "graph" if as_obj(graph) is not None else "none"
    )
    refusals = _refusals(view)
    facts = _routing_facts(configured, delivered, refusals)
    app = _app_lines(inp, writer)
    if inp.observed is not None and verdict is None:
        # An observed run records no routing: check 1 has nothing to judge, and says why.
        line = writer.say("understood", "understood.observed", status="not-applicable")
        return _without_verdict(facts, unread, [], line, None)
    if verdict is not None:
        context = _Context(inp, view, writer, delivered, _Skills(view, inp), refusals)
        return _with_verdict(context, verdict, facts, unread, app)
    if inp.resumed and configured != "none":
        # A resumed leg of a routed agent: the routing happened before the pause.
        line = writer.say(
            "understood",
            "understood.resumed",
            status="not-recorded",
            missing="before-pause",
            chips=[chip("chip.beforePause")],
        )
        why = _why(writer, "unreachable.decided", "before-pause")
        return _without_verdict(facts, unread, app, line, why, "lost")
    if configured == "none" and configured_event is not None:
        line = writer.say(
            "understood",
            "understood.notConfigured",
            status="not-applicable",
            pointers=[at_event(configured_event)],
        )
        return _without_verdict(facts, unread, app, line, None)
    return _without_verdict(facts, unread, app, _NOT_RECORDED, _NO_ROUTING)


def _routing_facts(
    configured: Literal["graph", "none"] | None,
    delivered: Mapping[str, FootprintEvent],
    refusals: list[_Refusal],
) -> RoutingFacts:
    """The leg's routing facts before any verdict is read: what was configured, delivered and
    refused (each list bounded)."""
    return RoutingFacts(  # positional: a record built with keywords costs twice as much
        configured,
        None,  # verdict
        None,  # scores
        tuple([cut(sid, ID_CHARS) for sid in list(delivered)[:MAX_REFUSALS]]),  # delivered
        tuple(  # refusals
            [
                Refusal(cut(r.requested_id, ID_CHARS), cut(r.by, ID_CHARS))
                for r in refusals[:MAX_REFUSALS]
            ]
        ),
        max(0, len(refusals) - MAX_REFUSALS),  # refusals_omitted
    )


def _facts_with(
    facts: RoutingFacts,
    *,
    verdict: VerdictFact | None = None,
    scores: ScoresFact | None = None,
    before_pause: Literal["lost", "held", "carried"] | None = None,
) -> RoutingFacts:
    """``facts`` with the verdict read (``dataclasses.replace`` of those three fields, built
    directly)."""
    return RoutingFacts(
        facts.configured,
        verdict,
        scores,
        facts.delivered,
        facts.refusals,
        facts.refusals_omitted,
        before_pause,
    )


def _app_lines(inp: AccountInput, writer: Writer) -> list[Line]:
    """The line saying the app's own routing is not recorded, when the app decides."""
    if not inp.declarations.app_decides:
        return []
    return [
        writer.say(
            "understood",
            "understood.app.notRecorded",
            status="not-recorded",
            missing="not-built",
            chips=[chip("chip.notRecorded")],
        )
    ]


def _without_verdict(
    facts: RoutingFacts,
    unread: int,
    app: list[Line],
    line: Line,
    why: Line | None,
    before: Literal["lost"] | None = None,
) -> Understood:
    """A leg with no verdict on the record: check 1 is not applicable (``why`` None), or
    unreachable and why."""
    state: CheckState = "not-applicable" if why is None else "unreachable"
    # Positional records below: one built with keywords costs about twice as much.
    sentence = why.text if why is not None else line.text
    return Understood(
        (line, *app),  # lines
        CheckResult("decided-delivered", state, None, sentence),  # check
        None,  # signal
        None,  # signal_line
        why,  # unreachable
        facts if before is None else _facts_with(facts, before_pause=before),  # as read
        None,  # verdict
        unread,
    )


def _why(writer: Writer, template_id: str, missing: str) -> Line:
    """Why check 1 could not run, as an item of the "Anything wrong" row."""
    return writer.say(
        "anything-wrong", template_id, status="not-recorded", missing=missing, item=True
    )


# Lines that never vary: written once (lines are immutable).
_NOT_RECORDED, _CONFIDENCE_NONE = (
    Writer().say(
        "understood", t, status="not-recorded", missing=m, chips=[chip("chip.notRecorded")]
    )
    for t, m in (
        ("understood.notRecorded", "no-event"),
        ("understood.confidence.none", "not-built"),
    )
)
_NO_ROUTING = _why(Writer(), "unreachable.decided", "no-event")


class _Context(NamedTuple):
    inp: AccountInput
    view: LegView
    writer: Writer
    delivered: Mapping[str, FootprintEvent]
    skills: _Skills
    refusals: list[_Refusal]


def _verdict_lines(c: _Context, verdict: RoutingVerdict) -> list[Line]:
    """The verdict's own line (and the menu's pick), each with the origin chip when it was read
    from before the pause."""
    by, to = verdict.by, verdict.to
    chips = (
        [chip("chip.beforePause.held")]
        if verdict.origin == "held"
        else [chip("chip.beforePause.carried")]
        if verdict.origin == "carried"
        else []
    )
    skill = {"skill": c.skills.var(to, verdict.at("to"))} if to is not None else {}

    def line(template_id: str, values: Mapping[str, Var] | None = None) -> Line:
        return c.writer.say(
            "understood", template_id, values, pointers=verdict.ats("by"), chips=chips
        )

    if to is not None and by == "entry" and verdict.witness is not None:
        witness = c.writer.quote(verdict.witness, "person", verdict.at("witness"))
        return [line("understood.rule.witness", {**skill, "witness": witness})]
    if to is not None and by == "entry":
        return [line("understood.rule", skill)]
    if to is not None and by == "intent":
        return [line("understood.intent", skill)]
    if to is not None and by == "continuity":
        return [line("understood.continuity", skill)]
    if to is not None and by == "decider" and verdict.decider_model is not None:
        model = Var(cut(verdict.decider_model), "library", verdict.at("deciderModel"))
        return [line("understood.decider", {**skill, "model": model})]
    if to is not None and by == "decider":
        return [line("understood.decider.noModel", skill)]
    if by != "menu":
        return [line("understood.none")]
    offered = verdict.offered or 0
    lines = [
        line("understood.menu", {"offered": Var(count_phrase(offered, "skill", "skills"))})
        if offered > 0
        else line("understood.menu.bare")
    ]
    opened = next(iter(c.delivered), None)
    if opened is not None:
        where = at_event(c.delivered[opened], "sourceId")
        lines.append(
            c.writer.say(
                "understood", "understood.menu.picked", {"skill": c.skills.var(opened, where)}
            )
        )
    return lines


def _scores_line(c: _Context, verdict: RoutingVerdict) -> tuple[Line | None, ScoresFact | None]:
    """The app's numbers, when the pick is their top (both numeric, the runner-up named)."""
    top, nxt, to = verdict.top, verdict.next, verdict.to
    if (
        top is None
        or nxt is None
        or to is None
        or top.id != to
        or top.score is None
        or nxt.score is None
        or nxt.id is None
    ):
        return None, None
    fact = ScoresFact(top.score, nxt.score, cut(nxt.id), verdict.others_equal)
    values = {
        "top": Var(number_text(top.score), "app", verdict.at("scores/0/score")),
        "next": Var(number_text(nxt.score), "app", verdict.at("scores/1/score")),
    }
    if verdict.others_equal:
        return c.writer.say("understood", "understood.scores.allOthers", values), fact
    # The runner-up's name is presentation: it does not weaken the app's voucher.
    named = c.skills.var(nxt.id, verdict.at("scores/1/id"))
    values["nextSkill"] = Var(named.text, None, named.pointer)
    return c.writer.say("understood", "understood.scores", values), fact


def _with_verdict(
    c: _Context, verdict: RoutingVerdict, facts: RoutingFacts, unread: int, app: list[Line]
) -> Understood:
    writer, to = c.writer, verdict.to
    lines = _verdict_lines(c, verdict)
    scores_line, scores_fact = _scores_line(c, verdict)
    if scores_line is not None:
        lines.append(scores_line)
    skill = {"skill": c.skills.var(to, verdict.at("to"))} if to is not None else {}
    if verdict.by in LIBRARY_DECISIONS and to is not None:
        lines += _refusal_lines(writer, [r for r in c.refusals if r.requested_id == to], skill)
        delivery = _delivery_check(c, verdict, to, skill)
    else:
        delivery = _Delivery(
            [],
            CheckResult(
                "decided-delivered",
                "not-applicable",
                None,
                writer.text("check.decided.notApplicable"),
            ),
        )
    lines += delivery.lines
    lines.append(_CONFIDENCE_NONE)
    lines += app
    before: Literal["held", "carried"] | None = None
    if verdict.origin != "event":
        before = "held" if verdict.origin == "held" else "carried"
    fact = VerdictFact(
        cut(verdict.by),  # by
        verdict.origin,
        cut(verdict.from_) if verdict.from_ is not None else None,  # from_
        cut(to) if to is not None else None,  # to
        verdict.decisive,
        verdict.scorer,
    )
    return Understood(
        tuple(lines),
        delivery.check,
        delivery.signal,
        delivery.signal_line,
        delivery.why,  # unreachable
        _facts_with(facts, verdict=fact, scores=scores_fact, before_pause=before),
        verdict,
        unread,
    )


class _Delivery(NamedTuple):
    """Check 1 on a decision: its lines in the "It understood" row, its result, and its signal or
    why it could not run."""

    lines: list[Line]
    check: CheckResult
    signal: Signal | None = None
    signal_line: Line | None = None
    why: Line | None = None


def _delivery_check(
    c: _Context, verdict: RoutingVerdict, to: str, skill: dict[str, Var]
) -> _Delivery:
    """Check 1 on a library's decision for ``to``: delivered, not delivered (when the leg's
    delivery record is complete), or not knowable."""
    row = c.delivered.get(to)
    if row is not None:
        return _delivered(c, verdict, row, skill)
    if delivery_complete(c.view, c.inp.answering_iteration):
        return _not_delivered(c, verdict, skill)
    return _delivery_unknown(c, verdict)


def _delivered(
    c: _Context, verdict: RoutingVerdict, row: FootprintEvent, skill: dict[str, Var]
) -> _Delivery:
    # The line and the check point at the same evidence: read once.
    pointers = bounded([*verdict.ats("to"), at_event(row, "sourceId")])
    line = c.writer.say(
        "understood",
        "understood.delivered",
        pointers=pointers,
        chips=[chip("chip.decidedDelivered")],
    )
    check = CheckResult(
        "decided-delivered",
        "reachable",
        "delivered",  # outcome
        c.writer.text("check.decided.delivered", skill),  # sentence
        pointers,
        "pass",  # label
    )
    return _Delivery([line], check)


def _not_delivered(c: _Context, verdict: RoutingVerdict, skill: dict[str, Var]) -> _Delivery:
    writer = c.writer
    composes = [
        at_event(e, "slot")
        for e in c.view.of(semconv.T_SLOT_COMPOSED)
        if e.payload.get("slot") == SYSTEM_PROMPT
    ]
    other = next(iter(c.delivered), None)
    values = dict(skill)
    if other is not None:
        values["other"] = c.skills.var(other, at_event(c.delivered[other], "sourceId"))
    line = writer.say(
        "understood",
        "understood.notDelivered.other" if other is not None else "understood.notDelivered",
        values,
        pointers=composes,
        chips=[chip("chip.decidedNotDelivered")],
    )
    signal_line = writer.say(
        "anything-wrong", "signal.decidedNotDelivered", skill, pointers=composes
    )
    signal = Signal(
        "decided-not-delivered",
        "decided-delivered",
        "bad",
        signal_line.text,
        signal_line.pointers,
    )
    check = CheckResult(
        "decided-delivered",
        "reachable",
        outcome="not-delivered",
        sentence=signal_line.text,
        pointers=bounded([*verdict.ats("to"), *composes]),
        label="fail",
    )
    return _Delivery([line], check, signal, signal_line)


def _delivery_unknown(c: _Context, verdict: RoutingVerdict) -> _Delivery:
    # A verdict from before the pause: what the model was given then is that part's record.
    missing = "no-event" if verdict.origin == "event" else "before-pause"
    line = c.writer.say(
        "understood",
        "understood.delivery.unknown",
        status="not-recorded",
        missing=missing,
        chips=[chip("chip.notRecorded")],
    )
    why = _why(c.writer, "unreachable.delivery", missing)
    check = CheckResult(
        "decided-delivered", "unreachable", sentence=why.text, pointers=verdict.ats("to")
    )
    return _Delivery([line], check, why=why)


def _refusal_lines(writer: Writer, of_decided: list[_Refusal], skill: dict[str, Var]) -> list[Line]:
    """One line per distinct refusing rule (event type, by), at most three and within the shared
    item budget; the rest counted in one ``understood.refused.more`` line."""
    distinct: dict[tuple[str, str], _Refusal] = {}
    for refusal in of_decided:
        distinct.setdefault((refusal.event.type, refusal.by), refusal)
    lines: list[Line] = []
    for refusal in distinct.values():
        if len(lines) >= MAX_REFUSAL_LINES or not writer.take_item(min(len(refusal.by), ID_CHARS)):
            break
        where = at_event(refusal.event, refusal.field)
        if refusal.event.type == semconv.T_SKILL_REJECTED:
            lines.append(writer.say("understood", "understood.rejected", skill, pointers=[where]))
        elif refusal.named:
            rule = Var(cut(refusal.by), "library", at_event(refusal.event, "policyRuleId"))
            lines.append(
                writer.say(
                    "understood", "understood.refused", {**skill, "by": rule}, pointers=[where]
                )
            )
        else:
            lines.append(
                writer.say("understood", "understood.refused.unnamed", skill, pointers=[where])
            )
    unlisted = len(of_decided) - len(lines)
    if unlisted > 0:
        # The upstream points at the first unlisted refusal (one pointer, not thousands).
        first = of_decided[len(lines)]
        lines.append(
            writer.say(
                "understood",
                "understood.refused.more",
                {"more": Var(count_phrase(unlisted, "more refusal", "more refusals"))},
                pointers=[at_event(first.event, first.field)],
            )
        )
    return lines
