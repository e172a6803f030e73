// The integrity inputs (issue 17) beyond the vectors: the frame with an instrumentation's model-call
// span (staged, then its own), and the declarations the recorder refuses (as the Python recorder does).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SpanKind } from '@opentelemetry/api';

import * as footprint from '../dist/index.js';
import { sdk, sdkWithHook } from './support.mjs';

const N = footprint.names;
const USER = [{ role: 'user', parts: [{ type: 'text', content: 'hi' }] }];

test("a frame stated before the model call lands on the instrumentation's span; after it, theirs stands", async (t) => {
  const { order, tracer } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a' }, (run) => {
    run.frame(run.nextPass(), { system: ['be careful'], messages: USER });
    const span = tracer.startSpan('chat m', { kind: SpanKind.CLIENT, attributes: { [N.GEN_AI_OPERATION_NAME]: 'chat' } });
    span.setAttribute(N.GEN_AI_OUTPUT_MESSAGES, '[theirs]');
    const call = run.nextPass(); // the next pass: the claimed one is gone
    assert.equal(call.iteration, 2);
    span.end();
  });
  const pass = order.spans[1];
  assert.equal(pass.attributes[N.PASS_ITERATION], 1);
  assert.equal(pass.attributes[N.GEN_AI_SYSTEM_INSTRUCTIONS], '[{"type": "text", "content": "be careful"}]');
  assert.equal(pass.attributes[N.GEN_AI_INPUT_MESSAGES], '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]');
  assert.equal(pass.attributes[N.GEN_AI_OUTPUT_MESSAGES], '[theirs]');
});

test('a frame stated on a claimed pass that is still open leaves the instrumentation its own', async (t) => {
  const { order, tracer, hook } = sdkWithHook(t);
  footprint.run({ tracer, agent: 'a' }, (run) => {
    const call = run.nextPass();
    const span = tracer.startSpan('chat m', { kind: SpanKind.CLIENT, attributes: { [N.GEN_AI_OPERATION_NAME]: 'chat' } });
    assert.equal(call.claimed, true);
    run.frame(call, { tools: [{ type: 'function', name: 'x' }], output: USER });
    span.end();
  });
  assert.equal(hook.attached, 1);
  const pass = order.spans[1];
  assert.equal(pass.attributes[N.GEN_AI_TOOL_DEFINITIONS], undefined);
  assert.equal(pass.attributes[N.GEN_AI_OUTPUT_MESSAGES], undefined);
});

for (const [what, call, message] of [
  ['a blank argumentsFrom', (run) => run.declareTool('t', { argumentsFrom: [''] }), /argumentsFrom/],
  ['argumentsFrom naming the tool itself', (run) => run.declareTool('t', { argumentsFrom: ['t'] }), /argumentsFrom/],
  ['an unknown checkColumnTypes', (run) => run.integritySettings({ checkColumnTypes: 'strict' }), /checkColumnTypes/],
  ['a non-boolean dial', (run) => run.integritySettings({ noticeEmptyLookups: 'yes' }), /noticeEmptyLookups/],
  ['an unknown posture', (run) => run.integritySettings({ posture: 'strict' }), /posture/],
  ['empty resultColumns', (run) => run.declareTool('t', { resultColumns: {} }), /non-empty/],
  ['an unknown column type', (run) => run.declareTool('t', { resultColumns: { c: 'unknown' } }), /type must be/],
  ['a blank column name', (run) => run.declareTool('t', { resultColumns: { ' ': 'number' } }), /blank/],
  [
    'a non-boolean nullable',
    (run) => run.declareTool('t', { resultColumns: { c: { type: 'number', nullable: 'yes' } } }),
    /nullable/,
  ],
  ['a blank ground value', (run) => run.externalGround(' ', 'cmdb'), /external ground/],
  ['a blank ground source', (run) => run.externalGround('x1234', ''), /external ground/],
  ['a blank claim entity', (run) => run.declareClaim('x', ' ', 'paths'), /non-blank/],
  ['an unknown result shape', (run) => run.toolCall('t', {}, (c) => c.resultShape('table')), /shape must be/],
  ['negative rows', (run) => run.toolCall('t', {}, (c) => c.resultShape('rowset', { rows: -1 })), /rows must be/],
  ['fractional rows', (run) => run.toolCall('t', {}, (c) => c.resultShape('rowset', { rows: 1.5 })), /rows must be/],
]) {
  test(`refused: ${what}`, async () => {
    const { provider, order } = sdk();
    assert.throws(() => footprint.run({ tracer: provider.getTracer('t'), agent: 'a' }, call), message);
    await provider.shutdown();
    // Nothing of the refused declaration was written.
    const written = order.spans.flatMap((s) => s.events.map((e) => e.name)).filter((n) => n !== 'exception');
    assert.deepEqual(written, [N.EV_TURN_START]);
  });
}
