"""Every name otel_footprint reads or writes on OpenTelemetry data, in one place.

Input: the ``footprint.*`` events agents emit (span events or log records) and the GenAI /
OpenInference / OpenLLMetry span attributes used to recognise runs, passes and tool calls.
Output: the ``footprint.*`` annotations written back onto spans. ``docs/schema.md`` documents each
name; ``python -m otel_footprint.semconv --json`` prints them for clients in other languages.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Final, Literal

# ---------------------------------------------------------------------------------------------
# Prefixes and the event-name rule
# ---------------------------------------------------------------------------------------------

PREFIX: Final = "footprint."
"""Our namespace for attributes and event names (an application prefix, never under gen_ai.*)."""

UPSTREAM_PREFIX: Final = "agentfootprint."
"""Accepted as an alias of ``footprint.`` on event names (the upstream's own event types)."""

# ---------------------------------------------------------------------------------------------
# Input events (agent side). Name = "footprint." + the upstream type without "agentfootprint.".
# Payload field ``fooBar`` travels as attribute ``footprint.foo_bar``; objects and lists of
# objects travel as JSON strings (see codec.py for the one codec).
# ---------------------------------------------------------------------------------------------

# Event types: the upstream type without prefix, as FootprintEvent.type carries it.
T_MAPS_MOUNTED: Final = "maps.mounted"
T_RUN_CONFIGURED: Final = "agent.run_configured"
T_GRAPH_DECLARED: Final = "skill.graph_declared"
T_TURN_START: Final = "agent.turn_start"
T_TURN_END: Final = "agent.turn_end"
T_CONTEXT_EVALUATED: Final = "context.evaluated"
T_CONTEXT_INJECTED: Final = "context.injected"
T_SLOT_COMPOSED: Final = "context.slot_composed"
T_TURN_ROUTED: Final = "skill.turn_routed"
T_SKILL_REJECTED: Final = "skill.rejected"
T_SKILL_PICKED: Final = "skill.picked"
T_PERMISSION_CHECK: Final = "permission.check"
T_MAP_ENGAGED: Final = "map.engaged"
T_MAP_PARKED: Final = "map.parked"
T_PAUSE_REQUEST: Final = "pause.request"
T_PAUSE_RESUME: Final = "pause.resume"
T_TOOLS_ABSENT: Final = "tools.absent"
T_TOOLS_COVERAGE: Final = "tools.coverage_declared"

EV_MAPS_MOUNTED: Final = PREFIX + T_MAPS_MOUNTED
EV_RUN_CONFIGURED: Final = PREFIX + T_RUN_CONFIGURED
EV_GRAPH_DECLARED: Final = PREFIX + T_GRAPH_DECLARED
EV_TURN_START: Final = PREFIX + T_TURN_START
EV_TURN_END: Final = PREFIX + T_TURN_END
EV_CONTEXT_EVALUATED: Final = PREFIX + T_CONTEXT_EVALUATED
EV_CONTEXT_INJECTED: Final = PREFIX + T_CONTEXT_INJECTED
EV_SLOT_COMPOSED: Final = PREFIX + T_SLOT_COMPOSED
EV_TURN_ROUTED: Final = PREFIX + T_TURN_ROUTED
EV_SKILL_REJECTED: Final = PREFIX + T_SKILL_REJECTED
EV_SKILL_PICKED: Final = PREFIX + T_SKILL_PICKED
EV_PERMISSION_CHECK: Final = PREFIX + T_PERMISSION_CHECK
EV_MAP_ENGAGED: Final = PREFIX + T_MAP_ENGAGED
EV_MAP_PARKED: Final = PREFIX + T_MAP_PARKED
EV_PAUSE_REQUEST: Final = PREFIX + T_PAUSE_REQUEST
EV_PAUSE_RESUME: Final = PREFIX + T_PAUSE_RESUME
EV_TOOLS_ABSENT: Final = PREFIX + T_TOOLS_ABSENT
EV_TOOLS_COVERAGE: Final = PREFIX + T_TOOLS_COVERAGE

INPUT_EVENTS: Final = frozenset(
    {
        EV_MAPS_MOUNTED,
        EV_RUN_CONFIGURED,
        EV_GRAPH_DECLARED,
        EV_TURN_START,
        EV_TURN_END,
        EV_CONTEXT_EVALUATED,
        EV_CONTEXT_INJECTED,
        EV_SLOT_COMPOSED,
        EV_TURN_ROUTED,
        EV_SKILL_REJECTED,
        EV_SKILL_PICKED,
        EV_PERMISSION_CHECK,
        EV_MAP_ENGAGED,
        EV_MAP_PARKED,
        EV_PAUSE_REQUEST,
        EV_PAUSE_RESUME,
        EV_TOOLS_ABSENT,
        EV_TOOLS_COVERAGE,
    }
)
"""The events reconstruction reads. Other ``footprint.*`` input events are carried, not read."""

# Input attributes: run and pass identity ------------------------------------------------------

RUN_ID: Final = "footprint.run.id"
"""On the run span: the agent's run id. A resumed leg keeps it and starts a new trace."""
PASS_ITERATION: Final = "footprint.pass.iteration"
"""On a model-call span: the pass number (ReAct iteration). Also written on output."""
COMPOSITION_ID: Final = "footprint.composition_id"
"""On context.injected / slot_composed: rows of one slot composition share it (upstream
``meta.runtimeStageId``)."""
SESSION_ID_ALIASES: Final = ("gen_ai.conversation.id", "session.id")

# Payload field attributes of the events the engine reads (footprint.<snake_case payload field>).
F_MAPS: Final = "footprint.maps"
"""JSON list of ``{id, memberIds, toolNames, nonParkable?}``: the mounted plan."""
F_RENEWAL_GRACE: Final = "footprint.renewal_grace"
F_ENFORCED: Final = "footprint.enforced"
"""On maps.mounted: true when the agent applies the kernel itself (verify mode), false for shadow."""
F_CHARS: Final = "footprint.chars"
"""On context.injected: the characters this row put into the slot (what riding costs)."""
F_STATE: Final = "footprint.state"
F_PAUSED_WITH: Final = "footprint.paused_with"
F_ITERATION: Final = "footprint.iteration"
F_ACTIVE_IDS: Final = "footprint.active_ids"
F_SKIPPED_DETAILS: Final = "footprint.skipped_details"
F_CURSOR_MOVE: Final = "footprint.cursor_move"
"""JSON ``{from?, to?, by, witness?{text, keyword?}, ...}``: the pass's cursor move."""
F_ROUTING: Final = "footprint.routing"
F_SLOT: Final = "footprint.slot"
F_SOURCE: Final = "footprint.source"
F_SOURCE_ID: Final = "footprint.source_id"
F_CONTENT_HASH: Final = "footprint.content_hash"
F_SOURCE_BREAKDOWN: Final = "footprint.source_breakdown"
F_BY: Final = "footprint.by"
F_TO: Final = "footprint.to"
F_SKILL_ID: Final = "footprint.skill_id"
F_HOP: Final = "footprint.hop"
F_REQUESTED_ID: Final = "footprint.requested_id"
F_CAPABILITY: Final = "footprint.capability"
F_TARGET: Final = "footprint.target"
F_RESULT: Final = "footprint.result"

JSON_FIELDS: Final = frozenset(
    {
        # payload fields (snake_case) that are objects or lists of objects upstream
        "maps",
        "cursor_move",
        "skipped_details",
        "routing",
        "skill_catalog",
        "trigger_kind_counts",
        "source_breakdown",
        "budget",
        "dropped_summaries",
        "scores",
        "runner_up",
        "witness",
        "policy",
        "window",
        "dropped_resume",
        "decider",
        "offered",
        "llm",
        "memories",
        "skill_graph",
        "evidence_gate",
        "artifacts",
        "recipes",
        "nodes",
        "edges",
        "stopped_early",
        "question_payload",
        "resume_input",
        "checked",
        "not_checked",
        "cannot_cover",
        "state",
        "paused_with",
        "rows",
        "usage",
        "args",
    }
)
"""Payload fields whose attribute value is a JSON string and is decoded on read."""

# ---------------------------------------------------------------------------------------------
# Span recognition (read): GenAI, OpenInference, OpenLLMetry
# ---------------------------------------------------------------------------------------------

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"

OP_INVOKE_AGENT: Final = "invoke_agent"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_CHAT: Final = "chat"
MODEL_CALL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})

OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OI_KIND_LLM: Final = "LLM"
OI_KIND_TOOL: Final = "TOOL"
OI_KIND_AGENT: Final = "AGENT"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_CALL_ID: Final = "tool_call.id"
OI_SESSION_ID: Final = "session.id"
OI_PROJECT_NAME: Final = "openinference.project.name"

TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TL_KIND_AGENT: Final = "agent"
TL_KIND_TOOL: Final = "tool"
LLM_REQUEST_TYPE: Final = "llm.request.type"
LLM_REQUEST_TYPE_MODEL_CALLS: Final = frozenset({"chat", "completion"})
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"

# The Vercel AI SDK (`ai`, `experimental_telemetry`; attribute shapes of versions 4 to 6): every span
# it makes names its operation in `ai.operationId` (its model-call spans carry no
# `gen_ai.operation.name`).
AI_SDK_OPERATION_ID: Final = "ai.operationId"
AI_SDK_RUN_OPERATIONS: Final = frozenset(
    {"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"}
)
AI_SDK_MODEL_CALL_OPERATIONS: Final = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
AI_SDK_OP_TOOL_CALL: Final = "ai.toolCall"
AI_SDK_TOOL_CALL_NAME: Final = "ai.toolCall.name"
AI_SDK_TOOL_CALL_ID: Final = "ai.toolCall.id"
AI_SDK_TOOL_CALL_ARGS: Final = "ai.toolCall.args"
AI_SDK_TOOL_CALL_RESULT: Final = "ai.toolCall.result"
AI_SDK_PROMPT_MESSAGES: Final = "ai.prompt.messages"
AI_SDK_PROMPT_TOOLS: Final = "ai.prompt.tools"
AI_SDK_RESPONSE_TOOL_CALLS: Final = "ai.response.toolCalls"
AI_SDK_RESPONSE_TEXT: Final = "ai.response.text"

# ---------------------------------------------------------------------------------------------
# Integrations (read): what existing instrumentations put on model-call and tool spans, and the
# recorder's own problem event. docs/schema.md "Recognition by library" lists them per library.
# ---------------------------------------------------------------------------------------------

T_RECORD_PROBLEM: Final = "record.problem"
"""Input event on the run span: the recorder could not place a pass (``footprint.code``,
``footprint.message``, ``footprint.iteration``: that pass and the ones after stay undecided)."""
EV_RECORD_PROBLEM: Final = PREFIX + T_RECORD_PROBLEM
F_CODE: Final = "footprint.code"
F_MESSAGE: Final = "footprint.message"

GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
"""JSON list of output messages, each ``{role, parts: [{type: "tool_call", id, name, arguments}
...], finish_reason}`` (GenAI >= 1.37; OpenLLMetry >= 0.5; openai-v2 with content capture)."""
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
"""JSON list of the tools offered to the model (``{type, name, description, parameters}``)."""
GEN_AI_SKILL_NAME: Final = "gen_ai.skill.name"
"""On an ``execute_tool`` span that loads a skill (semantic-conventions-genai PR #498): the skill."""
GEN_AI_SKILL_PREFIX: Final = "gen_ai.skill."
TOOL_CALL_FINISH_REASONS: Final = frozenset(
    {"tool_calls", "tool_call", "function_call", "tool-calls"}
)
"""Finish reasons that say the model asked for tools (OpenAI; OpenLLMetry writes ``tool_call``, the
Vercel AI SDK ``tool-calls``)."""
OI_OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."
"""OpenInference: ``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.function.name`` ..."""
OI_TOOLS_PREFIX: Final = "llm.tools."
OI_FINISH_REASON: Final = "llm.finish_reason"
OI_OUTPUT_VALUE: Final = "output.value"
OI_INPUT_VALUE: Final = "input.value"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TOOL_ARGUMENT_KEYS: Final = (
    "gen_ai.tool.call.arguments",
    OI_INPUT_VALUE,
    TRACELOOP_ENTITY_INPUT,
    AI_SDK_TOOL_CALL_ARGS,
)
"""A tool span's arguments: GenAI, then OpenInference, OpenLLMetry, the Vercel AI SDK (first present
wins)."""
TOOL_RESULT_KEYS: Final = (
    "gen_ai.tool.call.result",
    OI_OUTPUT_VALUE,
    TRACELOOP_ENTITY_OUTPUT,
    AI_SDK_TOOL_CALL_RESULT,
)
"""A tool span's result: GenAI, then OpenInference, OpenLLMetry, the Vercel AI SDK (first present
wins; the AI SDK's is the result JSON-encoded, read decoded once)."""
OI_KIND_CHAIN: Final = "CHAIN"
LEGACY_COMPLETION_PREFIXES: Final = ("gen_ai.completion.", "llm.completions.")
"""Older OpenLLMetry: ``gen_ai.completion.{i}.tool_calls.{j}.name`` / ``.arguments`` / ``.id``."""

READ_SKILL_TOOL: Final = "read_skill"
"""The upstream's skill-pick tool: its ``id`` argument is a pick when no refusal follows."""

# Log records carrying events (OpenTelemetry is moving span events to logs).
LOG_EVENT_NAME_ATTR: Final = "event.name"
"""Older log bridges put the event name in this attribute instead of ``LogRecord.event_name``."""

# ---------------------------------------------------------------------------------------------
# Integrity checks (issue 17): what the model was offered, and what it acted on
#
# Read first from the conventions (the frame, the offered tools, the calls chosen); the footprint
# input events below carry only what no convention does. Output names: the footprint.integrity.*
# attributes and events the processor writes (docs/schema.md, "Integrity").
# ---------------------------------------------------------------------------------------------

# Conventions read besides the ones above (GEN_AI_TOOL_DEFINITIONS, GEN_AI_OUTPUT_MESSAGES,
# OI_TOOLS_PREFIX, OI_OUTPUT_MESSAGES_PREFIX, OI_INPUT_VALUE): the frame each model call was shown.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
# OI_INPUT_VALUE (above): the request as recorded; read for its ``tools`` when the span has no
# ``llm.tools.*`` (a request without tools then offered none).
OI_INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
"""OpenInference: ``llm.input_messages.{i}.message.role`` / ``.content`` / ``.tool_calls.{j}...``."""
# OpenLLMetry (legacy indexed attributes; 0.5+ writes the GenAI JSON ones)
TL_PROMPT_PREFIX: Final = "gen_ai.prompt."
TL_COMPLETION_PREFIX: Final = "gen_ai.completion."
TL_FUNCTIONS_PREFIX: Final = "llm.request.functions."

# Input events (agent side) where no convention carries the fact
T_TOOL_DECLARED: Final = "tool.declared"
"""Run span, once per tool: ``toolName``, ``argumentsFrom`` (tool names whose results ground its
arguments), ``resultColumns`` (JSON: column -> type or {type, nullable})."""
T_INTEGRITY_CONFIG: Final = "integrity.config"
"""Run span: ``posture``, ``noticeEmptyLookups``, ``checkColumnTypes`` (off / warn / enforce)."""
T_EXTERNAL_GROUND: Final = "integrity.external_ground"
"""Pass span (or run span with ``iteration``): a value the app vouches for, ``value`` + ``source``."""
T_WIRE_MANIFEST: Final = "wire.manifest"
"""Pass span: ``toolNames`` the provider adapter read back from the serialized request body."""
T_WINDOW_COMPACTED: Final = "window.compacted"
"""Pass span: ``droppedObservations`` (tool names whose results left the window before this call)."""
T_TOOL_RESULT_SHAPE: Final = "tool.result_shape"
"""Tool span: the tool's raw return as ``shape`` (rowset / absence / bespoke) and ``rows``."""
T_CONTEXT_ERROR: Final = "integrity.context_error"
"""The agent's own integrity finding (verify mode): ``kind``, ``seam``, ``subjects`` ("kind:id"),
``predicate``, ``iteration``, ``advisory``, ``message``."""
T_EXTERNAL_GROUND_USED: Final = "integrity.external_ground_used"
T_EVIDENCE_GROUNDING: Final = "evidence.grounding"
"""Run span, per final answer: the evidence gate's reading of where the answer's values came from
(``fromThisTurn``, ``fromPriorTurns``, ``latestPriorTurn``, ``currentTurn``,
``toolResultsThisTurn``, ``indexTruncated``): the prior-turn-evidence check's input."""
T_CLAIMS_DECLARED: Final = "claims.declared"
"""Run span, once per claim: ``answerField`` (a dot path into the typed answer) claims
``field`` of ``entity`` (the unsupported-claim check's contract)."""
T_SEMANTICS_DECLARED: Final = "tools.semantics_declared"
"""Tool span (the upstream's event): ``semantics`` (JSON ``{facts: [{entity, <field>: value, ...}],
series: [{entity, metric, value, t?}], provenance: {measured_at?}}``), the facts the tool settled."""

EV_TOOL_DECLARED: Final = PREFIX + T_TOOL_DECLARED
EV_INTEGRITY_CONFIG: Final = PREFIX + T_INTEGRITY_CONFIG
EV_EXTERNAL_GROUND: Final = PREFIX + T_EXTERNAL_GROUND
EV_WIRE_MANIFEST: Final = PREFIX + T_WIRE_MANIFEST
EV_WINDOW_COMPACTED: Final = PREFIX + T_WINDOW_COMPACTED
EV_TOOL_RESULT_SHAPE: Final = PREFIX + T_TOOL_RESULT_SHAPE
EV_CONTEXT_ERROR: Final = PREFIX + T_CONTEXT_ERROR
EV_CLAIMS_DECLARED: Final = PREFIX + T_CLAIMS_DECLARED
EV_EVIDENCE_GROUNDING: Final = PREFIX + T_EVIDENCE_GROUNDING
EV_SEMANTICS_DECLARED: Final = PREFIX + T_SEMANTICS_DECLARED

F_ARGUMENTS_FROM: Final = "footprint.arguments_from"
F_RESULT_COLUMNS: Final = "footprint.result_columns"
F_POSTURE: Final = "footprint.posture"
F_NOTICE_EMPTY_LOOKUPS: Final = "footprint.notice_empty_lookups"
F_CHECK_COLUMN_TYPES: Final = "footprint.check_column_types"
F_NOTICE_PRIOR_TURN_EVIDENCE: Final = "footprint.notice_prior_turn_evidence"
F_FROM_THIS_TURN: Final = "footprint.from_this_turn"
F_FROM_PRIOR_TURNS: Final = "footprint.from_prior_turns"
F_LATEST_PRIOR_TURN: Final = "footprint.latest_prior_turn"
F_CURRENT_TURN: Final = "footprint.current_turn"
F_TOOL_RESULTS_THIS_TURN: Final = "footprint.tool_results_this_turn"
F_INDEX_TRUNCATED: Final = "footprint.index_truncated"
F_VALUE: Final = "footprint.value"
F_TOOL_NAMES: Final = "footprint.tool_names"
F_DROPPED_OBSERVATIONS: Final = "footprint.dropped_observations"
F_SHAPE: Final = "footprint.shape"
F_ROWS: Final = "footprint.rows"
F_KIND: Final = "footprint.kind"
F_SEAM: Final = "footprint.seam"
F_SUBJECTS: Final = "footprint.subjects"
F_PREDICATE: Final = "footprint.predicate"
F_ADVISORY: Final = "footprint.advisory"
F_ANSWER_FIELD: Final = "footprint.answer_field"
F_ENTITY: Final = "footprint.entity"
F_FIELD: Final = "footprint.field"
F_SEMANTICS: Final = "footprint.semantics"

# Output (processor side): on the run span
INTEGRITY_STATE: Final = "footprint.integrity.state"
"""Worst row state: fail > unreachable > pass > not-applicable."""
INTEGRITY_FINDINGS: Final = "footprint.integrity.findings"
"""Findings that are contradictions (advisories are counted apart); on run and pass spans."""
INTEGRITY_ADVISORIES: Final = "footprint.integrity.advisories"
INTEGRITY_KINDS: Final = "footprint.integrity.kinds"
INTEGRITY_UNREACHABLE: Final = "footprint.integrity.unreachable"
"""Rows that could not be judged for want of evidence (string array of ``check@seam``)."""
INTEGRITY_SUMMARY: Final = "footprint.integrity.summary"
INTEGRITY_MISMATCH: Final = "footprint.integrity.mismatch"
"""Verify mode: the agent's own findings or rows differ from the ones re-derived here."""
INTEGRITY_ALARMS: Final = "footprint.integrity.alarms"
"""Dev posture only (string array): a check that missed its canary, or was armed and judged
nothing in a run that did work — about the checker, not the run."""
_INTEGRITY_ROW_PREFIX: Final = "footprint.integrity.row."
"""+ ``<check>.<seam>`` with underscores: the row's state (pass / fail / unreachable /
not-applicable); every such name is a ``ROW_*`` constant below."""
# Output events
EV_INTEGRITY_FINDING: Final = "footprint.integrity.finding"
EV_INTEGRITY_MISMATCH: Final = "footprint.integrity.mismatch"
EV_INTEGRITY_GROUND_USED: Final = "footprint.integrity.ground_used"
IF_KIND: Final = "footprint.integrity.kind"
IF_SEAM: Final = "footprint.integrity.seam"
IF_SUBJECTS: Final = "footprint.integrity.subjects"
IF_PREDICATE: Final = "footprint.integrity.predicate"
IF_ADVISORY: Final = "footprint.integrity.advisory"
IF_ITERATION: Final = "footprint.integrity.iteration"
IF_MESSAGE: Final = "footprint.integrity.message"
IF_EVIDENCE: Final = "footprint.integrity.evidence"
"""Rendered pointers: ``<trace>/<span>[#<event>[i]][@<attribute>][/<message index>...]``."""
IF_REPORTED: Final = "footprint.integrity.reported_only"
IF_DERIVED: Final = "footprint.integrity.derived_only"
IF_VALUE: Final = "footprint.integrity.value"
IF_SOURCE: Final = "footprint.integrity.source"
IF_PATH: Final = "footprint.integrity.path"
INTEGRITY_OUTPUT_EVENTS: Final = frozenset(
    {EV_INTEGRITY_FINDING, EV_INTEGRITY_MISMATCH, EV_INTEGRITY_GROUND_USED}
)


INTEGRITY_ROWS: Final = (
    ("invariant-violation", "wire"),
    ("invariant-violation", "compose"),
    ("dangling-reference", "compose"),
    ("unsupported-argument", "choice"),
    ("unsupported-claim", "claim"),
    ("empty-lookup", "write"),
    ("column-type-mismatch", "write"),
    ("missing-column", "write"),
    ("prior-turn-evidence", "claim"),
)
"""Every integrity row (check, seam), in the order they are written."""
# The run-span attribute of each row's state (integrity_row_attribute of the row).
ROW_INVARIANT_VIOLATION_WIRE: Final = "footprint.integrity.row.invariant_violation.wire"
ROW_INVARIANT_VIOLATION_COMPOSE: Final = "footprint.integrity.row.invariant_violation.compose"
ROW_DANGLING_REFERENCE_COMPOSE: Final = "footprint.integrity.row.dangling_reference.compose"
ROW_UNSUPPORTED_ARGUMENT_CHOICE: Final = "footprint.integrity.row.unsupported_argument.choice"
ROW_UNSUPPORTED_CLAIM_CLAIM: Final = "footprint.integrity.row.unsupported_claim.claim"
ROW_EMPTY_LOOKUP_WRITE: Final = "footprint.integrity.row.empty_lookup.write"
ROW_COLUMN_TYPE_MISMATCH_WRITE: Final = "footprint.integrity.row.column_type_mismatch.write"
ROW_MISSING_COLUMN_WRITE: Final = "footprint.integrity.row.missing_column.write"
ROW_PRIOR_TURN_EVIDENCE_CLAIM: Final = "footprint.integrity.row.prior_turn_evidence.claim"


def integrity_evaluation_name(check: str, seam: str) -> str:
    """``gen_ai.evaluation.name`` of an integrity row: ``footprint.integrity.<check>@<seam>``."""
    return f"{PREFIX}integrity.{check}@{seam}"


def integrity_row_attribute(check: str, seam: str) -> str:
    """The run-span attribute of a row's state: ``footprint.integrity.row.<check>.<seam>``."""
    return _INTEGRITY_ROW_PREFIX + f"{check}.{seam}".replace("-", "_")


INTEGRITY_EVALUATION_NAMES: Final = frozenset(
    integrity_evaluation_name(check, seam) for check, seam in INTEGRITY_ROWS
)


# ---------------------------------------------------------------------------------------------
# Output annotations (processor side) — contract of design/architecture.md
# ---------------------------------------------------------------------------------------------

# On each pass span
ENG_ENGAGED_MAPS: Final = "footprint.engagement.engaged_maps"
ENG_PARKED_MAPS: Final = "footprint.engagement.parked_maps"
ENG_PARKED_INJECTION_IDS: Final = "footprint.engagement.parked_injection_ids"
ENG_PARKED_TOOL_NAMES: Final = "footprint.engagement.parked_tool_names"
ENG_SERVED_WHILE_PARKED: Final = "footprint.engagement.served_while_parked"
ENG_MISMATCH: Final = "footprint.engagement.mismatch"

EV_ENGAGEMENT_ENGAGED: Final = "footprint.engagement.engaged"
EV_ENGAGEMENT_PARKED: Final = "footprint.engagement.parked"
EV_ENGAGEMENT_MISMATCH: Final = "footprint.engagement.mismatch"

CH_MAP_ID: Final = "footprint.map.id"
CH_BY: Final = "footprint.engagement.by"
CH_IDLE_CALLS: Final = "footprint.engagement.idle_calls"
CH_WITNESS: Final = "footprint.engagement.witness"
CH_REENGAGED: Final = "footprint.engagement.reengaged"
CH_UPGRADED: Final = "footprint.engagement.upgraded"
CH_TENANT_CHANGED: Final = "footprint.engagement.tenant_changed"
CH_AT: Final = "footprint.engagement.at"
CH_FOUNDED_BY: Final = "footprint.engagement.founded_by"
CH_ITERATION: Final = "footprint.engagement.iteration"

MISMATCH_REPORTED: Final = "footprint.mismatch.reported"
MISMATCH_DERIVED: Final = "footprint.mismatch.derived"

# On the run span
RUN_PASSES: Final = "footprint.run.passes"
RUN_PARKED_MAPS: Final = "footprint.run.parked_maps"
RUN_COMPLETE: Final = "footprint.run.complete"
RUN_MODE: Final = "footprint.run.mode"
RUN_REASONS: Final = "footprint.run.reasons"
"""Why a run could not be (fully) annotated: short reason codes, e.g. ``no-plan``, ``overflow``."""
RUN_FINDINGS: Final = "footprint.run.findings"
"""On the run span: how many findings beyond the upstream's own rules the engine made (int); each
finding rides a ``footprint.run.finding`` event with its sentence."""
EV_RUN_FINDING: Final = "footprint.run.finding"
FINDING_TEXT: Final = "footprint.finding.text"
RUN_RESUMED: Final = "footprint.run.resumed"
SAVINGS_CHARS: Final = "footprint.savings.chars"
"""On the run span of an enforce-mode run (``record.run(..., policy=True)``), written by the
recorder: characters of injections and tool definitions the agent left out of its model calls
because the live policy parked their map (int)."""
SAVINGS_PREDICTED_CHARS: Final = "footprint.savings.predicted_chars"
"""Of ``footprint.savings.chars``, the parked maps' injections: what shadow mode's riding finding
would have counted for the same run (int)."""
SAVINGS_PASSES: Final = "footprint.savings.passes"
"""How many model calls of the enforce-mode run something was left out of (int)."""

# On the run span, shadow mode: what kept riding after the kernel would have parked it (the roll-up
# of the pass spans' served_while_parked; the total characters are RUN_SERVED_CHARS_WHILE_PARKED).
RUN_SERVED_PASSES_WHILE_PARKED: Final = "footprint.run.served_passes_while_parked"
"""Passes on which some parked injection still rode (int)."""
RUN_SERVED_WHILE_PARKED: Final = "footprint.run.served_while_parked"
"""The injection ids that rode while parked, first-rode order (string array)."""
RUN_SERVED_WHILE_PARKED_MAPS: Final = "footprint.run.served_while_parked_maps"
"""The maps whose injections rode while parked, plan order (string array)."""
RUN_SERVED_CHARS_WHILE_PARKED_BY_MAP: Final = "footprint.run.served_chars_while_parked_by_map"
"""Characters per map, aligned with RUN_SERVED_WHILE_PARKED_MAPS (int array)."""

MODE_VERIFY: Final = "verify"
MODE_SHADOW: Final = "shadow"
MODE_OBSERVED: Final = "observed"
"""An observed run: read from the instrumentation's spans alone, no recorder input (no kernel)."""

CHECK_DECIDED_DELIVERED: Final = "footprint.check.decided_delivered"
CHECK_DECIDED_DELIVERED_OUTCOME: Final = "footprint.check.decided_delivered.outcome"
CHECK_EXISTENCE: Final = "footprint.check.existence"
CHECK_EMPTY_RESULTS: Final = "footprint.check.empty_results"
SIGNALS: Final = "footprint.signals"
SUMMARY: Final = "footprint.summary"
SUMMARY_TONE: Final = "footprint.summary.tone"

EV_ACCOUNT_LINE: Final = "footprint.account.line"
OUTPUT_EVENTS: Final = frozenset(
    {
        EV_ENGAGEMENT_ENGAGED,
        EV_ENGAGEMENT_PARKED,
        EV_ENGAGEMENT_MISMATCH,
        EV_RUN_FINDING,
        EV_ACCOUNT_LINE,
        *INTEGRITY_OUTPUT_EVENTS,
    }
)
"""The ``footprint.*`` events the processor writes: never read back as agent input."""
LINE_ROW: Final = "footprint.line.row"
LINE_TEMPLATE: Final = "footprint.line.template"
LINE_TEXT: Final = "footprint.line.text"
LINE_STATUS: Final = "footprint.line.status"
LINE_POINTERS: Final = "footprint.line.pointers"
LINE_CHIPS: Final = "footprint.line.chips"
LINK_EVIDENCE: Final = "footprint.evidence"
"""Attribute on a span link: which claim (check id or line template) the linked span backs."""

# Standard evaluation event (GenAI semconv >= 1.38)
EV_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
EVAL_NAME: Final = "gen_ai.evaluation.name"
EVAL_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVAL_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVAL_EXPLANATION: Final = "gen_ai.evaluation.explanation"

# Check ids (the account's vocabulary) and how they appear as attributes.
CHECK_IDS: Final = ("decided-delivered", "existence", "empty-results")
CHECK_ATTRIBUTE: Final = {
    "decided-delivered": CHECK_DECIDED_DELIVERED,
    "existence": CHECK_EXISTENCE,
    "empty-results": CHECK_EMPTY_RESULTS,
}


def evaluation_name(check_id: str) -> str:
    """``gen_ai.evaluation.name`` of a check: ``footprint.<check id>``."""
    return PREFIX + check_id


def event_type_of(name: str) -> str | None:
    """The upstream event type (``context.evaluated``) of an event name, or None if not ours.

    Accepts ``footprint.`` and the upstream ``agentfootprint.`` prefix as aliases.
    """
    if name.startswith(UPSTREAM_PREFIX):
        return name[len(UPSTREAM_PREFIX) :]
    if name.startswith(PREFIX):
        return name[len(PREFIX) :]
    return None


def event_name_of(event_type: str) -> str:
    """Our event name for an upstream type (``context.evaluated`` -> ``footprint.context.evaluated``)."""
    return PREFIX + event_type


def all_names() -> dict[str, str]:
    """Every public name constant in this module, by constant name (for docs and other languages)."""
    return {
        key: value
        for key, value in globals().items()
        if key.isupper() and isinstance(value, str) and not key.startswith("_")
    }


# ---------------------------------------------------------------------------------------------
# Added by helper-6 (annotate/ + sdk/): annotation bookkeeping; the self-metrics of both paths
# ---------------------------------------------------------------------------------------------

ENG_SERVED_CHARS_WHILE_PARKED: Final = "footprint.engagement.served_chars_while_parked"
"""On a pass span (shadow mode): characters of the parked injections that still rode this pass."""
RUN_SERVED_CHARS_WHILE_PARKED: Final = "footprint.run.served_chars_while_parked"
"""On the run span (shadow mode): what riding while parked cost over the whole run, in characters."""
ANNOTATION_DROPPED_EVENTS: Final = "footprint.annotation.dropped_events"
"""On a span whose annotation events were cut by the per-span event cap: how many were left off."""
ANNOTATION_DROPPED_LINKS: Final = "footprint.annotation.dropped_links"
"""On the run span when evidence links were cut by the link cap: how many were left off."""

METRIC_PROCESSOR_SPANS: Final = "footprint.processor.spans"
METRIC_PROCESSOR_RUNS: Final = "footprint.processor.runs"
METRIC_PROCESSOR_HELD_RUNS: Final = "footprint.processor.held_runs"
METRIC_PROCESSOR_HELD_SPANS: Final = "footprint.processor.held_spans"
METRIC_ATTR_COMPONENT: Final = "footprint.component"
"""Metric attribute: which buffer the measurement is of (``span_processor`` / ``otlp_exporter``)."""
METRIC_ATTR_OUTCOME: Final = "footprint.outcome"
"""Metric attribute: what happened to a span or run (``passed``, ``annotated``, ``overflow``, ...)."""
METRIC_VERDICT_RUNS: Final = "footprint.verdict.runs"
METRIC_VERDICT_INTEGRITY_FINDINGS: Final = "footprint.verdict.integrity.findings"
METRIC_VERDICT_SERVED_CHARS: Final = "footprint.verdict.served.chars.while.parked"
METRIC_VERDICT_SERVED_CALLS: Final = "footprint.verdict.served.calls.while.parked"
METRIC_VERDICT_NAMES_FOLDED: Final = "footprint.verdict.names.folded"
METRIC_ATTR_CHECK_1: Final = "footprint.check.decided_delivered.result"
"""Metric attribute: check 1 of a decided run as one word: ``pass``, ``fail`` (reachable, by its
label), ``unreachable``, ``not-applicable``, or ``not-run`` (no account)."""
METRIC_ATTR_INTEGRITY_CHECK: Final = "footprint.integrity.check"
"""Metric attribute: the integrity row a finding belongs to, ``<kind>@<seam>``."""
METRIC_ATTR_NAME_KIND: Final = "footprint.name.kind"
"""Metric attribute of ``footprint.verdict.names.folded``: which label was folded (``agent``, ``map``)."""
METRIC_OTHER: Final = "_other"
"""The one value every agent or map name past the cap is folded into (verdict metrics)."""


@dataclass(frozen=True, slots=True)
class Metric:
    """A self-metric, declared once for the OpenTelemetry metrics API of both delivery paths.

    The in-process path observes the ``PROCESSOR_*`` rows on the application's MeterProvider; the
    hop (``service/metrics.py``) registers the ``HOP_*`` rows on its own, exported as OTLP under
    ``name`` and as Prometheus text by the OpenTelemetry exporter's rule: dots become underscores,
    a counter gains ``_total``, and a unit gains its name (``s`` -> ``_seconds``) unless the name
    already ends with it.
    """

    name: str
    kind: Literal["counter", "gauge", "histogram"]
    unit: str
    attributes: tuple[str, ...]
    description: str
    buckets: tuple[float, ...] | None = None
    """A histogram's explicit bucket bounds (an advisory the SDK applies)."""


_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_DELAY = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0)
_OUTCOME = (METRIC_ATTR_COMPONENT, METRIC_ATTR_OUTCOME)
_COMPONENT = (METRIC_ATTR_COMPONENT,)

# One row per instrument: name, kind, unit, attribute keys, description (, histogram buckets).
# fmt: off
PROCESSOR_SPANS: Final = Metric(METRIC_PROCESSOR_SPANS, "counter", "{span}", _OUTCOME, "Spans seen by the in-process processor, by footprint.outcome.")
PROCESSOR_RUNS: Final = Metric(METRIC_PROCESSOR_RUNS, "counter", "{run}", _OUTCOME, "Runs released by the in-process processor, by footprint.outcome.")
PROCESSOR_HELD_RUNS: Final = Metric(METRIC_PROCESSOR_HELD_RUNS, "gauge", "{run}", _COMPONENT, "Runs held in memory waiting for their run span (plus grace).")
PROCESSOR_HELD_SPANS: Final = Metric(METRIC_PROCESSOR_HELD_SPANS, "gauge", "{span}", _COMPONENT, "Spans held in memory across all held runs.")

_VERDICT_RUN = (GEN_AI_AGENT_NAME, RUN_MODE, SUMMARY_TONE, METRIC_ATTR_CHECK_1)
_AGENT_MAP = (GEN_AI_AGENT_NAME, CH_MAP_ID)
VERDICT_RUNS: Final = Metric(METRIC_VERDICT_RUNS, "counter", "{run}", _VERDICT_RUN, "Run legs decided, by agent (gen_ai.agent.name), mode, summary tone and check 1's result.")
VERDICT_INTEGRITY_FINDINGS: Final = Metric(METRIC_VERDICT_INTEGRITY_FINDINGS, "counter", "{finding}", (GEN_AI_AGENT_NAME, METRIC_ATTR_INTEGRITY_CHECK), "Integrity findings (contradictions and advisories) of decided runs, by agent and row (kind@seam).")
VERDICT_SERVED_CHARS_WHILE_PARKED: Final = Metric(METRIC_VERDICT_SERVED_CHARS, "counter", "{char}", _AGENT_MAP, "Shadow mode: characters that rode after the kernel would have parked their map, by agent and map.")
VERDICT_SERVED_CALLS_WHILE_PARKED: Final = Metric(METRIC_VERDICT_SERVED_CALLS, "counter", "{call}", _AGENT_MAP, "Shadow mode: model calls on which some injection of a parked map still rode, by agent and map.")
VERDICT_NAMES_FOLDED: Final = Metric(METRIC_VERDICT_NAMES_FOLDED, "counter", "{value}", (METRIC_ATTR_NAME_KIND,), "Verdict-metric values counted under _other because the cap on distinct agent or map names was reached.")
VERDICT_METRICS: Final = (VERDICT_RUNS, VERDICT_INTEGRITY_FINDINGS, VERDICT_SERVED_CHARS_WHILE_PARKED, VERDICT_SERVED_CALLS_WHILE_PARKED, VERDICT_NAMES_FOLDED)

HOP_SPANS_RECEIVED: Final = Metric("otel_footprint.spans.received", "counter", "{span}", ("transport",), "Spans accepted by a receiver.")
HOP_LOG_RECORDS_RECEIVED: Final = Metric("otel_footprint.log.records.received", "counter", "{record}", ("transport",), "Log records accepted by a receiver.")
HOP_REQUESTS_REJECTED: Final = Metric("otel_footprint.requests.rejected", "counter", "{request}", ("transport", "reason"), "Export requests refused, by reason.")
HOP_SPANS_PASSED_THROUGH: Final = Metric("otel_footprint.spans.passed.through", "counter", "{span}", (), "Spans forwarded at once (they belong to no agent run).")
HOP_SPANS_ANNOTATED: Final = Metric("otel_footprint.spans.annotated", "counter", "{span}", (), "Spans that received annotations.")
HOP_LATE_SPANS: Final = Metric("otel_footprint.late.spans", "counter", "{span}", (), "Spans of an already-decided run, annotated from the decision cache.")
HOP_SPANS_QUEUED: Final = Metric("otel_footprint.spans.queued", "counter", "{span}", (), "Spans written to the disk queue for forwarding.")
HOP_SPANS_FORWARDED: Final = Metric("otel_footprint.spans.forwarded", "counter", "{span}", (), "Spans accepted by the next hop.")
HOP_LOG_RECORDS_FORWARDED: Final = Metric("otel_footprint.log.records.forwarded", "counter", "{record}", (), "Log records accepted by the next hop.")
HOP_FORWARD_RETRIES: Final = Metric("otel_footprint.forward.retries", "counter", "{attempt}", (), "Forward attempts that will be retried.")
HOP_FORWARD_FAILED: Final = Metric("otel_footprint.forward.failed", "counter", "{batch}", ("signal",), "Batches the next hop refused permanently (not retried).")
HOP_FORWARD_SPLITS: Final = Metric("otel_footprint.forward.splits", "counter", "{request}", (), "Requests split because they exceeded the forward request size.")
HOP_DEAD_LETTERED: Final = Metric("otel_footprint.dead.lettered", "counter", "{record}", ("signal",), "Spans or log records the next hop can never take, set aside in the dead-letter file.")
HOP_DEAD_LETTER_DROPPED: Final = Metric("otel_footprint.dead.letter.dropped", "counter", "{record}", ("signal",), "Spans or log records that could not be delivered and found the dead-letter file full.")
HOP_SPANS_REJECTED_DOWNSTREAM: Final = Metric("otel_footprint.spans.rejected.downstream", "counter", "{span}", (), "Spans the next hop reported as rejected (partial success).")
HOP_RUNS_RELEASED: Final = Metric("otel_footprint.runs.released", "counter", "{run}", ("cause",), "Runs released from the buffer, by cause.")
HOP_RUNS_RELEASED_TIMEOUT: Final = Metric("otel_footprint.runs.released.timeout", "counter", "{run}", (), "Runs released because the wait bound passed (complete=false).")
HOP_RUNS_RELEASED_OVERFLOW: Final = Metric("otel_footprint.runs.released.overflow", "counter", "{run}", ("limit",), "Runs released unannotated because a limit was hit.")
HOP_DECISION_ERRORS: Final = Metric("otel_footprint.decision.errors", "counter", "{run}", (), "Runs whose decision raised; forwarded unannotated with the reason.")
HOP_SERVED_CHARS_WHILE_PARKED: Final = Metric("otel_footprint.served.chars.while.parked", "counter", "{char}", (), "Shadow mode: characters that rode after the kernel would have parked them (what parking would have saved), summed over decided runs.")
HOP_SERVED_PASSES_WHILE_PARKED: Final = Metric("otel_footprint.served.passes.while.parked", "counter", "{pass}", (), "Shadow mode: passes on which some parked injection still rode, over decided runs.")
HOP_DECISION_LATENCY: Final = Metric("otel_footprint.decision.latency.seconds", "histogram", "s", (), "Time to decide and annotate one released trace.", _SECONDS)
HOP_RELEASE_DELAY: Final = Metric("otel_footprint.release.delay.seconds", "histogram", "s", (), "From the run span's arrival to its spans being queued for forwarding.", _DELAY)
HOP_RUNS_HELD: Final = Metric("otel_footprint.runs.held", "gauge", "{run}", (), "Runs currently held in the run buffer.")
HOP_SPANS_HELD: Final = Metric("otel_footprint.spans.held", "gauge", "{span}", (), "Spans currently held in the run buffer.")
HOP_BYTES_HELD: Final = Metric("otel_footprint.bytes.held", "gauge", "{byte}", (), "Wire bytes of the spans held in the run buffer.")  # "By" would add _bytes
HOP_MEMORY_BYTES: Final = Metric("otel_footprint.memory.bytes", "gauge", "By", (), "Bytes counted against processing.max_bytes: runs held and releasing, the journal's outbound batches in memory, the verdict log's accounts (refused at 90%).")
HOP_DECISION_CACHE_TRACES: Final = Metric("otel_footprint.decision.cache.traces", "gauge", "{trace}", (), "Decided traces kept in the decision cache (to annotate their late spans).")
HOP_DECISION_CACHE_BYTES: Final = Metric("otel_footprint.decision.cache.bytes", "gauge", "By", (), "Memory the decision cache takes (packed notes and what it keeps of each trace, estimated): at most processing.decision_cache.max_bytes, within what the runs leave of processing.max_bytes.")
HOP_RESIDENT_BYTES: Final = Metric("otel_footprint.resident.bytes", "gauge", "By", (), "The process's resident memory as the memory backstop last read it (VmRSS).")
HOP_MEMORY_LIMIT_BYTES: Final = Metric("otel_footprint.memory.limit.bytes", "gauge", "By", (), "processing.memory_limit (default processing.max_bytes): resident memory past which input is refused.")
HOP_MEMORY_LIMIT_REFUSALS: Final = Metric("otel_footprint.memory.limit.refusals", "counter", "{request}", (), "Requests refused (RESOURCE_EXHAUSTED / 503, with a retry delay) because the process's resident memory was past processing.memory_limit.")
HOP_QUEUE_BYTES: Final = Metric("otel_footprint.queue.bytes", "gauge", "By", (), "Bytes of pending records in the disk journal (held input and outbound).")
HOP_QUEUE_DISK_BYTES: Final = Metric("otel_footprint.queue.disk.bytes", "gauge", "By", (), "Bytes the disk journal's segment files take (pending records plus finished ones not yet reclaimed; compaction keeps it near queue_bytes).")
HOP_QUEUE_BATCHES: Final = Metric("otel_footprint.queue.batches", "gauge", "{batch}", (), "Batches waiting in the disk queue to be forwarded.")
HOP_QUEUE_BLOCKED: Final = Metric("otel_footprint.queue.blocked", "gauge", "{state}", (), "1 while the disk journal cannot write (a full disk, an I/O error): new input is refused and the write retried; the log line says what it waits for.")
HOP_QUEUE_WRITE_FAILURES: Final = Metric("otel_footprint.queue.write.failures", "counter", "{write}", ("error",), "Journal writes, fsyncs and file creations that failed, by error (ENOSPC, EIO, ...); each left the journal as it was.")
HOP_QUEUE_QUARANTINED: Final = Metric("otel_footprint.queue.quarantined", "counter", "{region}", (), "Damaged journal regions found at startup and set aside in <data_dir>/queue/quarantine (their records are lost, nothing else).")
HOP_QUEUE_QUARANTINED_BYTES: Final = Metric("otel_footprint.queue.quarantined.bytes", "counter", "By", (), "Bytes of those damaged regions.")
HOP_PHOENIX_ANNOTATIONS_POSTED: Final = Metric("otel_footprint.phoenix.annotations.posted", "counter", "{annotation}", (), "Check results Phoenix accepted as span annotations.")
HOP_PHOENIX_ANNOTATIONS_FAILED: Final = Metric("otel_footprint.phoenix.annotations.failed", "counter", "{annotation}", (), "Span annotations Phoenix refused, or that could not be delivered after retries.")
HOP_PHOENIX_ANNOTATIONS_DROPPED: Final = Metric("otel_footprint.phoenix.annotations.dropped", "counter", "{annotation}", ("reason",), "Span annotations not attempted: queue full, spans not forwarded, or shutdown.")
HOP_PHOENIX_ANNOTATIONS_PENDING: Final = Metric("otel_footprint.phoenix.annotations.pending", "gauge", "{annotation}", (), "Span annotations waiting for their spans to be forwarded or to be posted.")
# fmt: on


# ---------------------------------------------------------------------------------------------
# Added by helper-4 (record/ + bridges/): payload-field attributes the recorder and the
# agentfootprint importer write, and the upstream events the importer carries by name
# ---------------------------------------------------------------------------------------------

# Upstream event types that arrive as spans (the bridge turns them into pass and tool spans) or
# are upstream-only; they never travel as footprint events.
T_ITERATION_START: Final = "agent.iteration_start"
T_ITERATION_END: Final = "agent.iteration_end"
T_LLM_START: Final = "stream.llm_start"
T_LLM_END: Final = "stream.llm_end"
T_STREAM_TOKEN: Final = "stream.token"
T_TOOL_START: Final = "stream.tool_start"
T_TOOL_END: Final = "stream.tool_end"
T_PERMISSION_HALT: Final = "permission.halt"
T_EVIDENCE_CHECKED: Final = "agent.evidence_checked"
"""The evidence gate's verdict on the answer; its ``lookedUp`` (when an object) is the gate's
reading of where the answer's values came from, the prior-turn-evidence check's input."""
T_EVIDENCE_LOOKED_UP: Final = "evidence.looked_up"
"""The upstream's own event for that reading (``agentfootprint.evidence.looked_up``): the same
fields as ``evidence.grounding``."""
T_ROUTE_DECIDED: Final = "agent.route_decided"
EV_ROUTE_DECIDED: Final = PREFIX + T_ROUTE_DECIDED
"""Carried on the pass span by the importer: the loop's tool-calls / final decision."""
T_TOOLS_REPEATED_CALL: Final = "tools.repeated_call"
EV_TOOLS_REPEATED_CALL: Final = PREFIX + T_TOOLS_REPEATED_CALL
"""Carried on the tool span by the importer: the same call (name + args) was made again."""
T_INTEGRITY_DISPOSITION: Final = "integrity.disposition"
EV_INTEGRITY_DISPOSITION: Final = PREFIX + T_INTEGRITY_DISPOSITION
"""Carried on the run span by the importer: the upstream's integrity summary at the run boundary."""

# Run-level payload fields
F_AGENT_ID: Final = "footprint.agent_id"
F_NODES: Final = "footprint.nodes"
F_EDGES: Final = "footprint.edges"
F_TURN_INDEX: Final = "footprint.turn_index"
F_USER_PROMPT: Final = "footprint.user_prompt"
F_FINAL_CONTENT: Final = "footprint.final_content"
F_ITERATION_COUNT: Final = "footprint.iteration_count"
F_REASON: Final = "footprint.reason"
F_QUESTION_PAYLOAD: Final = "footprint.question_payload"
F_RESUME_INPUT: Final = "footprint.resume_input"
F_PAUSED_DURATION_MS: Final = "footprint.paused_duration_ms"
# skill.turn_routed payload fields
F_FROM: Final = "footprint.from"
F_SCORER: Final = "footprint.scorer"
F_SCORES: Final = "footprint.scores"
F_DECISIVE: Final = "footprint.decisive"
F_WITNESS: Final = "footprint.witness"
"""JSON ``{text, keyword?}`` on turn_routed; plain text (the matched words) on map.* events."""
F_OFFERED: Final = "footprint.offered"
F_RUNNER_UP: Final = "footprint.runner_up"
F_POLICY: Final = "footprint.policy"
F_DECIDER: Final = "footprint.decider"
# context.injected payload fields beyond the ones the engine reads
F_CONTENT_SUMMARY: Final = "footprint.content_summary"
F_RAW_CONTENT: Final = "footprint.raw_content"
# map.engaged / map.parked payload fields (the agent's own kernel, verify mode)
F_MAP_ID: Final = "footprint.map_id"
F_IDLE_CALLS: Final = "footprint.idle_calls"
F_REENGAGED: Final = "footprint.reengaged"
F_UPGRADED: Final = "footprint.upgraded"
F_TENANT_CHANGED: Final = "footprint.tenant_changed"
F_AT: Final = "footprint.at"
F_FOUNDED_BY: Final = "footprint.founded_by"
# skill.rejected / permission.check / tools.* payload fields
F_CURRENT_SKILL_ID: Final = "footprint.current_skill_id"
F_ALLOWED: Final = "footprint.allowed"
F_ACTOR: Final = "footprint.actor"
F_RATIONALE: Final = "footprint.rationale"
F_POLICY_RULE_ID: Final = "footprint.policy_rule_id"
F_TOOL_NAME: Final = "footprint.tool_name"
F_TOOL_CALL_ID: Final = "footprint.tool_call_id"
F_CHECKED: Final = "footprint.checked"
F_NOT_CHECKED: Final = "footprint.not_checked"
F_CANNOT_COVER: Final = "footprint.cannot_cover"

SKILL_MAP_ID: Final = "skill-map"
"""The id of the skill map, the one map the upstream mounts (``.maps()``)."""


# ---------------------------------------------------------------------------------------------
# Added by helper-13 (review pass): upstream vocabulary that several readers and writers share
# ---------------------------------------------------------------------------------------------

MAP_CHANGE_KINDS: Final = {T_MAP_ENGAGED: "engaged", T_MAP_PARKED: "parked"}
"""The agent's own kernel decisions (verify mode): event type -> the change's ``kind`` in the
kernel's change JSON. The event payload is that JSON without ``kind``."""

# Events the importer places on the tool call in flight (the upstream's gate and check-ins).
T_MIDDLEWARE_DECISION: Final = "middleware.decision"
T_CHECKIN_REQUEST: Final = "checkin.request"
T_CHECKIN_DECISION: Final = "checkin.decision"

# permission.check payload values
CAPABILITY_SKILL_READ: Final = "skill_read"
"""``capability`` of a skill read; its ``target`` is ``skill:<id>`` (or the bare id)."""
SKILL_TARGET_PREFIX: Final = "skill:"
CAPABILITY_TOOL_CALL: Final = "tool_call"
"""``capability`` of a tool call; its ``target`` is the tool name."""
PERMISSION_REFUSING_RESULTS: Final = frozenset({"deny", "halt"})
"""``result`` values that refuse what was asked (``allow`` and ``gate_open`` let it through)."""


def _main(argv: list[str]) -> int:
    """``python -m otel_footprint.semconv [--json]``: every name, as TSV or as one JSON object."""
    import argparse  # only for the command line; importing semconv stays cheap

    parser = argparse.ArgumentParser(
        prog="python -m otel_footprint.semconv",
        description="Print every name otel_footprint reads or writes (constant name and value).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of TSV lines")
    args = parser.parse_args(argv)
    if args.json:
        json.dump(all_names(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        for key, value in sorted(all_names().items()):
            sys.stdout.write(f"{key}\t{value}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - a tiny export for non-Python clients
    try:
        raise SystemExit(_main(sys.argv[1:]))
    except BrokenPipeError:  # piped into ``head``: the reader has what it wanted
        sys.stdout = None  # no final flush into the closed pipe
        raise SystemExit(0) from None
