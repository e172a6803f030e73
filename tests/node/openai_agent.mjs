// A tool-calling agent on the `openai` npm client against an OpenAI-compatible server (the tests' fake
// on loopback), instrumented by one real JavaScript instrumentation, recorded with the package
// @otel-footprint/recorder: the agent states each pass on the run; the span-start hook attaches it
// to the model-call span the instrumentation makes (no span of the recorder's own for model calls).
//
// The scenario (the stuck turn, shorter) is scenario.mjs's, shared with the Python agent of the test.
//
// Usage: node openai_agent.mjs --base-url URL --instrumentation otel|openinference|traceloop|none
//          [--style next|helper] [--endpoint URL] [--passes N] [--run-id ID] [--project NAME]
//          [--timeout-ms MS]
// --style next (default): the pass is stated on `run.nextPass()`; helper: inside `run.modelCall(...)`, which
// makes the recorder's own `chat <model>` span only when no instrumentation made one.
// Exports OTLP/HTTP protobuf to --endpoint (a base URL; /v1/traces is added). Prints one JSON summary
// line. Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments.

import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { footprintHook, names as N, run as footprintRun } from '@otel-footprint/recorder';

import { SCENARIO, statePass } from './scenario.mjs';

const require = createRequire(import.meta.url);

function fail(status, message) {
  process.stderr.write(`openai_agent.mjs: ${message}\n`);
  process.exit(status);
}

/** Delegates to the OTLP exporter and remembers every result: the SDK only logs failed exports. */
class CheckedExporter {
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

/** Counts the spans this process started, by whether a recognised model-call span carries a pass. */
class Census {
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

/** The instrumentation, enabled on `provider` before `openai` is loaded. */
function instrument(which, provider) {
  let instrumentation;
  if (which === 'otel') {
    const { OpenAIInstrumentation } = require('@opentelemetry/instrumentation-openai');
    instrumentation = new OpenAIInstrumentation();
  } else if (which === 'openinference') {
    const { OpenAIInstrumentation } = require('@arizeai/openinference-instrumentation-openai');
    instrumentation = new OpenAIInstrumentation();
  } else if (which === 'traceloop') {
    const { OpenAIInstrumentation } = require('@traceloop/instrumentation-openai');
    instrumentation = new OpenAIInstrumentation();
  } else if (which === 'none') {
    return;
  } else {
    fail(2, `--instrumentation must be otel, openinference, traceloop or none, got ${which}`);
  }
  instrumentation.setTracerProvider(provider);
  instrumentation.enable();
}

async function agentLoop(client, tracer, { runId, passes, style }) {
  const S = SCENARIO;
  return footprintRun(
    {
      tracer,
      agent: S.agent,
      runId,
      maps: [{ id: 'skill-map', memberIds: S.members, toolNames: [S.zoneTool] }],
      renewalGrace: 3,
      enforced: false,
      userPrompt: S.userPrompt,
      graph: S.graph,
    },
    async (run) => {
      const messages = [
        { role: 'system', content: `${S.basePrompt}\n${S.skillBody}` },
        { role: 'user', content: S.userPrompt },
      ];
      const tools = S.toolRows.map(([name, description]) => ({
        type: 'function',
        function: { name, description, parameters: { type: 'object', properties: {} } },
      }));
      let modelCalls = 0;
      let toolCalls = 0;
      for (;;) {
        const model = `scripted-${passes}`;
        let reply;
        if (style === 'next') {
          // State the pass on the run; the hook attaches it to the instrumentation's span.
          const pass = run.nextPass();
          statePass(pass, pass.iteration);
          reply = await client.chat.completions.create({ model, messages, tools });
        } else {
          // The explicit helper: the instrumentation's span when there is one, else its own.
          reply = await run.modelCall(model, {}, async (call) => {
            statePass(call, call.iteration);
            return client.chat.completions.create({ model, messages, tools });
          });
        }
        modelCalls += 1;
        const message = reply.choices[0].message;
        messages.push(message);
        if (!message.tool_calls?.length) {
          run.answer(message.content ?? '');
          break;
        }
        for (const call of message.tool_calls) {
          toolCalls += 1;
          run.toolCall(call.function.name, { args: JSON.parse(call.function.arguments), callId: call.id }, (tool) =>
            tool.result(S.toolResult),
          );
          messages.push({ role: 'tool', tool_call_id: call.id, content: S.toolResult });
        }
        if (modelCalls > passes) fail(1, `the server kept calling tools after ${passes} passes`);
      }
      const { traceId, spanId } = run.span.spanContext();
      return { traceId, runSpanId: spanId, modelCalls, toolCalls, passes: run.iteration, unattached: run.unattached };
    },
  );
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        'base-url': { type: 'string' },
        instrumentation: { type: 'string', default: 'otel' },
        endpoint: { type: 'string', default: 'http://127.0.0.1:4318' },
        passes: { type: 'string', default: '6' },
        style: { type: 'string', default: 'next' },
        'run-id': { type: 'string' },
        project: { type: 'string' },
        'timeout-ms': { type: 'string', default: '10000' },
      },
      strict: true,
    }));
  } catch (err) {
    fail(2, err.message);
  }
  if (!values['base-url']) fail(2, '--base-url is required (the OpenAI-compatible server, .../v1)');
  const passes = Number(values.passes);
  if (!Number.isInteger(passes) || passes < 1 || passes > 100) fail(2, '--passes must be in 1..100');
  const timeoutMillis = Number(values['timeout-ms']);
  const style = values.style;
  if (style !== 'next' && style !== 'helper') fail(2, '--style must be next or helper');
  const runId = values['run-id'] ?? `openai-run-${Date.now()}-${process.pid}`;

  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const url = /\/v1\/traces\/?$/.test(values.endpoint)
    ? values.endpoint
    : `${values.endpoint.replace(/\/+$/, '')}/v1/traces`;
  const exporter = new CheckedExporter(new OTLPTraceExporter({ url, timeoutMillis }));
  const census = new Census();
  const hook = footprintHook();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': `otel-footprint-openai-agent-${values.instrumentation}`,
      ...(values.project === undefined ? {} : { [N.OI_PROJECT_NAME]: values.project }),
    }),
    spanProcessors: [hook, census, new BatchSpanProcessor(exporter, { scheduledDelayMillis: 100 })],
  });
  trace.setGlobalTracerProvider(provider);
  instrument(values.instrumentation, provider);
  const { OpenAI } = require('openai');
  const client = new OpenAI({ apiKey: 'test-key', baseURL: values['base-url'], maxRetries: 0, timeout: timeoutMillis });
  const result = await agentLoop(client, provider.getTracer('openai-agent'), { runId, passes, style });
  try {
    await provider.forceFlush();
    await provider.shutdown();
  } catch (err) {
    const errors = Array.isArray(err) ? err : [err];
    for (const e of errors) exporter.failures.push(e?.message ?? String(e));
  }
  const summary = {
    runId,
    instrumentation: values.instrumentation,
    style,
    ...result,
    attached: hook.attached,
    spans: census.spans,
    exported: exporter.exported,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  if (exporter.failures.length > 0 || exporter.exported !== census.spans) {
    fail(1, `exported ${exporter.exported}/${census.spans} span(s) to ${url}: ${[...new Set(exporter.failures)].join('; ')}`);
  }
}

await main();
