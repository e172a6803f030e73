"""``dangling-reference`` @compose: a tool offered after the results that ground its arguments left
the window and were not fetched again.

The tools a declaration says ground a tool's arguments (``footprint.tool.declared``
``argumentsFrom``) are its grounds. A ground is *dropped* when a result of it was in an earlier
pass's frame and is missing from a later one (derived from the captured input messages), or when
the agent says so (``footprint.window.compacted``). A ground never dropped is legitimate
sequencing; a ground fetched again is re-established. Both stay silent.
"""

from __future__ import annotations

from otel_footprint.account.integrity.common import frame_missing, names, tools_missing
from otel_footprint.account.integrity.model import Finding, Subject, Witness
from otel_footprint.account.integrity.tally import Tally, unarmed
from otel_footprint.account.integrity.texts import say
from otel_footprint.runs.integrity_inputs import IntegrityInputs
from otel_footprint.runs.outputs import FrameMessage


def tool_result_names(messages: tuple[FrameMessage, ...], known: dict[str, str]) -> dict[str, str]:
    """Tool-role messages as {call id (or index) -> tool name}: the message's own name, else the
    name of the assistant call with that id (in this frame or seen earlier, ``known``)."""
    calls = dict(known)
    for message in messages:
        for call in message.calls:
            if call.call_id and call.name:
                calls[call.call_id] = call.name
    found: dict[str, str] = {}
    for message in messages:
        if message.role != "tool":
            continue
        name = message.tool_name or (calls.get(message.tool_call_id or "") or None)
        if name:
            found[message.tool_call_id or f"#{message.index}"] = name
    return found


def unnamed_results(messages: tuple[FrameMessage, ...] | None, known: dict[str, str]) -> int:
    """Tool-role messages of a frame that no rule can name (neither their own tool name nor the
    call their id answers, in this frame or an earlier one)."""
    if messages is None:
        return 0
    calls = dict(known)
    for message in messages:
        for call in message.calls:
            if call.call_id and call.name:
                calls[call.call_id] = call.name
    return sum(
        1
        for m in messages
        if m.role == "tool" and not m.tool_name and not calls.get(m.tool_call_id or "")
    )


def check_dangling(inputs: IntegrityInputs) -> Tally:
    grounding = {n: d.arguments_from for n, d in inputs.declarations.items() if d.arguments_from}
    if not grounding:
        return unarmed("no-grounds")
    tally = Tally()
    known_calls: dict[str, str] = {}
    seen: dict[str, str] = {}  # result id -> tool name, every result any earlier frame held
    dropped: set[str] = set()
    frames_complete = True  # every earlier pass's frame was captured
    reported = any(p.dropped is not None for p in inputs.passes)
    for pass_ in inputs.passes:
        it = pass_.iteration
        view = pass_.frame()
        present: dict[str, str] | None = None
        if view is not None and view.messages is not None:
            present = tool_result_names(view.messages, known_calls)
            for message in view.messages:
                for call in message.calls:
                    if call.call_id and call.name:
                        known_calls[call.call_id] = call.name
        if pass_.dropped:
            dropped.update(pass_.dropped)
        if present is not None and frames_complete:
            dropped.update(name for rid, name in seen.items() if rid not in present)
        dropped_known = frames_complete or reported

        offered, _ = pass_.tools()
        if offered is None:
            tally.note("unreachable", it, *tools_missing(pass_))
        else:
            served = [t.name for t in offered if t.name in grounding]
            if not served:
                tally.note("not-applicable", it, "none-offered")
            elif present is None:
                tally.note("unreachable", it, *frame_missing(pass_))
            elif not dropped_known:
                tally.note("unreachable", it, "window-unknown")
            elif not dropped:
                tally.note("not-applicable", it, "nothing-dropped")
            else:
                here = set(present.values())
                filed: list[Finding] = []
                for tool in served:
                    missing = [g for g in grounding[tool] if g in dropped and g not in here]
                    if not missing:
                        continue
                    filed.append(
                        Finding(
                            "dangling-reference",
                            "compose",
                            (Subject("tool", tool), *(Subject("tool", g) for g in missing)),
                            say("dangling", tool=tool, grounds=names(missing)),
                            tuple(
                                Witness(
                                    Subject("tool", tool),
                                    "argument-ground",
                                    f"results of '{g}' left the window and were not fetched again",
                                    f"frame of pass {it}: no result of '{g}' among the messages",
                                    pass_.dropped_ref or (view.messages_ref if view else None),
                                )
                                for g in missing
                            ),
                            iteration=it,
                        )
                    )
                if filed and unnamed_results(view.messages if view else None, known_calls):
                    # A result the frame holds that no rule can name may be the ground fetched
                    # again: whether it is missing cannot be told.
                    tally.note("unreachable", it, "unnamed-result")
                else:
                    tally.judged(filed, it)
        if present is None:
            frames_complete = False
        else:
            seen.update(present)
            # a re-fetched result is present again: it no longer counts as dropped
            dropped.difference_update(set(present.values()))
    return tally
