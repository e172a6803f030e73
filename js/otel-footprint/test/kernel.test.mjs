// The TypeScript kernel (src/policy.ts) on the engagement kernel's reference conformance cases: the
// upstream's own input/output pairs (tests/data/reference/conformance, 228 scenarios), every pass
// from its recorded prior state, every key compared (a key on one side only is a difference).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { advanceEngagement } from '../dist/index.js';

const CASES = new URL('../../../tests/data/reference/conformance/engagement-public.jsonl', import.meta.url);
const scenarios = readFileSync(CASES, 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line));

test('the reference cases are all there', () => {
  assert.equal(scenarios.length, 228);
  assert.equal(
    scenarios.reduce((n, s) => n + s.steps.length, 0),
    3053,
  );
});

test('every pass of every reference scenario advances as the upstream kernel did', () => {
  for (const scenario of scenarios) {
    const { maps, renewalGrace } = scenario.plan;
    for (const step of scenario.steps) {
      const pass = { ...step.pass, toolResults: step.pass.toolResults.map((r) => r.toolName) };
      const advance = advanceEngagement(maps, renewalGrace ?? 3, step.prior ?? undefined, pass);
      const where = `${scenario.name}, iteration ${step.pass.iteration}`;
      assert.deepEqual(advance.next, step.next, where);
      assert.deepEqual(advance.parkedInjectionIds, step.parkedInjectionIds, where);
      assert.deepEqual(advance.parkedToolNames, step.parkedToolNames, where);
      assert.deepEqual(advance.changes, step.changes, where);
    }
  }
});
