"""Grouping spans into runs: each run span with the model-call, tool and event-carrying spans under it.

A span belongs to the run of its nearest run-span ancestor (by parent chain within its trace). Spans
that play no role and carry no footprint event are dropped after one role lookup and one scan of
event names, which keeps the protobuf-native hop cheap on traces full of unrelated spans.

Agent stacks make more agent and model-call spans than an agent has runs and passes, so:

- a run span names a run (``footprint.run.id``, :func:`~otel_footprint.runs.recognize.role_of`);
  a framework's agent / chain / workflow spans are containers, and a run span nested in a run of
  the same run id does not split it. Only when footprint events have no run above them does their
  nearest agent span (themselves included) become their run (agents that emit on their own
  ``invoke_agent`` span).
- a pass is a model-call span marked as one (``footprint.pass.iteration``, set by the recorder or
  its span-start hook) or carrying footprint events; other model calls of the run (guards,
  routers, summarisers, the client span under a framework span that is the pass) are no pass.
  A run with no marked model call at all keeps every model call as a pass (older recordings).

Observed runs (``observed=True``): a trace with no recorder input — no span names a run
(``footprint.run.id``) and no span carries a footprint input event, as a span event or a log
record — is read from its instrumentation alone. The rule, one for every instrumentation: each
*outermost* agent span (``invoke_agent``, OpenInference ``AGENT``, OpenLLMetry ``agent``: one with
no agent span above it) is a run, and agent spans nested in it (handoffs, sub-agents, a framework's
workflow span) are parts of that run; a trace with no agent span is one run whose run span is its
top span (the root, or the topmost span here when the trace continues a remote one). Every model
call under a run span that has no model call above it within the run is a pass; a model call
nested in another (a client span under a framework's) is a second view of it, no pass; a model
call under no run span (a guard before the agent span) is no pass. Recorder input anywhere in a
trace wins for the whole trace: its runs are the recorder's and no observed run is made there,
so one agent run is never two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from otel_footprint import semconv
from otel_footprint.codec import integral
from otel_footprint.runs.model import Reason
from otel_footprint.runs.observed import observed_runs
from otel_footprint.runs.recognize import SpanRole, is_agent_span
from otel_footprint.runs.slices import STEP_SPANS, Steps, finish
from otel_footprint.runs.spans import OtlpSpanView, SdkSpanView, SpanEventView, SpanView

# Our own output events ride spans that may come back through the hop (a second pass, a replay of an
# annotated file); they are not agent input and must not make a plain span "carry footprint events".


_PREFIXES = (semconv.PREFIX, semconv.UPSTREAM_PREFIX)

# The roles as module constants: reading an Enum member off its class costs a descriptor call
# (~80 ns on CPython 3.11), and grouping compares roles a few dozen times per trace.
_RUN, _PASS, _TOOL, _OTHER = SpanRole.RUN, SpanRole.PASS, SpanRole.TOOL, SpanRole.OTHER
_AGENT = SpanRole.AGENT


def is_footprint_input_event(name: str) -> bool:
    """True for ``footprint.*`` / ``agentfootprint.*`` event names that agents emit (not our output).

    The one rule, used by reconstruction, the in-process buffer and the hop; the prefix test first
    settles the common event that is not ours at all.
    """
    if not name.startswith(_PREFIXES):
        return False
    event_type = semconv.event_type_of(name)
    if not event_type:  # a bare prefix names no event
        return False
    return semconv.event_name_of(event_type) not in semconv.OUTPUT_EVENTS


def _event_names(view: SpanView) -> Iterable[str]:
    # Reading names straight off the protobuf / SDK objects avoids converting every attribute of
    # every event of spans that turn out not to matter.
    if isinstance(view, OtlpSpanView):
        return (event.name for event in view.pb.events)
    if isinstance(view, SdkSpanView):
        return (event.name for event in view.span.events)
    return (event.name for event in view.events())


def carries_footprint_events(view: SpanView) -> bool:
    """Whether a span has at least one footprint input event among its own span events."""
    return any(is_footprint_input_event(name) for name in _event_names(view))


def _int_attribute(view: SpanView, key: str) -> int | None:
    value = view.attribute(key)
    # Some clients can only set string attributes: "4" names pass 4 as well as 4 does.
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        try:
            value = int(value)
        except ValueError:  # past Python's digit limit: not an iteration (the pass says why)
            return None
    return integral(value)


def pass_iteration_of(view: SpanView) -> int | None:
    """``footprint.pass.iteration`` of a model-call or tool span, when present and an integer."""
    return _int_attribute(view, semconv.PASS_ITERATION)


@dataclass(frozen=True, slots=True)
class RunSpans:
    """The spans of one run leg, by role, plus the log-record events joined to them.

    ``run_span`` is None for a trace that carries footprint events but has no run span; ``reason``
    then says so and the engine decides nothing (the spans still flow on unannotated).
    """

    trace_id: str
    run_span: SpanView | None
    passes: tuple[SpanView, ...]
    """Model-call spans, by ``footprint.pass.iteration`` when present, else by start time."""
    tools: tuple[SpanView, ...]
    """Tool spans, by start time."""
    others: tuple[SpanView, ...] = ()
    """Spans of no recognised role that carry footprint events."""
    log_events: Mapping[str, tuple[SpanEventView, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Events that arrived as log records, by the span id (hex) they name."""
    reason: Reason | None = None
    unmarked_calls: tuple[SpanView, ...] = ()
    """Model-call spans of the run that are no pass (the client span under a framework's pass
    span, guards, summarisers), by start time: read only as a second view of a pass (the
    integrity checks' wire seam), never as passes."""
    observed: bool = False
    """An observed run: read from the instrumentation's spans alone (no recorder input in its
    trace; see the module docstring). Its run span is an agent span or the trace's top span."""

    @property
    def run_id(self) -> str:
        """``footprint.run.id`` of the run span; without it, the run span's id; without a run span,
        the trace id (a leg of a resumed run keeps the run id across traces)."""
        return run_id_of(self.run_span) if self.run_span is not None else self.trace_id

    @property
    def session_id(self) -> str | None:
        """The conversation the run belongs to (``gen_ai.conversation.id`` or ``session.id``)."""
        return session_id_of(self.run_span) if self.run_span is not None else None

    @property
    def run_span_id(self) -> str | None:
        """The run span's id (hex), or None."""
        return None if self.run_span is None else self.run_span.span_id

    @property
    def start_time_unix_nano(self) -> int:
        """When the leg began: the run span's start, else the earliest span's."""
        if self.run_span is not None:
            return self.run_span.start_time_unix_nano
        starts = [s.start_time_unix_nano for s in (*self.passes, *self.tools, *self.others)]
        return min(starts, default=0)

    def spans(self) -> tuple[SpanView, ...]:
        """Every span of the run: the run span first, then the others by start time (an observed
        run whose top span is itself its one model call lists it once)."""
        rest = sorted(
            (*self.passes, *self.tools, *self.others),
            key=lambda s: (s.start_time_unix_nano, s.span_id),
        )
        if self.run_span is None:
            return tuple(rest)
        run_id = self.run_span.span_id
        return (self.run_span, *[s for s in rest if s.span_id != run_id])


@dataclass(slots=True, eq=False)
class _Node:
    view: SpanView
    role: SpanRole
    carries: bool
    """Set for spans of no role only: they belong to a run only when they carry events."""
    marked: bool = False
    """Pass spans: has an iteration or carries footprint events (a pass, not another call)."""
    iteration: int | None = None
    """Pass spans: ``footprint.pass.iteration`` (read once; passes are sorted by it)."""


def _nearest_run(
    span_id: str, nodes: Mapping[str, _Node], memo: dict[str, str | None]
) -> str | bool | None:
    """The span id of the nearest run-span ancestor (the span itself excluded), None when the chain
    ends at a root without one, or False when the chain is broken (a parent that is not here)."""
    path: list[str] = []
    current: str | None = nodes[span_id].view.parent_span_id
    result: str | bool | None
    while True:
        if current is None:
            result = None
            break
        if current in memo:
            result = memo[current]
            break
        node = nodes.get(current)
        if node is None:
            result = False
            break
        if node.role is _RUN:
            result = current
            break
        if current in path:  # a parent cycle in corrupt input: treat as broken
            result = False
            break
        path.append(current)
        current = node.view.parent_span_id
    if result is not False:
        for visited in path:
            memo[visited] = result if isinstance(result, str) else None
    return result


def _node_pass_key(node: _Node) -> tuple[int, int, int, str]:
    # Spans with an iteration order by it; spans without one follow them by start time.
    iteration = node.iteration
    return (
        0 if iteration is not None else 1,
        iteration if iteration is not None else 0,
        node.view.start_time_unix_nano,
        node.view.span_id,
    )


def _start_key(view: SpanView) -> tuple[int, str]:
    return (view.start_time_unix_nano, view.span_id)


def group_runs(
    spans: Iterable[SpanView],
    log_events: Mapping[str, Sequence[SpanEventView]] | None = None,
    *,
    observed: bool = False,
) -> list[RunSpans]:
    """Group spans into run legs, in the order the legs started.

    A span joins the run of its nearest run-span ancestor; when its parent chain is broken and its
    trace has exactly one run span, it joins that one. Spans of a trace that has no run span (or an
    ambiguous broken chain) and that carry footprint events form a leg with ``run_span=None`` and a
    reason. ``log_events`` maps a span id (hex) to the events that arrived as log records for it.
    ``observed``: a trace with no recorder input gives its observed runs (module docstring).
    """
    return finish(group_runs_steps(spans, log_events, observed=observed))


def group_runs_steps(
    spans: Iterable[SpanView],
    log_events: Mapping[str, Sequence[SpanEventView]] | None = None,
    *,
    observed: bool = False,
    whole: str | None = None,
) -> Steps[list[RunSpans]]:
    """:func:`group_runs` in steps (one per :data:`STEP_SPANS` spans, one per trace): see
    ``runs/slices.py``.

    ``whole``: the id (hex) of a span the caller knows every span's parent chain reaches through
    ``spans`` (:func:`chains_reach`: the hop's buffer grouped them so). When it is their one run
    span, every span's nearest run is known without walking a chain; the runs are the same.
    """
    logs: Mapping[str, Sequence[SpanEventView]] = log_events or {}
    traces: dict[str, dict[str, _Node]] = {}
    for count, view in enumerate(spans, 1):
        role = view.role
        # Only a span of no role needs its events looked at now: it matters only if it carries some.
        carries = (role is _OTHER or role is _AGENT) and (
            view.span_id in logs or carries_footprint_events(view)
        )
        iteration = pass_iteration_of(view) if role is _PASS else None
        marked = role is _PASS and (iteration is not None or _carries(view, logs))
        trace = traces.setdefault(view.trace_id, {})
        # Keep the role-bearing copy if a span id repeats (a retried export): first one wins.
        trace.setdefault(view.span_id, _Node(view, role, carries, marked, iteration))
        if not count % STEP_SPANS:
            yield None

    legs: list[RunSpans] = []
    for trace_id, nodes in traces.items():
        if observed and not _recorded(nodes, logs):
            legs.extend(_observed_legs(trace_id, nodes))
        else:
            legs.extend(_group_trace(trace_id, nodes, logs, whole))
        yield None
    legs.sort(key=lambda leg: (leg.start_time_unix_nano, leg.trace_id, leg.run_span_id or ""))
    return legs


def _recorded(nodes: Mapping[str, _Node], logs: Mapping[str, Sequence[SpanEventView]]) -> bool:
    """Whether a trace has recorder input: a span naming a run, or a footprint input event on any
    of its spans (a span event, or a log record naming it). A ``footprint.pass.iteration`` alone
    is not: an observed run's own annotation writes it, and our output is never our input."""
    for node in nodes.values():
        if node.role is _RUN or node.carries:
            return True
        if node.role is not _OTHER and _carries(node.view, logs):
            return True
    return False


def recorder_input(view: SpanView) -> bool:
    """Whether a span is recorder input: it names a run, or carries a footprint input event."""
    return view.attribute(semconv.RUN_ID) is not None or carries_footprint_events(view)


def incomplete_for(run: RunSpans, reason: Reason | None) -> Reason | None:
    """The release's incompleteness ``reason`` as it holds for ``run``: ``missing-spans`` (the
    trace's root ended before some run span arrived) never holds for an observed run, whose run
    span is its agent or top span, here; every other reason holds as it is."""
    if reason is not None and run.observed and reason.code == "missing-spans":
        return None
    return reason


def _observed_legs(trace_id: str, nodes: Mapping[str, _Node]) -> list[RunSpans]:
    """The observed runs of a trace with no recorder input (see the module docstring)."""
    found = observed_runs({sid: (n.view, n.role) for sid, n in nodes.items()})
    legs: list[RunSpans] = []
    for run_id, passes, unmarked, tools in found:
        legs.append(
            RunSpans(
                trace_id=trace_id,
                run_span=nodes[run_id].view,
                passes=tuple(
                    n.view for n in sorted((nodes[p] for p in passes), key=_node_pass_key)
                ),
                tools=tuple(sorted((nodes[t].view for t in tools), key=_start_key)),
                unmarked_calls=tuple(sorted((nodes[u].view for u in unmarked), key=_start_key)),
                observed=True,
            )
        )
    return legs


def _carries(view: SpanView, logs: Mapping[str, Sequence[SpanEventView]]) -> bool:
    return carries_footprint_events(view) or any(
        is_footprint_input_event(event.name) for event in logs.get(view.span_id, ())
    )


def session_id_of(run_span: SpanView) -> str | None:
    """The conversation of the run whose run span this is (:attr:`RunSpans.session_id`)."""
    for key in semconv.SESSION_ID_ALIASES:
        value = run_span.attribute(key)
        if isinstance(value, str) and value:
            return value
    return None


def may_be_run_span(view: SpanView) -> bool:
    """Whether grouping may make this span a run span: it names a run (every run span does), or
    it is an agent span (the run of footprint events with no run above them)."""
    return view.attribute(semconv.RUN_ID) is not None or is_agent_span(view.attribute)


def run_id_of(view: SpanView) -> str:
    """The run id of the run whose run span this is (:attr:`RunSpans.run_id`)."""
    value = view.attribute(semconv.RUN_ID)
    return value if isinstance(value, str) and value else view.span_id


def _settle_runs(nodes: Mapping[str, _Node]) -> None:
    """Settle which spans are runs (see the module docstring). Changes ``nodes`` in place."""
    # Footprint input with no run above it: its nearest agent span (itself included) is its run.
    inputs = [n for n in nodes.values() if n.carries or (n.role is _PASS and n.marked)]
    for node in inputs:
        if isinstance(_nearest_run(node.view.span_id, nodes, {}), str):
            continue
        current: str | None = node.view.span_id
        seen: set[str] = set()
        while current is not None and current not in seen:
            seen.add(current)
            candidate = nodes.get(current)
            if candidate is None:
                break
            if candidate.role is _AGENT:
                candidate.role = _RUN
                candidate.carries = False
                break
            current = candidate.view.parent_span_id
    # A run span inside a run of the same run id is part of that run, not a second run.
    for node in [n for n in nodes.values() if n.role is _RUN]:
        owner = _nearest_run(node.view.span_id, nodes, {})
        if isinstance(owner, str) and run_id_of(nodes[owner].view) == run_id_of(node.view):
            node.role = _OTHER
            node.carries = True


def chains_reach(run_span_id: bytes, parents: Mapping[bytes, bytes]) -> bool:
    """Whether the parent chain of every span in ``parents`` (span id -> parent id) reaches
    ``run_span_id`` through the spans there (a cycle, or a parent not there, breaks a chain).
    Read from the ids alone: what ``whole`` of :func:`group_runs_steps` asks of its caller."""
    reaches = {run_span_id: True}
    for span_id in parents:
        path: dict[bytes, None] = {}
        current: bytes | None = span_id
        while current is not None and current not in reaches:
            if current in path or current not in parents:
                current = None  # a cycle, or a parent not among the spans: broken
                break
            path[current] = None
            current = parents[current]
        found = current is not None and reaches[current]
        for visited in path:
            reaches[visited] = found
        if not found:
            return False
    return True


def _sole_run(nodes: Mapping[str, _Node], run_span_id: str) -> bool:
    """Whether ``run_span_id`` is the trace's one run span, and not under a span of its run
    (then settling the runs changes nothing, and every chain that reaches it ends there)."""
    node = nodes.get(run_span_id)
    if node is None or node.role is not _RUN or node.view.parent_span_id in nodes:
        return False
    return sum(1 for n in nodes.values() if n.role is _RUN) == 1


def _group_trace(
    trace_id: str,
    nodes: Mapping[str, _Node],
    logs: Mapping[str, Sequence[SpanEventView]],
    whole: str | None = None,
) -> list[RunSpans]:
    if whole is not None and not _sole_run(nodes, whole):
        whole = None
    if whole is None:
        _settle_runs(nodes)
    for node in nodes.values():
        if node.role is _AGENT:  # a container of a recorded run
            node.role = _OTHER
    run_ids = [span_id for span_id, node in nodes.items() if node.role is _RUN]
    only_run = run_ids[0] if len(run_ids) == 1 else None
    members: dict[str | None, list[_Node]] = {run_id: [] for run_id in run_ids}
    orphans: list[_Node] = []
    memo: dict[str, str | None] = {}
    for span_id, node in nodes.items():
        if node.role is _RUN:
            continue
        if node.role is _OTHER and not node.carries:
            continue
        owner = whole or _nearest_run(span_id, nodes, memo)
        if owner is False:
            owner = only_run
        if isinstance(owner, str):
            members[owner].append(node)
        else:
            orphans.append(node)

    legs: list[RunSpans] = []
    for run_id in run_ids:
        run_node = nodes[run_id]
        legs.append(_leg(trace_id, run_node.view, members[run_id], logs, None))
    if any(
        node.carries or node.view.span_id in logs or carries_footprint_events(node.view)
        for node in orphans
    ):
        if run_ids:
            reason = Reason(
                "no-run-span",
                f"{len(orphans)} span(s) of trace {trace_id} carry footprint events but have no "
                "run span (invoke_agent) among their ancestors, and the trace has "
                f"{len(run_ids)} run spans to choose from",
            )
        else:
            reason = Reason(
                "no-run-span",
                f"trace {trace_id} carries footprint events but has no run span "
                "(gen_ai.operation.name=invoke_agent, or an agent span of OpenInference/OpenLLMetry)",
            )
        legs.append(_leg(trace_id, None, orphans, logs, reason))
    return legs


def _leg(
    trace_id: str,
    run_span: SpanView | None,
    nodes: Sequence[_Node],
    logs: Mapping[str, Sequence[SpanEventView]],
    reason: Reason | None,
) -> RunSpans:
    calls = [n for n in nodes if n.role is _PASS]
    if any(n.marked for n in calls):
        calls = [n for n in calls if n.marked]
    passes = [n.view for n in sorted(calls, key=_node_pass_key)]
    # By identity: ``n not in calls`` compared each node with every call (dataclass equality), a
    # quadratic that cost a 3,000-pass run ≈ 0.45 s.
    chosen = {id(n) for n in calls}
    unmarked = sorted(
        (n.view for n in nodes if n.role is _PASS and id(n) not in chosen), key=_start_key
    )
    tools = sorted((n.view for n in nodes if n.role is _TOOL), key=_start_key)
    others = sorted((n.view for n in nodes if n.role is _OTHER), key=_start_key)
    wanted = [run_span.span_id] if run_span is not None else []
    wanted.extend(n.view.span_id for n in nodes)
    joined: dict[str, tuple[SpanEventView, ...]] = {
        span_id: tuple(logs[span_id]) for span_id in wanted if span_id in logs
    }
    return RunSpans(
        trace_id=trace_id,
        run_span=run_span,
        passes=tuple(passes),
        tools=tuple(tools),
        others=tuple(others),
        log_events=MappingProxyType(joined),
        reason=reason,
        unmarked_calls=tuple(unmarked),
    )
