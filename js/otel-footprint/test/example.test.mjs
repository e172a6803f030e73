// The example of docs/javascript.md runs and prints what the document says it prints.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const DOC = new URL('../../../docs/javascript.md', import.meta.url);
const EXAMPLE = new URL('../examples/quickstart.mjs', import.meta.url);

test('examples/quickstart.mjs prints the listing of docs/javascript.md', () => {
  const doc = readFileSync(DOC, 'utf8');
  const listing = /<!-- quickstart-output -->\n```text\n([\s\S]*?)```/.exec(doc);
  assert.ok(listing, 'docs/javascript.md lost its quickstart-output listing');
  const printed = execFileSync(process.execPath, [EXAMPLE.pathname], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(printed, listing[1]);
});
