/**
 * Small helpers the recorder's modules share: the scope name, Python-compatible text measures
 * (code points, content hashes, summaries), payload compaction, and settling a callback's result.
 */

import { createHash } from 'node:crypto';
import { type Span, SpanStatusCode } from '@opentelemetry/api';

import { names } from './semconv.js';

/** The tracer / logger scope name (the Python recorder's is `otel_footprint.record`). */
export const SCOPE_NAME = 'otel_footprint.record';

export const VERSION = '0.1.0';

export const SUMMARY_CHARS = 80;

export const STATUS_CHARS = 256;

/** Characters as Python counts them (code points, not UTF-16 units). */
export function codePoints(text: string): string[] {
  return Array.from(text);
}

export function contentHash(content: string): string {
  return createHash('sha256').update(content, 'utf8').digest('hex').slice(0, 8);
}

export function summary(content: string): string {
  const chars = codePoints(content);
  return chars.length <= SUMMARY_CHARS ? content : `${chars.slice(0, SUMMARY_CHARS - 1).join('')}…`;
}

/** Now, in milliseconds since the epoch with sub-millisecond precision (an OpenTelemetry time). */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

/** The recorder's problem event type, when this checkout's semconv.py has it (generated names). */
export const RECORD_PROBLEM: string | undefined = (names as Readonly<Record<string, string | undefined>>)['T_RECORD_PROBLEM'];

/** Drop absent fields: the schema leaves them out rather than sending nulls. */
export function compact(payload: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payload)) if (value !== undefined && value !== null) out[key] = value;
  return out;
}

export function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Python's `str.strip()` emptiness test. */
export function blank(text: unknown): boolean {
  return typeof text !== 'string' || text.trim() === '';
}

/** Runs `fn`, then `done` once it has settled (sync or async), passing its result or error through. */
export function settle<T>(fn: () => T, done: (error?: unknown) => void): T {
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

export function failSpan(span: Span, error: unknown): void {
  if (error instanceof Error) {
    span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: `${error.name}: ${error.message}` });
  } else {
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
  }
}
