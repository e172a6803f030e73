"""The Vercel AI SDK's spans (``ai`` 4 to 6, ``experimental_telemetry``) in the one recognition table:
``ai.generateText`` / ``ai.streamText`` a run (with ``footprint.run.id``, as every agent span), their
``doGenerate`` / ``doStream`` a pass though no ``gen_ai.operation.name`` is set, ``ai.toolCall`` a tool
call with its name and id. Attributes as ``ai`` 6.0.325 writes them (tests/node/ai_sdk_agent.mjs)."""

from __future__ import annotations

from typing import Any

import pytest

from otel_footprint import semconv as sc
from otel_footprint.runs.recognize import SpanRole, role_of, tool_call_id_of, tool_name_of

MODEL_CALL: dict[str, Any] = {
    "ai.operationId": "ai.generateText.doGenerate",
    "operation.name": "ai.generateText.doGenerate",
    "gen_ai.system": "openai.chat",
    "gen_ai.request.model": "scripted-6",
    "gen_ai.usage.input_tokens": 38,
}
TOOL_CALL: dict[str, Any] = {
    "ai.operationId": "ai.toolCall",
    "ai.toolCall.name": "screen_open",
    "ai.toolCall.id": "c1",
    "ai.toolCall.args": '{"screen":"runs"}',
    "ai.toolCall.result": '"screen shows: runs list"',
}


@pytest.mark.parametrize(
    ("attributes", "role"),
    [
        (MODEL_CALL, SpanRole.PASS),
        ({**MODEL_CALL, "ai.operationId": "ai.streamText.doStream"}, SpanRole.PASS),
        ({**MODEL_CALL, "ai.operationId": "ai.generateObject.doGenerate"}, SpanRole.PASS),
        (TOOL_CALL, SpanRole.TOOL),
        ({"ai.operationId": "ai.generateText"}, SpanRole.OTHER),  # a container without a run id
        ({"ai.operationId": "ai.streamText", sc.RUN_ID: "r1"}, SpanRole.RUN),
        ({"ai.operationId": "ai.embed.doEmbed"}, SpanRole.OTHER),
        # GenAI decides first when a span carries both.
        ({**MODEL_CALL, sc.GEN_AI_OPERATION_NAME: "embeddings"}, SpanRole.OTHER),
    ],
)
def test_the_ai_sdk_spans_have_their_roles(attributes: dict[str, Any], role: SpanRole) -> None:
    assert role_of(attributes.get) is role


def test_an_ai_sdk_tool_span_names_its_tool_and_call() -> None:
    assert (tool_name_of(TOOL_CALL.get), tool_call_id_of(TOOL_CALL.get)) == ("screen_open", "c1")
