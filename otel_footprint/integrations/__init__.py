"""Adapters for agent frameworks whose loop the agent does not write itself.

The client instrumentations (OTel GenAI ``openai-v2``, OpenInference, OpenLLMetry) need no adapter:
the agent states each pass on its run and :mod:`otel_footprint.record.attach` lands it. A framework
runs the loop, so the adapter is the place to state each pass just before the framework calls the
model:

- :mod:`otel_footprint.integrations.openai_agents`: ``RunHooks`` for the OpenAI Agents SDK
  (extra ``openai-agents``);
- :mod:`otel_footprint.integrations.langchain`: a LangChain callback handler, for LangGraph and
  LangChain (extra ``langgraph``).

Each imports its framework lazily: importing this package needs neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from otel_footprint.record.recorder import ModelCall

PassHook: TypeAlias = Callable[[ModelCall, Any], None]
"""Called just before the framework's model call: ``hook(next_pass, details)`` states what goes into
it (``next_pass.evaluated(...)``, ``.injected(...)``, ``.composed(...)``). ``details`` is the
framework's view of the call (see each adapter)."""

__all__ = ["PassHook"]
