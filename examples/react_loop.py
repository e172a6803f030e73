"""A hand-written ReAct loop instrumented with the footprint recorder (scripted model, no network).

Run it: ``python examples/react_loop.py``. The lines under ``# footprint`` comments are all the
instrumentation there is; everything else is the agent as it would be written anyway. ``setup``
puts the footprint processor in front of the exporter, so the spans leave with their verdict; the
example prints the answer, the verdict written on the run span, and the spans.
To send the spans somewhere real, replace the in-memory exporter with
``OTLPSpanExporter(endpoint="http://127.0.0.1:4317", insecure=True)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_footprint import record as footprint
from otel_footprint.sdk import setup

# ── the agent's own world: skills (prompt bodies + the tools they bring) and tools ──────────

SKILLS = {
    "billing": (
        "You handle refunds. Look the charge up before promising anything.",
        "lookup_charge",
    ),
    "shipping": ("You track parcels. Quote the carrier's status verbatim.", "track_parcel"),
}
TOOLS: dict[str, Callable[[dict[str, Any]], str]] = {
    "lookup_charge": lambda args: f"charge #{args['charge']}: $10.00, refundable",
    "track_parcel": lambda args: "in transit",
}
SYSTEM = "You are a support agent."


def scripted_model(turn: int) -> dict[str, Any]:
    """Stands in for the LLM: asks for one tool, then answers."""
    if turn == 1:
        return {"tool": "lookup_charge", "args": {"charge": 881}}
    return {"answer": "Charge #881 is refundable; I started the refund."}


def route(prompt: str) -> tuple[str, str | None]:
    """A keyword router: which skill this turn needs, and the word that decided it."""
    for word, skill in (("refund", "billing"), ("parcel", "shipping")):
        if word in prompt:
            return skill, word
    return "billing", None


# ── the loop ─────────────────────────────────────────────────────────────────────────────────

PLAN = footprint.MountedMap(
    "skill-map", member_ids=tuple(SKILLS), tool_names=tuple(tool for _, tool in SKILLS.values())
)


def react_loop(tracer: Tracer, prompt: str, max_turns: int = 8) -> str:
    skill, keyword = route(prompt)
    # footprint: the run span, with the plan it runs under and the routing verdict
    with footprint.run(tracer, agent="support", maps=[PLAN], user_prompt=prompt) as run:
        run.routed("entry", to=skill, witness=keyword, witness_keyword=keyword)
        for turn in range(1, max_turns + 1):
            body, tool_name = SKILLS[skill]
            first = turn == 1
            # footprint: one span per model call, saying what went into it
            with run.model_call("scripted-model") as call:
                moved = "entry" if first else "stay"
                call.evaluated(
                    [skill], cursor_to=skill, moved_by=moved, witness=keyword if first else None
                )
                call.injected("system-prompt", "base", content=SYSTEM)
                call.injected("system-prompt", "skill", source_id=skill, content=body)
                call.injected("tools", "skill", source_id=skill, content=tool_name)
                reply = scripted_model(turn)
            if "answer" in reply:
                run.answer(reply["answer"])  # footprint: the final answer
                return str(reply["answer"])
            # footprint: one span per tool call
            with run.tool_call(reply["tool"], args=reply["args"]) as tool:
                tool.result(TOOLS[reply["tool"]](reply["args"]))
    return "I ran out of turns."


def _spans_and_events(exporter: InMemorySpanExporter) -> Iterator[str]:
    for span in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0):
        yield span.name
        for event in span.events:
            yield f"    {event.name}"


def verdict_lines(exporter: InMemorySpanExporter) -> list[str]:
    """What the footprint processor wrote on the run span, as a person reads it."""
    lines = []
    for span in exporter.get_finished_spans():
        attrs = span.attributes or {}
        if "footprint.summary" not in attrs:
            continue
        lines.append(
            f"verdict ({attrs.get('footprint.summary.tone')}): {attrs['footprint.summary']}"
        )
        lines.append(
            f"  mode {attrs.get('footprint.run.mode')}, {attrs.get('footprint.run.passes')} passes, "
            f"parked maps: {list(attrs.get('footprint.run.parked_maps', ())) or 'none'}"
        )
        lines.append(
            "  check 1 (the decided skill reached the model): "
            f"{attrs.get('footprint.check.decided_delivered')}"
            + (
                f", {attrs['footprint.check.decided_delivered.outcome']}"
                if "footprint.check.decided_delivered.outcome" in attrs
                else ""
            )
        )
    return lines


def main() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    setup(provider, exporter)  # footprint: decide and annotate each run before it is exported
    answer = react_loop(provider.get_tracer("react-loop"), "please refund my order")
    provider.shutdown()
    print(answer)
    print("\n".join(verdict_lines(exporter)))
    print("\n".join(_spans_and_events(exporter)))


if __name__ == "__main__":
    main()
