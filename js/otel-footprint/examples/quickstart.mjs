// docs/javascript.md's example, runnable: a two-pass agent recorded with @otel-footprint/recorder.
// The model call here is a stand-in span made the way client instrumentations make theirs (an
// OpenTelemetry `chat <model>` client span); with @opentelemetry/instrumentation-openai and the
// `openai` client, `await openai.chat.completions.create(...)` makes it instead.
//
// Run: npm run build && node examples/quickstart.mjs   (prints the spans and their footprint events)

import { SpanKind, context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { footprintHook, run } from '@otel-footprint/recorder';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter(); // yours: an OTLP exporter to `otel-footprint serve`
const provider = new BasicTracerProvider({
  // The one line: the hook first, then your exporting processor.
  spanProcessors: [footprintHook(), new SimpleSpanProcessor(exporter)],
});
trace.setGlobalTracerProvider(provider);
const tracer = trace.getTracer('quickstart');

/** Stands in for the instrumented `openai.chat.completions.create(...)`. */
async function chatCompletion(model) {
  const span = tracer.startSpan(`chat ${model}`, {
    kind: SpanKind.CLIENT,
    attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': model },
  });
  await new Promise((resolve) => setTimeout(resolve, 1));
  span.end();
  return { content: 'Order 1182 was charged twice.' };
}

await run(
  {
    agent: 'support',
    maps: [{ id: 'skill-map', memberIds: ['billing', 'shipping'], toolNames: ['lookup_order'] }],
    userPrompt: 'please refund my order 1182',
  },
  async (run) => {
    run.routed('intent', { to: 'billing', decisive: true });
    // Pass 1: say what goes into the call, then make it.
    run.evaluated(['billing'], { cursorTo: 'billing', movedBy: 'intent' });
    run.injected('system-prompt', 'skill', { sourceId: 'billing', content: 'BILLING: refunds...' });
    await chatCompletion('gpt-x');
    run.toolCall('lookup_order', { args: { id: 1182 } }, (tool) => tool.result([{ order: 1182, status: 'charged twice' }]));
    // Pass 2
    run.evaluated(['billing'], { cursorTo: 'billing', cursorFrom: 'billing' });
    run.injected('system-prompt', 'skill', { sourceId: 'billing', content: 'BILLING: refunds...' });
    const reply = await chatCompletion('gpt-x');
    run.answer(reply.content);
  },
);

for (const span of exporter.getFinishedSpans().sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1])) {
  const iteration = span.attributes['footprint.pass.iteration'];
  console.log(`${span.name}${iteration === undefined ? '' : ` (pass ${iteration})`}`);
  for (const event of span.events) console.log(`  ${event.name}`);
}
await provider.shutdown();
