// Replays the vectors generated from the Python recorder (scripts/js_vectors.py): the same payloads
// and the same recorder calls make the same span-event names and attributes, byte for byte.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as footprint from '../dist/index.js';
import { described, replay, sdk, typedAttributes, vectors } from './support.mjs';

test('the generated names are every name of semconv.py', () => {
  assert.deepEqual({ ...footprint.names }, vectors('semconv.json'));
});

for (const vector of vectors('encode.json')) {
  test(`encode: ${vector.case}`, () => {
    assert.equal(footprint.eventNameOf(vector.type), vector.name);
    const attributes = footprint.encodePayload(vector.payload, vector.compositionId);
    assert.deepEqual(typedAttributes(attributes), vector.attributes);
  });
}

for (const vector of vectors('recorder.json')) {
  test(`recorder: ${vector.case}`, async () => {
    const { provider, order } = sdk();
    replay(vector, provider.getTracer('vectors'));
    await provider.shutdown();
    assert.deepEqual(described(order), vector.spans);
  });
}
