// A measurement, not a test: what recording costs per pass (a pass = evaluated + 6 injected + 2
// composed, staged on the run and landed by the hook on an instrumentation-style span), on the real
// SDK with a no-op exporting step. Run: npm run build && node scripts/bench.mjs [passes]

import { SpanKind, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';

import { encodePayload, footprintHook, names as N, run } from '../dist/index.js';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const passes = Number(process.argv[2] ?? 20000);
const provider = new BasicTracerProvider({ spanProcessors: [footprintHook()] });
const tracer = provider.getTracer('bench');

function onePass(target) {
  target.evaluated(['zone-audit'], { cursorTo: 'zone-audit', cursorFrom: 'zone-audit', movedBy: 'stay' });
  target.injected('system-prompt', 'base', { content: 'You help people find and audit things.' });
  target.injected('system-prompt', 'skill', { sourceId: 'zone-audit', content: 'ZONE AUDIT PROCEDURE '.repeat(8) });
  target.composed('system-prompt');
  for (const tool of ['screen_open', 'read_skill', 'get_zone_info']) target.injected('tools', 'registry', { sourceId: tool, content: tool });
  target.injected('tools', 'skill', { sourceId: 'zone-audit', content: 'get_zone_info: zone audit data' });
  target.composed('tools');
}

const started = process.hrtime.bigint();
run({ tracer, agent: 'bench', maps: [{ id: 'skill-map', memberIds: ['zone-audit'], toolNames: [] }] }, (leg) => {
  for (let i = 0; i < passes; i += 1) {
    onePass(leg.nextPass());
    tracer.startSpan('chat m', { kind: SpanKind.CLIENT, attributes: { [N.GEN_AI_OPERATION_NAME]: 'chat' } }).end();
  }
});
const elapsed = Number(process.hrtime.bigint() - started) / 1e9;

const payload = { iteration: 3, activeIds: ['a', 'b'], cursorMove: { from: 'a', to: 'b', by: 'intent' }, chars: 71, routing: [{ id: 'a', score: 0.5 }] };
const encodes = 200000;
const t0 = process.hrtime.bigint();
for (let i = 0; i < encodes; i += 1) encodePayload(payload, 'slot/compose#1');
const encodeSeconds = Number(process.hrtime.bigint() - t0) / 1e9;

console.log(
  JSON.stringify({
    passes,
    seconds: Number(elapsed.toFixed(3)),
    microsecondsPerPass: Number(((elapsed / passes) * 1e6).toFixed(1)),
    microsecondsPerEncode: Number(((encodeSeconds / encodes) * 1e6).toFixed(2)),
    node: process.version,
  }),
);
await provider.shutdown();
