"""OpenAI Agents SDK adapter: ``RunHooks`` that state each pass before the SDK calls the model.

Install ``otel-footprint[openai-agents]`` (``openai-agents`` and
``openinference-instrumentation-openai-agents``)::

    from otel_footprint.integrations.openai_agents import footprint_hooks

    with footprint.run(tracer, agent="support", maps=MAPS) as run:
        result = await Runner.run(agent, prompt, hooks=footprint_hooks(state_pass))

``state_pass(next_pass, call)`` runs in the SDK's ``on_llm_start``; ``call`` is a
:class:`AgentsModelCall` (the agent, its system prompt, the input items). The OpenInference
instrumentation's ``generation`` span (started right after) takes the pass; the ``openai`` client
span under it, if a client instrumentation is on too, is no pass. Tool calls are read from its TOOL
spans. The run is the innermost :func:`otel_footprint.record.run` open where ``Runner.run`` is
called (or the ``run`` given).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any

from otel_footprint.integrations import PassHook
from otel_footprint.record.recorder import Run, current_run

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentsModelCall:
    """What the Agents SDK is about to send the model."""

    agent: Any
    """The ``agents.Agent`` making the call (``agent.name``)."""
    system_prompt: str | None
    input_items: list[Any]


def footprint_hooks(state_pass: PassHook, *, run: Run | None = None, wrapped: Any = None) -> Any:
    """An ``agents.RunHooks`` whose ``on_llm_start`` calls ``state_pass(run.next_pass(), call)``.

    ``wrapped``: RunHooks of your own; every hook is passed on to it. Raises ``ImportError`` when
    ``openai-agents`` is not installed. With no run open, a model call is logged and not recorded.
    """
    agents = importlib.import_module("agents")

    class FootprintRunHooks(agents.RunHooks):  # type: ignore[misc, name-defined]
        """Pass-stating hooks (see :func:`footprint_hooks`)."""

        async def on_llm_start(
            self, context: Any, agent: Any, system_prompt: str | None, input_items: Any
        ) -> None:
            target = run or current_run()
            if target is None:
                # No run: this call is no pass (nothing to decide), never a wrong verdict.
                _logger.warning(
                    "footprint_hooks: no footprint run is open around Runner.run (wrap it in "
                    "`with footprint.run(...)`, or pass run=); the model call is not recorded"
                )
            else:
                call = AgentsModelCall(agent, system_prompt, list(input_items))
                state_pass(target.next_pass(), call)
            if wrapped is not None:
                await wrapped.on_llm_start(context, agent, system_prompt, input_items)

    hooks = FootprintRunHooks()
    if wrapped is not None:
        for name in (
            "on_agent_start",
            "on_agent_end",
            "on_handoff",
            "on_tool_start",
            "on_tool_end",
            "on_llm_end",
        ):
            setattr(hooks, name, getattr(wrapped, name))
    return hooks
