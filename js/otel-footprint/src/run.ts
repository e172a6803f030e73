/**
 * The run: one run leg (the `invoke_agent` span), its passes and tool calls, the hook's entry
 * points, and `run()` / `startRun()`.
 */

import {
  type AttributeValue,
  type Attributes,
  type Context,
  type Span,
  SpanKind,
  type Tracer,
  context as contextApi,
  diag,
  trace,
} from '@opentelemetry/api';

import { type Json, type JsonObject, type Payload, pythonJson } from './codec.js';
import { RUN_CONTEXT_KEY, OWN_SPAN_CONTEXT_KEY, hookCount, type ModelSpanSink } from './context.js';
import { type EmitAs, type LogEmitter, Emitter } from './emitter.js';
import {
  checkColumns,
  type DeclareToolOptions,
  type IntegritySettingsOptions,
  type ContextErrorOptions,
  type EvidenceGrounding,
  type ToolSemanticsOptions,
  type FrameOptions,
} from './integrity.js';
import { type EvaluatedOptions, type InjectedOptions, type ModelCallOptions, ModelCall } from './modelCall.js';
import { DEFAULT_RENEWAL_GRACE, type MountedMap, validatePlan, planJson } from './plan.js';
import { type Decision, LivePolicy, StatedCall } from './policy.js';
import { names } from './semconv.js';
import { SCOPE_NAME, VERSION, now, RECORD_PROBLEM, compact, blank, settle, failSpan } from './support.js';
import { type ToolCallOptions, ToolCall } from './toolCall.js';

/** Span parents a run remembers (the hook's ancestry test); bounded. */
export const MAX_PARENTS = 10_000;

/** Options of {@link Run.routed}. */
export interface RoutedOptions {
  to?: string;
  from?: string;
  scorer?: string;
  scores?: readonly JsonObject[];
  decisive?: boolean;
  witness?: string;
  witnessKeyword?: string;
  offered?: readonly string[];
  deciderModel?: string;
}

/** Options of {@link run} / {@link startRun}. */
export interface RunOptions {
  /** The agent's name (`gen_ai.agent.name`; the run span is `invoke_agent <agent>`). */
  agent: string;
  /** Default: `trace.getTracer('otel_footprint.record')` of the global provider. */
  tracer?: Tracer;
  /** Default: a random id. A resumed leg keeps its run's id. */
  runId?: string;
  maps?: readonly MountedMap[];
  renewalGrace?: number;
  /** True when the agent applies the kernel itself (verify mode); false for shadow. */
  enforced?: boolean;
  /** Enforce mode with the recorder's own kernel (src/policy.ts): `plan()` before each model call. */
  policy?: boolean;
  userPrompt?: string;
  conversationId?: string;
  /** `{nodes, edges}` of the skill graph (`skill.graph_declared`). */
  graph?: JsonObject;
  /** Run configuration (`agent.run_configured`, with `agentId`). */
  configured?: JsonObject;
  /** A leg resumed after a pause (same `runId`; numbering continued with `nextIteration`). */
  resumed?: boolean;
  resumeInput?: Json;
  /** The routing verdict held across the pause (`{turnRoute, entryScores?, entryScorer?}`). */
  held?: JsonObject;
  nextIteration?: number;
  turnIndex?: number;
  emitAs?: EmitAs;
  /** The log record emitter when `emitAs` is `'log'`. */
  logger?: LogEmitter;
}

/** One run leg: the `invoke_agent` span; opens model-call and tool spans under it. */
export class Run implements ModelSpanSink {
  /** The number of the latest model call (0 before the first). */
  iteration: number;
  /** The context of the run (the run span current, the run findable by the hook). */
  readonly context: Context;
  private nextIterationValue: number;
  private counter = 0;
  private pending: ModelCall | undefined;
  private unattachedCount = 0;
  private readonly opened = new Map<ModelCall, { provider: string | undefined; started: number }>();
  private openCalls: Span[] = [];
  private readonly parents = new Map<string, string>();
  private stagedWhile: string | undefined;
  /** @internal The live policy of a run started with `policy: true` (src/policy.ts). */
  policy: LivePolicy | undefined;

  /** @internal use {@link run} or {@link startRun}. */
  constructor(
    private readonly tracer: Tracer,
    readonly span: Span,
    readonly runId: string,
    private readonly emitter: Emitter,
    nextIteration: number,
    private readonly turnIndex: number,
    parent: Context,
  ) {
    this.nextIterationValue = nextIteration;
    this.iteration = nextIteration - 1;
    this.context = trace.setSpan(parent, span).setValue(RUN_CONTEXT_KEY, this);
  }

  /** Write one footprint event on `span` the way this run was configured to. */
  emit(span: Span, eventType: string, payload: Payload, compositionId?: string, time?: number): void {
    this.emitter.emit(span, eventType, payload, compositionId, time);
  }

  /** How this run writes its events. */
  get emitAs(): EmitAs {
    return this.emitter.emitAs;
  }

  /** A run-unique id for one composition of `slot` (shared by its rows). */
  compositionId(slot: string): string {
    this.counter += 1;
    return `${slot}/compose#${this.counter}`;
  }

  // ── the next pass: stated on the run, landed on the next model-call span ─────────────────────

  /**
   * The pass the next model call of this run will be: what is stated on it is staged and lands on
   * the model-call span an instrumentation starts next inside the run (see {@link ModelCall}). The
   * same object until that span starts; the pass number is taken now.
   */
  nextPass(): ModelCall {
    if (this.pending === undefined) {
      const number = this.nextIterationValue;
      this.nextIterationValue = number + 1;
      this.iteration = number;
      this.pending = new ModelCall(this, number);
      const current = contextApi.active().getValue(RUN_CONTEXT_KEY) as Run | undefined;
      this.stagedWhile = current === this ? undefined : (current?.runId ?? 'no run');
    }
    return this.pending;
  }

  /** {@link ModelCall.evaluated} on {@link nextPass} (staged until the model call). */
  evaluated(activeIds: readonly string[] = [], options: EvaluatedOptions = {}): ModelCall {
    const call = this.nextPass();
    call.evaluated(activeIds, options);
    return call;
  }

  /** {@link ModelCall.plan} on {@link nextPass}: what to leave out of the next model call. */
  plan(move: Omit<EvaluatedOptions, 'skipped' | 'routing'> = {}): Decision {
    return this.nextPass().plan(move);
  }

  /** {@link ModelCall.keep} on {@link nextPass}. */
  keep(injectionId: string, size: { content?: string; chars?: number } = {}): boolean {
    return this.nextPass().keep(injectionId, size);
  }

  /** {@link ModelCall.tools} on {@link nextPass}. */
  tools<T extends Readonly<Record<string, unknown>>>(definitions: readonly T[]): T[] {
    return this.nextPass().tools(definitions);
  }

  /** {@link ModelCall.injected} on {@link nextPass} (staged until the model call). */
  injected(slot: string, source: string, options: InjectedOptions = {}): ModelCall {
    const call = this.nextPass();
    call.injected(slot, source, options);
    return call;
  }

  /** {@link ModelCall.composed} on {@link nextPass} (staged until the model call). */
  composed(slot: string): ModelCall {
    const call = this.nextPass();
    call.composed(slot);
    return call;
  }

  /**
   * Say on the run span why part of the run cannot be decided (`record.problem`, when this
   * checkout's semconv has it); with `iteration` that pass and the ones after it stay undecided.
   */
  problem(code: string, message: string, iteration?: number): void {
    if (RECORD_PROBLEM === undefined) {
      diag.warn(`otel-footprint: run ${this.runId}: ${code}: ${message}`);
      return;
    }
    this.emit(this.span, RECORD_PROBLEM, { code, message, iteration });
  }

  /** How many passes were stated but taken by no model call (each also a `record.problem`). */
  get unattached(): number {
    return this.unattachedCount;
  }

  /** @internal True while a stated pass waits for the instrumentation's model-call span. */
  wantsModelSpan(): boolean {
    return this.pending !== undefined;
  }

  /** @internal The hook's record of span parents inside the run (bounded). */
  spanStarted(span: Span, parentSpanId: string | undefined): void {
    if (parentSpanId !== undefined && this.parents.size < MAX_PARENTS) {
      this.parents.set(span.spanContext().spanId, parentSpanId);
    }
  }

  /**
   * @internal The span-start hook's entry: a model-call span started inside this run takes the
   * staged pass, if there is one (else it is no pass: a guard, a router, a summary). A pass taken
   * while another model call of the run that is not an ancestor is still open cannot be told from
   * it: the run says so (`concurrent-model-calls`).
   */
  modelCallStarted(span: Span, parentSpanId: string | undefined): boolean {
    if (span.spanContext().traceId !== this.span.spanContext().traceId) return false;
    this.openCalls = this.openCalls.filter((s) => s.isRecording());
    const ancestors = this.ancestors(parentSpanId);
    const others = this.openCalls.filter((s) => !ancestors.has(s.spanContext().spanId));
    this.openCalls.push(span);
    const call = this.pending;
    if (call === undefined) return false;
    this.pending = undefined;
    call.land(span, true, false);
    call.close();
    if (others.length > 0) {
      this.problem(
        'concurrent-model-calls',
        `pass ${call.iteration} started while ${others.length} other model call(s) of this run were still ` +
          'open: which call its staged events describe cannot be told, so passes from here on are not decided',
        call.iteration,
      );
    }
    return true;
  }

  /**
   * Land the staged pass `call` on `span` directly: for adapters whose framework marks its
   * model-call span only when it ends, so the span-start hook cannot recognise it. False when `call`
   * is no longer staged (another span took it) or `span` has ended.
   */
  land(call: ModelCall, span: Span): boolean {
    if (!span.isRecording() || this.pending !== call) return false;
    this.pending = undefined;
    call.land(span, true, false);
    call.close();
    return true;
  }

  private ancestors(spanId: string | undefined): Set<string> {
    const seen = new Set<string>();
    while (spanId !== undefined && !seen.has(spanId)) {
      seen.add(spanId);
      spanId = this.parents.get(spanId);
    }
    return seen;
  }

  /**
   * Open one pass around the model call the caller makes next: with an instrumentation (and the
   * hook), its model-call span takes the pass and no other span is made; without one,
   * {@link ModelCall.end} makes the recorder's own `chat <model>` span (covering the call). A pass
   * already stated on the run ({@link nextPass}) is this one. Passes number themselves from 1.
   */
  startModelCall(model: string, options: ModelCallOptions = {}): ModelCall {
    if (options.iteration !== undefined && this.pending === undefined) this.nextIterationValue = options.iteration;
    const call = this.nextPass();
    call.model = model;
    this.opened.set(call, { provider: options.provider, started: now() });
    return call;
  }

  /** {@link startModelCall}, `fn` run inside the run's context, then {@link ModelCall.end}. */
  modelCall<T>(model: string, options: ModelCallOptions, fn: (call: ModelCall) => T): T {
    const call = this.startModelCall(model, options);
    return settle(
      () => contextApi.with(this.context, () => fn(call)),
      (error) => call.end(error),
    );
  }

  /** @internal */
  endModelCall(call: ModelCall, error: unknown): void {
    const opened = this.opened.get(call);
    if (opened === undefined) return; // ended already, or never opened with startModelCall
    this.opened.delete(call);
    if (this.pending !== call) {
      call.close();
      return;
    }
    this.pending = undefined;
    const attributes: Attributes = {
      [names.GEN_AI_OPERATION_NAME]: names.OP_CHAT,
      [names.GEN_AI_REQUEST_MODEL]: call.model ?? '',
      [names.PASS_ITERATION]: call.iteration,
    };
    if (opened.provider !== undefined) attributes[names.GEN_AI_PROVIDER_NAME] = opened.provider;
    const span = this.tracer.startSpan(
      `${names.OP_CHAT} ${call.model ?? ''}`,
      { kind: SpanKind.CLIENT, attributes, startTime: opened.started },
      this.context.setValue(OWN_SPAN_CONTEXT_KEY, true),
    );
    call.land(span, false, true);
    call.close();
    if (error !== undefined) failSpan(span, error);
    span.end();
  }

  /**
   * Give the staged pass `call` up at once: its model call is over and no span took it (an adapter
   * that saw the call or the step end says `why`). The run says so (`unattached-pass`),
   * {@link unattached} counts it now, and the next {@link nextPass} is a new pass rather than this
   * one with the next call's events added. False when `call` is not the staged pass (it landed).
   */
  giveUp(call: ModelCall, why: string): boolean {
    if (this.pending !== call) return false;
    this.pending = undefined;
    this.sayUnattached(call, why);
    return true;
  }

  private finish(): void {
    const savings = this.policy?.savings;
    if (savings !== undefined) {
      // Enforce mode: what leaving parked maps out saved, on the run span.
      this.span.setAttribute(names.SAVINGS_CHARS, savings.chars);
      this.span.setAttribute(names.SAVINGS_PREDICTED_CHARS, savings.predictedChars);
      this.span.setAttribute(names.SAVINGS_PASSES, savings.passes.size);
    }
    const call = this.pending;
    if (call === undefined) return;
    this.pending = undefined;
    let why = 'no model-call span started inside the run after them';
    if (hookCount() === 0) why = "no span-start hook is installed (footprintHook() in the tracer provider's span processors)";
    else if (this.stagedWhile !== undefined) why = `they were staged while run ${this.stagedWhile} was the current run`;
    this.sayUnattached(call, why);
  }

  private sayUnattached(call: ModelCall, why: string): void {
    this.unattachedCount += 1;
    this.problem(
      'unattached-pass',
      `pass ${call.iteration}'s staged events (${call.stagedTypes().join(', ') || 'none'}) were attached ` +
        `to no model call: ${why}; passes from here on are not decided`,
      call.iteration,
    );
  }

  /**
   * Open the span `execute_tool <name>` under the run span, tied to the latest pass (or to
   * `iteration`: a call paused for a person and resumed in this leg keeps its pass).
   */
  startToolCall(name: string, options: ToolCallOptions = {}): ToolCall {
    const number = options.iteration ?? this.iteration;
    let identifier = options.callId;
    if (identifier === undefined || identifier === '') {
      this.counter += 1;
      identifier = `call-${this.counter}`;
    }
    const attributes: Record<string, AttributeValue> = {
      [names.GEN_AI_OPERATION_NAME]: names.OP_EXECUTE_TOOL,
      [names.GEN_AI_TOOL_NAME]: name,
      [names.GEN_AI_TOOL_CALL_ID]: identifier,
      [names.GEN_AI_TOOL_CALL_ARGUMENTS]: pythonJson({ ...(options.args ?? {}) }),
    };
    if (number >= 1) attributes[names.PASS_ITERATION] = number;
    const span = this.tracer.startSpan(
      `${names.OP_EXECUTE_TOOL} ${name}`,
      { kind: SpanKind.INTERNAL, attributes },
      this.context.setValue(OWN_SPAN_CONTEXT_KEY, true),
    );
    let stated: StatedCall | undefined;
    if (this.policy !== undefined) {
      stated = new StatedCall(number, name, { ...(options.args ?? {}) });
      this.policy.toolCalled(stated);
    }
    return new ToolCall(this, span, name, identifier, number, stated);
  }

  /** {@link startToolCall}, `fn` run with the tool span current, then the span ended (ERROR if `fn` throws). */
  toolCall<T>(name: string, options: ToolCallOptions, fn: (call: ToolCall) => T): T {
    const call = this.startToolCall(name, options);
    return settle(
      () => contextApi.with(trace.setSpan(this.context, call.span), () => fn(call)),
      (error) => {
        if (error !== undefined) failSpan(call.span, error);
        if (error !== undefined && call.stated !== undefined) call.stated.failed = true;
        call.end();
      },
    );
  }

  /**
   * The turn-start routing verdict (`skill.turn_routed`): `by` is `entry`, `intent`, `continuity`,
   * `menu`, `decider` or `none`; `to` the skill decided.
   */
  routed(by: string, options: RoutedOptions = {}): void {
    this.emit(
      this.span,
      names.T_TURN_ROUTED,
      compact({
        by,
        from: options.from,
        to: options.to,
        scorer: options.scorer,
        scores: options.scores?.map((s) => ({ ...s })),
        decisive: options.decisive,
        witness: options.witness === undefined ? undefined : compact({ text: options.witness, keyword: options.witnessKeyword }),
        offered: options.offered === undefined ? undefined : [...options.offered],
        decider: options.deciderModel === undefined ? undefined : { model: options.deciderModel },
      }),
    );
  }

  /** The leg stops to ask a person (`pause.request`); resume in a new run leg. */
  pause(
    question: string,
    options: { toolCallId?: string; toolName?: string; reason?: string; absence?: JsonObject } = {},
  ): void {
    // `absence`: the paused lookup declares it found nothing, which empty-lookup judges as its answer.
    const questionPayload = compact({
      toolCallId: options.toolCallId,
      toolName: options.toolName,
      question,
      absence: options.absence !== undefined ? { ...options.absence } : undefined,
    });
    this.emit(this.span, names.T_PAUSE_REQUEST, { reason: options.reason ?? 'stage requested pause', questionPayload });
  }

  /** The final answer of the turn (`agent.turn_end`). */
  answer(text: string): void {
    this.emit(this.span, names.T_TURN_END, { turnIndex: this.turnIndex, finalContent: text, iterationCount: this.iteration });
  }

  /** Any other upstream event type on the run span. */
  event(eventType: string, payload: Payload): void {
    this.emit(this.span, eventType, payload);
  }

  // ── integrity inputs (issue 17): facts no convention carries, and the conventions' frame ─────

  /**
   * Declare a tool once per run (`tool.declared`): the tools whose results its arguments come from,
   * and the columns of the rows it returns. Arms `dangling-reference`, `unsupported-argument` and the
   * write-seam checks.
   */
  declareTool(name: string, options: DeclareToolOptions = {}): void {
    const argumentsFrom = [...(options.argumentsFrom ?? [])];
    if (typeof name !== 'string' || name === '' || argumentsFrom.some((g) => blank(g) || g === name)) {
      throw new Error('argumentsFrom names other tools, never blank or the tool itself');
    }
    const columns = options.resultColumns;
    if (columns !== undefined) checkColumns(columns);
    this.emit(
      this.span,
      names.T_TOOL_DECLARED,
      compact({
        toolName: name,
        argumentsFrom,
        // Python's json.dumps default separators, as the Python recorder writes it.
        resultColumns: columns === undefined ? undefined : pythonJson(columns, ', ', ': '),
      }),
    );
  }

  /** The integrity dials of this run (`integrity.config`). */
  integritySettings(options: IntegritySettingsOptions = {}): void {
    const {
      noticeEmptyLookups = false,
      checkColumnTypes = 'off',
      noticePriorTurnEvidence = false,
      posture = 'observe',
    } = options;
    for (const [dial, value] of [
      ['noticeEmptyLookups', noticeEmptyLookups],
      ['noticePriorTurnEvidence', noticePriorTurnEvidence],
    ] as const) {
      if (typeof value !== 'boolean') throw new Error(`${dial} must be a boolean: ${String(value)}`);
    }
    if (!['off', 'warn', 'enforce'].includes(checkColumnTypes)) {
      throw new Error(`checkColumnTypes must be off, warn or enforce: ${String(checkColumnTypes)}`);
    }
    if (!['observe', 'dev'].includes(posture)) throw new Error(`posture must be observe or dev: ${String(posture)}`);
    this.emit(this.span, names.T_INTEGRITY_CONFIG, {
      posture,
      noticeEmptyLookups,
      checkColumnTypes,
      noticePriorTurnEvidence,
    });
  }

  /**
   * A value the app vouches for (`integrity.external_ground`), for the latest pass or `iteration`:
   * an argument equal to it is excused, not flagged.
   */
  externalGround(value: string, source: string, options: { iteration?: number } = {}): void {
    if (blank(value) || blank(source)) throw new Error('an external ground needs a value and a source');
    this.emit(this.span, names.T_EXTERNAL_GROUND, { value, source, iteration: options.iteration ?? this.iteration });
  }

  /** The tool names the provider adapter read back from the request body it sent (`wire.manifest`). */
  wireManifest(toolNames: readonly string[], options: { iteration?: number } = {}): void {
    this.emit(this.span, names.T_WIRE_MANIFEST, {
      toolNames: [...toolNames],
      iteration: options.iteration ?? this.iteration,
    });
  }

  /** Tool names whose results left the window before the latest (or `iteration`) call (`window.compacted`). */
  windowCompacted(droppedObservations: readonly string[], options: { iteration?: number } = {}): void {
    this.emit(this.span, names.T_WINDOW_COMPACTED, {
      droppedObservations: [...droppedObservations],
      iteration: options.iteration ?? this.iteration,
    });
  }

  /**
   * A finding the agent's own integrity checks filed (`integrity.context_error`; `subjects` as
   * `"tool:name"`): the processor re-derives and compares (verify mode).
   */
  contextError(kind: string, seam: string, subjects: readonly string[], options: ContextErrorOptions = {}): void {
    this.emit(
      this.span,
      names.T_CONTEXT_ERROR,
      compact({
        kind,
        seam,
        subjects: [...subjects],
        predicate: options.predicate,
        iteration: options.iteration,
        advisory: options.advisory ?? false,
        message: options.message,
      }),
    );
  }

  /**
   * The evidence gate's reading of the final answer (`evidence.grounding`): how many grounded values
   * the answer states from this turn and from earlier turns, the newest earlier turn, the current
   * turn (0: no user turn), the tool results this turn served.
   */
  evidenceGrounding(grounding: EvidenceGrounding): void {
    this.emit(
      this.span,
      names.T_EVIDENCE_GROUNDING,
      compact({
        fromThisTurn: grounding.fromThisTurn,
        fromPriorTurns: grounding.fromPriorTurns,
        latestPriorTurn: grounding.latestPriorTurn,
        currentTurn: grounding.currentTurn,
        toolResultsThisTurn: grounding.toolResultsThisTurn ?? 0,
        indexTruncated: grounding.indexTruncated ?? false,
      }),
    );
  }

  /**
   * The typed answer's `answerField` (a dot path) claims `field` of `entity` (`claims.declared`): the
   * unsupported-claim check compares it with the facts the tools settled ({@link toolSemantics}).
   */
  declareClaim(answerField: string, entity: string, field: string): void {
    if (blank(answerField) || blank(entity) || blank(field)) {
      throw new Error('a claim needs a non-blank answer field, entity and field');
    }
    this.emit(this.span, names.T_CLAIMS_DECLARED, { answerField, entity, field });
  }

  /**
   * The facts a tool call settled (`tools.semantics_declared` on its span): `facts` rows
   * `{entity, <field>: value, ...}`, `series` points `{entity, metric, value, t?}`: the full
   * envelope, whatever the model was served.
   */
  toolSemantics(call: ToolCall, options: ToolSemanticsOptions = {}): void {
    const semantics: Record<string, unknown> = { facts: (options.facts ?? []).map((row) => ({ ...row })) };
    if (options.series !== undefined && options.series.length > 0) {
      semantics['series'] = options.series.map((point) => ({ ...point }));
    }
    if (options.measuredAt !== undefined) semantics['provenance'] = { measured_at: options.measuredAt };
    this.emit(call.span, names.T_SEMANTICS_DECLARED, {
      toolName: call.name,
      toolCallId: call.callId,
      iteration: call.iteration,
      // Python's json.dumps default separators, as the Python recorder writes it.
      semantics: pythonJson(semantics, ', ', ': '),
    });
  }

  /**
   * The facts a tool call settled, as a `describedResult()` declaration (the upstream's 10.0
   * replacement of `semantic()`: camelCase keys, `provenance.measuredAt`), on the same
   * `tools.semantics_declared` event: read alongside {@link toolSemantics}' envelopes.
   */
  toolDescribedResult(call: ToolCall, options: ToolSemanticsOptions = {}): void {
    const described: Record<string, unknown> = { facts: (options.facts ?? []).map((row) => ({ ...row })) };
    if (options.series !== undefined && options.series.length > 0) {
      described['series'] = options.series.map((point) => ({ ...point }));
    }
    if (options.measuredAt !== undefined) described['provenance'] = { measuredAt: options.measuredAt };
    this.emit(call.span, names.T_SEMANTICS_DECLARED, {
      toolName: call.name,
      toolCallId: call.callId,
      iteration: call.iteration,
      // Python's json.dumps default separators, as the Python recorder writes it.
      semantics: pythonJson(described, ', ', ': '),
    });
  }

  /**
   * What a model call was offered and shown, in the GenAI conventions' own attributes
   * (`gen_ai.tool.definitions`, `gen_ai.system_instructions`, `gen_ai.input.messages`,
   * `gen_ai.output.messages`), for agents with no instrumentation that records them. Call it before
   * the model call: it lands with the pass; an instrumentation's own values win. Messages are the
   * conventions' `{role, parts}`; an option left out leaves its attribute out.
   */
  frame(call: ModelCall, options: FrameOptions = {}): void {
    const values: Array<[string, readonly unknown[] | undefined]> = [
      [names.GEN_AI_TOOL_DEFINITIONS, options.tools],
      [names.GEN_AI_SYSTEM_INSTRUCTIONS, options.system?.map((content) => ({ type: 'text', content }))],
      [names.GEN_AI_INPUT_MESSAGES, options.messages],
      [names.GEN_AI_OUTPUT_MESSAGES, options.output],
    ];
    for (const [key, value] of values) {
      if (value === undefined) continue;
      call.frameAttribute(key, pythonJson([...value], ', ', ': '));
    }
  }

  /** End the run span (a pass stated but taken by no model call is said on it: `record.problem`). */
  end(): void {
    this.finish();
    this.span.end();
  }
}

/**
 * Open one run leg: the `invoke_agent <agent>` span with `footprint.run.id`, and its opening events
 * (in order: `pause.resume` for a resumed leg, `agent.run_configured`, `skill.graph_declared`,
 * `maps.mounted`, then `agent.turn_start` unless resumed). The caller ends it with {@link Run.end};
 * {@link run} does that for you. Throws {@link PlanError} when `maps` cannot be mounted.
 */
export function startRun(options: RunOptions, parent: Context = contextApi.active()): Run {
  const maps = options.maps ?? [];
  const renewalGrace = options.renewalGrace ?? DEFAULT_RENEWAL_GRACE;
  if (maps.length > 0) validatePlan(maps, renewalGrace);
  let enforced = options.enforced;
  if (options.policy === true && (maps.length === 0 || enforced === false)) {
    throw new Error('policy: true needs mounted maps, and is enforce mode (enforced: true)');
  }
  if (options.policy === true && options.resumed === true) {
    // The earlier leg's engagement is the processor's (its run store), not this process's.
    throw new Error("policy: true cannot continue a resumed leg's engagement yet");
  }
  if (options.policy === true) enforced = true;
  const emitter = new Emitter(options.emitAs ?? 'span', options.logger);
  const tracer = options.tracer ?? trace.getTracer(SCOPE_NAME, VERSION);
  const runId = options.runId ?? globalThis.crypto.randomUUID().replaceAll('-', '');
  const attributes: Attributes = {
    [names.GEN_AI_OPERATION_NAME]: names.OP_INVOKE_AGENT,
    [names.GEN_AI_AGENT_NAME]: options.agent,
    [names.RUN_ID]: runId,
  };
  if (options.conversationId !== undefined) attributes[names.GEN_AI_CONVERSATION_ID] = options.conversationId;
  const span = tracer.startSpan(
    `${names.OP_INVOKE_AGENT} ${options.agent}`,
    { kind: SpanKind.INTERNAL, attributes },
    parent.setValue(OWN_SPAN_CONTEXT_KEY, true),
  );
  const turnIndex = options.turnIndex ?? 0;
  const leg = new Run(
    tracer,
    span,
    runId,
    emitter,
    options.nextIteration ?? 1,
    turnIndex,
    parent,
  );
  if (options.resumed === true) {
    const held = options.held === undefined ? undefined : { ...options.held };
    leg.event(names.T_PAUSE_RESUME, compact({ resumeInput: options.resumeInput, state: held, pausedWith: held }));
  }
  if (options.configured !== undefined) leg.event(names.T_RUN_CONFIGURED, { agentId: options.agent, ...options.configured });
  if (options.graph !== undefined) leg.event(names.T_GRAPH_DECLARED, options.graph);
  if (options.policy === true) leg.policy = new LivePolicy(maps, renewalGrace, LivePolicy.edgesOf(options.graph));
  if (maps.length > 0) leg.event(names.T_MAPS_MOUNTED, compact({ ...planJson(maps, renewalGrace), enforced }));
  if (options.resumed !== true) {
    leg.event(names.T_TURN_START, compact({ turnIndex, userPrompt: options.userPrompt }));
  }
  return leg;
}

/**
 * Run `fn` inside one run leg (see {@link startRun}): the run span is current inside, and ends when
 * `fn` returns or its promise settles (ERROR with the exception when it throws).
 *
 * ```ts
 * await run({ tracer, agent: 'support', maps: [{ id: 'skill-map', memberIds: ['billing'], toolNames: [] }] },
 *   async (run) => {
 *     run.evaluated(['billing'], { cursorTo: 'billing', movedBy: 'intent' });
 *     run.injected('system-prompt', 'skill', { sourceId: 'billing', content: body });
 *     const reply = await openai.chat.completions.create({ ... }); // the instrumentation's span
 *     run.answer(reply.choices[0].message.content);
 *   });
 * ```
 */
export function run<T>(options: RunOptions, fn: (run: Run) => T): T {
  const leg = startRun(options);
  return settle(
    () => contextApi.with(leg.context, () => fn(leg)),
    (error) => {
      if (error !== undefined) failSpan(leg.span, error);
      leg.end();
    },
  );
}
