// The live policy's guard rails in the TypeScript recorder (its decisions are held to the Python
// recorder's by the policy vectors of vectors/recorder.json, its kernel by test/kernel.test.mjs).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as footprint from '../dist/index.js';
import { sdk } from './support.mjs';

const MAPS = [{ id: 'skill-map', memberIds: ['zone-audit'], toolNames: ['get_zone_info'] }];

test('the policy is asked only in a run that has one', async () => {
  const { provider, tracer } = sdk();
  assert.throws(() => footprint.startRun({ tracer, agent: 'a', policy: true }), /needs mounted maps/);
  assert.throws(() => footprint.startRun({ tracer, agent: 'a', maps: MAPS, policy: true, enforced: false }), /enforce mode/);
  assert.throws(() => footprint.startRun({ tracer, agent: 'a', maps: MAPS, policy: true, resumed: true }), /resumed/);
  footprint.run({ tracer, agent: 'a', maps: MAPS }, (run) => {
    assert.throws(() => run.plan({ cursorTo: 'zone-audit', movedBy: 'entry' }), /no live policy/);
  });
  footprint.run({ tracer, agent: 'a', maps: MAPS, policy: true }, (run) => {
    run.modelCall('m', {}, (call) => {
      assert.throws(() => call.keep('zone-audit'), /call plan/);
      const decision = call.plan({ cursorTo: 'zone-audit', movedBy: 'entry' });
      assert.deepEqual(decision.parkedMaps, []);
      assert.equal(call.keep('zone-audit', { content: 'body' }), true);
      assert.throws(() => call.evaluated(['zone-audit'], { cursorTo: 'zone-audit', movedBy: 'intent' }), /another cursor move/);
    });
  });
  await provider.shutdown();
});
