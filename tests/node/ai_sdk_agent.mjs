// The stuck-turn agent of openai_agent.mjs written on the Vercel AI SDK (`ai` 6, `generateText` with
// `experimental_telemetry`, the `@ai-sdk/openai` chat model) against the tests' fake OpenAI-compatible
// server. The package's adapter (footprintSteps: the SDK's prepareStep and onStepFinish) states each
// pass on the run right before the SDK's step calls the model; the span-start hook lands it on the
// SDK's own `ai.generateText.doGenerate` span. The recipe of docs/javascript.md, "Vercel AI SDK".
//
// Usage: node ai_sdk_agent.mjs --base-url URL [--endpoint URL] [--passes N] [--run-id ID]
//          [--project NAME] [--timeout-ms MS] [--telemetry on|off] [--stream]
// --telemetry off: the SDK makes no spans, so no pass can land (the run says so step by step).
// --stream: streamText (its model calls are `ai.streamText.doStream` spans) instead of generateText.
// Exports OTLP/HTTP protobuf to --endpoint (a base URL; /v1/traces is added). Prints one JSON summary
// line (with `steps`: the run's iteration and unattached count seen at each step's end).
// Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments.

// recipe:start imports
import { createOpenAI } from '@ai-sdk/openai';
import { footprintHook, footprintSteps, names as N, run as footprintRun } from '@otel-footprint/recorder';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
// recipe:end

import { checkExported, failer, flushAndShutdown, parseAgentCli, startTracing } from './agent_support.mjs';
import { SCENARIO, runOptions, statePass } from './scenario.mjs';

const fail = failer('ai_sdk_agent.mjs');

async function main() {
  const { values, passes, timeoutMillis, runId } = parseAgentCli(fail, {
    options: { telemetry: { type: 'string', default: 'on' }, stream: { type: 'boolean', default: false } },
    runIdPrefix: 'ai-sdk-run',
  });
  if (!['on', 'off'].includes(values.telemetry)) fail(2, '--telemetry must be on or off');
  const hook = footprintHook();
  const { provider, exporter, census, url } = startTracing({
    resource: {
      'service.name': 'otel-footprint-ai-sdk-agent',
      ...(values.project === undefined ? {} : { [N.OI_PROJECT_NAME]: values.project }),
    },
    endpoint: values.endpoint,
    timeoutMillis,
    hook,
  });
  const openai = createOpenAI({ apiKey: 'test-key', baseURL: values['base-url'] });

  const S = SCENARIO;
  let toolCalls = 0;
  const model = openai.chat(`scripted-${passes}`);
  const system = `${S.basePrompt}\n${S.skillBody}`;
  const { userPrompt } = S;
  const screenOpen = tool({
    description: S.toolRows[0][1],
    inputSchema: z.object({ screen: z.string() }),
    execute: async () => {
      toolCalls += 1;
      return S.toolResult;
    },
  });
  const telemetry = values.telemetry === 'on';
  const generate = values.stream ? streamText : generateText; // the same options, the same spans
  const result = await footprintRun(runOptions(provider.getTracer('ai-sdk-agent'), runId), async (run) => {
    const steps = [];
    // recipe:start call
    const outcome = await generate({
      model,
      system,
      prompt: userPrompt,
      tools: { screen_open: screenOpen },
      stopWhen: stepCountIs(passes + 2),
      // The SDK's spans: each step's doGenerate span takes the step's pass (through footprintHook()).
      experimental_telemetry: { isEnabled: telemetry, tracer: provider.getTracer('ai') },
      // prepareStep states each step's pass before its model call; by onStepFinish, run.unattached
      // already counts a pass no span took.
      ...footprintSteps((pass) => statePass(pass, pass.iteration), {
        onStepFinish: () => steps.push([run.iteration, run.unattached]),
      }),
    });
    run.answer(await outcome.text);
    // recipe:end
    const { traceId, spanId } = run.span.spanContext();
    return { traceId, runSpanId: spanId, passes: run.iteration, unattached: run.unattached, steps };
  });
  await flushAndShutdown(provider, exporter);
  const summary = { runId, ...result, toolCalls, attached: hook.attached, spans: census.spans, exported: exporter.exported };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  checkExported(fail, exporter, census.spans, url);
}

await main();
