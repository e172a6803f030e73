/**
 * The agent-side recorder for Node.js: GenAI run / model-call / tool spans carrying footprint events,
 * written through the OpenTelemetry API as span events (default) or as log records tied to the span.
 *
 * The same concepts, names and payloads as the Python recorder (`otel_footprint/record/recorder.py`):
 * for the same calls both write the same span-event names and attributes (checked by the vectors in
 * `vectors/recorder.json`, generated from Python). Python's `with` blocks are callbacks here
 * (`run(options, async (run) => ...)`, `run.modelCall(model, {}, (call) => ...)`) or explicit
 * `start*()` / `end()` pairs.
 *
 * With an instrumentation that makes the model-call spans (OpenTelemetry's, OpenInference's,
 * OpenLLMetry's, the OpenAI Agents SDK's), install {@link FootprintSpanProcessor} (`footprintHook()`):
 * what the agent states on the run (`run.evaluated(...)`, `run.injected(...)`, or inside
 * `run.modelCall`) is attached to the model-call span the instrumentation starts next inside the run,
 * with `footprint.pass.iteration`, and the recorder makes no span of its own. The semantics are those
 * of issue 10's Python recorder (`otel_footprint/record/attach.py`).
 */

import { createHash } from 'node:crypto';

import {
  type AttributeValue,
  INVALID_SPAN_CONTEXT,
  type Attributes,
  type Context,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  context as contextApi,
  diag,
  trace,
} from '@opentelemetry/api';

import { type Json, type JsonObject, type Payload, encodePayload, eventNameOf, pythonJson } from './codec.js';
import { names } from './semconv.js';

/** The tracer / logger scope name (the Python recorder's is `otel_footprint.record`). */
export const SCOPE_NAME = 'otel_footprint.record';
export const VERSION = '0.1.0';
/** The reference's default renewal grace. */
export const DEFAULT_RENEWAL_GRACE = 3;

const SUMMARY_CHARS = 80;
/** Span parents a run remembers (the hook's ancestry test); bounded. */
const MAX_PARENTS = 10_000;
const STATUS_CHARS = 256;

/** Where footprint events go: span events (every backend shows them) or log records. */
export type EmitAs = 'span' | 'log';

/**
 * What the recorder needs of a log record emitter: an `@opentelemetry/api-logs` `Logger`
 * (`logs.getLogger('otel_footprint.record')`) fits; typed here so the package needs no api-logs.
 */
export interface LogEmitter {
  emit(record: { eventName?: string; attributes?: Attributes; context?: Context; timestamp?: number }): void;
}

/** One mounted map of the plan (the reference's `{id, memberIds, toolNames, nonParkable?}`). */
export interface MountedMap {
  readonly id: string;
  readonly memberIds: readonly string[];
  readonly toolNames: readonly string[];
  readonly nonParkable?: boolean;
}

/** The agent's own kernel decision (verify mode): the kernel's change JSON. */
export type EngagementChange =
  | {
      readonly kind: 'engaged';
      readonly mapId: string;
      readonly iteration: number;
      readonly by: string;
      readonly witness?: string;
      readonly reengaged?: boolean;
      readonly upgraded?: boolean;
      readonly tenantChanged?: boolean;
      readonly at?: string;
      readonly foundedBy?: string;
    }
  | {
      readonly kind: 'parked';
      readonly mapId: string;
      readonly iteration: number;
      readonly by: string;
      readonly idleCalls: number;
      readonly witness?: string;
    };

/** A plan the kernel cannot be mounted with (the Python recorder's `PlanError`). */
export class PlanError extends Error {
  override readonly name = 'PlanError';
}

// ── small pure helpers ─────────────────────────────────────────────────────────────────────────

/** Characters as Python counts them (code points, not UTF-16 units). */
function codePoints(text: string): string[] {
  return Array.from(text);
}

function contentHash(content: string): string {
  return createHash('sha256').update(content, 'utf8').digest('hex').slice(0, 8);
}

function summary(content: string): string {
  const chars = codePoints(content);
  return chars.length <= SUMMARY_CHARS ? content : `${chars.slice(0, SUMMARY_CHARS - 1).join('')}…`;
}

/** Now, in milliseconds since the epoch with sub-millisecond precision (an OpenTelemetry time). */
function now(): number {
  return performance.timeOrigin + performance.now();
}

/** The recorder's problem event type, when this checkout's semconv.py has it (generated names). */
const RECORD_PROBLEM: string | undefined = (names as Readonly<Record<string, string | undefined>>)['T_RECORD_PROBLEM'];

/** Drop absent fields: the schema leaves them out rather than sending nulls. */
function compact(payload: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payload)) if (value !== undefined && value !== null) out[key] = value;
  return out;
}

const COLUMN_TYPES: ReadonlySet<string> = new Set(['number', 'string', 'boolean', 'date']);
const RESULT_SHAPES: ReadonlySet<string> = new Set(['rowset', 'absence', 'bespoke']);

function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Python's `str.strip()` emptiness test. */
function blank(text: unknown): boolean {
  return typeof text !== 'string' || text.trim() === '';
}

/** Refuse a result-column declaration the column checks could not read (the Python `_check_columns`). */
function checkColumns(columns: unknown): void {
  if (!isRecord(columns) || Object.keys(columns).length === 0) {
    throw new Error('resultColumns must be a non-empty map of column -> type');
  }
  for (const [column, spec] of Object.entries(columns)) {
    if (column.trim() === '') throw new Error('resultColumns: a column name must not be blank');
    const kind = isRecord(spec) ? spec['type'] : spec;
    if (typeof kind !== 'string' || !COLUMN_TYPES.has(kind)) {
      throw new Error(
        `resultColumns[${JSON.stringify(column)}]: type must be one of ${[...COLUMN_TYPES].sort().join(', ')}, got ${String(kind)}`,
      );
    }
    if (isRecord(spec) && spec['nullable'] !== undefined && typeof spec['nullable'] !== 'boolean') {
      throw new Error(`resultColumns[${JSON.stringify(column)}]: nullable must be a boolean`);
    }
  }
}

function validatePlan(maps: readonly MountedMap[], renewalGrace: number): void {
  if (!Number.isInteger(renewalGrace) || renewalGrace < 1) {
    throw new PlanError(`renewalGrace must be an integer >= 1, got ${String(renewalGrace)}`);
  }
  if (maps.length === 0) throw new PlanError('nothing is mounted that the kernel could manage: the plan has no maps');
  const seen = new Set<string>();
  maps.forEach((mounted, index) => {
    if (typeof mounted.id !== 'string') throw new PlanError(`maps[${index}].id must be a string`);
    const where = `map '${mounted.id}'`;
    if (seen.has(mounted.id)) throw new PlanError(`${where} is mounted twice: map ids must be unique`);
    seen.add(mounted.id);
    for (const [label, values] of [
      ['memberIds', mounted.memberIds],
      ['toolNames', mounted.toolNames],
    ] as const) {
      if (!Array.isArray(values) || !values.every((v) => typeof v === 'string')) {
        throw new PlanError(`${where}: ${label} must be a list of strings`);
      }
    }
    if (mounted.memberIds.length === 0) throw new PlanError(`${where} has no members: memberIds must not be empty`);
    if (mounted.nonParkable !== undefined && typeof mounted.nonParkable !== 'boolean') {
      throw new PlanError(`${where}: nonParkable must be a boolean when given`);
    }
  });
}

function planJson(maps: readonly MountedMap[], renewalGrace: number): JsonObject {
  return {
    maps: maps.map((m) => ({
      id: m.id,
      memberIds: [...m.memberIds],
      toolNames: [...m.toolNames],
      ...(m.nonParkable === undefined ? {} : { nonParkable: m.nonParkable }),
    })),
    renewalGrace,
  };
}

/** The change JSON without `kind`, in the kernel's canonical key order (`change_to_json`). */
function changePayload(change: EngagementChange): Record<string, unknown> {
  const out: Record<string, unknown> = { mapId: change.mapId, iteration: change.iteration, by: change.by };
  if (change.kind === 'parked') {
    out['idleCalls'] = change.idleCalls;
  } else {
    if (change.reengaged === true) out['reengaged'] = true;
    if (change.upgraded === true) out['upgraded'] = true;
    if (change.tenantChanged === true) out['tenantChanged'] = true;
    if (change.at !== undefined) out['at'] = change.at;
    if (change.foundedBy !== undefined) out['foundedBy'] = change.foundedBy;
  }
  if (change.witness !== undefined) out['witness'] = change.witness;
  return out;
}

/** Runs `fn`, then `done` once it has settled (sync or async), passing its result or error through. */
function settle<T>(fn: () => T, done: (error?: unknown) => void): T {
  let result: T;
  try {
    result = fn();
  } catch (error) {
    done(error);
    throw error;
  }
  if (result instanceof Promise) {
    return result.then(
      (value: unknown) => {
        done();
        return value;
      },
      (error: unknown) => {
        done(error);
        throw error;
      },
    ) as T;
  }
  done();
  return result;
}

function failSpan(span: Span, error: unknown): void {
  if (error instanceof Error) {
    span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: `${error.name}: ${error.message}` });
  } else {
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
  }
}

// ── context keys and the hook registry (shared by every copy of this package in a process) ────

/** Where the run is found in a context (`Symbol.for`, so two copies of the package agree). */
export const RUN_CONTEXT_KEY: symbol = Symbol.for('otel_footprint.record.run');
/** Set in the context of the spans the recorder makes itself: the hook leaves them alone. */
export const OWN_SPAN_CONTEXT_KEY: symbol = Symbol.for('otel_footprint.record.own_span');
const HOOKS = Symbol.for('otel_footprint.record.hooks');

function hookCount(): number {
  return ((globalThis as Record<symbol, unknown>)[HOOKS] as number | undefined) ?? 0;
}

/** Counts installed span-start hooks (an unattached pass says whether one was installed). */
export function registerHook(delta: 1 | -1): void {
  (globalThis as Record<symbol, unknown>)[HOOKS] = Math.max(0, hookCount() + delta);
}

/** What the span-start hook calls on the run it finds in the parent context. */
export interface ModelSpanSink {
  /** True while a stated pass waits for its model-call span. */
  wantsModelSpan(): boolean;
  /** Every span started inside the run (its parent, for telling nested from concurrent calls). */
  spanStarted(span: Span, parentSpanId: string | undefined): void;
  /** A model-call span started inside the run: it takes the waiting pass; false when none waits. */
  modelCallStarted(span: Span, parentSpanId: string | undefined): boolean;
}

// ── emitting ──────────────────────────────────────────────────────────────────────────────────

class Emitter {
  constructor(
    readonly emitAs: EmitAs,
    private readonly logger: LogEmitter | undefined,
  ) {
    if (emitAs !== 'span' && emitAs !== 'log') throw new Error(`emitAs must be 'span' or 'log', got ${String(emitAs)}`);
    if (emitAs === 'log' && logger === undefined) throw new Error("emitAs 'log' needs a logger (an api-logs Logger)");
  }

  emit(span: Span, eventType: string, payload: Payload, compositionId?: string, time?: number): void {
    const name = eventNameOf(eventType);
    const attributes = encodePayload(payload, compositionId);
    if (this.emitAs === 'span' || this.logger === undefined) {
      span.addEvent(name, attributes, time);
    } else {
      this.logger.emit({
        eventName: name,
        attributes,
        context: trace.setSpan(contextApi.active(), span),
        ...(time === undefined ? {} : { timestamp: time }),
      });
    }
  }
}

interface Composition {
  readonly id: string;
  readonly breakdown: Map<string, { chars: number; count: number }>;
}

type Staged = readonly [eventType: string, payload: Record<string, unknown>, compositionId: string | undefined, time: number];

/** Options of {@link ModelCall.evaluated}. */
export interface EvaluatedOptions {
  cursorTo?: string;
  /** The clause that moved the cursor: `entry`, `intent`, `route`, `model-pick`, `continuity`, `stay`, ... */
  movedBy?: string;
  cursorFrom?: string;
  /** The user's words that matched, when a rule matched some. */
  witness?: string;
  witnessKeyword?: string;
  skipped?: readonly JsonObject[];
  routing?: readonly JsonObject[];
}

/** Options of {@link ModelCall.injected}. */
export interface InjectedOptions {
  sourceId?: string;
  /** The piece itself: counted, hashed and summarised (80 characters); the body is not recorded. */
  content?: string;
  /** The characters, when the content must not leave the process. */
  chars?: number;
  contentHash?: string;
  summary?: string;
}

/** Options of a model call. */
export interface ModelCallOptions {
  provider?: string;
  /** The pass number; by default the run numbers its passes from 1 (or `nextIteration`). */
  iteration?: number;
}

/**
 * One pass (one model call) and what went into it.
 *
 * What is stated here is held (*staged*) until the pass has a span: the model-call span an
 * instrumentation starts next inside the run takes it through the span-start hook
 * ({@link FootprintSpanProcessor}), which writes it there with `footprint.pass.iteration`. A pass
 * opened with {@link Run.modelCall} that no instrumentation span took gets the recorder's own
 * `chat <model>` span when it ends (started when the call was opened), so an agent without
 * instrumentation records exactly what the Python recorder does. Events stated after the taken span
 * has ended go on the run span (they carry the iteration or a composition id that ties them here).
 */
export class ModelCall {
  /** The pass number (`footprint.pass.iteration`). */
  readonly iteration: number;
  /** True when an instrumentation's model-call span took this pass. */
  claimed = false;
  /** @internal The model of {@link Run.modelCall} (its own span's name). */
  model: string | undefined;
  private spanValue: Span | undefined;
  private readonly stagedEvents: Staged[] = [];
  private readonly stagedAttributes: Attributes = {};
  private readonly open = new Map<string, Composition>();

  /** @internal use {@link Run.nextPass} or {@link Run.modelCall}. */
  constructor(
    private readonly run: Run,
    iteration: number,
  ) {
    this.iteration = iteration;
  }

  /** The span this pass's events are on; undefined while staged (no model call yet). */
  get span(): Span | undefined {
    return this.spanValue;
  }

  /** True while the pass waits for its model-call span. */
  get staged(): boolean {
    return this.spanValue === undefined;
  }

  /** What this pass serves and where the cursor stands (`context.evaluated`). */
  evaluated(activeIds: readonly string[] = [], options: EvaluatedOptions = {}): void {
    let move: Record<string, unknown> | undefined;
    if (options.movedBy !== undefined || options.cursorTo !== undefined) {
      move = compact({ from: options.cursorFrom, to: options.cursorTo, by: options.movedBy ?? 'stay' });
      if (options.witness !== undefined) move['witness'] = compact({ text: options.witness, keyword: options.witnessKeyword });
    }
    this.write(names.T_CONTEXT_EVALUATED, {
      iteration: this.iteration,
      activeIds: [...activeIds],
      skippedDetails: (options.skipped ?? []).map((row) => ({ ...row })),
      cursorMove: move,
      routing: options.routing?.map((row) => ({ ...row })),
    });
  }

  /**
   * One piece put into a slot (`context.injected`) of this pass's composition of `slot`. Give
   * `content` and the recorder counts its characters, hashes it and keeps an 80-character summary;
   * or give `chars` (and a hash) when the content must not leave the process.
   */
  injected(slot: string, source: string, options: InjectedOptions = {}): void {
    let { chars, contentHash: hash, summary: short } = options;
    const { content } = options;
    if (content !== undefined) {
      chars ??= codePoints(content).length;
      hash = hash === undefined || hash === '' ? contentHash(content) : hash;
      short ??= summary(content);
    }
    const composition = this.composition(slot);
    let row = composition.breakdown.get(source);
    if (row === undefined) {
      row = { chars: 0, count: 0 };
      composition.breakdown.set(source, row);
    }
    row.chars += chars ?? 0;
    row.count += 1;
    this.write(
      names.T_CONTEXT_INJECTED,
      { slot, source, sourceId: options.sourceId, contentHash: hash, contentSummary: short, chars },
      composition.id,
    );
  }

  /**
   * Close this pass's composition of `slot` (`context.slot_composed` with the per-source breakdown).
   * Open compositions are closed when the model call starts (or, for the recorder's own span, ends).
   */
  composed(slot: string): void {
    const composition = this.open.get(slot) ?? { id: this.run.compositionId(slot), breakdown: new Map() };
    this.open.delete(slot);
    const sourceBreakdown: Record<string, { chars: number; count: number }> = {};
    for (const [source, row] of composition.breakdown) sourceBreakdown[source] = { ...row };
    this.write(names.T_SLOT_COMPOSED, { slot, iteration: this.iteration, sourceBreakdown }, composition.id);
  }

  /** Verify mode: a decision of the agent's own kernel (`map.engaged` / `map.parked`). */
  engagement(change: EngagementChange): void {
    this.write(change.kind === 'parked' ? names.T_MAP_PARKED : names.T_MAP_ENGAGED, changePayload(change));
  }

  /** Token usage of the call (`gen_ai.usage.*`); a taken span's usage is its instrumentation's. */
  usage(tokens: { inputTokens?: number; outputTokens?: number }): void {
    const values: Array<[string, number | undefined]> = [
      [names.GEN_AI_USAGE_INPUT_TOKENS, tokens.inputTokens],
      [names.GEN_AI_USAGE_OUTPUT_TOKENS, tokens.outputTokens],
    ];
    for (const [key, value] of values) {
      if (value === undefined) continue;
      const span = this.spanValue;
      if (span === undefined) this.stagedAttributes[key] = value;
      else if (span.isRecording() && !this.claimed) span.setAttribute(key, value);
    }
  }

  /**
   * @internal A frame attribute ({@link Run.frame}): staged until the pass has a span; a taken span's
   * frame is its instrumentation's to record.
   */
  frameAttribute(key: string, text: string): void {
    const span = this.spanValue;
    if (span === undefined) this.stagedAttributes[key] = text;
    else if (span.isRecording() && !this.claimed) span.setAttribute(key, text);
  }

  /** Any other upstream event type on this pass (e.g. `skill.route_conflict`). */
  event(eventType: string, payload: Payload): void {
    this.write(eventType, { ...(payload instanceof Map ? Object.fromEntries(payload) : payload) });
  }

  /** End the model call opened with {@link Run.startModelCall} (see {@link Run.modelCall}). */
  end(error?: unknown): void {
    this.run.endModelCall(this, error);
  }

  /** @internal Write what was staged on `span`, the pass's span from now on. */
  land(span: Span, claimed: boolean, keepTimes: boolean): void {
    this.spanValue = span;
    this.claimed = claimed;
    span.setAttribute(names.PASS_ITERATION, this.iteration);
    span.setAttributes(this.stagedAttributes);
    for (const [eventType, payload, compositionId, time] of this.stagedEvents.splice(0)) {
      this.run.emit(span, eventType, payload, compositionId, keepTimes ? time : undefined);
    }
  }

  /** @internal Close the compositions still open (the model call has started, or ended). */
  close(): void {
    for (const slot of [...this.open.keys()]) this.composed(slot);
  }

  /** @internal The staged event types (for the unattached-pass problem). */
  stagedTypes(): string[] {
    return [...new Set(this.stagedEvents.map(([eventType]) => eventType))].sort();
  }

  private composition(slot: string): Composition {
    let composition = this.open.get(slot);
    if (composition === undefined) {
      composition = { id: this.run.compositionId(slot), breakdown: new Map() };
      this.open.set(slot, composition);
    }
    return composition;
  }

  private write(eventType: string, payload: Record<string, unknown>, compositionId?: string): void {
    const compacted = compact(payload);
    const span = this.spanValue;
    if (span === undefined) {
      this.stagedEvents.push([eventType, compacted, compositionId, now()]);
    } else if (span.isRecording() || this.run.emitAs === 'log') {
      // A log record may name an ended span; a span event may not be added to one.
      this.run.emit(span, eventType, compacted, compositionId);
    } else {
      this.run.emit(this.run.span, eventType, compacted, compositionId);
    }
  }
}

/** Options of a tool call. */
export interface ToolCallOptions {
  args?: Readonly<Record<string, unknown>>;
  callId?: string;
  /** The pass whose model output asked for this call (default: the latest pass). */
  iteration?: number;
}

/** One tool call: the `execute_tool <name>` span, its result, and the gate's verdicts. */
export class ToolCall {
  /** @internal use {@link Run.toolCall} or {@link Run.startToolCall}. */
  constructor(
    private readonly run: Run,
    readonly span: Span,
    readonly name: string,
    readonly callId: string,
    /** The pass whose model output asked for this call. */
    readonly iteration: number,
  ) {}

  /** What the tool returned (`gen_ai.tool.call.result`; non-text as JSON); `error` marks the span ERROR. */
  result(value: unknown, options: { error?: boolean } = {}): void {
    // Python's json.dumps default separators here (", " and ": "), as the Python recorder writes it.
    const text = typeof value === 'string' ? value : pythonJson(value, ', ', ': ');
    this.span.setAttribute(names.GEN_AI_TOOL_CALL_RESULT, text);
    if (options.error === true) {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: codePoints(text).slice(0, STATUS_CHARS).join('') });
    }
  }

  /** The gate accepted a skill pick (`skill.picked`); `hop` = it moves the cursor. */
  picked(skillId: string, options: { hop?: boolean } = {}): void {
    this.run.emit(this.span, names.T_SKILL_PICKED, { skillId, hop: options.hop ?? false });
  }

  /** The skill gate refused a pick (`skill.rejected`). */
  rejected(requestedId: string, options: { allowed?: readonly string[]; currentSkillId?: string } = {}): void {
    this.run.emit(
      this.span,
      names.T_SKILL_REJECTED,
      compact({
        requestedId,
        currentSkillId: options.currentSkillId,
        allowed: [...(options.allowed ?? [])],
        iteration: this.iteration,
      }),
    );
  }

  /**
   * A permission check during this call (`permission.check`); `result` is `allow`, `deny`, `halt` or
   * `gate_open`; a skill read targets `skill:<id>`.
   */
  permission(
    capability: string,
    target: string,
    result: string,
    options: { actor?: string; rationale?: string; policyRuleId?: string } = {},
  ): void {
    this.run.emit(
      this.span,
      names.T_PERMISSION_CHECK,
      compact({
        capability,
        actor: options.actor ?? 'model',
        target,
        result,
        rationale: options.rationale,
        policyRuleId: options.policyRuleId,
      }),
    );
  }

  /**
   * The shape of what the tool really returned (`tool.result_shape`): `rowset` (with `rows`),
   * `absence` or `bespoke`, whatever the model was served. Arms `empty-lookup`.
   */
  resultShape(shape: ResultShape, options: { rows?: number } = {}): void {
    if (!RESULT_SHAPES.has(shape)) {
      throw new Error(`shape must be one of ${[...RESULT_SHAPES].sort().join(', ')}: ${String(shape)}`);
    }
    const { rows } = options;
    if (rows !== undefined && (!Number.isInteger(rows) || rows < 0)) {
      throw new Error(`rows must be an integer >= 0: ${String(rows)}`);
    }
    this.run.emit(this.span, names.T_TOOL_RESULT_SHAPE, compact({ shape, rows }));
  }

  /** Any other upstream event on this call (e.g. `tools.absent`). */
  event(eventType: string, payload: Payload): void {
    this.run.emit(this.span, eventType, payload);
  }

  /** End the tool span. */
  end(): void {
    this.span.end();
  }
}

/** The shape of a tool's raw return ({@link ToolCall.resultShape}). */
export type ResultShape = 'rowset' | 'absence' | 'bespoke';

/** The type of a result column. */
export type ColumnType = 'number' | 'string' | 'boolean' | 'date';

/** A result column: its type, or `{type, nullable}` ({@link DeclareToolOptions.resultColumns}). */
export type ColumnSpec = ColumnType | { readonly type: ColumnType; readonly nullable?: boolean };

/** Options of {@link Run.declareTool}. */
export interface DeclareToolOptions {
  /** The tools whose results this tool's arguments come from (never blank, never the tool itself). */
  argumentsFrom?: readonly string[];
  /** The columns of the rows the tool returns: column -> type or `{type, nullable}`. */
  resultColumns?: Readonly<Record<string, ColumnSpec>>;
}

/** Options of {@link Run.integritySettings} (the integrity dials of a run). */
export interface IntegritySettingsOptions {
  noticeEmptyLookups?: boolean;
  checkColumnTypes?: 'off' | 'warn' | 'enforce';
  noticePriorTurnEvidence?: boolean;
  posture?: 'observe' | 'dev';
}

/** Options of {@link Run.contextError}. */
export interface ContextErrorOptions {
  predicate?: string;
  iteration?: number;
  advisory?: boolean;
  message?: string;
}

/** The evidence gate's reading of the final answer ({@link Run.evidenceGrounding}). */
export interface EvidenceGrounding {
  fromThisTurn: number;
  fromPriorTurns: number;
  /** The current turn (0: no user turn). */
  currentTurn: number;
  latestPriorTurn?: number;
  toolResultsThisTurn?: number;
  indexTruncated?: boolean;
}

/** Options of {@link Run.toolSemantics}: the facts a tool call settled (the full envelope). */
export interface ToolSemanticsOptions {
  /** Rows `{entity, <field>: value, ...}`. */
  facts?: readonly JsonObject[];
  /** Points `{entity, metric, value, t?}`. */
  series?: readonly JsonObject[];
  measuredAt?: string;
}

/** Options of {@link Run.frame}: what a model call was offered and shown (GenAI conventions). */
export interface FrameOptions {
  /** `gen_ai.tool.definitions`. */
  tools?: readonly JsonObject[];
  /** `gen_ai.system_instructions` (each text as a `{type: 'text', content}` part). */
  system?: readonly string[];
  /** `gen_ai.input.messages` (`{role, parts}`). */
  messages?: readonly JsonObject[];
  /** `gen_ai.output.messages` (`{role, parts}`). */
  output?: readonly JsonObject[];
}

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
    return new ToolCall(this, span, name, identifier, number);
  }

  /** {@link startToolCall}, `fn` run with the tool span current, then the span ended (ERROR if `fn` throws). */
  toolCall<T>(name: string, options: ToolCallOptions, fn: (call: ToolCall) => T): T {
    const call = this.startToolCall(name, options);
    return settle(
      () => contextApi.with(trace.setSpan(this.context, call.span), () => fn(call)),
      (error) => {
        if (error !== undefined) failSpan(call.span, error);
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
  pause(question: string, options: { toolCallId?: string; toolName?: string; reason?: string } = {}): void {
    const questionPayload = compact({ toolCallId: options.toolCallId, toolName: options.toolName, question });
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
  if (maps.length > 0) leg.event(names.T_MAPS_MOUNTED, compact({ ...planJson(maps, renewalGrace), enforced: options.enforced }));
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

/**
 * Emit one footprint event on the current span, whoever opened it (`emit('context.evaluated', {...})`
 * inside a model call whose span another instrumentation made current).
 */
export function emit(
  eventType: string,
  payload: Payload,
  options: { compositionId?: string; emitAs?: EmitAs; logger?: LogEmitter; span?: Span } = {},
): void {
  const span = options.span ?? trace.getActiveSpan() ?? trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
  new Emitter(options.emitAs ?? 'span', options.logger).emit(span, eventType, payload, options.compositionId);
}
