"""The integrity checks' inputs, read from a run's spans: what each model call was offered and shown,
what it chose, what the tools returned, and the few facts only ``footprint.*`` events carry.

Conventions first: OTel GenAI (``gen_ai.tool.definitions``, ``gen_ai.input.messages``,
``gen_ai.system_instructions``, ``gen_ai.output.messages``, ``execute_tool`` spans), OpenInference
(``llm.tools.*``, ``llm.input_messages.*``, ``llm.output_messages.*``) and OpenLLMetry's legacy
indexed names (``gen_ai.prompt.*``, ``gen_ai.completion.*``, ``llm.request.functions.*``). The
``footprint.*`` integrity events (semconv, "Integrity checks") add tool declarations, external
grounds, the settings, a wire manifest, window compactions, raw result shapes and the agent's own
findings.

Every fact is either read or marked missing (``None``), never defaulted: a frame or a tool list
that was not captured is not "nothing offered" (the checks turn it into ``unreachable``). A JSON
attribute that does not parse (typically cut by an attribute length limit) counts as missing and
says so in ``unreadable``. The model here is frozen data; the checks in
``otel_footprint.account.integrity`` are pure functions over it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from otel_footprint import semconv
from otel_footprint.codec import FootprintEvent, integral
from otel_footprint.runs.group import RunSpans, pass_iteration_of
from otel_footprint.runs.passes import RunFacts
from otel_footprint.runs.spans import SpanView

MAX_INDEXED = 1024
"""Indexed attributes (``llm.input_messages.<i>``) are probed up to here: contiguous from 0."""


@dataclass(frozen=True, slots=True)
class Ref:
    """Where an input was read: span, event, attribute, message index (an evidence pointer)."""

    trace_id: str
    span_id: str
    attribute: str | None = None
    event_name: str | None = None
    event_index: int | None = None
    message_index: int | None = None

    def render(self) -> str:
        """``<trace>/<span>[#<event>[i]][@<attribute>][/<message index>]``."""
        text = f"{self.trace_id}/{self.span_id}"
        if self.event_name is not None:
            text += f"#{self.event_name}[{self.event_index or 0}]"
        if self.attribute is not None:
            text += f"@{self.attribute}"
        if self.message_index is not None:
            text += f"/{self.message_index}"
        return text


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """One tool on a call's offered list; ``parameters`` is its JSON schema when recorded."""

    name: str
    parameters: Any | None = None


@dataclass(frozen=True, slots=True)
class ChosenCall:
    """A tool call in a message: the model's choice (output) or an earlier one (frame)."""

    call_id: str | None
    name: str
    arguments: Any | None
    """Decoded JSON arguments; None when absent or not JSON (``readable`` False then)."""
    readable: bool
    ref: Ref


@dataclass(frozen=True, slots=True)
class FrameMessage:
    """One message of a frame (input) or of the model's output."""

    index: int
    role: str
    texts: tuple[str, ...]
    """Text content (text parts, or a tool result's text)."""
    calls: tuple[ChosenCall, ...] = ()
    tool_call_id: str | None = None
    """Tool-role messages: the call this result answers."""
    tool_name: str | None = None
    ref: Ref | None = None


@dataclass(frozen=True, slots=True)
class CallView:
    """One span's view of a model call. ``None`` = not captured (never "empty")."""

    trace_id: str
    span_id: str
    convention: str
    """``gen_ai``, ``openinference`` or ``openllmetry``: where the frame was read."""
    tools: tuple[OfferedTool, ...] | None
    tools_ref: Ref | None
    system: tuple[str, ...] | None
    messages: tuple[FrameMessage, ...] | None
    messages_ref: Ref | None
    output: tuple[FrameMessage, ...] | None
    unreadable: tuple[str, ...] = ()
    """Attributes present but unreadable (not JSON: cut by a length limit, or garbage)."""


@dataclass(frozen=True, slots=True)
class ExternalGround:
    """A value the app vouches for (``footprint.integrity.external_ground``)."""

    value: str
    source: str
    iteration: int | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class PassInputs:
    """What one pass (one model call) offered and showed, from up to two views of it."""

    iteration: int
    framework: CallView
    """The pass span (the framework's / agent's own view, or the only one)."""
    client: CallView | None = None
    """A client instrumentation's span of the same call (nested under the pass span)."""
    wire_manifest: tuple[str, ...] | None = None
    wire_ref: Ref | None = None
    dropped: tuple[str, ...] | None = None
    """``footprint.window.compacted`` tool names, when the agent reported compactions."""
    dropped_ref: Ref | None = None

    @property
    def best(self) -> CallView:
        """The view closest to the request: the client's when there is one."""
        return self.client if self.client is not None else self.framework

    def tools(self) -> tuple[tuple[OfferedTool, ...] | None, Ref | None]:
        """The offered list: the client's when it recorded one, else the framework's."""
        for view in (self.client, self.framework):
            if view is not None and view.tools is not None:
                return view.tools, view.tools_ref
        return None, None

    def frame(self) -> CallView | None:
        """The view whose input messages were captured (the client's first)."""
        for view in (self.client, self.framework):
            if view is not None and view.messages is not None:
                return view
        return None

    def unreadable(self) -> tuple[str, ...]:
        """Attributes of this pass present but not readable (cut, or not JSON)."""
        views = (self.framework, self.client)
        return tuple(k for view in views if view is not None for k in view.unreadable)

    def output(self) -> tuple[FrameMessage, ...] | None:
        for view in (self.client, self.framework):
            if view is not None and view.output is not None:
                return view.output
        return None


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """``footprint.tool.declared``: where a tool's arguments come from, what columns it returns."""

    name: str
    arguments_from: tuple[str, ...]
    result_columns: Mapping[str, Any] | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class Settings:
    """``footprint.integrity.config`` (absent: every dial at its default)."""

    posture: str = "observe"
    notice_empty_lookups: bool = False
    check_column_types: str = "off"
    notice_prior_turn_evidence: bool = False
    ref: Ref | None = None


@dataclass(frozen=True, slots=True)
class Execution:
    """One tool span: the call as executed and what it returned."""

    name: str
    call_id: str | None
    iteration: int | None
    order: int
    """Position among the run's tool spans by start time (the write seam's "before")."""
    arguments: Any | None
    failed: bool
    result_text: str | None
    """``gen_ai.tool.call.result`` (OpenInference ``output.value``); None when not recorded."""
    shape: str | None
    """Raw shape the agent stated (``footprint.tool.result_shape`` / ``tools.absent``)."""
    rows: int | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class ReportedFinding:
    """``footprint.integrity.context_error``: a finding the agent's own checks filed."""

    kind: str
    seam: str
    subjects: tuple[str, ...]
    predicate: str | None
    iteration: int | None
    advisory: bool
    ref: Ref


@dataclass(frozen=True, slots=True)
class ClaimDeclaration:
    """``footprint.claims.declared``: the answer's ``answer_field`` claims ``field(entity)``."""

    answer_field: str
    entity: str
    field: str
    ref: Ref


@dataclass(frozen=True, slots=True)
class SettledFact:
    """One ``(entity, field, value)`` a tool's declared semantics settled, in ledger order."""

    entity: str
    field: str
    value: Any
    tool: str
    call_id: str | None
    iteration: int | None
    measured_at: str | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class Grounding:
    """``footprint.evidence.grounding``: the evidence gate's reading of the final answer."""

    from_this_turn: int
    from_prior_turns: int
    latest_prior_turn: int | None
    current_turn: int
    tool_results_this_turn: int
    index_truncated: bool
    ref: Ref


@dataclass(frozen=True, slots=True)
class Answer:
    """The final answer the caller received (``agent.turn_end`` ``finalContent``)."""

    content: str
    ref: Ref


@dataclass(frozen=True, slots=True)
class IntegrityInputs:
    """Everything the integrity checks read about one run leg."""

    trace_id: str
    run_span_id: str | None
    passes: tuple[PassInputs, ...]
    declarations: Mapping[str, ToolDeclaration]
    settings: Settings
    executions: tuple[Execution, ...]
    grounds: tuple[ExternalGround, ...] = ()
    reported: tuple[ReportedFinding, ...] | None = None
    """None: the agent ran no integrity checks of its own (no verify)."""
    claims: tuple[ClaimDeclaration, ...] = ()
    facts: tuple[SettledFact, ...] = ()
    answer: Answer | None = None
    grounding: Grounding | None = None
    """The last reading of the run (None: not recorded)."""
    problems: tuple[str, ...] = field(default=())
    """Inputs present but unreadable (named), for the explanations."""

    def grounds_for(self, iteration: int) -> tuple[ExternalGround, ...]:
        return tuple(g for g in self.grounds if g.iteration in (None, iteration))


# ── reading JSON and indexed attributes ─────────────────────────────────────────────────────


class _UnreadableError(Exception):
    pass


def _json_attr(view: SpanView, key: str) -> Any | None:
    """A JSON-valued attribute: None when absent; raises _UnreadableError when present but not JSON."""
    raw = view.attribute(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _UnreadableError(key)
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise _UnreadableError(key) from None


def _loads(text: Any) -> tuple[Any | None, bool]:
    """(decoded, readable) of a JSON text or an already decoded value."""
    if isinstance(text, dict | list):
        return text, True
    if not isinstance(text, str) or not text.strip():
        return None, False
    try:
        return json.loads(text), True
    except json.JSONDecodeError:
        return None, False


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _indexed(attribute: Callable[[str], Any], prefix: str, probe: str) -> list[int]:
    """Indices ``i`` for which ``<prefix><i>.<probe>`` is set, contiguous from 0 (``prefix``
    ends with a dot)."""
    found: list[int] = []
    for index in range(MAX_INDEXED):
        if attribute(f"{prefix}{index}.{probe}") is None:
            break
        found.append(index)
    return found


def _text_of_content(content: Any) -> tuple[str, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (content,)
    # A structured result (dict / list) is grounded as its compact JSON text.
    return (json.dumps(content, ensure_ascii=False, separators=(",", ":")),)


# ── GenAI ────────────────────────────────────────────────────────────────────────────────────


def _genai_messages(raw: Any, ref: Ref) -> tuple[FrameMessage, ...]:
    if not isinstance(raw, list):
        raise _UnreadableError(ref.attribute or "")
    messages: list[FrameMessage] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            continue
        role = _str(item.get("role")) or "unknown"
        texts: list[str] = []
        calls: list[ChosenCall] = []
        tool_call_id: str | None = None
        where = Ref(ref.trace_id, ref.span_id, ref.attribute, message_index=index)
        parts = item.get("parts")
        if not isinstance(parts, list):  # an older flat shape: {"role", "content"}
            parts = [{"type": "text", "content": item.get("content")}]
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.extend(_text_of_content(part.get("content")))
            elif kind == "tool_call":
                arguments, readable = _loads(part.get("arguments"))
                if part.get("arguments") is None:
                    readable = False
                calls.append(
                    ChosenCall(
                        _str(part.get("id")),
                        _str(part.get("name")) or "",
                        arguments,
                        readable,
                        where,
                    )
                )
            elif kind == "tool_call_response":
                tool_call_id = _str(part.get("id"))
                result = part.get("response", part.get("result"))
                texts.extend(_text_of_content(result))
        messages.append(
            FrameMessage(
                index, role, tuple(texts), tuple(calls), tool_call_id, _str(item.get("name")), where
            )
        )
    return tuple(messages)


_TOOLS_CACHE_ENTRIES = 256
_TOOLS_CACHE_CHARS = 65_536
"""Offered-tool lists parsed once per distinct text: the same list rides every pass of a run. At
most 256 texts of at most 64 KiB each are kept (a longer one is parsed every time)."""


@lru_cache(maxsize=_TOOLS_CACHE_ENTRIES)
def _tools_of_text(text: str) -> tuple[OfferedTool, ...] | None:
    """``gen_ai.tool.definitions`` text as offered tools; None when it is not a JSON list."""
    try:
        return _genai_tools(json.loads(text), semconv.GEN_AI_TOOL_DEFINITIONS)
    except (json.JSONDecodeError, _UnreadableError):
        return None


def _read_tools(view: SpanView) -> tuple[OfferedTool, ...] | None:
    """The GenAI offered list of a span; raises _UnreadableError when present but unreadable."""
    raw = view.attribute(semconv.GEN_AI_TOOL_DEFINITIONS)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _UnreadableError(semconv.GEN_AI_TOOL_DEFINITIONS)
    if len(raw) <= _TOOLS_CACHE_CHARS:
        found = _tools_of_text(raw)
    else:
        found = _tools_of_text.__wrapped__(raw)
    if found is None:
        raise _UnreadableError(semconv.GEN_AI_TOOL_DEFINITIONS)
    return found


def _genai_tools(raw: Any, key: str) -> tuple[OfferedTool, ...]:
    if not isinstance(raw, list):
        raise _UnreadableError(key)
    tools: list[OfferedTool] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        # Accept both the semconv shape {type, name, parameters} and the OpenAI request shape
        # {type: "function", function: {name, parameters}}.
        inner = item.get("function")
        body: Mapping[str, Any] = inner if isinstance(inner, dict) else item
        name = _str(body.get("name"))
        if name:
            tools.append(OfferedTool(name, body.get("parameters")))
    return tuple(tools)


_GENAI_FRAME_KEYS = (
    semconv.GEN_AI_TOOL_DEFINITIONS,
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
)


def _genai_view(view: SpanView, frames: bool = True) -> CallView | None:
    keys = _GENAI_FRAME_KEYS if frames else _GENAI_FRAME_KEYS[:1]
    if all(view.attribute(k) is None for k in keys):
        return None
    trace_id, span_id = view.trace_id, view.span_id
    unreadable: list[str] = []

    def read(key: str, convert: Callable[[Any, Ref], Any]) -> Any:
        try:
            raw = _json_attr(view, key)
            return None if raw is None else convert(raw, Ref(trace_id, span_id, key))
        except _UnreadableError:
            unreadable.append(key)
            return None

    try:
        tools = _read_tools(view)
    except _UnreadableError:
        tools = None
        unreadable.append(semconv.GEN_AI_TOOL_DEFINITIONS)
    if not frames:
        return CallView(
            trace_id,
            span_id,
            "gen_ai",
            tools,
            Ref(trace_id, span_id, semconv.GEN_AI_TOOL_DEFINITIONS) if tools is not None else None,
            None,
            None,
            None,
            None,
            tuple(unreadable),
        )
    messages = read(semconv.GEN_AI_INPUT_MESSAGES, _genai_messages)
    output = read(semconv.GEN_AI_OUTPUT_MESSAGES, _genai_messages)
    system = read(
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        lambda raw, ref: tuple(
            t
            for part in (raw if isinstance(raw, list) else [raw])
            for t in (
                _text_of_content(part.get("content")) if isinstance(part, dict) else (str(part),)
            )
        ),
    )
    if system is None and messages is not None:
        system = ()  # instructions ride as system-role messages, or there are none
    return CallView(
        trace_id,
        span_id,
        "gen_ai",
        tools,
        Ref(trace_id, span_id, semconv.GEN_AI_TOOL_DEFINITIONS) if tools is not None else None,
        system,
        messages,
        Ref(trace_id, span_id, semconv.GEN_AI_INPUT_MESSAGES) if messages is not None else None,
        output,
        tuple(unreadable),
    )


# ── OpenInference ────────────────────────────────────────────────────────────────────────────


def _oi_messages(view: SpanView, prefix: str) -> tuple[FrameMessage, ...] | None:
    attr = view.attribute
    indices = _indexed(attr, prefix, "message.role")
    if not indices:
        return None
    trace_id, span_id = view.trace_id, view.span_id
    messages: list[FrameMessage] = []
    for i in indices:
        base = f"{prefix}{i}.message"
        where = Ref(trace_id, span_id, prefix.rstrip("."), message_index=i)
        texts: list[str] = []
        content = _str(attr(f"{base}.content"))
        if content is not None:
            texts.append(content)
        for j in _indexed(attr, f"{base}.contents.", "message_content.type"):
            text = _str(attr(f"{base}.contents.{j}.message_content.text"))
            if text is not None:
                texts.append(text)
        calls: list[ChosenCall] = []
        for j in _indexed(attr, f"{base}.tool_calls.", "tool_call.function.name"):
            call = f"{base}.tool_calls.{j}.tool_call"
            raw_args = attr(f"{call}.function.arguments")
            arguments, readable = _loads(raw_args)
            calls.append(
                ChosenCall(
                    _str(attr(f"{call}.id")),
                    _str(attr(f"{call}.function.name")) or "",
                    arguments,
                    readable,
                    where,
                )
            )
        messages.append(
            FrameMessage(
                i,
                _str(attr(f"{base}.role")) or "unknown",
                tuple(texts),
                tuple(calls),
                _str(attr(f"{base}.tool_call_id")),
                _str(attr(f"{base}.name")),
                where,
            )
        )
    return tuple(messages)


def _oi_tools(view: SpanView) -> tuple[tuple[OfferedTool, ...] | None, list[str]]:
    attr = view.attribute
    tools: list[OfferedTool] = []
    unreadable: list[str] = []
    for i in range(MAX_INDEXED):
        schema_key = f"{semconv.OI_TOOLS_PREFIX}{i}.tool.json_schema"
        name = _str(attr(f"{semconv.OI_TOOLS_PREFIX}{i}.tool.name"))
        raw = attr(schema_key)
        if raw is None and name is None:
            break
        schema, readable = _loads(raw)
        if raw is not None and not readable:
            unreadable.append(schema_key)
        body: Mapping[str, Any] = {}
        if isinstance(schema, dict):
            inner = schema.get("function")
            body = inner if isinstance(inner, dict) else schema
        name = name or _str(body.get("name"))
        if name:
            tools.append(OfferedTool(name, body.get("parameters")))
    return (tuple(tools) if tools or unreadable else None), unreadable


def _oi_request_tools(view: SpanView) -> tuple[OfferedTool, ...] | None:
    """An OpenInference LLM span without ``llm.tools.*``: the request it recorded whole in
    ``input.value`` says whether tools were sent — a request without ``tools`` is a stated zero.
    None when the request is not recorded (hidden inputs) or not a chat request."""
    request, readable = _loads(view.attribute(semconv.OI_INPUT_VALUE))
    if not readable or not isinstance(request, dict) or "messages" not in request:
        return None
    listed = request.get("tools")
    if listed is None:
        return ()
    try:
        return _genai_tools(listed, semconv.OI_INPUT_VALUE)
    except _UnreadableError:
        return None


def _oi_view(view: SpanView, frames: bool = True) -> CallView | None:
    if view.attribute(semconv.OPENINFERENCE_SPAN_KIND) != semconv.OI_KIND_LLM:
        return None  # OpenInference writes llm.* only on its LLM spans
    messages = _oi_messages(view, semconv.OI_INPUT_MESSAGES_PREFIX) if frames else None
    output = _oi_messages(view, semconv.OI_OUTPUT_MESSAGES_PREFIX) if frames else None
    tools, unreadable = _oi_tools(view)
    tools_key = semconv.OI_TOOLS_PREFIX.rstrip(".")
    if tools is None:
        tools = _oi_request_tools(view)
        if tools is not None:
            tools_key = semconv.OI_INPUT_VALUE
    if messages is None and output is None and tools is None:
        return None
    trace_id, span_id = view.trace_id, view.span_id
    system: tuple[str, ...] | None = None
    if messages is not None:
        system = ()  # system prompts are system-role input messages here
    return CallView(
        trace_id,
        span_id,
        "openinference",
        tools,
        Ref(trace_id, span_id, tools_key) if tools is not None else None,
        system,
        messages,
        Ref(trace_id, span_id, semconv.OI_INPUT_MESSAGES_PREFIX.rstrip(".")) if messages else None,
        output,
        tuple(unreadable),
    )


# ── OpenLLMetry (legacy indexed names) ───────────────────────────────────────────────────────


def _tl_messages(view: SpanView, prefix: str) -> tuple[FrameMessage, ...] | None:
    attr = view.attribute
    indices = _indexed(attr, prefix, "role")
    if not indices:
        return None
    trace_id, span_id = view.trace_id, view.span_id
    messages: list[FrameMessage] = []
    for i in indices:
        where = Ref(trace_id, span_id, prefix.rstrip("."), message_index=i)
        content = _str(attr(f"{prefix}{i}.content"))
        calls: list[ChosenCall] = []
        for j in _indexed(attr, f"{prefix}{i}.tool_calls.", "name"):
            arguments, readable = _loads(attr(f"{prefix}{i}.tool_calls.{j}.arguments"))
            calls.append(
                ChosenCall(
                    _str(attr(f"{prefix}{i}.tool_calls.{j}.id")),
                    _str(attr(f"{prefix}{i}.tool_calls.{j}.name")) or "",
                    arguments,
                    readable,
                    where,
                )
            )
        messages.append(
            FrameMessage(
                i,
                _str(attr(f"{prefix}{i}.role")) or "unknown",
                (content,) if content is not None else (),
                tuple(calls),
                _str(attr(f"{prefix}{i}.tool_call_id")),
                None,
                where,
            )
        )
    return tuple(messages)


def _tl_view(view: SpanView, frames: bool = True) -> CallView | None:
    attr = view.attribute
    messages = _tl_messages(view, semconv.TL_PROMPT_PREFIX) if frames else None
    output = _tl_messages(view, semconv.TL_COMPLETION_PREFIX) if frames else None
    tools: list[OfferedTool] = []
    for i in _indexed(attr, semconv.TL_FUNCTIONS_PREFIX, "name"):
        params, _ = _loads(attr(f"{semconv.TL_FUNCTIONS_PREFIX}{i}.parameters"))
        tools.append(OfferedTool(str(attr(f"{semconv.TL_FUNCTIONS_PREFIX}{i}.name")), params))
    if messages is None and output is None and not tools:
        return None
    trace_id, span_id = view.trace_id, view.span_id
    return CallView(
        trace_id,
        span_id,
        "openllmetry",
        tuple(tools) if tools else None,
        Ref(trace_id, span_id, semconv.TL_FUNCTIONS_PREFIX.rstrip(".")) if tools else None,
        () if messages is not None else None,
        messages,
        Ref(trace_id, span_id, semconv.TL_PROMPT_PREFIX.rstrip(".")) if messages else None,
        output,
    )


def call_view(view: SpanView, *, frames: bool = True) -> CallView:
    """The frame of one model-call span, field by field from the first convention that recorded
    it (GenAI, then OpenInference, then OpenLLMetry): an agent may state the offered tools in the
    GenAI attribute on a span whose instrumentation records the messages in its own names.
    ``frames=False`` reads only the offered tools (what the compose and wire checks need)."""
    first = _genai_view(view, frames)
    complete = first is not None and first.tools is not None
    if complete and first is not None and (not frames or (first.messages and first.output)):
        return first  # everything from one convention: the others are not asked
    found = [v for v in (first, _oi_view(view, frames), _tl_view(view, frames)) if v is not None]
    if not found:
        return CallView(view.trace_id, view.span_id, "none", None, None, None, None, None, None)
    with_tools = next((v for v in found if v.tools is not None), None)
    with_frame = next((v for v in found if v.messages is not None), None)
    with_output = next((v for v in found if v.output is not None), None)
    return CallView(
        view.trace_id,
        view.span_id,
        (with_frame or found[0]).convention,
        with_tools.tools if with_tools else None,
        with_tools.tools_ref if with_tools else None,
        with_frame.system if with_frame else next((v.system for v in found if v.system), None),
        with_frame.messages if with_frame else None,
        with_frame.messages_ref if with_frame else None,
        with_output.output if with_output else None,
        tuple(k for v in found for k in v.unreadable),
    )


# ── footprint integrity events ───────────────────────────────────────────────────────────────


def _ref_of(event: FootprintEvent, attribute: str | None = None) -> Ref:
    pointer = event.pointer
    return Ref(
        pointer.trace_id,
        pointer.span_id,
        attribute,
        event_name=pointer.event_name,
        event_index=pointer.event_index,
    )


def _strings(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if isinstance(value, str):
        decoded, ok = _loads(value)
        if ok and isinstance(decoded, list) and all(isinstance(v, str) for v in decoded):
            return tuple(decoded)
        return (value,) if value else ()
    return None


def _declarations(
    events: Sequence[FootprintEvent], problems: list[str]
) -> dict[str, ToolDeclaration]:
    found: dict[str, ToolDeclaration] = {}
    for event in events:
        payload = event.payload
        name = _str(payload.get("toolName"))
        if not name:
            problems.append(f"{semconv.EV_TOOL_DECLARED} without {semconv.F_TOOL_NAME}")
            continue
        grounds = _strings(payload.get("argumentsFrom")) or ()
        columns_raw = payload.get("resultColumns")
        columns, ok = _loads(columns_raw)
        if columns_raw is not None and (not ok or not isinstance(columns, dict)):
            problems.append(f"{semconv.EV_TOOL_DECLARED} ({name}): resultColumns is not a JSON map")
            columns = None
        found[name] = ToolDeclaration(
            name,
            tuple(g for g in grounds if g.strip() and g != name),
            columns if isinstance(columns, dict) else None,
            _ref_of(event, semconv.F_ARGUMENTS_FROM),
        )
    return found


def _settings(events: Sequence[FootprintEvent]) -> Settings:
    if not events:
        return Settings()
    event = events[-1]
    payload = event.payload
    posture = _str(payload.get("posture")) or "observe"
    columns = _str(payload.get("checkColumnTypes")) or "off"
    return Settings(
        posture=posture,
        notice_empty_lookups=payload.get("noticeEmptyLookups") is True,
        check_column_types=columns if columns in ("off", "warn", "enforce") else "off",
        notice_prior_turn_evidence=payload.get("noticePriorTurnEvidence") is True,
        ref=_ref_of(event),
    )


def _subjects(value: Any) -> tuple[str, ...]:
    """``subjects`` as ``kind:id`` strings: our recorder's strings, or the upstream's
    ``[{kind, id}]`` objects (a JSON string when they travelled as an attribute)."""
    if isinstance(value, str):
        decoded, ok = _loads(value)
        value = decoded if ok else [value]
    if not isinstance(value, list | tuple):
        return ()
    out: list[str] = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            out.append(f"{item.get('kind') or 'tool'}:{item['id']}")
    return tuple(out)


def _grounding(event: FootprintEvent, problems: list[str]) -> Grounding | None:
    payload = event.payload
    counts = [
        integral(payload.get(k))
        for k in ("fromThisTurn", "fromPriorTurns", "currentTurn", "toolResultsThisTurn")
    ]
    this_turn, prior, current, results = counts
    if this_turn is None or prior is None or current is None:
        problems.append(
            f"{semconv.EV_EVIDENCE_GROUNDING} needs integer fromThisTurn, fromPriorTurns and "
            "currentTurn"
        )
        return None
    return Grounding(
        this_turn,
        prior,
        integral(payload.get("latestPriorTurn")),
        current,
        results or 0,
        payload.get("indexTruncated") is True,
        _ref_of(event),
    )


def _claims(events: Sequence[FootprintEvent], problems: list[str]) -> tuple[ClaimDeclaration, ...]:
    out: list[ClaimDeclaration] = []
    for event in events:
        payload = event.payload
        parts = [_str(payload.get(k)) for k in ("answerField", "entity", "field")]
        answer_field, entity, field_name = parts
        if not answer_field or not entity or not field_name:
            problems.append(
                f"{semconv.EV_CLAIMS_DECLARED} needs answerField, entity and field (all non-blank)"
            )
            continue
        out.append(ClaimDeclaration(answer_field, entity, field_name, _ref_of(event)))
    return tuple(out)


def _facts(
    events: Sequence[FootprintEvent], calls: Mapping[str, Any], problems: list[str]
) -> tuple[SettledFact, ...]:
    """The ledger: each ``tools.semantics_declared`` flattened, in event order (never rewritten).
    ``facts`` rows give one fact per column other than ``entity``; ``series`` points one
    ``(entity, metric, value)`` measured at the point's ``t`` (else the envelope's)."""
    out: list[SettledFact] = []
    for event in events:
        payload = event.payload
        semantics, readable = _loads(payload.get("semantics"))
        if not readable or not isinstance(semantics, dict):
            problems.append(f"{semconv.EV_SEMANTICS_DECLARED}: semantics is not a JSON object")
            continue
        call = calls.get(event.pointer.span_id)
        tool = _str(payload.get("toolName")) or (call.name if call is not None else "?")
        call_id = _str(payload.get("toolCallId")) or (call.call_id if call is not None else None)
        iteration = integral(payload.get("iteration"))
        if iteration is None and call is not None:
            iteration = call.iteration
        provenance = semantics.get("provenance")
        measured = _str(provenance.get("measured_at")) if isinstance(provenance, dict) else None
        ref = _ref_of(event, semconv.F_SEMANTICS)
        for row in semantics.get("facts") or ():
            if isinstance(row, dict) and isinstance(row.get("entity"), str):
                for key, value in row.items():
                    if key != "entity":
                        out.append(
                            SettledFact(
                                row["entity"], key, value, tool, call_id, iteration, measured, ref
                            )
                        )
        for point in semantics.get("series") or ():
            if isinstance(point, dict) and isinstance(point.get("entity"), str):
                metric = _str(point.get("metric"))
                if metric:
                    at = _str(point.get("t")) or measured
                    out.append(
                        SettledFact(
                            point["entity"],
                            metric,
                            point.get("value"),
                            tool,
                            call_id,
                            iteration,
                            at,
                            ref,
                        )
                    )
    return tuple(out)


def _reported(events: Sequence[FootprintEvent]) -> tuple[ReportedFinding, ...]:
    out: list[ReportedFinding] = []
    for event in events:
        payload = event.payload
        kind, seam = _str(payload.get("kind")), _str(payload.get("seam"))
        if not kind or not seam or payload.get("synthetic") is True:
            continue  # a canary (the upstream's dev posture) is never a finding
        out.append(
            ReportedFinding(
                kind,
                seam,
                _subjects(payload.get("subjects")),
                _str(payload.get("predicate")) or None,
                integral(payload.get("iteration")) or integral(payload.get("epoch")),
                payload.get("advisory") is True,
                _ref_of(event),
            )
        )
    return tuple(out)


# ── the run ──────────────────────────────────────────────────────────────────────────────────


def _iterations(run: RunSpans, facts: RunFacts) -> tuple[dict[str, int], dict[str, str]]:
    """(pass span id -> iteration, client span id -> the pass span it is a second view of).

    A client span is a model-call span that is no pass of its own: one nested under a pass span
    (directly, or — through containers not in the run — by lying within exactly one pass span's
    time), or, in older recordings where every model call is a pass, one whose parent is one.
    """
    known = {p.span_id: p.iteration for p in facts.passes if p.span_id is not None}
    pass_ids = {view.span_id for view in run.passes}
    nested: dict[str, str] = {
        view.span_id: view.parent_span_id
        for view in run.passes
        if view.parent_span_id is not None and view.parent_span_id in pass_ids
    }
    tops = [view for view in run.passes if view.span_id not in nested]
    for view in run.unmarked_calls:
        parent = view.parent_span_id
        if parent is not None and parent in pass_ids:
            nested[view.span_id] = parent
            continue
        around = [
            top
            for top in tops
            if top.start_time_unix_nano <= view.start_time_unix_nano
            and view.end_time_unix_nano <= top.end_time_unix_nano
        ]
        if len(around) == 1:
            nested[view.span_id] = around[0].span_id
    iterations: dict[str, int] = {}
    for ordinal, view in enumerate(tops, start=1):
        iteration = known.get(view.span_id)
        if iteration is None:
            iteration = pass_iteration_of(view)
        iterations[view.span_id] = iteration if iteration is not None else ordinal
    return iterations, nested


def read_integrity_inputs(facts: RunFacts) -> IntegrityInputs:
    """The integrity inputs of a run leg already read into :class:`RunFacts`.

    Only what an armed check can use is read: no model-call span is looked at when nothing could
    arm a check that reads them (no plan, no tool declaration, no second view of a call), and the
    frames (messages, output) only when a tool declares ``argumentsFrom``.
    """
    run = facts.run
    problems: list[str] = []
    by_type: dict[str, list[FootprintEvent]] = {}
    for event in facts.events:
        by_type.setdefault(event.type, []).append(event)
    declarations = _declarations(by_type.get(semconv.T_TOOL_DECLARED, ()), problems)
    frames = any(d.arguments_from for d in declarations.values())
    calls_needed = (
        facts.plan is not None
        or bool(declarations)
        or bool(run.unmarked_calls)
        or semconv.T_WIRE_MANIFEST in by_type
    )
    iterations, nested = _iterations(run, facts) if calls_needed else ({}, {})
    by_id = {view.span_id: view for view in (*run.passes, *run.unmarked_calls)}

    def on_pass(event: FootprintEvent) -> int | None:
        explicit = integral(event.payload.get("iteration"))
        if explicit is not None:
            return explicit
        span = event.pointer.span_id
        return iterations.get(span, iterations.get(nested.get(span, ""), None))

    manifests: dict[int, tuple[tuple[str, ...], Ref]] = {}
    for event in by_type.get(semconv.T_WIRE_MANIFEST, ()):
        it = on_pass(event)
        names = _strings(event.payload.get("toolNames"))
        if it is not None:
            manifests[it] = (names or (), _ref_of(event, semconv.F_TOOL_NAMES))
    dropped: dict[int, tuple[tuple[str, ...], Ref]] = {}
    for event in by_type.get(semconv.T_WINDOW_COMPACTED, ()):
        it = on_pass(event)
        names = _strings(event.payload.get("droppedObservations")) or ()
        if it is not None:
            prior = dropped.get(it, ((), _ref_of(event)))[0]
            dropped[it] = ((*prior, *names), _ref_of(event, semconv.F_DROPPED_OBSERVATIONS))

    clients: dict[str, SpanView] = {}
    for child, parent in nested.items():
        clients.setdefault(parent, by_id[child])
    passes: list[PassInputs] = []
    for span_id, iteration in sorted(iterations.items(), key=lambda kv: (kv[1], kv[0])):
        framework = call_view(by_id[span_id], frames=frames)
        client_span = clients.get(span_id)
        client = call_view(client_span, frames=frames) if client_span is not None else None
        for view in (framework, client):
            if view is not None:
                problems.extend(f"{view.span_id}: {key} is not readable" for key in view.unreadable)
        manifest = manifests.get(iteration)
        drop = dropped.get(iteration)
        passes.append(
            PassInputs(
                iteration,
                framework,
                client,
                manifest[0] if manifest else None,
                manifest[1] if manifest else None,
                drop[0] if drop else (() if dropped else None),
                drop[1] if drop else None,
            )
        )

    grounds: list[ExternalGround] = []
    for event in by_type.get(semconv.T_EXTERNAL_GROUND, ()):
        value, source = _str(event.payload.get("value")), _str(event.payload.get("source"))
        if value and value.strip() and source and source.strip():
            grounds.append(
                ExternalGround(value, source, on_pass(event), _ref_of(event, semconv.F_VALUE))
            )

    executions: list[Execution] = []
    tool_events: dict[str, list[FootprintEvent]] = {}
    for event in facts.events:
        tool_events.setdefault(event.pointer.span_id, []).append(event)
    for order, call in enumerate(sorted(facts.tool_calls, key=lambda c: c.start_time_unix_nano)):
        shape: str | None = None
        rows: int | None = None
        for event in tool_events.get(call.span_id, ()):
            if event.type == semconv.T_TOOLS_ABSENT:
                shape = "absence"
            elif event.type == semconv.T_TOOL_RESULT_SHAPE:
                stated = _str(event.payload.get("shape"))
                if stated in ("rowset", "absence", "bespoke"):
                    shape, rows = stated, integral(event.payload.get("rows"))
        executions.append(
            Execution(
                call.name,
                call.call_id,
                call.iteration,
                order,
                call.arguments,
                call.failed,
                call.result,
                shape,
                rows,
                Ref(call.trace_id, call.span_id, semconv.GEN_AI_TOOL_CALL_ARGUMENTS),
            )
        )
    turn_ends = [
        e
        for e in by_type.get(semconv.T_TURN_END, ())
        if isinstance(e.payload.get("finalContent"), str)
    ]
    answer = (
        Answer(
            turn_ends[-1].payload["finalContent"], _ref_of(turn_ends[-1], semconv.F_FINAL_CONTENT)
        )
        if turn_ends
        else None
    )
    calls_by_span = {call.span_id: call for call in facts.tool_calls}
    readings = by_type.get(semconv.T_EVIDENCE_GROUNDING, ())
    grounding = _grounding(readings[-1], problems) if readings else None
    reported_events = by_type.get(semconv.T_CONTEXT_ERROR, ())
    return IntegrityInputs(
        trace_id=run.trace_id,
        run_span_id=run.run_span_id,
        passes=tuple(passes),
        declarations=declarations,
        settings=_settings(by_type.get(semconv.T_INTEGRITY_CONFIG, ())),
        executions=tuple(executions),
        grounds=tuple(grounds),
        reported=_reported(reported_events) if reported_events else None,
        claims=_claims(by_type.get(semconv.T_CLAIMS_DECLARED, ()), problems),
        facts=_facts(by_type.get(semconv.T_SEMANTICS_DECLARED, ()), calls_by_span, problems),
        answer=answer,
        grounding=grounding,
        problems=tuple(problems),
    )
