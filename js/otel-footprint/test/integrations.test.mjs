// The Agents SDK adapter: a callModelInputFilter that states the pass right before each model call.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SpanKind } from '@opentelemetry/api';

import * as footprint from '../dist/index.js';
import { sdk, sdkWithHook } from './support.mjs';

const N = footprint.names;
const args = (input) => ({ modelData: { input, instructions: 'be brief' }, agent: { name: 'support' }, context: undefined });

test('the filter states a pass before each model call and passes the input on unchanged', async (t) => {
  const { order, tracer } = sdkWithHook(t);
  const seen = [];
  await footprint.run({ tracer, agent: 'a' }, async () => {
    const filter = footprint.footprintCallModelInputFilter((pass, call) => {
      seen.push([pass.iteration, call.agent.name, call.instructions, call.input.length]);
      pass.evaluated(['billing']);
    });
    for (const input of [['hi'], ['hi', 'tool result']]) {
      const data = args(input);
      assert.equal(await filter(data), data.modelData);
      tracer.startSpan('generation', { kind: SpanKind.CLIENT, attributes: { [N.OPENINFERENCE_SPAN_KIND]: 'LLM' } }).end();
    }
  });
  assert.deepEqual(seen, [
    [1, 'support', 'be brief', 1],
    [2, 'support', 'be brief', 2],
  ]);
  assert.deepEqual(
    order.spans.slice(1).map((s) => [s.attributes[N.PASS_ITERATION], s.events.map((e) => e.name)]),
    [
      [1, [N.EV_CONTEXT_EVALUATED]],
      [2, [N.EV_CONTEXT_EVALUATED]],
    ],
  );
});

test('a wrapped filter runs first; outside a run the filter says what is missing', async () => {
  const { tracer } = sdk();
  const wrapped = ({ modelData }) => ({ ...modelData, input: modelData.input.slice(-1) });
  let stated;
  await footprint.run({ tracer, agent: 'a' }, async (run) => {
    assert.equal(footprint.currentRun(), run);
    const filter = footprint.footprintCallModelInputFilter((pass, call) => (stated = call.input), { wrapped });
    assert.deepEqual((await filter(args(['a', 'b']))).input, ['b']);
  });
  assert.deepEqual(stated, ['b']);
  assert.equal(footprint.currentRun(), undefined);
  const filter = footprint.footprintCallModelInputFilter(() => {});
  await assert.rejects(filter(args([])), /no footprint run is open/);
});

test('a pass no span took is given up when the next model call comes, not at the run end', async (t) => {
  const { tracer } = sdkWithHook(t);
  const seen = [];
  let leg;
  await footprint.run({ tracer, agent: 'a' }, async (run) => {
    leg = run;
    const filter = footprint.footprintCallModelInputFilter((pass) => pass.evaluated(['billing']));
    for (const input of [['hi'], ['hi', 'r1'], ['hi', 'r1', 'r2']]) {
      await filter(args(input)); // no generation span: the instrumentation is off
      seen.push([run.iteration, run.unattached]);
    }
  });
  assert.deepEqual(seen, [[1, 0], [2, 1], [3, 2]]);
  assert.equal(leg.unattached, 3); // the last one at the run's end
});
