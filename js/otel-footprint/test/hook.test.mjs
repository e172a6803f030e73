// The span-start hook: a pass stated on the run lands on the model-call span an instrumentation starts
// next inside the run (with footprint.pass.iteration), exactly as the recorder's own span would carry it.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SpanKind, context, trace } from '@opentelemetry/api';

import * as footprint from '../dist/index.js';
import { described, sdk, sdkWithHook } from './support.mjs';

const N = footprint.names;

function statePass(call) {
  call.evaluated(['billing'], { cursorTo: 'billing', movedBy: 'intent', witness: 'refund' });
  call.injected('system-prompt', 'skill', { sourceId: 'billing', content: 'BILLING SKILL ✓' });
  call.injected('tools', 'registry', { sourceId: 'refund', chars: 12 }); // left open: the call closes it
}

/** An instrumentation's model call: a client span started in the active context, as theirs are. */
function instrumentedCall(tracer, attributes, name = 'chat m') {
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
  span.end();
  return span;
}

const events = (span) => span.events.map((e) => [e.name, e.attributes]);

test('a pass stated on the run lands on the next model-call span, with its number', async (t) => {
  const { hook, order, tracer } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a', runId: 'r' }, (run) => {
    instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' }); // a guard: nothing stated
    statePass(run.nextPass());
    instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' });
    instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' }); // a summary: nothing stated
    assert.equal(run.iteration, 1);
    run.answer('done');
  });
  const [, guard, pass, summary] = order.spans;
  assert.equal(hook.attached, 1);
  assert.deepEqual([guard.events, summary.events], [[], []]);
  assert.equal(guard.attributes[N.PASS_ITERATION], undefined);
  assert.equal(pass.attributes[N.PASS_ITERATION], 1);
  assert.deepEqual(
    pass.events.map((e) => e.name),
    [N.EV_CONTEXT_EVALUATED, N.EV_CONTEXT_INJECTED, N.EV_CONTEXT_INJECTED, N.EV_SLOT_COMPOSED, N.EV_SLOT_COMPOSED],
  );

  // The same statements through the recorder's own span (no hook) give the same events.
  const own = sdk();
  footprint.run({ tracer: own.tracer, agent: 'a', runId: 'r' }, (run) => {
    run.modelCall('m', {}, (call) => statePass(call));
  });
  assert.deepEqual(events(pass), events(own.order.spans[1]));
  await own.provider.shutdown();
});

for (const [library, attributes, name] of [
  ['OpenTelemetry / OpenLLMetry (gen_ai.operation.name)', { [N.GEN_AI_OPERATION_NAME]: 'text_completion' }, 'x'],
  ['OpenInference (openinference.span.kind)', { [N.OPENINFERENCE_SPAN_KIND]: N.OI_KIND_LLM }, 'OpenAI Chat Completions'],
  ['older OpenLLMetry (llm.request.type)', { [N.LLM_REQUEST_TYPE]: 'completion' }, 'openai.completion'],
  ['Vercel AI SDK (ai.operationId)', { [N.AI_SDK_OPERATION_ID]: 'ai.generateText.doGenerate' }, 'ai.generateText.doGenerate'],
  ['Vercel AI SDK, streamed (ai.operationId)', { [N.AI_SDK_OPERATION_ID]: 'ai.streamText.doStream' }, 'ai.streamText.doStream'],
]) {
  test(`recognised at start: ${library}`, async (t) => {
    const { order, tracer } = sdkWithHook(t);
    footprint.run({ tracer, agent: 'a' }, (run) => {
      statePass(run.nextPass());
      instrumentedCall(tracer, attributes, name);
    });
    assert.equal(order.spans[1].attributes[N.PASS_ITERATION], 1);
    assert.equal(order.spans[1].events.length, 5);
  });
}

test('a span whose recognising attributes come just after its start (OpenInference) is attached', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a' }, (run) => {
    const other = tracer.startSpan('HTTP POST'); // not a model call: watched, then left alone
    other.setAttribute('http.method', 'POST');
    other.end();
    statePass(run.nextPass());
    const span = tracer.startSpan('OpenAI Chat Completions');
    span.setAttributes({ [N.OPENINFERENCE_SPAN_KIND]: N.OI_KIND_LLM });
    span.end();
  });
  const [, http, llm] = order.spans;
  assert.deepEqual([http.events.length, http.attributes[N.PASS_ITERATION]], [0, undefined]);
  assert.deepEqual([llm.events.length, llm.attributes[N.PASS_ITERATION]], [5, 1]);
  assert.equal(Object.hasOwn(llm, 'setAttribute'), false, 'the watch is removed');
});

test('the model-call helper makes no second span under an instrumentation, and its own without one', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a' }, (run) => {
    run.modelCall('m', { provider: 'p' }, (call) => {
      statePass(call);
      instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' }, 'chat m (instrumented)');
    });
    run.modelCall('m', { provider: 'p' }, (call) => statePass(call)); // no instrumentation here
    run.toolCall('lookup', {}, (tool) => tool.result('ok'));
  });
  const names = order.spans.map((s) => s.name);
  assert.deepEqual(names, ['invoke_agent a', 'chat m (instrumented)', 'chat m', 'execute_tool lookup']);
  const [, instrumented, own, tool] = order.spans;
  assert.deepEqual(
    [instrumented.attributes[N.PASS_ITERATION], own.attributes[N.PASS_ITERATION], tool.attributes[N.PASS_ITERATION]],
    [1, 2, 2],
  );
  assert.equal(own.attributes[N.GEN_AI_PROVIDER_NAME], 'p');
  assert.equal(own.events.length, 5);
  assert.ok(own.startTime[0] * 1e3 + own.startTime[1] / 1e6 <= own.endTime[0] * 1e3 + own.endTime[1] / 1e6);
});

test('a stated pass no model call took is counted, not written anywhere', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  let leg;
  footprint.run({ tracer, agent: 'a' }, (run) => {
    leg = run;
    statePass(run.nextPass());
  });
  assert.equal(leg.unattached, 1);
  assert.equal(order.spans.length, 1);
  if (N.EV_RECORD_PROBLEM !== undefined) {
    const [problem] = order.spans[0].events.filter((e) => e.name === N.EV_RECORD_PROBLEM);
    assert.equal(problem.attributes[N.F_CODE], 'unattached-pass');
    assert.equal(problem.attributes[N.F_ITERATION], 1);
    assert.match(problem.attributes[N.F_MESSAGE], /no model-call span started inside the run/);
  }
});

test('a span name alone, or a GenAI operation that is no model call, is no pass (as in Python)', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  let leg;
  footprint.run({ tracer, agent: 'a' }, (run) => {
    leg = run;
    statePass(run.nextPass());
    instrumentedCall(tracer, {}, 'chat gpt-x');
    instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'embeddings', [N.OPENINFERENCE_SPAN_KIND]: 'LLM' });
  });
  assert.deepEqual(order.spans.slice(1).map((s) => s.events.length), [0, 0]); // nothing attached
  assert.equal(leg.unattached, 1);
  // The run says why, once semconv.py has the recorder's problem event (record.problem).
  const said = order.spans[0].events.map((e) => e.name);
  assert.deepEqual(said, N.EV_RECORD_PROBLEM === undefined ? [N.EV_TURN_START] : [N.EV_TURN_START, N.EV_RECORD_PROBLEM]);
});

test('run.evaluated / injected / composed state the next pass; a helper around it is the same pass', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a' }, (run) => {
    const pass = run.evaluated(['billing']);
    assert.equal(run.injected('system-prompt', 'base', { content: 'x' }), pass);
    assert.equal(run.composed('system-prompt'), pass);
    assert.equal(pass.iteration, 1);
    assert.ok(pass.staged);
    run.modelCall('m', {}, (call) => {
      assert.equal(call, pass);
      instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' });
      call.usage({ inputTokens: 3 }); // the instrumentation's span: its usage is its own
    });
    assert.ok(pass.claimed);
    pass.evaluated(['late']); // after the span ended: on the run span, tied by its iteration
  });
  const [runSpan, llm] = order.spans;
  assert.deepEqual(llm.events.map((e) => e.name), [N.EV_CONTEXT_EVALUATED, N.EV_CONTEXT_INJECTED, N.EV_SLOT_COMPOSED]);
  assert.equal(llm.attributes[N.GEN_AI_USAGE_INPUT_TOKENS], undefined);
  assert.equal(runSpan.events.at(-1).name, N.EV_CONTEXT_EVALUATED);
  assert.equal(runSpan.events.at(-1).attributes[N.F_ITERATION], 1);
});

test('outside a run, and after the hook is shut down, spans are left alone', async () => {
  const hook = footprint.footprintHook();
  const { provider, order, tracer } = sdk([hook]);
  instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' });
  await hook.shutdown();
  const run = footprint.startRun({ tracer, agent: 'a' });
  context.with(run.context, () => {
    const call = run.startModelCall('m'); // no hook any more: the recorder's own span at the end
    assert.equal(call.span, undefined);
    call.end();
    assert.equal(call.span?.attributes[N.PASS_ITERATION], 1);
  });
  run.end();
  assert.deepEqual(
    order.spans.map((s) => [s.name, s.attributes[N.PASS_ITERATION]]),
    [['chat m', undefined], ['invoke_agent a', undefined], ['chat m', 1]],
  );
  await provider.shutdown();
});

test('log records: each event as a log record tied to its span', async () => {
  const records = [];
  const logger = { emit: (record) => records.push(record) };
  const { provider, tracer } = sdk();
  footprint.run({ tracer, agent: 'a', emitAs: 'log', logger, userPrompt: 'hi' }, (run) => {
    run.modelCall('m', {}, (call) => call.evaluated(['x']));
  });
  assert.deepEqual(
    records.map((r) => [r.eventName, trace.getSpan(r.context)?.name]),
    [
      [N.EV_TURN_START, 'invoke_agent a'],
      [N.EV_CONTEXT_EVALUATED, 'chat m'],
    ],
  );
  assert.deepEqual(records[0].attributes, { [N.F_TURN_INDEX]: 0, [N.F_USER_PROMPT]: 'hi' });
  assert.throws(() => footprint.startRun({ tracer, agent: 'a', emitAs: 'log' }), /needs a logger/);
  await provider.shutdown();
});

test('a plan that cannot be mounted is refused loudly', () => {
  const { tracer } = sdk();
  assert.throws(() => footprint.startRun({ tracer, agent: 'a', maps: [{ id: 'm', memberIds: [], toolNames: [] }] }), footprint.PlanError);
  assert.throws(
    () => footprint.startRun({ tracer, agent: 'a', maps: [{ id: 'm', memberIds: ['x'], toolNames: [] }], renewalGrace: 0 }),
    /renewalGrace/,
  );
});

test('async callbacks: the run and the tool span end when the promise settles', async () => {
  const { provider, order, tracer } = sdk();
  const answer = await footprint.run({ tracer, agent: 'a' }, async (run) => {
    await run.toolCall('slow', {}, async (tool) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      tool.result({ rows: 2 });
    });
    await assert.rejects(
      run.toolCall('bad', {}, async () => {
        throw new Error('nope');
      }),
      /nope/,
    );
    return 'answer';
  });
  assert.equal(answer, 'answer');
  const [, slow, bad] = order.spans;
  assert.equal(slow.attributes[N.GEN_AI_TOOL_CALL_RESULT], '{"rows": 2}');
  assert.equal(bad.status.code, 2);
  assert.ok(order.spans.every((s) => s.ended));
  await provider.shutdown();
});

/** What the run said about a problem: its `record.problem` event (once semconv.py has it), else the diag warning. */
async function problemsOf(runSpan, fn) {
  const warnings = [];
  const { diag, DiagLogLevel } = await import('@opentelemetry/api');
  const sink = { warn: (m) => warnings.push(m), error() {}, info() {}, debug() {}, verbose() {} };
  diag.setLogger(sink, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  try {
    fn();
  } finally {
    diag.disable();
  }
  if (N.EV_RECORD_PROBLEM !== undefined) {
    return runSpan()
      .events.filter((e) => e.name === N.EV_RECORD_PROBLEM)
      .map((e) => e.attributes[N.F_CODE]);
  }
  return warnings.map((w) => /: ([a-z-]+): /.exec(w)?.[1]).filter(Boolean);
}

test('a framework span and the client span inside it are one call; two open calls side by side are not', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  const llm = { [N.OPENINFERENCE_SPAN_KIND]: N.OI_KIND_LLM };
  const chat = { [N.GEN_AI_OPERATION_NAME]: 'chat' };
  const problems = await problemsOf(
    () => order.spans[0],
    () =>
      footprint.run({ tracer, agent: 'a' }, (run) => {
        statePass(run.nextPass());
        const framework = tracer.startSpan('generation', { attributes: llm });
        context.with(trace.setSpan(context.active(), framework), () => {
          const client = tracer.startSpan('chat m', { attributes: chat }); // the same call: no pass, no problem
          client.end();
        });
        statePass(run.nextPass());
        const other = tracer.startSpan('chat m', { attributes: chat }); // while `framework` is still open
        other.end();
        framework.end();
      }),
  );
  const [, framework, client, other] = order.spans;
  assert.deepEqual(
    [framework, client, other].map((s) => s.attributes[N.PASS_ITERATION]),
    [1, undefined, 2],
  );
  assert.deepEqual(problems, ['concurrent-model-calls']);
});

test('run.land puts a staged pass on a span the hook could not recognise at its start', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a' }, (run) => {
    const pass = run.nextPass();
    statePass(pass);
    const span = tracer.startSpan('ChatModel'); // marked only at its end by its instrumentation
    assert.equal(run.land(pass, span), true);
    assert.equal(run.land(pass, span), false); // taken already
    span.end();
  });
  assert.deepEqual([order.spans[1].attributes[N.PASS_ITERATION], order.spans[1].events.length], [1, 5]);
});

test('a pass staged while another run is current says so when it goes unattached', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  const outer = footprint.startRun({ tracer, agent: 'outer', runId: 'outer' });
  const problems = await problemsOf(
    () => order.spans[0],
    () => {
      statePass(outer.nextPass()); // staged outside the run's context
      outer.end();
    },
  );
  assert.deepEqual(problems, ['unattached-pass']);
  if (N.EV_RECORD_PROBLEM !== undefined) {
    const [event] = order.spans[0].events.filter((e) => e.name === N.EV_RECORD_PROBLEM);
    assert.match(event.attributes[N.F_MESSAGE], /staged while run no run was the current run/);
  }
});

test('two runs interleaved in async tasks: each pass lands in its own run', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  const agent = (name) =>
    footprint.run({ tracer, agent: name, runId: name }, async (run) => {
      for (let i = 0; i < 3; i += 1) {
        run.evaluated([name]);
        await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 3));
        instrumentedCall(tracer, { [N.GEN_AI_OPERATION_NAME]: 'chat' }, `chat ${name}`);
      }
    });
  await Promise.all([agent('a'), agent('b')]);
  const runs = new Map(order.spans.filter((s) => s.attributes[N.RUN_ID]).map((s) => [s.spanContext().spanId, s.attributes[N.RUN_ID]]));
  const passes = order.spans.filter((s) => s.name.startsWith('chat '));
  assert.equal(passes.length, 6);
  for (const span of passes) {
    assert.equal(runs.get(span.parentSpanContext.spanId), span.name.slice(5));
    const [evaluated] = span.events;
    assert.deepEqual(evaluated.attributes[N.F_ACTIVE_IDS], [span.name.slice(5)]);
  }
  assert.deepEqual(passes.filter((s) => s.name === 'chat a').map((s) => s.attributes[N.PASS_ITERATION]), [1, 2, 3]);
});

test('the AI SDK: its run and tool spans are no pass; footprintSteps gives a pass up at its step end', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  const seen = [];
  let leg;
  await footprint.run({ tracer, agent: 'a' }, async (run) => {
    leg = run;
    const { prepareStep, onStepFinish } = footprint.footprintSteps((pass) => statePass(pass), {
      onStepFinish: () => seen.push([run.iteration, run.unattached]),
    });
    // Step 0: the model-call span takes the pass (the SDK's container span before it does not).
    await prepareStep({ stepNumber: 0 });
    instrumentedCall(tracer, { [N.AI_SDK_OPERATION_ID]: 'ai.generateText' }, 'ai.generateText');
    instrumentedCall(tracer, { [N.AI_SDK_OPERATION_ID]: 'ai.generateText.doGenerate' }, 'ai.generateText.doGenerate');
    instrumentedCall(tracer, { [N.AI_SDK_OPERATION_ID]: 'ai.toolCall' }, 'ai.toolCall');
    await onStepFinish({});
    // Steps 1 and 2: no span for them (telemetry off): each is given up when its step ends.
    await prepareStep({ stepNumber: 1 });
    await onStepFinish({});
    await prepareStep({ stepNumber: 2 });
    await onStepFinish({});
  });
  assert.deepEqual(seen, [[1, 0], [2, 1], [3, 2]]);
  assert.equal(leg.unattached, 2);
  assert.deepEqual(order.spans.slice(1).map((s) => s.attributes[N.PASS_ITERATION]), [undefined, 1, undefined]);
  if (N.EV_RECORD_PROBLEM !== undefined) {
    const problems = order.spans[0].events.filter((e) => e.name === N.EV_RECORD_PROBLEM);
    assert.deepEqual(problems.map((e) => e.attributes[N.F_ITERATION]), [2, 3]);
    assert.match(problems[0].attributes[N.F_MESSAGE], /the AI SDK step ended/);
  }
});
