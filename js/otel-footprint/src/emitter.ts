/**
 * The emitter: footprint events written as span events (default) or as log records tied to the
 * span, and `emit()` for the current span whoever opened it.
 */

import {
  INVALID_SPAN_CONTEXT,
  type Attributes,
  type Context,
  type Span,
  context as contextApi,
  trace,
} from '@opentelemetry/api';

import { type Payload, encodePayload, eventNameOf } from './codec.js';

/** Where footprint events go: span events (every backend shows them) or log records. */
export type EmitAs = 'span' | 'log';

/**
 * What the recorder needs of a log record emitter: an `@opentelemetry/api-logs` `Logger`
 * (`logs.getLogger('otel_footprint.record')`) fits; typed here so the package needs no api-logs.
 */
export interface LogEmitter {
  emit(record: { eventName?: string; attributes?: Attributes; context?: Context; timestamp?: number }): void;
}

export class Emitter {
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
