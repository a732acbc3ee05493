// initializer.mjs — the CheckpointerTestInitializer of the validation suite: every
// checkpointer gets a store of its own (a fresh SQLite file, a fresh Redis prefix,
// PostgreSQL schema or MongoDB database), so no case sees another's checkpoints; each
// name starts with $CONVO_TEST_PREFIX (tests/redis-cluster.sh deletes those keys).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConvoSaver } from '../src/langgraph/index.js';

const base = process.env.CONVO_VALIDATE_URL || 'memory:';
// CONVO_VALIDATE_SYNC=0 / 1: the saver's `sync` option (unset: its default for the URL)
const sync = process.env.CONVO_VALIDATE_SYNC;
const options = sync === undefined || sync === '' ? {} : { sync: sync === '1' };
let dir = null;

function freshUrl() {
  const tag = (process.env.CONVO_TEST_PREFIX || '') + 'v' + randomBytes(6).toString('hex');
  if (base === 'memory:') return base;
  if (base.startsWith('sqlite:')) {
    dir ??= mkdtempSync(path.join(tmpdir(), 'convo-validate-'));
    return `sqlite:${path.join(dir, tag + '.db')}`;
  }
  const sep = base.includes('?') ? '&' : '?';
  if (base.startsWith('redis')) return `${base}${sep}prefix=${tag}`;
  if (base.startsWith('postgres')) return `${base}${sep}schema=${tag}`;
  if (base.startsWith('mongodb')) return `${base}${sep}database=${tag}`;
  throw new Error(`CONVO_VALIDATE_URL: no way to isolate ${base}`);
}

export const initializer = {
  checkpointerName: `ConvoSaver(${base.split(':')[0]}${sync ? `, sync ${sync}` : ''})`,
  async createCheckpointer() {
    const saver = new ConvoSaver(freshUrl(), options);
    await saver.store();
    return saver;
  },
  async destroyCheckpointer(saver) {
    await saver.close();
  },
  afterAll() {
    if (dir) rmSync(dir, { recursive: true, force: true });
  },
};
