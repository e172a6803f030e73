// The integrity tests' auditor (tests/integrity_agent.py: list_hosts, then get_host on a host it was
// shown or one it invented) written on the Vercel AI SDK (`ai` 6, `generateText` with
// `experimental_telemetry`), against the fake OpenAI-compatible server scripted for model `agent-m`.
// It states only what no span carries (the map, the tool declaration, the pass's engagement); the
// offered tools, the frame and the tool calls are read from the SDK's own spans.
//
// Usage: node ai_sdk_integrity.mjs --base-url URL [--endpoint URL] [--run-id ID] [--timeout-ms MS]
// Prints one JSON summary line. Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments.

import { createOpenAI } from '@ai-sdk/openai';
import { footprintHook, footprintSteps, run as footprintRun } from '@otel-footprint/recorder';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';

import { checkExported, failer, flushAndShutdown, parseAgentCli, startTracing } from './agent_support.mjs';

const fail = failer('ai_sdk_integrity.mjs');
const HOSTS = [
  { host: 'host-alpha-01', zone: 'north' },
  { host: 'host-beta-02', zone: 'south' },
];

function fn(description, properties, execute) {
  return tool({ description, inputSchema: jsonSchema({ type: 'object', properties }), execute });
}

const TOOLS = {
  screen_open: fn('screen_open tool', { screen: { type: 'string' } }, async () => 'screen opened'),
  get_zone_info: fn('get_zone_info tool', { zone: { type: 'string' } }, async () => '{"zone":"north","paths":2}'),
  list_hosts: fn('list_hosts tool', {}, async () => JSON.stringify(HOSTS)),
  get_host: fn('get_host tool', { machine: { type: 'string' } }, async ({ machine }) =>
    JSON.stringify(HOSTS.filter((h) => h.host === machine)),
  ),
};

async function main() {
  const { values, timeoutMillis, runId } = parseAgentCli(fail, { runIdPrefix: 'ai-sdk-auditor' });
  const hook = footprintHook();
  const { provider, exporter, census, url } = startTracing({
    resource: { 'service.name': 'otel-footprint-ai-sdk-auditor' },
    endpoint: values.endpoint,
    timeoutMillis,
    hook,
  });
  const openai = createOpenAI({ apiKey: 'test-key', baseURL: values['base-url'] });
  const options = {
    tracer: provider.getTracer('auditor'),
    agent: 'auditor',
    runId,
    maps: [{ id: 'skill-map', memberIds: ['zone-audit', 'run-finder'], toolNames: ['get_zone_info'] }],
  };
  const result = await footprintRun(options, async (run) => {
    run.declareTool('get_host', { argumentsFrom: ['list_hosts'] });
    const outcome = await generateText({
      model: openai.chat('agent-m'),
      system: 'You audit zone redundancy. Use the tools.',
      prompt: 'find the most recent zone redundancy run',
      tools: TOOLS,
      stopWhen: stepCountIs(12),
      maxRetries: 0,
      experimental_telemetry: { isEnabled: true, tracer: provider.getTracer('ai') },
      ...footprintSteps((pass) =>
        pass.evaluated(['zone-audit'], {
          cursorTo: 'zone-audit',
          ...(pass.iteration === 1 ? { movedBy: 'entry', witness: 'zone' } : { movedBy: 'stay' }),
        }),
      ),
    });
    run.answer(outcome.text);
    return { passes: run.iteration, unattached: run.unattached };
  });
  await flushAndShutdown(provider, exporter);
  process.stdout.write(`${JSON.stringify({ runId, ...result, attached: hook.attached, spans: census.spans, exported: exporter.exported })}\n`);
  checkExported(fail, exporter, census.spans, url);
}

await main();
