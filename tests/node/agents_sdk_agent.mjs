// The stuck-turn agent of openai_agent.mjs written on the OpenAI Agents SDK (@openai/agents), traced by
// its OpenInference instrumentation (@arizeai/openinference-instrumentation-openai-agents, which turns
// the SDK's own tracing into OpenTelemetry spans), against the tests' fake OpenAI-compatible server.
// The package's adapter (footprintCallModelInputFilter, the SDK's callModelInputFilter) states each
// pass on the run right before the SDK calls the model; the span-start hook lands it on the LLM span
// the instrumentation makes for that call.
//
// Usage: node agents_sdk_agent.mjs --base-url URL [--endpoint URL] [--passes N] [--run-id ID]
//          [--project NAME] [--timeout-ms MS]
// Exports OTLP/HTTP protobuf to --endpoint (a base URL; /v1/traces is added). Prints one JSON summary
// line.
// Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments.

import { OpenAIAgentsInstrumentation } from '@arizeai/openinference-instrumentation-openai-agents';
import * as agents from '@openai/agents';
import {
  footprintCallModelInputFilter,
  footprintHook,
  names as N,
  run as footprintRun,
} from '@otel-footprint/recorder';
import OpenAI from 'openai';
import { z } from 'zod';

import { checkExported, failer, flushAndShutdown, parseAgentCli, startTracing } from './agent_support.mjs';
import { SCENARIO, runOptions, statePass } from './scenario.mjs';

const fail = failer('agents_sdk_agent.mjs');

async function main() {
  const { values, passes, timeoutMillis, runId } = parseAgentCli(fail, { runIdPrefix: 'agents-run' });
  const hook = footprintHook();
  const { provider, exporter, census, url } = startTracing({
    resource: {
      'service.name': 'otel-footprint-agents-sdk-agent',
      ...(values.project === undefined ? {} : { [N.OI_PROJECT_NAME]: values.project }),
    },
    endpoint: values.endpoint,
    timeoutMillis,
    hook,
  });
  // The SDK's own trace processors are replaced (exclusive): nothing is sent to OpenAI's backend.
  new OpenAIAgentsInstrumentation({ tracerProvider: provider }).manuallyInstrument(agents);
  agents.setDefaultOpenAIClient(
    new OpenAI({ apiKey: 'test-key', baseURL: values['base-url'], maxRetries: 0, timeout: timeoutMillis }),
  );
  agents.setOpenAIAPI('chat_completions');

  const S = SCENARIO;
  let toolCalls = 0;
  const result = await footprintRun(runOptions(provider.getTracer('agents-sdk-agent'), runId), async (run) => {
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
  });
  await flushAndShutdown(provider, exporter);
  const summary = { runId, ...result, toolCalls, attached: hook.attached, spans: census.spans, exported: exporter.exported };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  checkExported(fail, exporter, census.spans, url);
}

await main();
