"""LangGraph / LangChain adapter: a callback handler that states each pass before a chat model runs.

Install ``otel-footprint[langgraph]`` (``langgraph``, ``langchain-openai``,
``openinference-instrumentation-langchain``)::

    from otel_footprint.integrations.langchain import footprint_callbacks

    with footprint.run(tracer, agent="support", maps=MAPS) as run:
        graph.invoke(state, config={"callbacks": [footprint_callbacks(state_pass)]})

``state_pass(next_pass, call)`` runs in ``on_chat_model_start`` (and ``on_llm_start``); ``call`` is a
:class:`LangChainModelCall`. The OpenInference LangChain tracer marks its LLM span
(``openinference.span.kind=LLM``) only when it ends, so the span-start hook cannot see it start:
this handler lands the pass on that span itself, looked up by the LangChain run id, at whichever of
its own callbacks finds the span open. LangChain calls a model call's handlers in one order, and
that order varies (a merged callback manager orders its handlers as a set does): when the tracer
comes first its span is open at this handler's start (the pass lands there); when this handler
comes first, the tracer has not started the span yet, and it is still open at this handler's end
(the pass lands there). A call whose span neither callback found open (no tracer installed) gives
its pass up when it ends, with an ``unattached-pass`` reason, rather than leaving it staged for the
next call. A client instrumentation under it (``openai``) that starts a recognisable span before
either takes the pass instead (one call, one pass). Model calls the hook should not
count (a guard, a router) are told by ``should_count(call)`` (default: every call).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from otel_footprint.integrations import PassHook
from otel_footprint.record.recorder import ModelCall, Run, current_run

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LangChainModelCall:
    """What LangChain is about to send a chat model."""

    serialized: dict[str, Any]
    messages: list[Any]
    """``list[list[BaseMessage]]`` for chat models, ``list[str]`` prompts for LLMs."""
    tags: list[str]
    metadata: dict[str, Any]
    """LangGraph puts ``langgraph_node`` / ``langgraph_step`` here."""


def footprint_callbacks(
    state_pass: PassHook,
    *,
    run: Run | None = None,
    should_count: Callable[[LangChainModelCall], bool] | None = None,
) -> Any:
    """A ``langchain_core`` callback handler stating a pass before each (counted) model call.

    Raises ``ImportError`` when ``langchain-core`` is not installed. With no run open, a model call
    is logged and not recorded.
    """
    callbacks = importlib.import_module("langchain_core.callbacks")
    passes = _Passes(state_pass, run, should_count)

    class FootprintCallbackHandler(callbacks.BaseCallbackHandler):  # type: ignore[misc, name-defined]
        """Pass-stating callback handler (see :func:`footprint_callbacks`)."""

        raise_error = True  # an error in state_pass must not pass silently
        run_inline = True  # called on the thread (and context) of the model call

        def on_chat_model_start(
            self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any
        ) -> None:
            passes.state(_model_call(serialized, messages, kwargs), kwargs.get("run_id"))

        def on_llm_start(
            self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any
        ) -> None:
            passes.state(_model_call(serialized, prompts, kwargs), kwargs.get("run_id"))

        def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
            passes.land(run_id)

        def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
            passes.land(run_id)

    return FootprintCallbackHandler()


def _model_call(
    serialized: dict[str, Any] | None, messages: list[Any], kwargs: dict[str, Any]
) -> LangChainModelCall:
    return LangChainModelCall(
        serialized or {}, messages, kwargs.get("tags") or [], kwargs.get("metadata") or {}
    )


class _Passes:
    """What the handler does, free of LangChain: states a pass when a counted model call starts
    and lands it on the framework's span, then or when the call ends (LangChain run id -> staged
    pass, while the span is not open yet)."""

    __slots__ = ("_run", "_should_count", "_staged", "_state_pass")

    def __init__(
        self,
        state_pass: PassHook,
        run: Run | None,
        should_count: Callable[[LangChainModelCall], bool] | None,
    ) -> None:
        self._state_pass = state_pass
        self._run = run
        self._should_count = should_count
        self._staged: dict[Any, tuple[Run, ModelCall]] = {}

    def state(self, call: LangChainModelCall, run_id: Any) -> None:
        if self._should_count is not None and not self._should_count(call):
            return
        target = self._run or current_run()
        if target is None:
            # No run: this call is no pass (nothing to decide), never a wrong verdict.
            _logger.warning(
                "footprint_callbacks: no footprint run is open around the graph (wrap the "
                "invoke in `with footprint.run(...)`, or pass run=); the model call is not "
                "recorded"
            )
            return
        staged = target.next_pass()
        self._state_pass(staged, call)
        if not self._landed(target, staged, run_id) and len(self._staged) < _MAX_OPEN_CALLS:
            self._staged[run_id] = (target, staged)  # the tracer's span is not open yet

    def land(self, run_id: Any) -> None:
        entry = self._staged.pop(run_id, None)
        if entry is not None and not self._landed(*entry, run_id):
            # The call is over and its span was never open to this handler (no tracer, or one
            # that started its span after this handler's start and ended it before its end).
            entry[0].unattached(
                entry[1],
                "the LangChain model call ended without an open OpenInference LangChain span "
                "for it at the handler's start or end (is LangChainInstrumentor on?)",
            )

    @staticmethod
    def _landed(target: Run, staged: ModelCall, run_id: Any) -> bool:
        """Land ``staged`` on the tracer's span for ``run_id`` if that span is open; True when
        nothing is left to do (landed, or another span already took the pass)."""
        if not staged.staged:
            return True  # a span-start-recognised span (a client instrumentation's) took it
        span = _framework_span(run_id)
        return span is not None and target.land(staged, span)


_MAX_OPEN_CALLS = 10_000  # model calls started and not yet ended that the handler remembers


def _framework_span(run_id: Any) -> Any:
    """The OpenInference LangChain tracer's span for a LangChain run id, when it is installed."""
    try:
        module = importlib.import_module("openinference.instrumentation.langchain")
    except ImportError:
        return None
    return module.LangChainInstrumentor().get_span(run_id)
