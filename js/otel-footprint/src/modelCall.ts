/**
 * The model call: one pass, staged until a model-call span takes it (or the recorder's own span),
 * with its `context.evaluated` / `context.injected` / `slot_composed` events.
 */

import { type Attributes, type Span } from '@opentelemetry/api';

import { type JsonObject, type Payload } from './codec.js';
import { type EngagementChange, changePayload } from './plan.js';
import { type CursorMove, type Decision, PassPolicy } from './policy.js';
import { type Run } from './run.js';
import { names } from './semconv.js';
import { codePoints, contentHash, summary, now, compact } from './support.js';

export interface Composition {
  readonly id: string;
  readonly breakdown: Map<string, { chars: number; count: number }>;
}

export type Staged = readonly [eventType: string, payload: Record<string, unknown>, compositionId: string | undefined, time: number];

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

/** The `cursorMove` of an evaluation (undefined: the pass states no move), as the Python recorder builds it. */
function cursorMoveOf(options: EvaluatedOptions): CursorMove | undefined {
  if (options.movedBy === undefined && options.cursorTo === undefined) return undefined;
  const move = compact({ from: options.cursorFrom, to: options.cursorTo, by: options.movedBy ?? 'stay' });
  if (options.witness !== undefined) move['witness'] = compact({ text: options.witness, keyword: options.witnessKeyword });
  return move as unknown as CursorMove;
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
  private readonly policy: PassPolicy | undefined;

  /** @internal use {@link Run.nextPass} or {@link Run.modelCall}. */
  constructor(
    private readonly run: Run,
    iteration: number,
  ) {
    this.iteration = iteration;
    const live = run.policy;
    this.policy = live === undefined ? undefined : new PassPolicy(live, live.passState(iteration));
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
    const move = cursorMoveOf(options);
    const payload = {
      iteration: this.iteration,
      activeIds: [...activeIds],
      skippedDetails: (options.skipped ?? []).map((row) => ({ ...row })),
      cursorMove: move,
      routing: options.routing?.map((row) => ({ ...row })),
    };
    // In a policy run the evaluation is written when the pass closes (src/policy.ts).
    if (this.policy !== undefined) this.policy.evaluated(move, payload);
    else this.write(names.T_CONTEXT_EVALUATED, payload);
  }

  /**
   * Enforce mode (a run started with `policy: true`): what to leave out of this model call, the
   * kernel advanced by this pass's cursor move (the options of {@link evaluated}; none after it).
   */
  plan(move: Omit<EvaluatedOptions, 'skipped' | 'routing'> = {}): Decision {
    return this.policyOf().plan(cursorMoveOf(move));
  }

  /** The policy's answer for this pass once asked (undefined before, and in a run without a policy). */
  get decision(): Decision | undefined {
    return this.policy?.decision;
  }

  /** False when `injectionId`'s map is parked on this call (its characters are counted as saved). */
  keep(injectionId: string, size: { content?: string; chars?: number } = {}): boolean {
    return this.policyOf().keep(injectionId, size);
  }

  /** The tool definitions to offer this call: those of parked maps left out (counted as saved). */
  tools<T extends Readonly<Record<string, unknown>>>(definitions: readonly T[]): T[] {
    return this.policyOf().tools(definitions);
  }

  private policyOf(): PassPolicy {
    if (this.policy === undefined) throw new Error('this run has no live policy: start it with policy: true');
    return this.policy;
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
    this.policy?.injected(source, options.sourceId);
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
    this.policy?.close((kind, payload) => {
      if (kind === 'change') this.engagement(payload as EngagementChange);
      else this.write(names.T_CONTEXT_EVALUATED, payload as Record<string, unknown>);
    });
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
