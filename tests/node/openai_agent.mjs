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

import { footprintHook, names as N, run as footprintRun } from '@otel-footprint/recorder';

import { checkExported, failer, flushAndShutdown, parseAgentCli, startTracing } from './agent_support.mjs';
import { SCENARIO, requestTools, runOptions, statePass } from './scenario.mjs';

const require = createRequire(import.meta.url);
const fail = failer('openai_agent.mjs');

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
  return footprintRun(runOptions(tracer, runId), async (run) => {
    const messages = [
      { role: 'system', content: `${S.basePrompt}\n${S.skillBody}` },
      { role: 'user', content: S.userPrompt },
    ];
    const tools = requestTools();
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
  });
}

async function main() {
  const { values, passes, timeoutMillis, runId } = parseAgentCli(fail, {
    options: {
      instrumentation: { type: 'string', default: 'otel' },
      style: { type: 'string', default: 'next' },
    },
    runIdPrefix: 'openai-run',
  });
  const style = values.style;
  if (style !== 'next' && style !== 'helper') fail(2, '--style must be next or helper');

  const hook = footprintHook();
  const { provider, exporter, census, url } = startTracing({
    resource: {
      'service.name': `otel-footprint-openai-agent-${values.instrumentation}`,
      ...(values.project === undefined ? {} : { [N.OI_PROJECT_NAME]: values.project }),
    },
    endpoint: values.endpoint,
    timeoutMillis,
    hook,
  });
  instrument(values.instrumentation, provider);
  const { OpenAI } = require('openai');
  const client = new OpenAI({ apiKey: 'test-key', baseURL: values['base-url'], maxRetries: 0, timeout: timeoutMillis });
  const result = await agentLoop(client, provider.getTracer('openai-agent'), { runId, passes, style });
  await flushAndShutdown(provider, exporter);
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
  checkExported(fail, exporter, census.spans, url);
}

await main();
