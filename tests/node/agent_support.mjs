// What the Node.js agents of the end-to-end tests (agent.mjs, openai_agent.mjs, agents_sdk_agent.mjs)
// share: failing with an exit status, the OTLP/HTTP traces URL, an exporter that remembers every
// result, a span census, the command line of the two agents on an OpenAI-compatible server, their
// tracer provider, and the closing flush with its export check. Spells no schema name: the agents
// take every name from @otel-footprint/recorder.

import { parseArgs } from 'node:util';

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

/** `fail(status, message)` for the script `script`: the message on stderr, then exit `status`. */
export function failer(script) {
  return (status, message) => {
    process.stderr.write(`${script}: ${message}\n`);
    process.exit(status);
  };
}

/** OTLP/HTTP: a base URL gets the signal path; a full traces URL is used as given. */
export function tracesUrl(endpoint) {
  return /\/v1\/traces\/?$/.test(endpoint) ? endpoint : `${endpoint.replace(/\/+$/, '')}/v1/traces`;
}

/** Delegates to the OTLP exporter and remembers every result: the SDK only logs failed exports. */
export class CheckedExporter {
  constructor(inner) {
    this.inner = inner;
    this.exported = 0;
    this.failures = [];
  }

  export(spans, resultCallback) {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) this.exported += spans.length;
      else this.failures.push(result.error?.message ?? `export of ${spans.length} span(s) failed`);
      resultCallback(result);
    });
  }

  shutdown() {
    return this.inner.shutdown();
  }

  forceFlush() {
    return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve();
  }
}

/** Counts the spans started in this process (a span processor). */
export class Census {
  constructor() {
    this.spans = 0;
  }
  onStart() {
    this.spans += 1;
  }
  onEnd() {}
  forceFlush() {
    return Promise.resolve();
  }
  shutdown() {
    return Promise.resolve();
  }
}

/**
 * The command line of an agent on an OpenAI-compatible server: --base-url (required), --endpoint,
 * --passes (1..100), --run-id, --project, --timeout-ms, plus `options`. Bad arguments exit 2.
 */
export function parseAgentCli(fail, { options = {}, runIdPrefix }) {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        'base-url': { type: 'string' },
        endpoint: { type: 'string', default: 'http://127.0.0.1:4318' },
        passes: { type: 'string', default: '6' },
        'run-id': { type: 'string' },
        project: { type: 'string' },
        'timeout-ms': { type: 'string', default: '10000' },
        ...options,
      },
      strict: true,
    }));
  } catch (err) {
    fail(2, err.message);
  }
  if (!values['base-url']) fail(2, '--base-url is required (the OpenAI-compatible server, .../v1)');
  const passes = Number(values.passes);
  if (!Number.isInteger(passes) || passes < 1 || passes > 100) fail(2, '--passes must be in 1..100');
  return {
    values,
    passes,
    timeoutMillis: Number(values['timeout-ms']),
    runId: values['run-id'] ?? `${runIdPrefix}-${Date.now()}-${process.pid}`,
  };
}

/**
 * The global tracer provider of an agent on an OpenAI-compatible server, exporting OTLP/HTTP protobuf
 * to `endpoint`: `hook` first (it must see each span start before the others), then a census and the
 * batch export. Returns the provider, its checked exporter, the census and the traces URL.
 */
export function startTracing({ resource, endpoint, timeoutMillis, hook }) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const url = tracesUrl(endpoint);
  const exporter = new CheckedExporter(new OTLPTraceExporter({ url, timeoutMillis }));
  const census = new Census();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: [hook, census, new BatchSpanProcessor(exporter, { scheduledDelayMillis: 100 })],
  });
  trace.setGlobalTracerProvider(provider);
  return { provider, exporter, census, url };
}

/** Flushes and shuts `provider` down; a failed batch rejects the flush with the exporter's errors,
 * which `exporter` keeps with the ones it recorded itself. */
export async function flushAndShutdown(provider, exporter) {
  try {
    await provider.forceFlush();
    await provider.shutdown();
  } catch (err) {
    const errors = Array.isArray(err) ? err : [err];
    for (const e of errors) exporter.failures.push(e?.message ?? String(e));
  }
}

/** Exits 1 (through `fail`) unless all `spans` spans reached `where` and no export failed. */
export function checkExported(fail, exporter, spans, where) {
  if (exporter.failures.length > 0 || exporter.exported !== spans) {
    fail(1, `exported ${exporter.exported}/${spans} span(s) to ${where}: ${[...new Set(exporter.failures)].join('; ')}`);
  }
}
