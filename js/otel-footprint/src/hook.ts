/**
 * The span-start hook: a span processor that attaches a run's stated pass (`run.evaluated(...)`,
 * `run.nextPass()`, or `run.modelCall(...)`) to the model-call span an instrumentation starts next
 * inside the run, and sets
 * `footprint.pass.iteration` on it. Install it first in the provider's span processors:
 *
 * ```ts
 * new NodeTracerProvider({ spanProcessors: [footprintHook(), new BatchSpanProcessor(exporter)] });
 * ```
 *
 * A model-call span is recognised as the Python side recognises one ({@link isModelCallSpan}), at its
 * start or at the attribute write that makes it one. Model-call spans with nothing stated for them
 * (a guard, a summariser; the client span under a framework span that already took the pass) are left
 * as they are: they are not passes.
 */

import { type AttributeValue, type Attributes, type Context, type Span, type TimeInput, diag, trace } from '@opentelemetry/api';

import { AI_SDK_MODEL_CALL_OPERATIONS, MODEL_CALL_OPERATIONS, LLM_REQUEST_TYPE_MODEL_CALLS, names } from './semconv.js';
import { type ModelSpanSink, OWN_SPAN_CONTEXT_KEY, RUN_CONTEXT_KEY, registerHook } from './recorder.js';

/** What the hook reads of a started span (the SDK's span has both). */
interface StartedSpan {
  readonly name?: unknown;
  readonly attributes?: unknown;
}

function attribute(span: StartedSpan, key: string): AttributeValue | undefined {
  const attributes = span.attributes;
  if (typeof attributes !== 'object' || attributes === null) return undefined;
  return (attributes as Record<string, AttributeValue | undefined>)[key];
}

/**
 * True when `span` is a model call, by the rule of the Python side (`runs/recognize.py`, `role_of`):
 * a GenAI `gen_ai.operation.name` decides when present (chat / text_completion / generate_content);
 * else the Vercel AI SDK's `ai.operationId` (`ai.generateText.doGenerate`, `ai.streamText.doStream`,
 * ...: its model-call spans carry no `gen_ai.operation.name`); else OpenInference
 * `openinference.span.kind` = LLM; else (not an OpenLLMetry agent or tool span) OpenLLMetry
 * `llm.request.type` chat / completion.
 */
export function isModelCallSpan(span: Span): boolean {
  const started = span as unknown as StartedSpan;
  const operation = attribute(started, names.GEN_AI_OPERATION_NAME);
  if (operation !== undefined) return typeof operation === 'string' && MODEL_CALL_OPERATIONS.has(operation);
  const aiOperation = attribute(started, names.AI_SDK_OPERATION_ID);
  if (aiOperation !== undefined) return typeof aiOperation === 'string' && AI_SDK_MODEL_CALL_OPERATIONS.has(aiOperation);
  const kind = attribute(started, names.OPENINFERENCE_SPAN_KIND);
  if (kind !== undefined) return String(kind).toUpperCase() === names.OI_KIND_LLM;
  const traceloopKind = attribute(started, names.TRACELOOP_SPAN_KIND);
  if (traceloopKind === names.TL_KIND_AGENT || traceloopKind === names.TL_KIND_TOOL) return false;
  const requestType = attribute(started, names.LLM_REQUEST_TYPE);
  return typeof requestType === 'string' && LLM_REQUEST_TYPE_MODEL_CALLS.has(requestType);
}

/** A span that already carries a pass number (the recorder's own, or taken by another hook). */
function numbered(span: Span): boolean {
  return attribute(span as unknown as StartedSpan, names.PASS_ITERATION) !== undefined;
}

function isSink(value: unknown): value is ModelSpanSink {
  return typeof value === 'object' && value !== null && typeof (value as ModelSpanSink).modelCallStarted === 'function';
}

/**
 * A span processor (the SDK's `SpanProcessor` shape) that only acts at span start. It exports
 * nothing: put your exporting processor after it.
 */
export class FootprintSpanProcessor {
  private active = true;
  /** Passes attached to an instrumentation's span so far. */
  attached = 0;

  constructor() {
    registerHook(1);
  }

  onStart(span: Span, parentContext: Context): void {
    try {
      this.started(span, parentContext);
    } catch (error) {
      // A hook must never break the application's model call.
      diag.error('otel-footprint: attaching a staged pass failed', error);
    }
  }

  private started(span: Span, parentContext: Context): void {
    if (!this.active || parentContext.getValue(OWN_SPAN_CONTEXT_KEY) === true) return;
    const sink = parentContext.getValue(RUN_CONTEXT_KEY);
    if (!isSink(sink)) return;
    const parentSpanId = trace.getSpanContext(parentContext)?.spanId;
    sink.spanStarted(span, parentSpanId);
    if (numbered(span)) return; // the recorder's own pass span, or one already taken
    if (isModelCallSpan(span)) {
      if (sink.modelCallStarted(span, parentSpanId)) this.attached += 1;
      return;
    }
    // Some tracers set the recognising attributes just after the start (OpenInference's OITracer
    // starts the span bare, then sets them): while a pass waits, watch this span's attribute
    // writes until it is recognised or ends.
    if (sink.wantsModelSpan()) this.watch(span, sink, parentSpanId);
  }

  private watch(span: Span, sink: ModelSpanSink, parentSpanId: string | undefined): void {
    const own = span as unknown as Record<string, unknown>;
    const setAttribute = span.setAttribute;
    const setAttributes = span.setAttributes;
    const end = span.end;
    const unwatch = (): void => {
      delete own['setAttribute'];
      delete own['setAttributes'];
      delete own['end'];
    };
    const check = (): void => {
      if (!isModelCallSpan(span)) return;
      unwatch();
      if (!numbered(span) && sink.modelCallStarted(span, parentSpanId)) this.attached += 1;
    };
    own['setAttribute'] = function (this: Span, key: string, value: AttributeValue) {
      const result = setAttribute.call(this, key, value);
      check();
      return result;
    };
    own['setAttributes'] = function (this: Span, attributes: Attributes) {
      const result = setAttributes.call(this, attributes);
      check();
      return result;
    };
    own['end'] = function (this: Span, endTime?: TimeInput) {
      unwatch();
      end.call(this, endTime);
    };
  }

  onEnd(): void {}

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    if (this.active) {
      this.active = false;
      registerHook(-1);
    }
    return Promise.resolve();
  }
}

/** The one line of setup: `spanProcessors: [footprintHook(), ...your exporting processors]`. */
export function footprintHook(): FootprintSpanProcessor {
  return new FootprintSpanProcessor();
}
