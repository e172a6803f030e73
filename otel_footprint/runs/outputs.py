"""What an instrumentation recorded of a model call's output: the tool calls the model asked for,
the tool results it was given, and the tools it was offered.

Client instrumentations make no tool spans; the tool calls are in the model-call span itself:

- OTel GenAI (``opentelemetry-instrumentation-openai-v2`` with content capture, OpenLLMetry >= 0.5):
  ``gen_ai.output.messages`` JSON, parts ``{"type": "tool_call", "id", "name", "arguments"}``;
  results in a later call's ``gen_ai.input.messages`` parts ``{"type": "tool_call_response",
  "id", "response"}``.
- OpenInference: ``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.{id,function.name,
  function.arguments}``; results in ``llm.input_messages.{i}.message`` with role ``tool``,
  ``tool_call_id`` and ``content``.
- older OpenLLMetry: ``gen_ai.completion.{i}.tool_calls.{j}.{id,name,arguments}`` (or
  ``llm.completions.*``).

``gen_ai.response.finish_reasons`` / ``llm.finish_reason`` say whether the model asked for tools at
all, which tells "no tool called" from "tool calls not recorded" (openai-v2 without content capture,
or streaming).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from otel_footprint import semconv
from otel_footprint.runs.spans import OtlpSpanView, SdkSpanView, SpanView


@dataclass(frozen=True, slots=True)
class OutputToolCall:
    """One tool call the model asked for, as the model-call span recorded it."""

    name: str
    call_id: str | None
    arguments_text: str | None


_OI_CALL = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$"
)
_LEGACY_CALL = re.compile(
    r"^(?:gen_ai\.completion|llm\.completions)\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)$"
)
_OI_INPUT = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|tool_call_id|content)$")
_OI_TOOL = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")


def _keys(view: SpanView) -> Iterable[str]:
    """The attribute keys of a span (the two concrete views; others offer none)."""
    if isinstance(view, OtlpSpanView):
        return [kv.key for kv in view.pb.attributes]
    if isinstance(view, SdkSpanView):
        return list((view.span.attributes or {}).keys())
    keys = getattr(view, "attribute_keys", None)
    return list(keys()) if callable(keys) else []


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def _genai_messages(view: SpanView, key: str) -> list[dict[str, Any]] | None:
    raw = _json(view.attribute(key))
    if not isinstance(raw, list | tuple):
        return None
    return [m for m in raw if isinstance(m, dict)]


def output_tool_calls(view: SpanView) -> tuple[OutputToolCall, ...] | None:
    """The tool calls in the span's recorded output, in order; None when the span records no
    output at all (then :func:`asked_for_tools` is all there is to go by)."""
    messages = _genai_messages(view, semconv.GEN_AI_OUTPUT_MESSAGES)
    if messages is not None:
        found: list[OutputToolCall] = []
        for message in messages:
            parts = message.get("parts")
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict) and part.get("type") == "tool_call":
                    call = _output_tool_call(part)
                    if call is not None:
                        found.append(call)
        return tuple(found)
    indexed: dict[tuple[int, int], dict[str, Any]] = {}
    any_output = False
    for key in _keys(view):
        if key.startswith(semconv.OI_OUTPUT_MESSAGES_PREFIX) or key.startswith(
            semconv.LEGACY_COMPLETION_PREFIXES
        ):
            any_output = True
        match = _OI_CALL.match(key) or _LEGACY_CALL.match(key)
        if match:
            field = match.group(3).replace("function.", "")
            indexed.setdefault((int(match.group(1)), int(match.group(2))), {})[field] = (
                view.attribute(key)
            )
    if not any_output:
        return None
    calls = (_output_tool_call(fields) for _, fields in sorted(indexed.items()))
    return tuple(call for call in calls if call is not None)


def _output_tool_call(fields: Mapping[str, Any]) -> OutputToolCall | None:
    """A tool call from its ``name``, ``id`` and ``arguments`` (a GenAI message part, or the
    indexed attributes of one call); None without a name."""
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        return None
    call_id = fields.get("id")
    arguments = fields.get("arguments")
    return OutputToolCall(
        name,
        call_id if isinstance(call_id, str) else None,
        None if arguments is None else _compact(arguments),
    )


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


def tool_results(view: SpanView) -> Iterator[tuple[str, str]]:
    """(call id, result text) of every tool result the span's input messages hold."""
    messages = _genai_messages(view, "gen_ai.input.messages")
    if messages is not None:
        for message in messages:
            parts = message.get("parts")
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict) and part.get("type") == "tool_call_response":
                    call_id, response = part.get("id"), part.get("response")
                    if isinstance(call_id, str) and response is not None:
                        yield call_id, _compact(response)
        return
    rows: dict[int, dict[str, Any]] = {}
    for key in _keys(view):
        match = _OI_INPUT.match(key)
        if match:
            rows.setdefault(int(match.group(1)), {})[match.group(2)] = view.attribute(key)
    for _, row in sorted(rows.items()):
        call_id, content = row.get("tool_call_id"), row.get("content")
        if row.get("role") == "tool" and isinstance(call_id, str) and content is not None:
            yield call_id, _compact(content)


def offered_tools(view: SpanView) -> tuple[str, ...] | None:
    """Names of the tools offered to the model (``gen_ai.tool.definitions``, OpenInference
    ``llm.tools.*``); None when the span does not say."""
    definitions = _json(view.attribute(semconv.GEN_AI_TOOL_DEFINITIONS))
    names: list[str] = []
    if isinstance(definitions, list | tuple):
        for item in definitions:
            if isinstance(item, dict):
                function = item.get("function")
                name = item.get("name") or (
                    function.get("name") if isinstance(function, dict) else None
                )
                if isinstance(name, str):
                    names.append(name)
        return tuple(names)
    schemas = [key for key in _keys(view) if _OI_TOOL.match(key)]
    if not schemas:
        return None
    for key in sorted(schemas, key=lambda k: int(k.split(".")[2])):
        schema = _json(view.attribute(key))
        if isinstance(schema, dict):
            function = schema.get("function", schema)
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str):
                names.append(name)
    return tuple(names)


def skill_of(view: SpanView) -> str | None:
    """The skill a tool span loaded (``gen_ai.skill.name``, proposed GenAI conventions)."""
    value = view.attribute(semconv.GEN_AI_SKILL_NAME)
    return value if isinstance(value, str) and value else None


def _unwrapped(value: Any) -> Any:
    """A LangChain ``ToolMessage`` as OpenInference serialises it (``{"type": "tool", "data":
    {"content": ...}}``) unwrapped to its content; anything else as it is."""
    decoded = _json(value) if isinstance(value, str) and value[:1] == "{" else None
    if isinstance(decoded, dict) and decoded.get("type") == "tool":
        data = decoded.get("data")
        if isinstance(data, dict) and "content" in data:
            return _compact(data["content"])
    return value


def tool_arguments_of(view: SpanView) -> Any | None:
    """A tool span's arguments: ``gen_ai.tool.call.arguments`` as recorded; else OpenInference
    ``input.value`` / OpenLLMetry ``traceloop.entity.input``, JSON made compact."""
    value = view.attribute(semconv.GEN_AI_TOOL_CALL_ARGUMENTS)
    if value is not None:
        return value
    for key in semconv.TOOL_ARGUMENT_KEYS[1:]:
        value = view.attribute(key)
        if value is not None:
            decoded = _json(value)
            return value if decoded is None else _compact(decoded)
    return None


def tool_result_of(view: SpanView) -> Any | None:
    """A tool span's result: ``gen_ai.tool.call.result``; else OpenInference ``output.value`` (a
    LangChain ToolMessage unwrapped to its content) / OpenLLMetry ``traceloop.entity.output``."""
    for key in semconv.TOOL_RESULT_KEYS:
        value = view.attribute(key)
        if value is not None:
            return value if key == semconv.GEN_AI_TOOL_CALL_RESULT else _unwrapped(value)
    return None
