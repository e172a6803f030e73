// A scripted agent (no model, no network but the OTLP endpoint) that emits the otel_footprint input
// schema on its own spans with the official OpenTelemetry JS SDK, then flushes and exits.
//
// Scenario: the reference's "30-call stuck turn". The skill map [zone-audit, run-finder] owns the tool
// get_zone_info; pass 1 places the cursor on zone-audit by an entry rule (lexical, witness "zone");
// every later pass stays there while the model only calls the foreign tool screen_open. This agent has
// no kernel (shadow mode: footprint.enforced = false), so zone-audit rides all passes; the processor is
// expected to say the map should have parked on pass 4 and what riding on cost.
//
// Usage: node agent.mjs [--endpoint URL] [--protocol grpc|http/protobuf] [--passes N] [--run-id ID]
//                       [--project NAME] [--timeout-ms MS]
// The endpoint defaults to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT, then to
// the OTLP default port of the protocol on 127.0.0.1. Prints one JSON summary line on stdout.
// Exit status: 0 all spans exported, 1 an export failed, 2 bad arguments or attribute names.
//
// Every footprint.* / gen_ai.* name and the payload codec come from the package @otel-footprint/recorder
// (js/otel-footprint, built; its names are generated from otel_footprint/semconv.py and its codec is
// checked against the Python one by vectors), so nothing here spells a schema name by hand.

import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

import { SpanKind, context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { encodePayload, names as N } from '@otel-footprint/recorder';

import { CheckedExporter, checkExported, failer, flushAndShutdown, tracesUrl } from './agent_support.mjs';

const MAX_PASSES = 1000; // bounded: two spans per pass must fit the batch queue below
const QUEUE_SIZE = 4096;

const fail = failer('agent.mjs');

// --- the scripted scenario -------------------------------------------------------------------------

const contentHash = (text) => createHash('sha256').update(text).digest('hex').slice(0, 8);

const USER_PROMPT = 'find the most recent zone redundancy run';
const BASE_PROMPT = 'You help people find and audit things.';
const SKILLS = [
  {
    id: 'zone-audit',
    description: 'audit zoneset redundancy',
    body: 'ZONE AUDIT PROCEDURE: call get_zone_info, classify single-path hosts.',
    tools: ['get_zone_info'],
  },
  { id: 'run-finder', description: 'find and open recorded runs', body: 'RUN FINDER', tools: [] },
];
const TOOLS = [
  { name: 'screen_open', description: 'Open a screen and look at it.' },
  { name: 'read_skill', description: 'Activate a skill for the next iteration.' },
  { name: 'get_zone_info', description: 'Zone redundancy audit data.' },
];
const ACTIVE = SKILLS[0];
const PLAN = {
  maps: [
    {
      id: 'skill-map',
      memberIds: SKILLS.map((s) => s.id),
      toolNames: [...new Set(SKILLS.flatMap((s) => s.tools))],
    },
  ],
  renewalGrace: 3,
  enforced: false,
};
const FOREIGN_TOOL = 'screen_open';
const FINAL_ANSWER = 'The most recent zone redundancy run is run-42.';

function row(slot, source, sourceId, text, reason) {
  return {
    contentSummary: text.slice(0, 80),
    contentHash: contentHash(text),
    slot,
    source,
    ...(sourceId === undefined ? {} : { sourceId }),
    reason,
    chars: text.length,
  };
}

function composed(slot, iteration, cap, rows) {
  const sourceBreakdown = {};
  for (const r of rows) {
    const entry = (sourceBreakdown[r.source] ??= { chars: 0, count: 0 });
    entry.chars += r.chars;
    entry.count += 1;
  }
  const used = rows.reduce((n, r) => n + r.chars, 0);
  return {
    slot,
    iteration,
    budget: { cap, used, headroomChars: cap - used },
    sourceBreakdown,
    droppedCount: 0,
    droppedSummaries: [],
  };
}

/** The footprint events of pass `iteration`, as [eventName, payload, compositionId?] triples. */
function passEvents(iteration, stage) {
  const cursorMove =
    iteration === 1
      ? { to: ACTIVE.id, by: 'entry', reachable: ['run-finder'], witness: { text: 'zone', keyword: 'zone' } }
      : { from: ACTIVE.id, to: ACTIVE.id, by: 'stay', reachable: ['run-finder'] };
  const systemRows = [
    row('system-prompt', 'base', undefined, BASE_PROMPT, 'Agent.system()'),
    row('system-prompt', 'skill', ACTIVE.id, ACTIVE.body, ACTIVE.description),
  ];
  const toolRows = [
    ...TOOLS.map((t) => row('tools', 'registry', t.name, `${t.name}: ${t.description}`, 'tool registry')),
    row(
      'tools',
      'skill',
      ACTIVE.id,
      `get_zone_info: ${TOOLS[2].description}`,
      `skill '${ACTIVE.id}' unlocked tool 'get_zone_info'`,
    ),
  ];
  const systemStage = `sf-system-prompt/compose#${stage}`;
  const toolsStage = `sf-tools/compose#${stage + 1}`;
  return [
    [
      N.EV_CONTEXT_EVALUATED,
      {
        iteration,
        activeCount: 1,
        skippedCount: 0,
        evaluatedTotal: SKILLS.length,
        activeIds: [ACTIVE.id],
        skippedDetails: [],
        triggerKindCounts: { rule: 1 },
        skillCatalog: SKILLS.map((s) => ({ id: s.id, description: s.description })),
        routing: [{ injectionId: ACTIVE.id, flavor: 'skill', via: 'entry', tools: ACTIVE.tools }],
        cursorMove,
      },
    ],
    ...systemRows.map((r) => [N.EV_CONTEXT_INJECTED, r, systemStage]),
    [N.EV_SLOT_COMPOSED, composed('system-prompt', iteration, 4000, systemRows), systemStage],
    ...toolRows.map((r) => [N.EV_CONTEXT_INJECTED, r, toolsStage]),
    [N.EV_SLOT_COMPOSED, composed('tools', iteration, 2000, toolRows), toolsStage],
  ];
}

function runAgent(tracer, { passes, runId }) {
  // A scripted turn takes microseconds, and the SDK stamps span starts in whole milliseconds: explicit,
  // strictly increasing times (1 ms per step, ending about now) keep the start order of passes and
  // tool calls unambiguous for a reader that orders by time.
  let clock = Date.now() - (passes * 10 + 10);
  const tick = (ms = 1) => (clock += ms);
  const run = tracer.startSpan(`${N.OP_INVOKE_AGENT} scripted-agent`, {
    kind: SpanKind.INTERNAL,
    startTime: tick(),
    attributes: {
      [N.GEN_AI_OPERATION_NAME]: N.OP_INVOKE_AGENT,
      [N.GEN_AI_AGENT_NAME]: 'scripted-agent',
      [N.RUN_ID]: runId,
    },
  });
  const emit = (span, name, payload, compositionId) =>
    span.addEvent(name, encodePayload(payload, compositionId), tick(0.01));
  emit(run, N.EV_GRAPH_DECLARED, {
    nodes: SKILLS.map((s) => ({ id: s.id, kind: 'skill', description: s.description, label: s.id })),
    edges: [
      { from: null, to: 'zone-audit', kind: 'entry' },
      { from: 'zone-audit', to: 'run-finder', kind: 'model' },
    ],
  });
  emit(run, N.EV_MAPS_MOUNTED, PLAN);
  emit(run, N.EV_TURN_START, { turnIndex: 0, userPrompt: USER_PROMPT });

  const inRun = trace.setSpan(context.active(), run);
  let toolCalls = 0;
  for (let iteration = 1; iteration <= passes; iteration += 1) {
    const chat = tracer.startSpan(
      `${N.OP_CHAT} scripted-model`,
      {
        kind: SpanKind.CLIENT,
        startTime: tick(),
        attributes: {
          [N.GEN_AI_OPERATION_NAME]: N.OP_CHAT,
          [N.GEN_AI_REQUEST_MODEL]: 'scripted-model',
          [N.GEN_AI_PROVIDER_NAME]: 'scripted',
          [N.PASS_ITERATION]: iteration,
        },
      },
      inRun,
    );
    for (const [name, payload, compositionId] of passEvents(iteration, iteration * 10)) {
      emit(chat, name, payload, compositionId);
    }
    chat.end(tick(5));
    if (iteration === passes) break; // the last pass answers instead of calling a tool
    toolCalls += 1;
    const tool = tracer.startSpan(
      `${N.OP_EXECUTE_TOOL} ${FOREIGN_TOOL}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: tick(),
        attributes: {
          [N.GEN_AI_OPERATION_NAME]: N.OP_EXECUTE_TOOL,
          [N.GEN_AI_TOOL_NAME]: FOREIGN_TOOL,
          [N.GEN_AI_TOOL_CALL_ID]: `c${iteration}`,
          [N.GEN_AI_TOOL_CALL_RESULT]: 'screen shows: runs list',
          [N.PASS_ITERATION]: iteration, // the pass whose model output asked for this call
        },
      },
      inRun,
    );
    tool.end(tick(2));
  }
  emit(run, N.EV_TURN_END, { turnIndex: 0, finalContent: FINAL_ANSWER, iterationCount: passes });
  run.end(tick());
  const { traceId, spanId } = run.spanContext();
  return { traceId, runSpanId: spanId, toolCalls };
}

// --- export plumbing -------------------------------------------------------------------------------

function makeExporter(protocol, endpoint, timeoutMillis) {
  if (protocol === 'grpc') return new GrpcTraceExporter({ url: endpoint, timeoutMillis });
  return new ProtoTraceExporter({ url: tracesUrl(endpoint), timeoutMillis });
}

function parseCli(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        endpoint: { type: 'string' },
        protocol: { type: 'string' },
        passes: { type: 'string', default: '30' },
        'run-id': { type: 'string' },
        project: { type: 'string' },
        'timeout-ms': { type: 'string', default: '10000' },
      },
      strict: true,
    }));
  } catch (err) {
    fail(2, err.message);
  }
  const env = process.env;
  const protocol = values.protocol ?? env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'grpc';
  if (protocol !== 'grpc' && protocol !== 'http/protobuf') {
    fail(2, `--protocol must be grpc or http/protobuf, got ${protocol}`);
  }
  const defaultEndpoint = protocol === 'grpc' ? 'http://127.0.0.1:4317' : 'http://127.0.0.1:4318';
  const endpoint =
    values.endpoint ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT ?? defaultEndpoint;
  const passes = Number(values.passes);
  if (!Number.isInteger(passes) || passes < 1 || passes > MAX_PASSES) {
    fail(2, `--passes must be an integer in 1..${MAX_PASSES}, got ${values.passes}`);
  }
  const timeoutMillis = Number(values['timeout-ms']);
  if (!Number.isInteger(timeoutMillis) || timeoutMillis < 1) fail(2, '--timeout-ms must be a positive integer');
  return {
    protocol,
    endpoint,
    passes,
    timeoutMillis,
    project: values.project,
    runId: values['run-id'] ?? `node-run-${Date.now()}-${process.pid}`,
  };
}

async function main() {
  const cli = parseCli(process.argv.slice(2));
  const exporter = new CheckedExporter(makeExporter(cli.protocol, cli.endpoint, cli.timeoutMillis));
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'otel-footprint-node-agent',
      ...(cli.project === undefined ? {} : { [N.OI_PROJECT_NAME]: cli.project }),
    }),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        maxQueueSize: QUEUE_SIZE,
        maxExportBatchSize: 512,
        scheduledDelayMillis: 200,
        exportTimeoutMillis: cli.timeoutMillis,
      }),
    ],
  });
  const tracer = provider.getTracer('otel-footprint-node-agent', '0.1.0');
  const result = runAgent(tracer, cli);
  await flushAndShutdown(provider, exporter);
  const spans = 1 + cli.passes + result.toolCalls;
  process.stdout.write(
    `${JSON.stringify({
      runId: cli.runId,
      traceId: result.traceId,
      runSpanId: result.runSpanId,
      passes: cli.passes,
      toolCalls: result.toolCalls,
      spans,
      exported: exporter.exported,
      protocol: cli.protocol,
      endpoint: cli.endpoint,
    })}\n`,
  );
  checkExported(fail, exporter, spans, cli.endpoint);
}

await main();
