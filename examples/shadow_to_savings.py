"""From shadow to savings: one agent, run in shadow mode, then with the recorder's live policy on.

Run it: ``python examples/shadow_to_savings.py`` (needs ``pip install -e '.[integrations]'``: the
real ``openai`` client and ``opentelemetry-instrumentation-openai-v2``). A support agent with two
skill maps calls a scripted model on the fake OpenAI-compatible server (``tests/fake_openai.py``,
real HTTP on loopback). The keyword router guesses "shipping" from the word "parcel", but the
question is about a charge: the model keeps calling ``lookup_charge`` and never touches shipping.

1. shadow: the agent only observes; the processor's finding says how many characters the shipping
   skill kept sending after the kernel would have parked it;
2. enforce: the same agent asks the policy before each model call (``run.plan(...)``) and leaves
   out what it parks (``run.keep(...)``, ``run.tools(...)``); the server receives fewer characters,
   the model's tool calls and answer are the same, the processor verifies every decision;
3. ignored: the policy is on but the agent ignores it for one call: a mismatch at that call.

``python examples/shadow_to_savings.py --json`` prints the measurements as one JSON object (the
tests read it); ``--openinference`` instruments the client with OpenInference instead, and
``--output-only`` leaves the tool calls to what the instrumentation records of the model's output.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# The instrumentation reads these when it is set up: record the messages and tool calls on the
# model-call spans (the processor reads the model's tool calls from there).
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # fake_openai

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from otel_footprint import record as footprint
from otel_footprint import semconv
from otel_footprint.sdk import setup

MODEL = "support-m"
PROMPT = "My parcel order was charged twice: why?"
BASE = "You are a support agent. Answer from what the tools return."
SKILLS = {
    "shipping": (
        "SHIPPING. You track parcels. Ask for the tracking number, call track_parcel, quote the "
        "carrier's status verbatim, never promise a delivery date, and offer a claim after ten "
        "days without a scan. " * 3,
        "track_parcel",
    ),
    "billing": (
        "BILLING. You explain charges. Look every charge up with lookup_charge before you say "
        "anything about it, and name the charge ids you relied on.",
        "lookup_charge",
    ),
}
MAPS = [
    footprint.MountedMap("shipping-map", ("shipping",), ("track_parcel",)),
    footprint.MountedMap("billing-map", ("billing",), ("lookup_charge",)),
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "track_parcel",
            "description": "The carrier's latest status of a parcel.",
            "parameters": {"type": "object", "properties": {"tracking": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_charge",
            "description": "One charge on the customer's card.",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}},
        },
    },
]
IGNORED_AT = 5
"""The call the third scenario ignores the policy on (the map was parked on call 4)."""
CHARGES = [101, 102, 103, 104, 105]
SCRIPT = {
    MODEL: [
        *(
            {"tool_calls": [{"id": f"call_{c}", "name": "lookup_charge", "arguments": {"id": c}}]}
            for c in CHARGES
        ),
        {"content": "Charges 101 and 102 are the same order: 102 was refunded today."},
    ]
}


def lookup_charge(charge: int) -> str:
    return f"charge {charge}: $42.00, order 7, " + ("refunded" if charge == 102 else "settled")


def support_agent(
    client: Any,
    tracer: Any,
    *,
    policy: bool = False,
    ignore_at: int | None = None,
    tool_spans: bool = True,
) -> tuple[str, list[tuple[str, str]]]:
    """The agent: the answer and the tool calls (name, arguments) the model asked for.

    ``policy``: enforce mode, the recorder's kernel says what to leave out of each call;
    ``ignore_at``: the pass whose decision the agent ignores (it sends everything);
    ``tool_spans``: state each tool call (else the tool calls are only what the instrumentation
    recorded of the model's output)."""
    calls: list[tuple[str, str]] = []
    # footprint: the run, with the maps it mounts (and, for enforce mode, the live policy)
    with footprint.run(
        tracer, agent="support", maps=MAPS, user_prompt=PROMPT, policy=policy
    ) as run:
        history: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        for iteration in range(1, 10):
            first = iteration == 1
            # The keyword router put the cursor on shipping ("parcel"); it stays there.
            move: dict[str, Any] = {
                "cursor_to": "shipping",
                "moved_by": "entry" if first else "stay",
            }
            if first:
                move.update(witness="parcel", witness_keyword="parcel")
            skills, tools = list(SKILLS), TOOLS
            if policy:
                run.plan(**move)  # footprint: what to leave out of this call
                if iteration != ignore_at:
                    skills = [s for s in skills if run.keep(s, content=SKILLS[s][0])]
                    tools = run.tools(TOOLS)
                run.evaluated(skills)  # footprint: what this call serves
            else:
                run.evaluated(skills, **move)  # footprint: what this call serves, the move
            run.injected("system-prompt", "base", content=BASE)
            for skill in skills:
                run.injected("system-prompt", "skill", source_id=skill, content=SKILLS[skill][0])
            system = "\n\n".join([BASE, *(SKILLS[s][0] for s in skills)])
            message = (
                client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "system", "content": system}, *history],
                    tools=tools,
                )
                .choices[0]
                .message
            )
            if not message.tool_calls:
                answer = str(message.content)
                run.answer(answer)  # footprint: the final answer
                return answer, calls
            history.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                calls.append((call.function.name, call.function.arguments))
                arguments = json.loads(call.function.arguments)
                result = lookup_charge(arguments["id"])
                if tool_spans:
                    # footprint: the tool call and its result
                    with run.tool_call(call.function.name, args=arguments, call_id=call.id) as tool:
                        tool.result(result)
                history.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return "I ran out of turns.", calls


def _run_span(spans: list[ReadableSpan]) -> dict[str, Any]:
    (run,) = [s for s in spans if (s.attributes or {}).get(semconv.RUN_MODE) is not None]
    return dict(run.attributes or {})


OPENINFERENCE_PROMPT_TOKENS = "llm.token_count.prompt"


def _input_tokens(span: ReadableSpan) -> int:
    """The input tokens the instrumentation recorded on a pass span (GenAI or OpenInference)."""
    attributes = span.attributes or {}
    if attributes.get(semconv.PASS_ITERATION) is None:
        return 0
    value = attributes.get(
        semconv.GEN_AI_USAGE_INPUT_TOKENS, attributes.get(OPENINFERENCE_PROMPT_TOKENS)
    )
    return int(value) if isinstance(value, int) else 0


def _mismatches(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    return [
        {
            "iteration": (event.attributes or {}).get(semconv.CH_ITERATION),
            "reported": list((event.attributes or {}).get(semconv.MISMATCH_REPORTED, ())),
            "derived": list((event.attributes or {}).get(semconv.MISMATCH_DERIVED, ())),
        }
        for span in spans
        for event in span.events
        if event.name == semconv.EV_ENGAGEMENT_MISMATCH
    ]


def scenario(
    client: Any, server: Any, tracer: Any, processor: Any, exporter: Any, **how: Any
) -> dict[str, Any]:
    """Run the agent once on a fresh script; what the server received and what the processor said."""
    server.reset()
    server.set_script(SCRIPT)
    exporter.clear()
    answer, calls = support_agent(client, tracer, **how)
    assert processor.force_flush(10_000)
    spans = list(exporter.get_finished_spans())
    run = _run_span(spans)
    sent = sum(len(json.dumps(body, separators=(",", ":"))) for body in server.requests)
    tokens = sum(_input_tokens(s) for s in spans)
    return {
        "answer": answer,
        "tool_calls": calls,
        "request_chars": sent,
        "input_tokens": tokens,
        "mode": run.get(semconv.RUN_MODE),
        "complete": run.get(semconv.RUN_COMPLETE),
        "reasons": list(run.get(semconv.RUN_REASONS, ())),
        "parked_maps": list(run.get(semconv.RUN_PARKED_MAPS, ())),
        "predicted_chars": run.get(semconv.RUN_SERVED_CHARS_WHILE_PARKED, 0),
        "saved_chars": run.get(semconv.SAVINGS_CHARS),
        "saved_predicted_chars": run.get(semconv.SAVINGS_PREDICTED_CHARS),
        "mismatches": _mismatches(spans),
    }


def main() -> None:
    try:
        import openai

        if "--openinference" in sys.argv:
            from openinference.instrumentation.openai import OpenAIInstrumentor
        else:
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    except ImportError:
        print("this example needs the integrations extra: pip install -e '.[integrations]'")
        return
    from fake_openai import FakeOpenAI

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    processor = setup(provider, exporter, grace_seconds=0.05)  # footprint: decide, annotate
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("support")
    spans = "--output-only" not in sys.argv
    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        results = {
            name: scenario(client, server, tracer, processor, exporter, tool_spans=spans, **how)
            for name, how in (
                ("shadow", {}),
                ("enforce", {"policy": True}),
                ("ignored", {"policy": True, "ignore_at": IGNORED_AT}),
            )
        }
    provider.shutdown()
    if "--json" in sys.argv:
        print(json.dumps(results))
        return
    shadow, enforce, ignored = results["shadow"], results["enforce"], results["ignored"]
    print(f"answer: {enforce['answer']}")
    print(
        f"shadow:  mode {shadow['mode']}, parked {shadow['parked_maps']}; the finding predicts "
        f"{shadow['predicted_chars']} characters; the server received {shadow['request_chars']} "
        f"({shadow['input_tokens']} input tokens)"
    )
    print(
        f"enforce: mode {enforce['mode']}, {len(enforce['mismatches'])} mismatches; the run span "
        f"says {enforce['saved_chars']} characters saved ({enforce['saved_predicted_chars']} of them "
        f"the finding's); the server received {enforce['request_chars']} "
        f"({shadow['request_chars'] - enforce['request_chars']} fewer; {enforce['input_tokens']} "
        "input tokens)"
    )
    for found in ignored["mismatches"]:
        print(
            f"ignored at call {found['iteration']}: the agent's record says {found['reported']}, "
            f"the evidence gives {found['derived']}"
        )


if __name__ == "__main__":
    main()
