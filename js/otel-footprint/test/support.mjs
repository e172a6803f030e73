// Test support: a real SDK tracer provider whose spans are kept in start order, typed attribute
// values as the vectors write them, and the replay of a recorder script (the vectors' small DSL).

import { readFileSync } from 'node:fs';

import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

import * as footprint from '../dist/index.js';

export const vectors = (name) => JSON.parse(readFileSync(new URL(`../vectors/${name}`, import.meta.url), 'utf8'));

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** Keeps every span in the order it started. */
class StartOrder {
  constructor() {
    this.spans = [];
  }
  onStart(span) {
    this.spans.push(span);
  }
  onEnd() {}
  forceFlush() {
    return Promise.resolve();
  }
  shutdown() {
    return Promise.resolve();
  }
}

/** A provider (optionally with extra span processors first), its in-memory exporter and start order. */
export function sdk(first = []) {
  const exporter = new InMemorySpanExporter();
  const order = new StartOrder();
  const provider = new BasicTracerProvider({ spanProcessors: [...first, order, new SimpleSpanProcessor(exporter)] });
  return { provider, exporter, order, tracer: provider.getTracer('vectors') };
}

/** `sdk` with the span-start hook first; the hook and the provider are shut down when test `t` ends. */
export function sdkWithHook(t) {
  const hook = footprint.footprintHook();
  const kit = sdk([hook]);
  t.after(async () => {
    await hook.shutdown();
    await kit.provider.shutdown();
  });
  return { hook, ...kit };
}

/** One attribute value typed as OTLP carries it (an integral JavaScript number is an int). */
export function typed(value) {
  if (typeof value === 'boolean') return { bool: value };
  if (typeof value === 'number') return Number.isInteger(value) ? { int: value } : { double: value };
  if (typeof value === 'string') return { string: value };
  if (Array.isArray(value)) return { array: value.map(typed) };
  throw new TypeError(`not an attribute value: ${String(value)}`);
}

export function typedAttributes(attributes) {
  return Object.fromEntries(
    Object.keys(attributes ?? {})
      .sort()
      .map((k) => [k, typed(attributes[k])]),
  );
}

const STATUS = ['UNSET', 'OK', 'ERROR'];
const KIND = ['INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];

/** A finished SDK span as the vectors describe one. */
export function spanJson(span, indexOf) {
  const parentId = span.parentSpanContext?.spanId;
  return {
    name: span.name,
    kind: KIND[span.kind],
    parent: parentId === undefined ? null : (indexOf.get(parentId) ?? null),
    attributes: typedAttributes(span.attributes),
    status: { code: STATUS[span.status.code], ...(span.status.message ? { description: span.status.message } : {}) },
    events: span.events
      .filter((e) => e.name !== 'exception')
      .map((e) => ({ name: e.name, attributes: typedAttributes(e.attributes) })),
  };
}

/**
 * The integrity inputs (issue 17): Run methods (whichever block the step sits in), the frame of the
 * enclosing model call (else of the run's next pass), the semantics of the enclosing tool call.
 */
function integrityStep(run, target, op, args) {
  switch (op) {
    case 'declareTool': {
      const { name, ...options } = args;
      run.declareTool(name, options);
      return true;
    }
    case 'integritySettings':
      run.integritySettings(args);
      return true;
    case 'externalGround': {
      const { value, source, ...options } = args;
      run.externalGround(value, source, options);
      return true;
    }
    case 'wireManifest': {
      const { toolNames, ...options } = args;
      run.wireManifest(toolNames, options);
      return true;
    }
    case 'windowCompacted': {
      const { droppedObservations, ...options } = args;
      run.windowCompacted(droppedObservations, options);
      return true;
    }
    case 'contextError': {
      const { kind, seam, subjects, ...options } = args;
      run.contextError(kind, seam, subjects, options);
      return true;
    }
    case 'evidenceGrounding':
      run.evidenceGrounding(args);
      return true;
    case 'declareClaim':
      run.declareClaim(args.answerField, args.entity, args.field);
      return true;
    case 'toolSemantics':
      if (!(target instanceof footprint.ToolCall)) throw new Error('toolSemantics belongs inside a toolCall');
      run.toolSemantics(target, args);
      return true;
    case 'toolDescribedResult':
      if (!(target instanceof footprint.ToolCall)) throw new Error('toolDescribedResult belongs inside a toolCall');
      run.toolDescribedResult(target, args);
      return true;
    case 'frame':
      run.frame(target instanceof footprint.ModelCall ? target : run.nextPass(), args);
      return true;
    case 'resultShape': {
      if (!(target instanceof footprint.ToolCall)) throw new Error('resultShape belongs inside a toolCall');
      const { shape, ...options } = args;
      target.resultShape(shape, options);
      return true;
    }
    default:
      return false;
  }
}

function steps(target, list = [], run = target) {
  for (const step of list) {
    const { op, steps: inner, ...args } = step;
    if (integrityStep(run, target, op, args)) continue;
    switch (op) {
      case 'modelCall': {
        const { model, ...options } = args;
        target.modelCall(model, options, (call) => steps(call, inner, run));
        break;
      }
      case 'toolCall': {
        const { name, raises, ...options } = args;
        try {
          target.toolCall(name, options, (call) => {
            steps(call, inner, run);
            if (raises) {
              const error = new Error(raises);
              error.name = 'RuntimeError'; // the status says `<class>: <message>`, as Python's does
              throw error;
            }
          });
        } catch (error) {
          if (error.message !== raises) throw error;
        }
        break;
      }
      case 'evaluated': {
        const { activeIds, cursorTo, movedBy, cursorFrom, witness, witnessKeyword, skipped, routing } = args;
        target.evaluated(activeIds, { cursorTo, movedBy, cursorFrom, witness, witnessKeyword, skipped, routing });
        break;
      }
      case 'injected': {
        const { slot, source, ...options } = args;
        target.injected(slot, source, options);
        break;
      }
      case 'composed':
        target.composed(args.slot);
        break;
      case 'engagement':
        target.engagement(args.change);
        break;
      case 'usage':
        target.usage(args);
        break;
      case 'result':
        target.result(args.value, { error: args.error });
        break;
      case 'picked':
        target.picked(args.skillId, { hop: args.hop });
        break;
      case 'rejected':
        target.rejected(args.requestedId, args);
        break;
      case 'permission': {
        const { capability, target: what, result, ...options } = args;
        target.permission(capability, what, result, options);
        break;
      }
      case 'routed': {
        const { by, decider, ...options } = args;
        target.routed(by, { ...options, ...(decider === undefined ? {} : { deciderModel: decider }) });
        break;
      }
      case 'pause': {
        const { question, ...options } = args;
        target.pause(question, options);
        break;
      }
      case 'plan':
        target.plan(args);
        break;
      case 'keep': {
        const { injectionId, ...size } = args;
        target.keep(injectionId, size);
        break;
      }
      case 'tools':
        target.tools(args.definitions);
        break;
      case 'answer':
        target.answer(args.text);
        break;
      case 'event':
        target.event(args.type, args.payload);
        break;
      case 'emit':
        footprint.emit(args.type, args.payload, { compositionId: args.compositionId });
        break;
      default:
        throw new Error(`unknown op ${op}`);
    }
  }
}

/** Replays one recorder script on `tracer` (extra run options merged in). */
export function replay(script, tracer, extra = {}) {
  footprint.run({ ...script.run, tracer, ...extra }, (run) => steps(run, script.steps));
}

/** The spans of `order` (start order) as the vectors describe them. */
export function described(order) {
  const indexOf = new Map(order.spans.map((s, i) => [s.spanContext().spanId, i]));
  return order.spans.map((s) => spanJson(s, indexOf));
}
