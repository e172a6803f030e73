// A support desk with no footprint code at all, on one of three SDKs: only the SDK's own telemetry (or
// its OpenInference instrumentation) exporting OTLP, for the observed runs `otel-footprint serve` reads
// from those spans alone. The scenario is tests/observed_agents.py's: the customer's orders
// (find_orders), then an order's status (order_status), then the answer; the fake OpenAI-compatible
// server scripts the model, so model `invented-m` asks for an order id nothing served.
//
//   --sdk ai      Vercel AI SDK (`ai` 6, generateText with experimental_telemetry): ai.generateText is
//                 the trace's top span, its ai.generateText.doGenerate spans the model calls.
//   --sdk agents  @openai/agents + OpenInference: Agent workflow → support → turn → generation / tool.
//   --sdk openai  the `openai` client + OpenInference JS, a plain tool loop inside one span of the
//                 application's own (plain OpenTelemetry API: nothing traces the tool runs).
//   --sdk plain   for comparison, the same loop on the `openai` client with no instrumentation, written
//                 with the plain recorder (@otel-footprint/recorder: its own model-call spans, the
//                 frame stated with run.frame, each tool call with run.toolCall; one map, a shadow
//                 run: a recorder run with no plan is not decided).
//
// Usage: node zero_code_agent.mjs --sdk ai|agents|openai|plain --base-url URL --model M [--endpoint URL]
//          [--timeout-ms MS]
// Prints one JSON summary line. Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments.

import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

import { Census, CheckedExporter, checkExported, failer, flushAndShutdown, tracesUrl } from './agent_support.mjs';

const require = createRequire(import.meta.url);
const fail = failer('zero_code_agent.mjs');

const CUSTOMER = 'CUST-4411';
const ORDER = 'ORD-1234';
const PROMPT = `Where is my order? My customer number is ${CUSTOMER}.`;
const INSTRUCTIONS = 'You answer questions about orders.';
const SCHEMAS = {
  find_orders: ['the orders of a customer', 'customer'],
  order_status: ['the status of an order', 'order_id'],
};

let toolCalls = 0;
function runTool(name, args) {
  toolCalls += 1;
  if (name === 'find_orders') return args.customer === CUSTOMER ? JSON.stringify([{ order_id: ORDER }]) : '[]';
  return args.order_id === ORDER ? JSON.stringify([{ order_id: ORDER, status: 'shipped' }]) : '[]';
}

function parameters(field) {
  return { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] };
}

async function onAiSdk(provider, client, model) {
  const { createOpenAI } = await import('@ai-sdk/openai');
  const { generateText, jsonSchema, stepCountIs, tool } = await import('ai');
  const openai = createOpenAI({ apiKey: 'test-key', baseURL: client.baseURL });
  const tools = Object.fromEntries(
    Object.entries(SCHEMAS).map(([name, [description, field]]) => [
      name,
      tool({ description, inputSchema: jsonSchema(parameters(field)), execute: async (args) => runTool(name, args) }),
    ]),
  );
  const outcome = await generateText({
    model: openai.chat(model),
    system: INSTRUCTIONS,
    prompt: PROMPT,
    tools,
    stopWhen: stepCountIs(6),
    maxRetries: 0,
    experimental_telemetry: { isEnabled: true, tracer: provider.getTracer('ai') },
  });
  return outcome.text;
}

async function onAgentsSdk(provider, client, model) {
  const { OpenAIAgentsInstrumentation } = await import('@arizeai/openinference-instrumentation-openai-agents');
  const agents = await import('@openai/agents');
  // The SDK's own trace processors are replaced (exclusive): nothing is sent to OpenAI's backend.
  new OpenAIAgentsInstrumentation({ tracerProvider: provider }).manuallyInstrument(agents);
  agents.setDefaultOpenAIClient(client);
  agents.setOpenAIAPI('chat_completions');
  const tools = Object.entries(SCHEMAS).map(([name, [description, field]]) =>
    agents.tool({
      name,
      description,
      parameters: { ...parameters(field), additionalProperties: false },
      strict: true,
      execute: async (args) => runTool(name, args),
    }),
  );
  const agent = new agents.Agent({ name: 'support', instructions: INSTRUCTIONS, model, tools });
  const outcome = await agents.run(agent, PROMPT, { maxTurns: 6 });
  return String(outcome.finalOutput ?? '');
}

async function onOpenAI(provider, client, model) {
  const tools = Object.entries(SCHEMAS).map(([name, [description, field]]) => ({
    type: 'function',
    function: { name, description, parameters: parameters(field) },
  }));
  // The application's own span around the loop (plain OpenTelemetry): one trace per conversation.
  return provider.getTracer('support-desk').startActiveSpan('support-desk', async (span) => {
    try {
      const messages = [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: PROMPT },
      ];
      for (let turn = 0; turn < 6; turn += 1) {
        const reply = await client.chat.completions.create({ model, messages, tools });
        const message = reply.choices[0].message;
        messages.push(message);
        if (!message.tool_calls?.length) return message.content ?? '';
        for (const call of message.tool_calls) {
          const content = runTool(call.function.name, JSON.parse(call.function.arguments));
          messages.push({ role: 'tool', tool_call_id: call.id, content });
        }
      }
      return '';
    } finally {
      span.end();
    }
  });
}

/** The gen_ai message parts of an OpenAI chat message (for the plain recorder's run.frame). */
function genAiMessage(message) {
  if (message.role === 'tool') {
    return { role: 'tool', parts: [{ type: 'tool_call_response', id: message.tool_call_id, response: message.content }] };
  }
  const parts = message.content ? [{ type: 'text', content: message.content }] : [];
  for (const call of message.tool_calls ?? []) {
    parts.push({ type: 'tool_call', id: call.id, name: call.function.name, arguments: JSON.parse(call.function.arguments) });
  }
  return { role: message.role, parts };
}

async function onPlainRecorder(provider, client, model) {
  const { run: footprintRun } = await import('@otel-footprint/recorder');
  const tools = Object.entries(SCHEMAS).map(([name, [description, field]]) => ({
    type: 'function',
    function: { name, description, parameters: parameters(field) },
  }));
  const definitions = tools.map(({ function: f }) => ({ type: 'function', ...f }));
  const options = {
    tracer: provider.getTracer('support-desk'),
    agent: 'support',
    userPrompt: PROMPT,
    maps: [{ id: 'desk-map', memberIds: ['orders'], toolNames: ['order_status'] }],
    enforced: false,
  };
  return footprintRun(options, async (run) => {
    const messages = [{ role: 'user', content: PROMPT }];
    for (let turn = 0; turn < 6; turn += 1) {
      const message = await run.modelCall(model, {}, async (call) => {
        const move = call.iteration === 1 ? { movedBy: 'entry', witness: 'order' } : { movedBy: 'stay' };
        call.evaluated(['orders'], { cursorTo: 'orders', ...move });
        run.frame(call, { tools: definitions, system: [INSTRUCTIONS], messages: messages.map(genAiMessage) });
        const reply = await client.chat.completions.create({
          model,
          messages: [{ role: 'system', content: INSTRUCTIONS }, ...messages],
          tools,
        });
        const out = reply.choices[0].message;
        const finish = out.tool_calls?.length ? 'tool_call' : 'stop';
        run.frame(call, { output: [{ ...genAiMessage(out), finish_reason: finish }] });
        return out;
      });
      messages.push(message);
      if (!message.tool_calls?.length) {
        run.answer(message.content ?? '');
        return message.content ?? '';
      }
      for (const call of message.tool_calls) {
        const args = JSON.parse(call.function.arguments);
        const content = runTool(call.function.name, args);
        run.toolCall(call.function.name, { args, callId: call.id }, (tool) => tool.result(content));
        messages.push({ role: 'tool', tool_call_id: call.id, content });
      }
    }
    return '';
  });
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        sdk: { type: 'string' },
        'base-url': { type: 'string' },
        model: { type: 'string' },
        endpoint: { type: 'string', default: 'http://127.0.0.1:4318' },
        'timeout-ms': { type: 'string', default: '10000' },
      },
      strict: true,
    }));
  } catch (err) {
    fail(2, err.message);
  }
  const run = { ai: onAiSdk, agents: onAgentsSdk, openai: onOpenAI, plain: onPlainRecorder }[values.sdk];
  if (run === undefined) fail(2, '--sdk must be ai, agents, openai or plain');
  if (!values['base-url'] || !values.model) fail(2, '--base-url and --model are required');
  const timeoutMillis = Number(values['timeout-ms']);

  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const url = tracesUrl(values.endpoint);
  const exporter = new CheckedExporter(new OTLPTraceExporter({ url, timeoutMillis }));
  const census = new Census();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': `support-desk-${values.sdk}` }),
    spanProcessors: [census, new BatchSpanProcessor(exporter, { scheduledDelayMillis: 100 })],
  });
  trace.setGlobalTracerProvider(provider);
  if (values.sdk === 'openai') {
    const { OpenAIInstrumentation } = require('@arizeai/openinference-instrumentation-openai');
    const instrumentation = new OpenAIInstrumentation();
    instrumentation.setTracerProvider(provider);
    instrumentation.enable();
  }
  const { OpenAI } = require('openai');
  const client = new OpenAI({ apiKey: 'test-key', baseURL: values['base-url'], maxRetries: 0, timeout: timeoutMillis });
  const answer = await run(provider, client, values.model);
  await flushAndShutdown(provider, exporter);
  const summary = { sdk: values.sdk, answer, toolCalls, spans: census.spans, exported: exporter.exported };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  checkExported(fail, exporter, census.spans, url);
}

await main();
