/**
 * The tool call: the `execute_tool <name>` span, its result, and the gate's verdicts.
 */

import { type Span, SpanStatusCode } from '@opentelemetry/api';

import { type Payload, pythonJson } from './codec.js';
import { RESULT_SHAPES, type ResultShape } from './integrity.js';
import { type StatedCall } from './policy.js';
import { type Run } from './run.js';
import { names } from './semconv.js';
import { STATUS_CHARS, codePoints, compact } from './support.js';

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
    /** @internal What a policy run's kernel reads of this call. */
    readonly stated?: StatedCall,
  ) {}

  /** What the tool returned (`gen_ai.tool.call.result`; non-text as JSON); `error` marks the span ERROR. */
  result(value: unknown, options: { error?: boolean } = {}): void {
    // Python's json.dumps default separators here (", " and ": "), as the Python recorder writes it.
    const text = typeof value === 'string' ? value : pythonJson(value, ', ', ': ');
    this.span.setAttribute(names.GEN_AI_TOOL_CALL_RESULT, text);
    if (options.error === true) {
      if (this.stated !== undefined) this.stated.failed = true;
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: codePoints(text).slice(0, STATUS_CHARS).join('') });
    }
  }

  /** The gate accepted a skill pick (`skill.picked`); `hop` = it moves the cursor. */
  picked(skillId: string, options: { hop?: boolean } = {}): void {
    this.stated?.picks.push({ skillId, hop: options.hop ?? false });
    this.run.emit(this.span, names.T_SKILL_PICKED, { skillId, hop: options.hop ?? false });
  }

  /** The skill gate refused a pick (`skill.rejected`). */
  rejected(requestedId: string, options: { allowed?: readonly string[]; currentSkillId?: string } = {}): void {
    this.stated?.refusedIds.add(requestedId);
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
    this.stated?.permission(capability, target, result);
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
