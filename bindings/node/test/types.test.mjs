// types.test.mjs — the package's TypeScript types (src/index.d.ts) compile, under
// strict mode, for the uses in test/types/usage.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

test('src/index.d.ts type-checks a user program', () => {
  const tsc = path.join(pkg, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(pkg, 'test', 'types', 'tsconfig.json')],
    { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
