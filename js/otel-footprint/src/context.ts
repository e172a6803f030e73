/**
 * The context keys a run is found by and the registry of installed span-start hooks (shared by
 * every copy of this package in a process), and what the hook calls on a run (`ModelSpanSink`).
 */

import { type Span } from '@opentelemetry/api';

/** Where the run is found in a context (`Symbol.for`, so two copies of the package agree). */
export const RUN_CONTEXT_KEY: symbol = Symbol.for('otel_footprint.record.run');

/** Set in the context of the spans the recorder makes itself: the hook leaves them alone. */
export const OWN_SPAN_CONTEXT_KEY: symbol = Symbol.for('otel_footprint.record.own_span');

export const HOOKS = Symbol.for('otel_footprint.record.hooks');

export function hookCount(): number {
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
