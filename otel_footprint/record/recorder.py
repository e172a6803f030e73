"""The agent-side recorder: GenAI run / model-call / tool spans carrying footprint events, written
through the OpenTelemetry API as span events (default) or as log records tied to the span."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from opentelemetry import trace
from opentelemetry._logs import Logger, LoggerProvider, get_logger
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from otel_footprint import __version__, semconv
from otel_footprint.codec import encode_payload
from otel_footprint.kernel import (
    DEFAULT_RENEWAL_GRACE,
    EngagementChange,
    MountedMap,
    ParkedChange,
    engagement_plan,
)
from otel_footprint.kernel.jsoncodec import change_to_json, plan_to_json
from otel_footprint.record.policy import Decision, LivePolicy, PassPolicy, StatedCall
from otel_footprint.runs.passes import edges_of_graph

EmitAs: TypeAlias = Literal["span", "log"]
"""Where footprint events go: span events (every backend shows them) or log records."""

SCOPE_NAME = "otel_footprint.record"
_SUMMARY_CHARS = 80
_MAX_PARENTS = 10_000  # span parents a run remembers (the hook's ancestry test); bounded

_CURRENT_RUN: ContextVar[Run | None] = ContextVar("otel_footprint_current_run", default=None)
"""The innermost open run of this context (threads and asyncio tasks inherit it by copy)."""
_ATTACH_INSTALLED = [0]
"""How many span-start hooks are installed (record.attach counts them; 0: staging cannot land)."""


def current_run() -> Run | None:
    """The innermost :func:`run` open in this context (thread / asyncio task), or None."""
    return _CURRENT_RUN.get()


def _hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:8]


def _summary(content: str) -> str:
    return content if len(content) <= _SUMMARY_CHARS else content[: _SUMMARY_CHARS - 1] + "…"


def _compact(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Drop absent (None) fields: the schema leaves them out rather than sending nulls."""
    return {key: value for key, value in payload.items() if value is not None}


_COLUMN_TYPES = frozenset({"number", "string", "boolean", "date"})
_RESULT_SHAPES = frozenset({"rowset", "absence", "bespoke"})


def _check_columns(columns: Mapping[str, Any]) -> None:
    """Refuse a result-column declaration the column checks could not read (raises ValueError)."""
    if not isinstance(columns, Mapping) or not columns:
        raise ValueError("result_columns must be a non-empty map of column -> type")
    for column, spec in columns.items():
        if not isinstance(column, str) or not column.strip():
            raise ValueError("result_columns: a column name must not be blank")
        kind = spec.get("type") if isinstance(spec, Mapping) else spec
        if kind not in _COLUMN_TYPES:
            raise ValueError(
                f"result_columns[{column!r}]: type must be one of {sorted(_COLUMN_TYPES)}, "
                f"got {kind!r}"
            )
        if isinstance(spec, Mapping) and not isinstance(spec.get("nullable", False), bool):
            raise ValueError(f"result_columns[{column!r}]: nullable must be a bool")


class _Emitter:
    """Writes one footprint event on a span, as a span event or as a log record tied to it."""

    def __init__(self, emit_as: EmitAs, logger_provider: LoggerProvider | None) -> None:
        if emit_as not in ("span", "log"):
            raise ValueError(f"emit_as must be 'span' or 'log', got {emit_as!r}")
        self.emit_as: EmitAs = emit_as
        self._logger: Logger | None = None
        if emit_as == "log":
            self._logger = get_logger(SCOPE_NAME, __version__, logger_provider)

    def emit(
        self,
        span: Span,
        event_type: str,
        payload: Mapping[str, Any],
        composition_id: str | None = None,
        timestamp: int | None = None,
    ) -> None:
        name = semconv.event_name_of(event_type)
        attributes = encode_payload(_compact(payload), composition_id=composition_id)
        if self._logger is None:
            span.add_event(name, attributes=attributes, timestamp=timestamp)
        else:
            self._logger.emit(
                event_name=name,
                attributes=attributes,
                context=trace.set_span_in_context(span),
                timestamp=timestamp,
            )


@dataclass(slots=True)
class _Composition:
    id: str
    breakdown: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Staged:
    """One event written before its span exists (kept until the pass lands on a span)."""

    event_type: str
    payload: Mapping[str, Any]
    composition_id: str | None
    time_unix_nano: int


class ModelCall:
    """One pass (one model call) and what went into it.

    The events stated here are *staged* until the pass has a span: the model-call span an
    instrumentation (OpenTelemetry GenAI, OpenInference, OpenLLMetry, a framework's) starts next
    inside the run claims them through the span-start hook (:mod:`otel_footprint.record.attach`,
    installed by ``otel_footprint.sdk.setup()``), which writes them there with
    ``footprint.pass.iteration``. A pass opened with :meth:`Run.model_call` that no instrumentation
    span claimed gets the recorder's own ``chat <model>`` span when its block ends (start time =
    block entry), so an agent without instrumentation records exactly what it did before.
    Events stated after the claimed span has ended go on the run span (they carry the iteration
    or a composition id, which ties them to this pass).
    """

    def __init__(self, run: Run, iteration: int) -> None:
        self._run = run
        self.span: Span | None = None
        """The span this pass's events are on: None while staged (no model call yet)."""
        self.iteration = iteration
        """The pass number (``footprint.pass.iteration``)."""
        self.claimed = False
        """True when an instrumentation's model-call span took this pass's events."""
        self._open: dict[str, _Composition] = {}
        self._staged: list[_Staged] = []
        self._staged_attributes: dict[str, int | str] = {}
        live = run._policy
        self._policy = PassPolicy(live, live.pass_state(iteration)) if live else None
        """This pass's side of the live policy (None: the run has no policy)."""

    @property
    def staged(self) -> bool:
        """True while the pass waits for its model-call span."""
        return self.span is None

    def _emit(
        self, event_type: str, payload: Mapping[str, Any], composition_id: str | None = None
    ) -> None:
        span = self.span
        if span is None:
            self._staged.append(_Staged(event_type, payload, composition_id, time.time_ns()))
        elif span.is_recording() or self._run._emit_as == "log":
            # A log record may name an ended span; a span event may not be added to one.
            self._run.emit(span, event_type, payload, composition_id)
        else:
            self._run.emit(self._run.span, event_type, payload, composition_id)

    def _land(self, span: Span, *, claimed: bool, keep_times: bool) -> None:
        """Write the staged events and attributes on ``span`` (the pass's span from now on)."""
        self.span = span
        if self._policy is not None:
            self._policy.state.span = span
        self.claimed = claimed
        span.set_attribute(semconv.PASS_ITERATION, self.iteration)
        for key, value in self._staged_attributes.items():
            span.set_attribute(key, value)
        for item in self._staged:
            self._run.emit(
                span,
                item.event_type,
                item.payload,
                item.composition_id,
                item.time_unix_nano if keep_times else None,
            )
        self._staged.clear()
        self._staged_attributes.clear()

    def evaluated(
        self,
        active_ids: Sequence[str] = (),
        *,
        cursor_to: str | None = None,
        moved_by: str | None = None,
        cursor_from: str | None = None,
        witness: str | None = None,
        witness_keyword: str | None = None,
        skipped: Sequence[Mapping[str, Any]] = (),
        routing: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """What this pass serves and where the cursor stands (``context.evaluated``).

        In a ``policy=True`` run the event is written when the pass closes, and a parked member
        listed here but not injected on the pass is written as skipped (``parked``), not served;
        the cursor move may be left to :meth:`plan`.

        ``moved_by`` is the clause that moved the cursor: ``entry``, ``intent``, ``route``,
        ``model-pick``, ``continuity``, ``stay``, ... (the kernel grades it); ``witness`` the user's
        words that matched, when a rule matched some.
        """
        move = _cursor_move(cursor_to, moved_by, cursor_from, witness, witness_keyword)
        payload: dict[str, Any] = {
            "iteration": self.iteration,
            "activeIds": list(active_ids),
            "skippedDetails": [dict(row) for row in skipped],
            "cursorMove": move,
            "routing": [dict(row) for row in routing] if routing is not None else None,
        }
        if self._policy is not None:
            self._policy.evaluated(move, payload)  # written when the pass closes
        else:
            self._emit(semconv.T_CONTEXT_EVALUATED, payload)

    # ── enforce mode: the live policy (a run opened with ``policy=True``) ──────────────────────

    def plan(
        self,
        *,
        cursor_to: str | None = None,
        moved_by: str | None = None,
        cursor_from: str | None = None,
        witness: str | None = None,
        witness_keyword: str | None = None,
    ) -> Decision:
        """What to leave out of this model call: the kernel advanced by this pass's cursor move
        (the same arguments as :meth:`evaluated`, which may then leave them out; or, after
        :meth:`evaluated`, no arguments: the pass is decided on its move). Ask before composing
        the prompt; :meth:`keep` and :meth:`tools` apply the answer and count what it
        saved. Raises ``ValueError`` in a run without ``policy=True``."""
        return self._policy_of().plan(
            _cursor_move(cursor_to, moved_by, cursor_from, witness, witness_keyword)
        )

    @property
    def decision(self) -> Decision | None:
        """The policy's answer for this pass, once asked (None before, and in a run without it)."""
        return self._policy.decision if self._policy is not None else None

    def keep(
        self, injection_id: str, *, content: str | None = None, chars: int | None = None
    ) -> bool:
        """True when ``injection_id`` may go into this call; False when its map is parked, and
        then its characters (``content``'s length, or ``chars``) are counted as saved — unless
        the pass injects it after all."""
        size = len(content) if content is not None else (chars or 0)
        return self._policy_of().keep(injection_id, size)

    def tools(self, definitions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The tool definitions (OpenAI or flat shape) to offer this call: those of parked maps
        left out, their characters counted as saved."""
        return self._policy_of().tools(definitions)

    def _policy_of(self) -> PassPolicy:
        if self._policy is None:
            raise ValueError("this run has no live policy: open it with run(..., policy=True)")
        return self._policy

    def injected(
        self,
        slot: str,
        source: str,
        *,
        source_id: str | None = None,
        content: str | None = None,
        chars: int | None = None,
        content_hash: str | None = None,
        summary: str | None = None,
    ) -> None:
        """One piece put into a slot (``context.injected``) of this pass's composition of ``slot``.

        Give ``content`` and the recorder counts its characters, hashes it and keeps an
        80-character summary (the body itself is not recorded); or give ``chars`` (and a hash)
        when the content must not leave the process.
        """
        if content is not None:
            chars = len(content) if chars is None else chars
            content_hash = content_hash or _hash(content)
            summary = summary if summary is not None else _summary(content)
        if self._policy is not None:
            self._policy.injected(source, source_id)
        composition = self._composition(slot)
        row = composition.breakdown.setdefault(source, {"chars": 0, "count": 0})
        row["chars"] += chars or 0
        row["count"] += 1
        payload = {
            "slot": slot,
            "source": source,
            "sourceId": source_id,
            "contentHash": content_hash,
            "contentSummary": summary,
            "chars": chars,
        }
        self._emit(semconv.T_CONTEXT_INJECTED, payload, composition.id)

    def composed(self, slot: str) -> None:
        """Close this pass's composition of ``slot`` (``context.slot_composed`` with the per-source
        breakdown). Open compositions are closed automatically when the model call ends."""
        composition = self._open.pop(slot, None) or _Composition(self._run.composition_id(slot))
        payload = {
            "slot": slot,
            "iteration": self.iteration,
            "sourceBreakdown": composition.breakdown,
        }
        self._emit(semconv.T_SLOT_COMPOSED, payload, composition.id)

    def engagement(self, change: EngagementChange) -> None:
        """Verify mode: a decision of the agent's own kernel (``map.engaged`` / ``map.parked``)."""
        payload = change_to_json(change)
        del payload["kind"]  # the event type says it
        event_type = (
            semconv.T_MAP_PARKED if isinstance(change, ParkedChange) else semconv.T_MAP_ENGAGED
        )
        self._emit(event_type, payload)

    def usage(self, *, input_tokens: int | None = None, output_tokens: int | None = None) -> None:
        """Token usage of the call (``gen_ai.usage.*``)."""
        for key, value in (
            (semconv.GEN_AI_USAGE_INPUT_TOKENS, input_tokens),
            (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens),
        ):
            if value is not None:
                self._attribute(key, value)

    def _attribute(self, key: str, value: int | str) -> None:
        """An attribute of the pass's own span, staged until the span is there. A claimed span's
        usage and frame are its instrumentation's to record."""
        if self.span is None:
            self._staged_attributes[key] = value
        elif self.span.is_recording() and not self.claimed:
            self.span.set_attribute(key, value)

    def event(self, event_type: str, payload: Mapping[str, Any]) -> None:
        """Any other upstream event type on this pass (e.g. ``skill.route_conflict``)."""
        self._emit(event_type, payload)

    def _composition(self, slot: str) -> _Composition:
        if slot not in self._open:
            self._open[slot] = _Composition(self._run.composition_id(slot))
        return self._open[slot]

    def _close(self) -> None:
        if self._policy is not None:
            self._policy.close(
                lambda payload: self._emit(semconv.T_CONTEXT_EVALUATED, payload), self.engagement
            )
        for slot in list(self._open):
            self.composed(slot)


class ToolCall:
    """One tool call: the ``execute_tool <name>`` span, its result, and the gate's verdicts."""

    def __init__(
        self,
        run: Run,
        span: Span,
        name: str,
        call_id: str,
        iteration: int,
        stated: StatedCall | None = None,
    ) -> None:
        self._run = run
        self.span = span
        self.name = name
        self.call_id = call_id
        self.iteration = iteration
        """The pass whose model output asked for this call."""
        self._stated = stated

    def result(self, value: Any, *, error: bool = False) -> None:
        """What the tool returned (``gen_ai.tool.call.result``; non-text as JSON); ``error=True``
        marks the span ERROR."""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        self.span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, text)
        if error:
            self.span.set_status(Status(StatusCode.ERROR, text[:256]))
            if self._stated is not None:
                self._stated.failed = True

    def picked(self, skill_id: str, *, hop: bool = False) -> None:
        """The gate accepted a skill pick (``skill.picked``); ``hop`` = it moves the cursor."""
        self._gate(semconv.T_SKILL_PICKED, {"skillId": skill_id, "hop": hop})

    def rejected(
        self,
        requested_id: str,
        *,
        allowed: Sequence[str] = (),
        current_skill_id: str | None = None,
    ) -> None:
        """The skill gate refused a pick (``skill.rejected``)."""
        payload = {
            "requestedId": requested_id,
            "currentSkillId": current_skill_id,
            "allowed": list(allowed),
            "iteration": self.iteration,
        }
        self._gate(semconv.T_SKILL_REJECTED, payload)

    def permission(
        self,
        capability: str,
        target: str,
        result: str,
        *,
        actor: str = "model",
        rationale: str | None = None,
        policy_rule_id: str | None = None,
    ) -> None:
        """A permission check during this call (``permission.check``); ``result`` is ``allow``,
        ``deny``, ``halt`` or ``gate_open``; a skill read targets ``skill:<id>``."""
        payload = {
            "capability": capability,
            "actor": actor,
            "target": target,
            "result": result,
            "rationale": rationale,
            "policyRuleId": policy_rule_id,
        }
        self._gate(semconv.T_PERMISSION_CHECK, payload)

    def _gate(self, event_type: str, payload: Mapping[str, Any]) -> None:
        """Write a gate event on the call's span; a policy run's kernel reads it too."""
        self._run.emit(self.span, event_type, payload)
        if self._stated is not None:
            self._stated.noted(event_type, _compact(payload))

    def result_shape(
        self, shape: Literal["rowset", "absence", "bespoke"], *, rows: int | None = None
    ) -> None:
        """The shape of what the tool really returned (``tool.result_shape``): ``rowset`` (with
        ``rows``), ``absence`` or ``bespoke``, whatever the model was served. Arms ``empty-lookup``."""
        if shape not in _RESULT_SHAPES:
            raise ValueError(f"shape must be one of {sorted(_RESULT_SHAPES)}: {shape!r}")
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise ValueError(f"rows must be an int >= 0: {rows!r}")
        self._run.emit(self.span, semconv.T_TOOL_RESULT_SHAPE, {"shape": shape, "rows": rows})

    def event(self, event_type: str, payload: Mapping[str, Any]) -> None:
        """Any other upstream event on this call (e.g. ``tools.absent``)."""
        self._run.emit(self.span, event_type, payload)


class Run:
    """One run leg: the ``invoke_agent`` span; opens model-call and tool spans under it."""

    def __init__(
        self,
        tracer: Tracer,
        span: Span,
        run_id: str,
        emitter: _Emitter,
        next_iteration: int,
        turn_index: int,
        policy: LivePolicy | None = None,
    ) -> None:
        self._policy = policy
        self._tracer = tracer
        self.span = span
        self.run_id = run_id
        self._emitter = emitter
        self._emit_as = emitter.emit_as
        self._next_iteration = next_iteration
        self._turn_index = turn_index
        self._counter = itertools.count(1)
        self.iteration = next_iteration - 1
        """The number of the latest model call (0 before the first)."""
        self._pending: ModelCall | None = None
        self._lock = threading.Lock()
        self._open_calls: list[Span] = []
        self._parents: dict[int, int] = {}
        self._staged_while: str | None = None

    def emit(
        self,
        span: Span,
        event_type: str,
        payload: Mapping[str, Any],
        composition_id: str | None = None,
        timestamp: int | None = None,
    ) -> None:
        """Write one footprint event on ``span`` the way this run was configured to."""
        self._emitter.emit(span, event_type, payload, composition_id, timestamp)

    def composition_id(self, slot: str) -> str:
        """A run-unique id for one composition of ``slot`` (shared by its rows)."""
        return f"{slot}/compose#{next(self._counter)}"

    # ── the next pass: stated on the run, landed on the next model-call span ──────────────────

    def next_pass(self) -> ModelCall:
        """The pass the next model call of this run will be: what is stated on it is staged and
        lands on the model-call span an instrumentation starts next inside the run (see
        :class:`ModelCall`). The same object until that span starts; the pass number is taken now.
        """
        with self._lock:
            if self._pending is None:
                number = self._next_iteration
                self._next_iteration = number + 1
                self.iteration = number
                self._pending = ModelCall(self, number)
                current = _CURRENT_RUN.get()
                self._staged_while = (
                    None if current is self else (current.run_id if current else "no run")
                )
            return self._pending

    def evaluated(self, active_ids: Sequence[str] = (), **options: Any) -> ModelCall:
        """:meth:`ModelCall.evaluated` on :meth:`next_pass` (staged until the model call)."""
        call = self.next_pass()
        call.evaluated(active_ids, **options)
        return call

    def injected(self, slot: str, source: str, **options: Any) -> ModelCall:
        """:meth:`ModelCall.injected` on :meth:`next_pass` (staged until the model call)."""
        call = self.next_pass()
        call.injected(slot, source, **options)
        return call

    def composed(self, slot: str) -> ModelCall:
        """:meth:`ModelCall.composed` on :meth:`next_pass` (staged until the model call)."""
        call = self.next_pass()
        call.composed(slot)
        return call

    def plan(
        self,
        *,
        cursor_to: str | None = None,
        moved_by: str | None = None,
        cursor_from: str | None = None,
        witness: str | None = None,
        witness_keyword: str | None = None,
    ) -> Decision:
        """:meth:`ModelCall.plan` on :meth:`next_pass`: what to leave out of the next model call."""
        return self.next_pass().plan(
            cursor_to=cursor_to,
            moved_by=moved_by,
            cursor_from=cursor_from,
            witness=witness,
            witness_keyword=witness_keyword,
        )

    def keep(
        self, injection_id: str, *, content: str | None = None, chars: int | None = None
    ) -> bool:
        """:meth:`ModelCall.keep` on :meth:`next_pass`."""
        return self.next_pass().keep(injection_id, content=content, chars=chars)

    def tools(self, definitions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """:meth:`ModelCall.tools` on :meth:`next_pass`."""
        return self.next_pass().tools(definitions)

    def problem(self, code: str, message: str, iteration: int | None = None) -> None:
        """Say on the run span why part of the run cannot be decided (``record.problem``); with
        ``iteration`` that pass and the ones after it stay undecided."""
        payload = {"code": code, "message": message, "iteration": iteration}
        self.emit(self.span, semconv.T_RECORD_PROBLEM, payload)

    def _model_call_started(self, span: Span, parent_span_id: int | None) -> ModelCall | None:
        """The span-start hook's entry: a model-call span started inside this run. It claims the
        staged pass, if there is one; returns the pass it became (None: not a pass)."""
        context = span.get_span_context()
        if context.trace_id != self.span.get_span_context().trace_id:
            return None
        with self._lock:
            self._open_calls = [s for s in self._open_calls if s.is_recording()]
            ancestors = self._ancestors(parent_span_id)
            others = [s for s in self._open_calls if s.get_span_context().span_id not in ancestors]
            self._open_calls.append(span)
            pending, self._pending = self._pending, None
        if pending is None:
            return None
        pending._land(span, claimed=True, keep_times=False)
        pending._close()
        if others:
            self.problem(
                "concurrent-model-calls",
                f"pass {pending.iteration} started while {len(others)} other model call(s) of "
                "this run were still open: which call its staged events describe cannot be "
                "told, so passes from here on are not decided",
                pending.iteration,
            )
        return pending

    def land(self, call: ModelCall, span: Span) -> bool:
        """Land the staged pass ``call`` on ``span`` directly: for adapters whose framework
        instrumentation marks its model-call span only when it ends (OpenInference LangChain), so
        the span-start hook cannot recognise it. False when ``call`` is no longer staged (another
        span took it) or ``span`` has ended."""
        if not span.is_recording():
            return False
        with self._lock:
            if self._pending is not call:
                return False
            self._pending = None
        call._land(span, claimed=True, keep_times=False)
        call._close()
        return True

    def _span_started(self, span_id: int, parent_span_id: int | None) -> None:
        """The hook's record of span parents inside the run (bounded), for telling a framework
        span and its client span (one call) from two concurrent calls."""
        if parent_span_id is not None and len(self._parents) < _MAX_PARENTS:
            self._parents[span_id] = parent_span_id

    def _ancestors(self, span_id: int | None) -> set[int]:
        seen: set[int] = set()
        while span_id is not None and span_id not in seen:
            seen.add(span_id)
            span_id = self._parents.get(span_id)
        return seen

    def unattached(self, call: ModelCall, why: str) -> None:
        """Give the staged pass ``call`` up: its model call ended and no span took it (an adapter
        that saw the call end says ``why``). The run says so (``unattached-pass``), and the next
        pass is a new one rather than this one with the next call's events added."""
        with self._lock:
            if self._pending is not call:
                return
            self._pending = None
        self._say_unattached(call, why)

    def _finish(self) -> None:
        """At the end of the leg: a pass still staged never reached a model call; say so."""
        self._write_savings()
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if not _ATTACH_INSTALLED[0]:
            why = (
                "no span-start hook is installed (otel_footprint.sdk.setup() installs it; "
                "otel_footprint.record.install_attach(provider) when exporting to the hop)"
            )
        elif self._staged_while is not None:
            why = f"they were staged while run {self._staged_while} was the current run"
        else:
            why = "no model-call span started inside the run after them"
        self._say_unattached(pending, why)

    def _say_unattached(self, call: ModelCall, why: str) -> None:
        kinds = sorted({item.event_type for item in call._staged})
        self.problem(
            "unattached-pass",
            f"pass {call.iteration}'s staged events ({', '.join(kinds) or 'none'}) were "
            f"attached to no model call: {why}; passes from here on are not decided",
            call.iteration,
        )

    def _write_savings(self) -> None:
        """Enforce mode: what leaving parked maps out saved, on the run span."""
        if self._policy is None:
            return
        savings = self._policy.savings
        self.span.set_attribute(semconv.SAVINGS_CHARS, savings.chars)
        self.span.set_attribute(semconv.SAVINGS_PREDICTED_CHARS, savings.predicted_chars)
        self.span.set_attribute(semconv.SAVINGS_PASSES, len(savings.passes))

    @contextmanager
    def model_call(
        self, model: str, *, provider: str | None = None, iteration: int | None = None
    ) -> Iterator[ModelCall]:
        """One pass around the model call the block makes. With an instrumentation (and the
        span-start hook), its model-call span takes the pass's events and no other span is made;
        without one, the recorder makes the pass span ``chat <model>`` when the block ends
        (covering the block). Iterations number themselves from 1."""
        if iteration is not None and self._pending is None:
            self._next_iteration = iteration
        call = self.next_pass()
        started = time.time_ns()
        failure: BaseException | None = None
        try:
            yield call
        except BaseException as error:
            failure = error
            raise
        finally:
            with self._lock:
                own = self._pending is call
                if own:
                    self._pending = None
            if own:
                self._own_span(call, model, provider, started, failure)
            else:
                call._close()

    def _own_span(
        self,
        call: ModelCall,
        model: str,
        provider: str | None,
        started: int,
        failure: BaseException | None,
    ) -> None:
        attributes: dict[str, str | int] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
            semconv.GEN_AI_REQUEST_MODEL: model,
            semconv.PASS_ITERATION: call.iteration,
        }
        if provider is not None:
            attributes[semconv.GEN_AI_PROVIDER_NAME] = provider
        span = self._tracer.start_span(
            f"{semconv.OP_CHAT} {model}",
            context=trace.set_span_in_context(self.span),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=started,
        )
        call._land(span, claimed=False, keep_times=True)
        call._close()
        if failure is not None and isinstance(failure, Exception):
            span.record_exception(failure)
            span.set_status(Status(StatusCode.ERROR, f"{type(failure).__name__}: {failure}"))
        span.end()

    @contextmanager
    def tool_call(
        self,
        name: str,
        *,
        args: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        iteration: int | None = None,
    ) -> Iterator[ToolCall]:
        """Open the span ``execute_tool <name>`` under the run span, tied to the latest pass (or to
        ``iteration``: a call paused for a person and resumed in this leg keeps its pass)."""
        number = self.iteration if iteration is None else iteration
        identifier = call_id or f"call-{next(self._counter)}"
        attributes: dict[str, str | int] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: name,
            semconv.GEN_AI_TOOL_CALL_ID: identifier,
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(
                dict(args or {}), ensure_ascii=False, separators=(",", ":")
            ),
        }
        if number >= 1:
            attributes[semconv.PASS_ITERATION] = number
        with self._tracer.start_as_current_span(
            f"{semconv.OP_EXECUTE_TOOL} {name}",
            context=trace.set_span_in_context(self.span),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        ) as span:
            stated: StatedCall | None = None
            if self._policy is not None:
                stated = StatedCall(number, name, dict(args or {}))
                self._policy.tool_called(stated)
            try:
                yield ToolCall(self, span, name, identifier, number, stated)
            except BaseException:
                if stated is not None:
                    stated.failed = True  # the span ends ERROR: the processor reads it failed
                raise

    def routed(
        self,
        by: str,
        *,
        to: str | None = None,
        from_id: str | None = None,
        scorer: str | None = None,
        scores: Sequence[Mapping[str, Any]] | None = None,
        decisive: bool | None = None,
        witness: str | None = None,
        witness_keyword: str | None = None,
        offered: Sequence[str] | None = None,
        decider_model: str | None = None,
    ) -> None:
        """The turn-start routing verdict (``skill.turn_routed``): ``by`` is ``entry``, ``intent``,
        ``continuity``, ``menu``, ``decider`` or ``none``; ``to`` the skill decided."""
        payload = {
            "by": by,
            "from": from_id,
            "to": to,
            "scorer": scorer,
            "scores": [dict(s) for s in scores] if scores is not None else None,
            "decisive": decisive,
            "witness": _compact({"text": witness, "keyword": witness_keyword})
            if witness is not None
            else None,
            "offered": list(offered) if offered is not None else None,
            "decider": {"model": decider_model} if decider_model is not None else None,
        }
        self.emit(self.span, semconv.T_TURN_ROUTED, payload)

    def pause(
        self,
        question: str,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        reason: str = "stage requested pause",
        absence: Mapping[str, Any] | None = None,
    ) -> None:
        """The leg stops to ask a person (``pause.request``); resume in a new :func:`run` leg.
        ``absence``: the paused lookup declares it found nothing (what it searched, and how) —
        its answer, as far as ``empty-lookup`` is concerned."""
        question_payload = _compact(
            {
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "question": question,
                "absence": dict(absence) if absence is not None else None,
            }
        )
        self.emit(
            self.span,
            semconv.T_PAUSE_REQUEST,
            {"reason": reason, "questionPayload": question_payload},
        )

    def answer(self, text: str) -> None:
        """The final answer of the turn (``agent.turn_end``)."""
        payload = {
            "turnIndex": self._turn_index,
            "finalContent": text,
            "iterationCount": self.iteration,
        }
        self.emit(self.span, semconv.T_TURN_END, payload)

    def event(self, event_type: str, payload: Mapping[str, Any]) -> None:
        """Any other upstream event type on the run span."""
        self.emit(self.span, event_type, payload)

    # ── integrity inputs (issue 17): facts no convention carries, and the conventions' frame ──

    def declare_tool(
        self,
        name: str,
        *,
        arguments_from: Sequence[str] = (),
        result_columns: Mapping[str, Any] | None = None,
    ) -> None:
        """Declare a tool once per run (``tool.declared``): the tools whose results its arguments
        come from, and the columns (``{name: type | {type, nullable}}``) of the rows it returns.
        Arms ``dangling-reference``, ``unsupported-argument`` and the write-seam checks."""
        if not name or any(not g.strip() or g == name for g in arguments_from):
            raise ValueError("arguments_from names other tools, never blank or the tool itself")
        if result_columns is not None:
            _check_columns(result_columns)
        payload = {
            "toolName": name,
            "argumentsFrom": list(arguments_from),
            "resultColumns": json.dumps(result_columns, ensure_ascii=False)
            if result_columns is not None
            else None,
        }
        self.emit(self.span, semconv.T_TOOL_DECLARED, payload)

    def integrity_settings(
        self,
        *,
        notice_empty_lookups: bool = False,
        check_column_types: Literal["off", "warn", "enforce"] = "off",
        notice_prior_turn_evidence: bool = False,
        posture: Literal["observe", "dev"] = "observe",
    ) -> None:
        """The integrity dials of this run (``integrity.config``)."""
        for dial, value in (
            ("notice_empty_lookups", notice_empty_lookups),
            ("notice_prior_turn_evidence", notice_prior_turn_evidence),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"{dial} must be a bool: {value!r}")
        if posture not in ("observe", "dev"):
            raise ValueError(f"posture must be observe or dev: {posture!r}")
        if check_column_types not in ("off", "warn", "enforce"):
            raise ValueError(
                f"check_column_types must be off, warn or enforce: {check_column_types!r}"
            )
        payload = {
            "posture": posture,
            "noticeEmptyLookups": notice_empty_lookups,
            "checkColumnTypes": check_column_types,
            "noticePriorTurnEvidence": notice_prior_turn_evidence,
        }
        self.emit(self.span, semconv.T_INTEGRITY_CONFIG, payload)

    def external_ground(self, value: str, source: str, *, iteration: int | None = None) -> None:
        """A value the app vouches for (``integrity.external_ground``), for the latest pass or
        ``iteration``: an argument equal to it is excused, not flagged."""
        if not value.strip() or not source.strip():
            raise ValueError("an external ground needs a value and a source")
        number = self.iteration if iteration is None else iteration
        payload = {"value": value, "source": source, "iteration": number}
        self.emit(self.span, semconv.T_EXTERNAL_GROUND, payload)

    def wire_manifest(self, tool_names: Sequence[str], *, iteration: int | None = None) -> None:
        """The tool names the provider adapter read back from the request body it sent."""
        number = self.iteration if iteration is None else iteration
        payload = {"toolNames": list(tool_names), "iteration": number}
        self.emit(self.span, semconv.T_WIRE_MANIFEST, payload)

    def window_compacted(
        self, dropped_observations: Sequence[str], *, iteration: int | None = None
    ) -> None:
        """Tool names whose results left the window before the latest (or ``iteration``) call."""
        number = self.iteration if iteration is None else iteration
        payload = {"droppedObservations": list(dropped_observations), "iteration": number}
        self.emit(self.span, semconv.T_WINDOW_COMPACTED, payload)

    def context_error(
        self,
        kind: str,
        seam: str,
        subjects: Sequence[str],
        *,
        predicate: str | None = None,
        iteration: int | None = None,
        advisory: bool = False,
        message: str | None = None,
    ) -> None:
        """A finding the agent's own integrity checks filed (``integrity.context_error``;
        ``subjects`` as ``"tool:name"``): the processor re-derives and compares (verify mode)."""
        payload = {
            "kind": kind,
            "seam": seam,
            "subjects": list(subjects),
            "predicate": predicate,
            "iteration": iteration,
            "advisory": advisory,
            "message": message,
        }
        self.emit(self.span, semconv.T_CONTEXT_ERROR, payload)

    def evidence_grounding(
        self,
        *,
        from_this_turn: int,
        from_prior_turns: int,
        current_turn: int,
        latest_prior_turn: int | None = None,
        tool_results_this_turn: int = 0,
        index_truncated: bool = False,
    ) -> None:
        """The evidence gate's reading of the final answer (``evidence.grounding``): how many
        grounded values the answer states from this turn and from earlier turns, the newest
        earlier turn, the current turn (0: no user turn), the tool results this turn served."""
        payload = {
            "fromThisTurn": from_this_turn,
            "fromPriorTurns": from_prior_turns,
            "latestPriorTurn": latest_prior_turn,
            "currentTurn": current_turn,
            "toolResultsThisTurn": tool_results_this_turn,
            "indexTruncated": index_truncated,
        }
        self.emit(self.span, semconv.T_EVIDENCE_GROUNDING, payload)

    def declare_claim(self, answer_field: str, entity: str, field: str) -> None:
        """The typed answer's ``answer_field`` (a dot path) claims ``field`` of ``entity``
        (``claims.declared``): the unsupported-claim check compares it with the facts the tools
        settled (:meth:`tool_semantics`)."""
        if not answer_field.strip() or not entity.strip() or not field.strip():
            raise ValueError("a claim needs a non-blank answer field, entity and field")
        payload = {"answerField": answer_field, "entity": entity, "field": field}
        self.emit(self.span, semconv.T_CLAIMS_DECLARED, payload)

    def tool_semantics(
        self,
        call: ToolCall,
        *,
        facts: Sequence[Mapping[str, Any]] = (),
        series: Sequence[Mapping[str, Any]] = (),
        measured_at: str | None = None,
    ) -> None:
        """The facts a tool call settled (``tools.semantics_declared`` on its span): ``facts`` rows
        ``{entity, <field>: value, ...}``, ``series`` points ``{entity, metric, value, t?}`` —
        the full envelope, whatever the model was served."""
        self._semantics_declared(call, facts, series, {"measured_at": measured_at})

    def tool_described_result(
        self,
        call: ToolCall,
        *,
        facts: Sequence[Mapping[str, Any]] = (),
        series: Sequence[Mapping[str, Any]] = (),
        measured_at: str | None = None,
    ) -> None:
        """The facts a tool call settled, as a ``describedResult()`` declaration (the upstream's
        10.0 replacement of ``semantic()``: camelCase keys, ``provenance.measuredAt``) on the same
        ``tools.semantics_declared`` event; read alongside :meth:`tool_semantics`' envelopes."""
        self._semantics_declared(call, facts, series, {"measuredAt": measured_at})

    def _semantics_declared(
        self,
        call: ToolCall,
        facts: Sequence[Mapping[str, Any]],
        series: Sequence[Mapping[str, Any]],
        provenance: Mapping[str, str | None],
    ) -> None:
        """One ``tools.semantics_declared`` event: the envelope's facts, series (when any) and
        provenance (its one key spelled as the declaration's style spells it, when given)."""
        envelope: dict[str, Any] = {"facts": [dict(r) for r in facts]}
        if series:
            envelope["series"] = [dict(p) for p in series]
        given = {k: v for k, v in provenance.items() if v is not None}
        if given:
            envelope["provenance"] = given
        payload = {
            "toolName": call.name,
            "toolCallId": call.call_id,
            "iteration": call.iteration,
            "semantics": json.dumps(envelope, ensure_ascii=False),
        }
        self.emit(call.span, semconv.T_SEMANTICS_DECLARED, payload)

    def frame(
        self,
        call: ModelCall,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system: Sequence[str] | None = None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        output: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """What a model call was offered and shown, in the GenAI conventions' own attributes
        (``gen_ai.tool.definitions``, ``gen_ai.system_instructions``, ``gen_ai.input.messages``,
        ``gen_ai.output.messages``), for agents with no instrumentation that records them.
        Messages are the conventions' ``{role, parts}``; ``None`` leaves an attribute out."""
        values = {
            semconv.GEN_AI_TOOL_DEFINITIONS: tools,
            semconv.GEN_AI_SYSTEM_INSTRUCTIONS: [{"type": "text", "content": t} for t in system]
            if system is not None
            else None,
            semconv.GEN_AI_INPUT_MESSAGES: messages,
            semconv.GEN_AI_OUTPUT_MESSAGES: output,
        }
        for key, value in values.items():
            if value is not None:
                call._attribute(key, json.dumps(list(value), ensure_ascii=False))


@contextmanager
def run(
    tracer: Tracer | None = None,
    *,
    agent: str,
    run_id: str | None = None,
    maps: Sequence[MountedMap] = (),
    renewal_grace: int = DEFAULT_RENEWAL_GRACE,
    enforced: bool | None = None,
    policy: bool = False,
    user_prompt: str | None = None,
    conversation_id: str | None = None,
    graph: Mapping[str, Any] | None = None,
    configured: Mapping[str, Any] | None = None,
    resumed: bool = False,
    resume_input: Any = None,
    held: Mapping[str, Any] | None = None,
    next_iteration: int = 1,
    turn_index: int = 0,
    emit_as: EmitAs = "span",
    logger_provider: LoggerProvider | None = None,
) -> Iterator[Run]:
    """Open one run leg: the ``invoke_agent <agent>`` span with ``footprint.run.id``.

    An agent author wraps the loop they already have::

        with footprint.run(tracer, agent="support", maps=[MountedMap(...)]) as run:
            with run.model_call("gpt-x") as p:
                p.evaluated(["billing"], cursor_to="billing", moved_by="intent")
                p.injected("system-prompt", "skill", source_id="billing", content=body)
            with run.tool_call("lookup_charge", args={"id": 7}) as call:
                call.result(lookup_charge(7))
            run.answer(text)

    Emits, in order: ``agent.run_configured`` (when ``configured``), ``skill.graph_declared``
    (when ``graph`` = ``{nodes, edges}``), ``maps.mounted`` (when ``maps``; ``enforced=True``
    says the agent applies the kernel itself), then ``agent.turn_start`` — or, for a
    ``resumed`` leg (same ``run_id``, numbering continued with ``next_iteration``),
    ``pause.resume`` carrying ``held`` (``{turnRoute, entryScores?, entryScorer?}``, the routing
    verdict held across the pause) as both ``state`` and ``pausedWith``.

    ``policy=True`` is enforce mode with the recorder's own kernel (:mod:`.policy`): the run is
    mounted ``enforced``, each pass's :meth:`ModelCall.plan` says what to leave out, the decisions
    the agent applied are written as ``map.engaged`` / ``map.parked``, and the run span says what
    leaving them out saved (``footprint.savings.*``).

    Raises ``PlanError`` when ``maps`` / ``renewal_grace`` cannot be mounted, ``ValueError`` for
    ``policy=True`` without maps, with ``enforced=False`` or on a resumed leg.
    """
    # Lists are welcome here; the kernel's frozen data holds tuples.
    maps = [
        MountedMap(m.id, tuple(m.member_ids), tuple(m.tool_names), m.non_parkable) for m in maps
    ]
    # Checked here, loudly, rather than in the processor.
    plan = engagement_plan(maps, renewal_grace) if maps else None
    live: LivePolicy | None = None
    if policy:
        if plan is None or enforced is False:
            raise ValueError("policy=True needs mounted maps, and is enforce mode (enforced=True)")
        if resumed:
            # The earlier leg's engagement is the processor's (its run store), not this process's.
            raise ValueError("policy=True cannot continue a resumed leg's engagement yet")
        enforced = True
        live = LivePolicy(plan, edges_of_graph(graph) if graph is not None else None)
    emitter = _Emitter(emit_as, logger_provider)
    tracer = tracer or trace.get_tracer(SCOPE_NAME, __version__)
    identifier = run_id or uuid.uuid4().hex
    attributes: dict[str, str] = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_NAME: agent,
        semconv.RUN_ID: identifier,
    }
    if conversation_id is not None:
        attributes[semconv.GEN_AI_CONVERSATION_ID] = conversation_id
    with tracer.start_as_current_span(
        f"{semconv.OP_INVOKE_AGENT} {agent}", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        leg = Run(tracer, span, identifier, emitter, next_iteration, turn_index, live)
        token = _CURRENT_RUN.set(leg)
        if resumed:
            held_state = dict(held) if held is not None else None
            leg.event(
                semconv.T_PAUSE_RESUME,
                {"resumeInput": resume_input, "state": held_state, "pausedWith": held_state},
            )
        if configured is not None:
            leg.event(semconv.T_RUN_CONFIGURED, {"agentId": agent, **configured})
        if graph is not None:
            leg.event(semconv.T_GRAPH_DECLARED, graph)
        if plan is not None:
            leg.event(semconv.T_MAPS_MOUNTED, {**plan_to_json(plan), "enforced": enforced})
        if not resumed:
            leg.event(semconv.T_TURN_START, {"turnIndex": turn_index, "userPrompt": user_prompt})
        try:
            yield leg
        finally:
            leg._finish()
            with contextlib.suppress(ValueError):  # exited in another context: nothing to undo
                _CURRENT_RUN.reset(token)


def _cursor_move(
    to: str | None,
    by: str | None,
    from_id: str | None,
    witness: str | None,
    keyword: str | None,
) -> dict[str, Any] | None:
    """The ``cursorMove`` payload of an evaluation (None: the pass states no move)."""
    if by is None and to is None:
        return None
    move = _compact({"from": from_id, "to": to, "by": by or "stay"})
    if witness is not None:
        move["witness"] = _compact({"text": witness, "keyword": keyword})
    return move


def emit(
    event_type: str,
    payload: Mapping[str, Any],
    *,
    composition_id: str | None = None,
    emit_as: EmitAs = "span",
    logger_provider: LoggerProvider | None = None,
) -> None:
    """Emit one footprint event on the current span, whoever opened it.

    For agents whose run, model-call and tool spans come from another instrumentation (OpenLLMetry,
    OpenInference, a framework's own): ``emit("context.evaluated", {...})`` inside the model call
    adds ``footprint.context.evaluated`` there. ``event_type`` is the upstream type
    (``maps.mounted``, ``context.injected``, ...); ``payload`` is its camelCase payload.
    """
    _Emitter(emit_as, logger_provider).emit(
        trace.get_current_span(), event_type, payload, composition_id
    )
