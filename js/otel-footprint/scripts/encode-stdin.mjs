// Reads JSON lines `{"type", "payload", "compositionId"?}` on stdin and writes, per line, the event
// name and the attributes the package encodes, typed as OTLP carries them (for tests/test_js_codec.py,
// which compares them with the Python codec on generated payloads).

import { createInterface } from 'node:readline';

import { encodePayload, eventNameOf } from '../dist/index.js';

const typed = (value) => {
  if (typeof value === 'boolean') return { bool: value };
  if (typeof value === 'number') return Number.isInteger(value) ? { int: value } : { double: value };
  if (typeof value === 'string') return { string: value };
  if (Array.isArray(value)) return { array: value.map(typed) };
  throw new TypeError(`not an attribute value: ${String(value)}`);
};

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') continue;
  const { type, payload, compositionId } = JSON.parse(line);
  const attributes = encodePayload(payload, compositionId ?? undefined);
  const out = Object.fromEntries(Object.keys(attributes).sort().map((k) => [k, typed(attributes[k])]));
  process.stdout.write(`${JSON.stringify({ name: eventNameOf(type), attributes: out })}\n`);
}
