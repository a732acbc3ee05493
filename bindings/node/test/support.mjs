// support.mjs — the stores the tests run on: memory:, a fresh SQLite file, and a
// fresh prefix / schema / database on every server named by CONVO_TEST_*_URL.
// CONVO_TEST_DRIVERS="redis ..." keeps only the drivers named (tests/redis-cluster.sh
// runs the suite on a cluster so); CONVO_TEST_PREFIX starts every fresh name (its
// keys can then be found and deleted).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const dirs = [];
process.on('exit', () => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

function withParam(url, key, value) {
  return `${url}${url.includes('?') ? '&' : '?'}${key}=${value}`;
}

/** A URL naming an empty store of the given kind, isolated from every other. */
export function freshUrl(base) {
  const tag = (process.env.CONVO_TEST_PREFIX || '') + 't' + randomBytes(6).toString('hex');
  if (base === 'memory:') return base;
  if (base === 'sqlite:') {
    const d = mkdtempSync(path.join(tmpdir(), 'convo-node-'));
    dirs.push(d);
    return `sqlite:${path.join(d, tag + '.db')}`;
  }
  if (base.startsWith('redis')) return withParam(base, 'prefix', tag);
  if (base.startsWith('postgres')) return withParam(base, 'schema', tag);
  if (base.startsWith('mongodb')) return withParam(base, 'database', tag);
  throw new Error(`no way to isolate a store on ${base}`);
}

const only = process.env.CONVO_TEST_DRIVERS ? process.env.CONVO_TEST_DRIVERS.split(/[\s,]+/) : null;

/** Whether the driver named (memory, sqlite, redis, postgres, mongo) is to be tested. */
export function wanted(name) {
  return !only || only.includes(name);
}

/** [name, base URL] of every driver to test on. */
export function drivers() {
  const out = [['memory', 'memory:'], ['sqlite', 'sqlite:']].filter(([name]) => wanted(name));
  for (const [name, env] of [['redis', 'CONVO_TEST_REDIS_URL'], ['postgres', 'CONVO_TEST_POSTGRES_URL'],
    ['mongo', 'CONVO_TEST_MONGO_URL']]) {
    if (!wanted(name)) continue;
    if (process.env[env]) out.push([name, process.env[env]]);
    else if (process.env.CONVO_REQUIRE_ALL === '1' || only) {
      throw new Error(`${env} is not set (${only ? `CONVO_TEST_DRIVERS names ${name}` : 'CONVO_REQUIRE_ALL=1'})`);
    }
  }
  return out;
}

