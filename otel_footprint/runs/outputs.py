"""What an instrumentation recorded of a model call, read once from its span: the tools offered,
the frame shown (system instructions, input messages with the tool results they carry) and the
output (the tool calls the model asked for); and what a tool span recorded of its call.

Client instrumentations make no tool spans; the tool calls are in the model-call span itself:

- OTel GenAI (``opentelemetry-instrumentation-openai-v2`` with content capture, OpenLLMetry >= 0.5):
  ``gen_ai.tool.definitions``, ``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` JSON; parts ``{"type": "tool_call", "id", "name", "arguments"}``, and
  results ``{"type": "tool_call_response", "id", "response"}``.
- OpenInference: ``llm.tools.{i}.tool.json_schema`` (else the request in ``input.value``),
  ``llm.input_messages.{i}.message.*`` / ``llm.output_messages.{i}.message.*`` with
  ``tool_calls.{j}.tool_call.{id,function.name,function.arguments}``; results are ``tool``-role
  messages with ``tool_call_id`` and ``content``. Where it writes no output messages (the OpenAI
  Agents SDK's ``generation`` span of a streamed run), ``output.value`` holds the responses whole
  (``{"object": "response", "output": [...]}``, or a list of them): their ``function_call`` items
  are the tool calls.
- the Vercel AI SDK (``ai`` 4 to 6, on its ``doGenerate`` / ``doStream`` spans): ``ai.prompt.tools``
  (a list of JSON texts ``{type, name, inputSchema}``; ``parameters`` in v4), ``ai.prompt.messages``
  (JSON; parts ``tool-call`` ``{toolCallId, toolName, input}`` — ``args`` in v4 — and ``tool-result``
  ``{toolCallId, output: {type, value}}`` — ``result`` in v4), and the output in
  ``ai.response.toolCalls`` (``[{toolCallId, toolName, input | args}]``, arguments a JSON text) and
  ``ai.response.text``. Its ``ai.toolCall`` spans: ``ai.toolCall.args`` / ``.result``.
- older OpenLLMetry: ``llm.request.functions.{i}``, ``gen_ai.prompt.{i}.*`` and
  ``gen_ai.completion.{i}.tool_calls.{j}.{id,name,arguments}`` (or ``llm.completions.*``).

The indexed conventions' messages are rebuilt in the GenAI shape, so one reader turns messages into
frames, chosen tool calls and tool results; each fact comes from the first convention (in the order
above) that recorded it. Every fact is read or ``None`` (not captured), never defaulted; a JSON
attribute that does not parse (typically cut by a length limit) counts as not captured and is named
in ``unreadable``.

``gen_ai.response.finish_reasons`` / ``llm.finish_reason`` say whether the model asked for tools at
all, which tells "no tool called" from "tool calls not recorded" (openai-v2 without content capture,
or streaming).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from otel_footprint import semconv
from otel_footprint.codec import quick_init
from otel_footprint.runs.spans import OtlpSpanView, SdkSpanView, SpanView


@quick_init
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


@quick_init
@dataclass(frozen=True, slots=True)
class OfferedTool:
    """One tool on a call's offered list; ``parameters`` is its JSON schema when recorded."""

    name: str
    parameters: Any | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class ChosenCall:
    """A tool call in a message: the model's choice (output) or an earlier one (frame)."""

    call_id: str | None
    name: str
    arguments: Any | None
    """Decoded JSON arguments; None when absent or not JSON (``readable`` False then)."""
    readable: bool
    ref: Ref


@quick_init
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


@quick_init
@dataclass(frozen=True, slots=True)
class CallView:
    """One span's view of a model call. ``None`` = not captured (never "empty")."""

    trace_id: str
    span_id: str
    convention: str
    """``gen_ai``, ``ai_sdk``, ``openinference`` or ``openllmetry``: where the frame was read."""
    tools: tuple[OfferedTool, ...] | None
    tools_ref: Ref | None
    system: tuple[str, ...] | None
    messages: tuple[FrameMessage, ...] | None
    messages_ref: Ref | None
    output: tuple[FrameMessage, ...] | None
    unreadable: tuple[str, ...] = ()
    """Attributes present but unreadable (not JSON: cut by a length limit, or garbage)."""


@quick_init
@dataclass(frozen=True, slots=True)
class OutputToolCall:
    """One tool call the model asked for, as the model-call span recorded it."""

    name: str
    call_id: str | None
    arguments_text: str | None


# ── JSON and indexed attributes ──────────────────────────────────────────────────────────────


def loads(value: Any) -> tuple[Any | None, bool]:
    """(decoded, readable) of a JSON text, or of a value already decoded (a map or a list)."""
    if isinstance(value, dict | list):
        return value, True
    if not isinstance(value, str) or not value.strip():
        return None, False
    try:
        return json.loads(value), True
    except json.JSONDecodeError:
        return None, False


def string(value: Any) -> str | None:
    """``value`` when it is a string."""
    return value if isinstance(value, str) else None


def _compact(value: Any, ascii_only: bool = True) -> str:
    """A string as it is; anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))


class _Indexed:
    """A span's indexed attributes by key prefix (its key list read once, when first needed, and
    only the keys of the indexed conventions kept: most spans have none, and every call view asks
    for up to six prefixes)."""

    __slots__ = ("keys", "view")

    def __init__(self, view: SpanView) -> None:
        self.view = view
        self.keys: list[str] | None = None

    def rows(self, prefix: str) -> list[tuple[int, dict[str, Any]]]:
        if self.keys is None:
            view = self.view
            keys = view.attribute_keys() if isinstance(view, OtlpSpanView | SdkSpanView) else ()
            self.keys = [k for k in keys if k.startswith(_INDEXED_PREFIXES)]
        if not self.keys:
            return []
        attribute = self.view.attribute
        return _rows(((k, attribute(k)) for k in self.keys if k.startswith(prefix)), prefix)


def _rows(pairs: Iterable[tuple[str, Any]], prefix: str) -> list[tuple[int, dict[str, Any]]]:
    """``<prefix><i>.<rest>`` pairs as ``(i, {rest: value})`` rows, by index."""
    rows: dict[int, dict[str, Any]] = {}
    for key, value in pairs:
        if key.startswith(prefix) and value is not None:
            index, _, rest = key[len(prefix) :].partition(".")
            if index.isdecimal():
                rows.setdefault(int(index), {})[rest] = value
    return sorted(rows.items())


# ── messages ────────────────────────────────────────────────────────────────────────────────

_INPUT = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.OI_INPUT_MESSAGES_PREFIX,
    (semconv.TL_PROMPT_PREFIX,),
)
_OUTPUT = (
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.OI_OUTPUT_MESSAGES_PREFIX,
    semconv.LEGACY_COMPLETION_PREFIXES,
)

_INDEXED_PREFIXES = (
    semconv.OI_TOOLS_PREFIX,
    semconv.TL_FUNCTIONS_PREFIX,
    _INPUT[1],
    *_INPUT[2],
    _OUTPUT[1],
    *_OUTPUT[2],
)
"""Every prefix :meth:`_Indexed.rows` is asked for (its key list keeps only these)."""

_Messages = tuple[str, str, list[tuple[int, Mapping[str, Any]]]]
"""(attribute, convention, (index, message in the GenAI shape) pairs)."""


def _messages(
    span: _Indexed, side: tuple[str, str, tuple[str, ...]], unreadable: list[str]
) -> _Messages | None:
    """A call's input or output messages from the first convention that recorded them."""
    genai, oi_prefix, legacy_prefixes = side
    raw = span.view.attribute(genai)
    if raw is not None:
        decoded, readable = loads(raw)
        if readable and isinstance(decoded, list):
            return genai, "gen_ai", [(i, m) for i, m in enumerate(decoded) if isinstance(m, dict)]
        unreadable.append(genai)
    if _is_ai_sdk_call(span.view):
        return _ai_sdk_messages(span.view, side is _INPUT, unreadable)
    rows = span.rows(oi_prefix)
    if rows:
        return oi_prefix[:-1], "openinference", [(i, _rebuilt(row)) for i, row in rows]
    for prefix in legacy_prefixes:
        rows = span.rows(prefix)
        if rows:
            return prefix[:-1], "openllmetry", [(i, _rebuilt(row)) for i, row in rows]
    if (
        side is _OUTPUT
        and span.view.attribute(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OI_KIND_LLM
    ):
        return _responses_output(span.view)
    return None


_RESPONSE_ITEMS_WITHOUT_CALLS = frozenset({"message", "reasoning"})
"""Responses output items that ask for no tool (``function_call`` asks for one; an item of any
other type, a hosted tool's call, cannot be read as a tool call, so the output is not read)."""


def _responses_output(view: SpanView) -> _Messages | None:
    """OpenInference ``output.value`` holding OpenAI Responses whole, one assistant message per
    response (text and ``function_call`` items); None when it holds anything else."""
    decoded, readable = loads(view.attribute(semconv.OI_OUTPUT_VALUE))
    responses = decoded if isinstance(decoded, list) else [decoded]
    if not readable or not responses:
        return None
    messages: list[tuple[int, Mapping[str, Any]]] = []
    for index, response in enumerate(responses):
        if not isinstance(response, dict) or response.get("object") != "response":
            return None
        parts = _response_parts(response.get("output"))
        if parts is None:
            return None
        messages.append((index, {"role": "assistant", "parts": parts}))
    return semconv.OI_OUTPUT_VALUE, "openinference", messages


def _response_parts(items: Any) -> list[dict[str, Any]] | None:
    """A response's output items as GenAI message parts; None when one cannot be read."""
    if not isinstance(items, list):
        return None
    parts: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            call = {"id": item.get("call_id"), "name": item.get("name")}
            parts.append({**call, "type": "tool_call", "arguments": item.get("arguments")})
        elif kind == "message":
            contents = item.get("content")
            for content in contents if isinstance(contents, list) else ():
                if isinstance(content, dict) and isinstance(content.get("text"), str):
                    parts.append({"type": "text", "content": content["text"]})
        elif kind not in _RESPONSE_ITEMS_WITHOUT_CALLS:
            return None
    return parts


def _is_ai_sdk_call(view: SpanView) -> bool:
    # An array where the operation belongs (a sender's bug) is no AI SDK call, never an error.
    operation = view.attribute(semconv.AI_SDK_OPERATION_ID)
    return isinstance(operation, str) and operation in semconv.AI_SDK_MODEL_CALL_OPERATIONS


def _ai_sdk_messages(view: SpanView, inputs: bool, unreadable: list[str]) -> _Messages | None:
    """The AI SDK's prompt (``ai.prompt.messages``) or response (``ai.response.toolCalls`` and
    ``ai.response.text``, one assistant message) in the GenAI shape; None when not recorded."""
    if inputs:
        key = semconv.AI_SDK_PROMPT_MESSAGES
        raw = view.attribute(key)
        if raw is None:
            return None
        decoded, readable = loads(raw)
        if not readable or not isinstance(decoded, list):
            unreadable.append(key)
            return None
        messages: list[tuple[int, Mapping[str, Any]]] = []
        for index, message in enumerate(decoded):
            if isinstance(message, dict):
                messages.extend((index, m) for m in _ai_sdk_message(message))
        return key, "ai_sdk", messages
    calls_raw = view.attribute(semconv.AI_SDK_RESPONSE_TOOL_CALLS)
    text = view.attribute(semconv.AI_SDK_RESPONSE_TEXT)
    if calls_raw is None and text is None:
        return None
    parts: list[dict[str, Any]] = []
    if isinstance(text, str) and text:
        parts.append({"type": "text", "content": text})
    if calls_raw is not None:
        calls, readable = loads(calls_raw)
        if not readable or not isinstance(calls, list):
            unreadable.append(semconv.AI_SDK_RESPONSE_TOOL_CALLS)
            return None
        parts.extend(_ai_sdk_call(c) for c in calls if isinstance(c, dict))
    key = (
        semconv.AI_SDK_RESPONSE_TOOL_CALLS
        if calls_raw is not None
        else semconv.AI_SDK_RESPONSE_TEXT
    )
    return key, "ai_sdk", [(0, {"role": "assistant", "parts": parts})]


def _ai_sdk_call(part: Mapping[str, Any]) -> dict[str, Any]:
    arguments = part.get("input", part.get("args"))  # ``args`` in v4
    return {
        "type": "tool_call",
        "id": part.get("toolCallId"),
        "name": part.get("toolName"),
        "arguments": arguments,
    }


def _ai_sdk_message(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """One AI SDK model message as GenAI-shaped messages: a ``tool`` message's results become one
    message each (a frame message answers one call)."""
    role, content = message.get("role"), message.get("content")
    items = content if isinstance(content, list) else [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    results: list[Mapping[str, Any]] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            parts.append({"type": "text", "content": item.get("text")})
        elif kind == "tool-call":
            parts.append(_ai_sdk_call(item))
        elif kind == "tool-result":
            output = item.get("output", item.get("result"))  # ``result`` in v4
            if isinstance(output, dict) and "value" in output:  # v5+: {type: text | json, value}
                output = output["value"]
            part = {"type": "tool_call_response", "id": item.get("toolCallId"), "response": output}
            results.append({"role": role, "name": item.get("toolName"), "parts": [part]})
    return results if results and not parts else [{"role": role, "parts": parts}, *results]


def _rebuilt(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """An indexed convention's message (its attributes after ``<prefix><i>.``) in the GenAI shape:
    a ``tool``-role message's content is the result of its ``tool_call_id``."""
    row = {key.removeprefix("message."): value for key, value in row.items()}
    role, content = row.get("role"), row.get("content")
    parts: list[dict[str, Any]] = [
        {"type": "tool_call_response", "id": row.get("tool_call_id"), "response": content}
        if role == "tool"
        else {"type": "text", "content": content}
    ]
    for _, item in _rows(row.items(), "contents."):
        parts.append({"type": "text", "content": item.get("message_content.text")})
    for _, item in _rows(row.items(), "tool_calls."):
        call = {k.removeprefix("tool_call.").removeprefix("function."): v for k, v in item.items()}
        if call.get("name") is not None:
            parts.append({**call, "type": "tool_call"})
    return {"role": role, "name": row.get("name"), "parts": parts}


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's parts (an older flat ``{"role", "content"}`` message: one text part)."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return [{"type": "text", "content": message.get("content")}]
    return [part for part in parts if isinstance(part, dict)]


def _response(part: Mapping[str, Any]) -> Any:
    return part.get("response", part.get("result"))


def _text_of_content(content: Any) -> tuple[str, ...]:
    # A structured result (dict / list) is grounded as its compact JSON text.
    return () if content is None else (_compact(content, ascii_only=False),)


def _frame(view: SpanView, found: _Messages) -> tuple[FrameMessage, ...]:
    key, _, messages = found
    frame: list[FrameMessage] = []
    for index, message in messages:
        where = Ref(view.trace_id, view.span_id, key, message_index=index)
        texts: list[str] = []
        calls: list[ChosenCall] = []
        tool_call_id: str | None = None
        for part in _parts(message):
            kind = part.get("type")
            if kind == "text":
                texts.extend(_text_of_content(part.get("content")))
            elif kind == "tool_call":
                arguments, readable = loads(part.get("arguments"))
                name = string(part.get("name")) or ""
                calls.append(ChosenCall(string(part.get("id")), name, arguments, readable, where))
            elif kind == "tool_call_response":
                tool_call_id = string(part.get("id"))
                texts.extend(_text_of_content(_response(part)))
        role, tool_name = string(message.get("role")) or "unknown", string(message.get("name"))
        frame.append(
            FrameMessage(index, role, tuple(texts), tuple(calls), tool_call_id, tool_name, where)
        )
    return tuple(frame)


# ── offered tools ───────────────────────────────────────────────────────────────────────────

_TOOLS_CACHE_ENTRIES = 256
_TOOLS_CACHE_CHARS = 65_536
"""Offered-tool lists parsed once per distinct text: the same list rides every pass of a run. At
most 256 texts of at most 64 KiB each are kept (a longer one is parsed every time)."""


@lru_cache(maxsize=_TOOLS_CACHE_ENTRIES)
def _tools_of_text(text: str) -> tuple[OfferedTool, ...] | None:
    """``gen_ai.tool.definitions`` text as offered tools; None when it is not a JSON list."""
    decoded, readable = loads(text)
    return _tool_list(decoded) if readable else None


def _tool_list(raw: Any) -> tuple[OfferedTool, ...] | None:
    """A JSON tool list, in the semconv shape ``{type, name, parameters}`` or the OpenAI request
    shape ``{type: "function", function: {name, parameters}}``; None when it is not a list."""
    if not isinstance(raw, list):
        return None
    tools = (_tool(item) for item in raw if isinstance(item, dict))
    return tuple(tool for tool in tools if tool is not None)


def _tool(item: Mapping[str, Any], name: Any = None) -> OfferedTool | None:
    inner = item.get("function")
    body: Mapping[str, Any] = inner if isinstance(inner, dict) else item
    name = string(name) or string(body.get("name"))
    parameters = body.get("parameters", body.get("inputSchema"))  # the AI SDK >= 5: inputSchema
    return OfferedTool(name, parameters) if name else None


def _tools(
    span: _Indexed, unreadable: list[str]
) -> tuple[str, str, tuple[OfferedTool, ...]] | None:
    """(attribute, convention, offered tools) from the first convention that recorded them."""
    view = span.view
    raw = view.attribute(semconv.GEN_AI_TOOL_DEFINITIONS)
    if raw is not None:
        if isinstance(raw, str):
            parse = _tools_of_text if len(raw) <= _TOOLS_CACHE_CHARS else _tools_of_text.__wrapped__
            found = parse(raw)
            if found is not None:
                return semconv.GEN_AI_TOOL_DEFINITIONS, "gen_ai", found
        unreadable.append(semconv.GEN_AI_TOOL_DEFINITIONS)
    listed = view.attribute(semconv.AI_SDK_PROMPT_TOOLS)
    if listed is not None and _is_ai_sdk_call(view):
        # An array attribute of JSON texts, one per tool.
        texts = (
            [listed]
            if isinstance(listed, str)
            else list(listed)
            if isinstance(listed, list | tuple)
            else [None]
        )
        items = [loads(text)[0] for text in texts]
        if all(isinstance(item, dict) for item in items):
            offered = (_tool(item) for item in items if isinstance(item, dict))
            found = tuple(tool for tool in offered if tool is not None)
            return semconv.AI_SDK_PROMPT_TOOLS, "ai_sdk", found
        unreadable.append(semconv.AI_SDK_PROMPT_TOOLS)
    tools: list[OfferedTool] = []
    bad: list[str] = []
    for i, row in span.rows(semconv.OI_TOOLS_PREFIX):
        schema, readable = loads(row.get("tool.json_schema"))
        if "tool.json_schema" in row and not readable:
            bad.append(f"{semconv.OI_TOOLS_PREFIX}{i}.tool.json_schema")
        tool = _tool(schema if isinstance(schema, dict) else {}, row.get("tool.name"))
        tools += [tool] if tool is not None else []
    unreadable.extend(bad)
    if tools or bad:
        return semconv.OI_TOOLS_PREFIX[:-1], "openinference", tuple(tools)
    if view.attribute(semconv.OPENINFERENCE_SPAN_KIND) == semconv.OI_KIND_LLM:
        # The request recorded whole: one without ``tools`` is a stated zero.
        request, readable = loads(view.attribute(semconv.OI_INPUT_VALUE))
        if readable and isinstance(request, dict) and "messages" in request:
            listed = request.get("tools")
            found = () if listed is None else _tool_list(listed)
            if found is not None:
                return semconv.OI_INPUT_VALUE, "openinference", found
    prefix = semconv.TL_FUNCTIONS_PREFIX
    for _, row in span.rows(prefix):
        if "name" in row:
            tools.append(OfferedTool(str(row["name"]), loads(row.get("parameters"))[0]))
    return (prefix[:-1], "openllmetry", tuple(tools)) if tools else None


# ── the call view ───────────────────────────────────────────────────────────────────────────


def _system(view: SpanView, unreadable: list[str]) -> tuple[str, ...] | None:
    raw = view.attribute(semconv.GEN_AI_SYSTEM_INSTRUCTIONS)
    if raw is None:
        return None
    decoded, readable = loads(raw)
    if not readable:
        unreadable.append(semconv.GEN_AI_SYSTEM_INSTRUCTIONS)
        return None
    return tuple(
        text
        for part in (decoded if isinstance(decoded, list) else [decoded])
        for text in (
            _text_of_content(part.get("content")) if isinstance(part, dict) else (str(part),)
        )
    )


def call_view(view: SpanView, *, frames: bool = True) -> CallView:
    """One model-call span read whole, each field from the first convention that recorded it: an
    agent may state the offered tools in the GenAI attribute on a span whose instrumentation records
    the messages in its own names. ``frames=False`` reads only the offered tools (what the compose
    and wire checks need)."""
    unreadable: list[str] = []
    span = _Indexed(view)
    tools = _tools(span, unreadable)
    frame = output = None
    system: tuple[str, ...] | None = None
    if frames:
        frame = _messages(span, _INPUT, unreadable)
        output = _messages(span, _OUTPUT, unreadable)
        system = _system(view, unreadable)
        if system is None and frame is not None:
            system = ()  # instructions ride as system-role messages, or there are none
    trace_id, span_id = view.trace_id, view.span_id
    first = frame or tools or output
    return CallView(
        trace_id,
        span_id,
        first[1] if first else "gen_ai" if unreadable else "none",  # only GenAI can be named so
        tools[2] if tools else None,
        Ref(trace_id, span_id, tools[0]) if tools else None,
        system,
        _frame(view, frame) if frame else None,
        Ref(trace_id, span_id, frame[0]) if frame else None,
        _frame(view, output) if output else None,
        tuple(unreadable),
    )


# ── what the pass reading needs ─────────────────────────────────────────────────────────────


def output_tool_calls(view: SpanView) -> tuple[OutputToolCall, ...] | None:
    """The tool calls in the span's recorded output, in order; None when the span records no
    output at all (then :func:`asked_for_tools` is all there is to go by)."""
    found = _messages(_Indexed(view), _OUTPUT, [])
    if found is None:
        return None
    calls: list[OutputToolCall] = []
    for _, message in found[2]:
        for part in _parts(message):
            name, arguments = string(part.get("name")), part.get("arguments")
            if part.get("type") == "tool_call" and name:
                text = None if arguments is None else _compact(arguments)
                calls.append(OutputToolCall(name, string(part.get("id")), text))
    return tuple(calls)


def tool_results(view: SpanView) -> Iterator[tuple[str, str, Ref]]:
    """(call id, result text, where it was read: the attribute and message index) of every tool
    result the span's input messages hold."""
    found = _messages(_Indexed(view), _INPUT, [])
    if not found:
        return
    key = found[0]
    for index, message in found[2]:
        for part in _parts(message):
            call_id, response = string(part.get("id")), _response(part)
            if (
                part.get("type") == "tool_call_response"
                and call_id is not None
                and response is not None
            ):
                where = Ref(view.trace_id, view.span_id, key, message_index=index)
                yield call_id, _compact(response), where


def offered_tools(view: SpanView) -> tuple[str, ...] | None:
    """Names of the tools offered to the model; None when the span does not say."""
    found = _tools(_Indexed(view), [])
    return None if found is None else tuple(tool.name for tool in found[2])


def asked_for_tools(view: SpanView) -> bool | None:
    """Whether the span's finish reason says the model asked for tools; None when it records no
    finish reason."""
    reasons = view.attribute(semconv.GEN_AI_RESPONSE_FINISH_REASONS)
    if reasons is None:
        reasons = view.attribute(semconv.OI_FINISH_REASON)
    if reasons is None:
        return None
    values = [reasons] if isinstance(reasons, str) else list(reasons)
    return any(str(v) in semconv.TOOL_CALL_FINISH_REASONS for v in values)


def instrumented(view: SpanView) -> bool:
    """Whether a model-call span was made by an instrumentation that describes the response (the
    recorder's own pass span never does: its tool calls are its tool spans)."""
    return any(
        view.attribute(key) is not None
        for key in (
            semconv.OPENINFERENCE_SPAN_KIND,
            semconv.GEN_AI_RESPONSE_ID,
            semconv.GEN_AI_RESPONSE_MODEL,
            semconv.GEN_AI_RESPONSE_FINISH_REASONS,
            semconv.GEN_AI_OUTPUT_MESSAGES,
        )
    )


# ── tool spans ──────────────────────────────────────────────────────────────────────────────


def skill_of(view: SpanView) -> str | None:
    """The skill a tool span loaded (``gen_ai.skill.name``, proposed GenAI conventions)."""
    return string(view.attribute(semconv.GEN_AI_SKILL_NAME)) or None


def tool_arguments_of(view: SpanView) -> Any | None:
    """A tool span's arguments: ``gen_ai.tool.call.arguments`` as recorded; else OpenInference
    ``input.value`` / OpenLLMetry ``traceloop.entity.input``, JSON made compact."""
    value = view.attribute(semconv.GEN_AI_TOOL_CALL_ARGUMENTS)
    if value is not None:
        return value
    for key in semconv.TOOL_ARGUMENT_KEYS[1:]:
        value = view.attribute(key)
        if value is not None:
            decoded, readable = loads(value)
            return _compact(decoded) if readable else value
    return None


def tool_result_of(view: SpanView) -> Any | None:
    """A tool span's result: ``gen_ai.tool.call.result``; else OpenInference ``output.value`` (a
    LangChain ToolMessage unwrapped to its content) / OpenLLMetry ``traceloop.entity.output``."""
    for key in semconv.TOOL_RESULT_KEYS:
        value = view.attribute(key)
        if value is not None:
            if key == semconv.AI_SDK_TOOL_CALL_RESULT:
                decoded, readable = loads(value)  # the AI SDK JSON-encodes the result
                return (
                    value
                    if not readable
                    else decoded
                    if isinstance(decoded, str)
                    else _compact(decoded)
                )
            return value if key == semconv.GEN_AI_TOOL_CALL_RESULT else _unwrapped(value)
    return None


def _unwrapped(value: Any) -> Any:
    """A LangChain ``ToolMessage`` as OpenInference serialises it (``{"type": "tool", "data":
    {"content": ...}}``) unwrapped to its content; anything else as it is."""
    decoded = loads(value)[0] if isinstance(value, str) and value[:1] == "{" else None
    if isinstance(decoded, dict) and decoded.get("type") == "tool":
        data = decoded.get("data")
        if isinstance(data, dict) and "content" in data:
            return _compact(data["content"])
    return value
