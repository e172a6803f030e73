// The stuck-turn agent of openai_agent.mjs written on the OpenAI Agents SDK (@openai/agents), traced by
// its OpenInference instrumentation (@arizeai/openinference-instrumentation-openai-agents, which turns
// the SDK's own tracing into OpenTelemetry spans), against the tests' fake OpenAI-compatible server.
// The package's adapter (footprintCallModelInputFilter, the SDK's callModelInputFilter) states each
// pass on the run right before the SDK calls the model; the span-start hook lands it on the LLM span
// the instrumentation makes for that call.
//
// Usage: node agents_sdk_agent.mjs --base-url URL [--endpoint URL] [--passes N] [--run-id ID]
//          [--project NAME] [--timeout-ms MS]
// Exports OTLP/HTTP protobuf to --endpoint (/v1/traces is added). Prints one JSON summary line.
// Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments.

import { parseArgs } from 'node:util';

import { OpenAIAgentsInstrumentation } from '@arizeai/openinference-instrumentation-openai-agents';
import * as agents from '@openai/agents';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  footprintCallModelInputFilter,
  footprintHook,
  names as N,
  run as footprintRun,
} from '@otel-footprint/recorder';
import OpenAI from 'openai';
import { z } from 'zod';

import { SCENARIO, statePass } from './scenario.mjs';

function fail(status, message) {
  process.stderr.write(`agents_sdk_agent.mjs: ${message}\n`);
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

/** Counts the spans started in this process. */
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

async function main() {
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
  const runId = values['run-id'] ?? `agents-run-${Date.now()}-${process.pid}`;

  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const url = `${values.endpoint.replace(/\/+$/, '').replace(/\/v1\/traces$/, '')}/v1/traces`;
  const exporter = new CheckedExporter(new OTLPTraceExporter({ url, timeoutMillis }));
  const census = new Census();
  const hook = footprintHook();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'otel-footprint-agents-sdk-agent',
      ...(values.project === undefined ? {} : { [N.OI_PROJECT_NAME]: values.project }),
    }),
    spanProcessors: [hook, census, new BatchSpanProcessor(exporter, { scheduledDelayMillis: 100 })],
  });
  trace.setGlobalTracerProvider(provider);
  // The SDK's own trace processors are replaced (exclusive): nothing is sent to OpenAI's backend.
  new OpenAIAgentsInstrumentation({ tracerProvider: provider }).manuallyInstrument(agents);
  agents.setDefaultOpenAIClient(
    new OpenAI({ apiKey: 'test-key', baseURL: values['base-url'], maxRetries: 0, timeout: timeoutMillis }),
  );
  agents.setOpenAIAPI('chat_completions');

  const S = SCENARIO;
  let toolCalls = 0;
  const result = await footprintRun(
    {
      tracer: provider.getTracer('agents-sdk-agent'),
      agent: S.agent,
      runId,
      maps: [{ id: 'skill-map', memberIds: S.members, toolNames: [S.zoneTool] }],
      renewalGrace: 3,
      enforced: false,
      userPrompt: S.userPrompt,
      graph: S.graph,
    },
    async (run) => {
      const screenOpen = agents.tool({
        name: S.toolRows[0][0],
        description: S.toolRows[0][1],
        parameters: z.object({ screen: z.string() }),
        execute: async () => {
          toolCalls += 1;
          return S.toolResult;
        },
      });
      const agent = new agents.Agent({
        name: S.agent,
        instructions: `${S.basePrompt}\n${S.skillBody}`,
        model: `scripted-${passes}`,
        tools: [screenOpen],
      });
      // Each pass is stated right before the SDK calls the model (the input passes on unchanged).
      const callModelInputFilter = footprintCallModelInputFilter((pass) => statePass(pass, pass.iteration));
      const outcome = await agents.run(agent, S.userPrompt, { maxTurns: passes + 2, callModelInputFilter });
      run.answer(String(outcome.finalOutput ?? ''));
      const { traceId, spanId } = run.span.spanContext();
      return { traceId, runSpanId: spanId, passes: run.iteration, unattached: run.unattached };
    },
  );
  try {
    await provider.forceFlush();
    await provider.shutdown();
  } catch (err) {
    const errors = Array.isArray(err) ? err : [err];
    for (const e of errors) exporter.failures.push(e?.message ?? String(e));
  }
  const summary = { runId, ...result, toolCalls, attached: hook.attached, spans: census.spans, exported: exporter.exported };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  if (exporter.failures.length > 0 || exporter.exported !== census.spans) {
    fail(1, `exported ${exporter.exported}/${census.spans} span(s) to ${url}: ${[...new Set(exporter.failures)].join('; ')}`);
  }
}

await main();
