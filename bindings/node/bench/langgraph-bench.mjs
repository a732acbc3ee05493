// The 1,000-turn LangGraph conversation on convo's ConvoSaver and on LangGraph's own
// SqliteSaver and PostgresSaver, in one run: one checkpoint per turn whose `messages`
// channel holds the whole message list, as add_messages leaves it. Reports put/s, the
// put rate at turn 100 and at the last turn, the latest getTuple's time, bytes stored
// and bytes stored / raw message bytes. On a shared machine: the savers run one after
// the other in ROUNDS rounds (3 by default, the order turned each round) and each figure
// is the median over the rounds; the put rate at a turn comes from the median of the
// 50 puts ending there; the latest getTuple's time is the median of 30 calls. (Running
// the savers interleaved in one process charged LangGraph's garbage collection to
// convo's puts.) A bench, not a test: it asserts no timing, but it checks that every
// saver gives the conversation back whole.
//
//   node --expose-gc langgraph-bench.mjs [--turns N] [--payload BYTES] [--rounds R] [--only NAME,...] [--json]
//
// PostgreSQL comes from CONVO_BENCH_POSTGRES_URL or CONVO_TEST_POSTGRES_URL (skipped,
// with a note, when neither is set); each saver gets a schema of its own, dropped at the
// end. SQLite files go to a temporary folder. libconvo: CONVO_LIBRARY or the build tree.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { benchOptions, words, convoImports, median, rate, rateAt as rateIn, since, withParam, runnable,
  inTurn } from './common.mjs';

const { opts, TURNS, PAYLOAD, ROUNDS, WINDOW, EARLY } = benchOptions('langgraph-bench', {
  only: { type: 'string' },
});

// convo/langgraph of the package this folder sits in, loaded only when a convo saver runs.
let ConvoSaver;
async function convoSaver(url) {
  ConvoSaver ??= (await convoImports('./langgraph'))[0].ConvoSaver;
  const saver = new ConvoSaver(url);
  await saver.store(); // opened (schema created) before the size is taken
  return saver;
}

const tmp = mkdtempSync(join(tmpdir(), 'convo-lg-bench-'));
const pgUrl = process.env.CONVO_BENCH_POSTGRES_URL ?? process.env.CONVO_TEST_POSTGRES_URL;
const tag = `b${process.pid}`;

// One conversation, shared by every saver so all store the same bytes.
const conversation = [];
for (let t = 0; t < TURNS; t++) {
  const fields = { id: randomUUID(), content: words(PAYLOAD) };
  conversation.push(t % 2 === 0 ? new HumanMessage(fields) : new AIMessage(fields));
}
const rawBytes = conversation.reduce((n, m) => n + Buffer.byteLength(JSON.stringify(m)), 0);

// ---- sizes of what a backend stores ----

// In a process of its own: better-sqlite3 bundles its own SQLite, and two SQLite
// libraries in one process break each other's POSIX locks on the same file (convo's
// store, opened by the system's libsqlite3, failed with SQLITE_PROTOCOL).
function sqliteUsedBytes(path) {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.pragma('wal_checkpoint(TRUNCATE)');
    const page = db.pragma('page_size', { simple: true });
    console.log((db.pragma('page_count', { simple: true }) - db.pragma('freelist_count', { simple: true })) * page);
    db.close();`;
  return Number(execFileSync(process.execPath, ['-e', script, path],
    { cwd: new URL('.', import.meta.url), encoding: 'utf8' }).trim());
}

async function pgSchemaBytes(schema) {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    const r = await client.query(
      `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS n
         FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
        WHERE s.nspname = $1 AND c.relkind IN ('r', 'm')`, [schema]);
    return Number(r.rows[0].n);
  } finally {
    await client.end();
  }
}

async function pgDropSchema(schema) {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

// ---- the savers: open (schema created), size, close ----

const SAVERS = [
  {
    name: 'convo-sqlite', backend: 'sqlite',
    async open() {
      this.path = join(tmp, `convo-${randomUUID()}.db`); // a fresh file each round
      return convoSaver(`sqlite:${this.path}`);
    },
    async close(saver) { await saver.close(); },
    async size() { return sqliteUsedBytes(this.path); },
  },
  {
    name: 'langgraph-sqlite', backend: 'sqlite',
    async open() {
      this.path = join(tmp, `langgraph-${randomUUID()}.db`);
      const saver = SqliteSaver.fromConnString(this.path);
      saver.setup(); // WAL; synchronous=NORMAL as convo's SQLite driver, for a fair rate
      saver.db.pragma('synchronous=NORMAL');
      return saver;
    },
    async close(saver) { saver.db.close(); },
    async size() { return sqliteUsedBytes(this.path); },
  },
  {
    name: 'convo-postgres', backend: 'postgres', needs: () => pgUrl,
    async open() {
      this.schema = `${tag}_convo`;
      return convoSaver(withParam(pgUrl, 'schema', this.schema));
    },
    async close(saver) { await saver.close(); },
    async size() { return pgSchemaBytes(this.schema); },
    async cleanup() { await pgDropSchema(this.schema); },
  },
  {
    name: 'langgraph-postgres', backend: 'postgres', needs: () => pgUrl,
    async open() {
      this.schema = `${tag}_langgraph`;
      const saver = PostgresSaver.fromConnString(pgUrl, { schema: this.schema });
      await saver.setup();
      return saver;
    },
    async close(saver) { await saver.end(); },
    async size() { return pgSchemaBytes(this.schema); },
    async cleanup() { await pgDropSchema(this.schema); },
  },
];

// ---- the conversation ----

function checkpointFor(saver, previous, turn) {
  const checkpoint = emptyCheckpoint();
  checkpoint.id = uuid6(-1);
  const version = saver.getNextVersion(previous?.channel_versions.messages);
  checkpoint.channel_values = { messages: conversation.slice(0, turn + 1) };
  checkpoint.channel_versions = { __start__: version, messages: version };
  checkpoint.versions_seen = { __input__: {}, __start__: { __start__: version }, model: { messages: version } };
  return { checkpoint, newVersions: { messages: version } };
}

const rateAt = (ms, turn) => rateIn(ms, turn, WINDOW);
const GETS = 30;

async function runOne(spec) {
  globalThis.gc?.(); // node --expose-gc: the previous saver's garbage is not this one's
  const saver = await spec.open();
  const threadId = 'conversation';
  let putMs = [];
  const getMs = [];
  let before;
  let tuple;
  try {
    before = await spec.size();
    let config = { configurable: { thread_id: threadId, checkpoint_ns: '' } };
    let previous;
    for (let t = 0; t < TURNS; t++) {
      const { checkpoint, newVersions } = checkpointFor(saver, previous, t);
      const metadata = { source: 'loop', step: t, parents: {} };
      const start = process.hrtime.bigint();
      config = await saver.put(config, checkpoint, metadata, newVersions);
      putMs.push(since(start));
      previous = checkpoint;
    }
    for (let i = 0; i < GETS; i++) {
      const start = process.hrtime.bigint();
      tuple = await saver.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: '' } });
      getMs.push(since(start));
    }
  } finally {
    await spec.close(saver);
  }
  const got = tuple?.checkpoint.channel_values.messages ?? [];
  // by class name: convo's saver is loaded from bindings/node, whose serde revives
  // messages with its own copy of @langchain/core, not this folder's
  const whole = got.length === TURNS && got.every((m, i) =>
    JSON.stringify(m) === JSON.stringify(conversation[i]) && m.constructor.name === conversation[i].constructor.name);
  if (!whole) throw new Error(`${spec.name}: the latest getTuple did not return the ${TURNS} messages put`);
  const stored = (await spec.size()) - before;
  return { putMs, getMs, stored };
}

// Per saver, the median over the rounds of each figure.
function summarize(spec, rounds) {
  const m = (f) => median(rounds.map(f));
  const stored = m((r) => r.stored);
  return {
    saver: spec.name, backend: spec.backend, turns: TURNS, payload: PAYLOAD, rounds: rounds.length,
    puts_per_sec: Math.round(m((r) => rate(r.putMs))),
    [`puts_per_sec_at_turn_${EARLY}`]: Math.round(m((r) => rateAt(r.putMs, EARLY))),
    [`puts_per_sec_at_turn_${TURNS}`]: Math.round(m((r) => rateAt(r.putMs, TURNS))),
    late_vs_early: +m((r) => rateAt(r.putMs, TURNS) / rateAt(r.putMs, EARLY)).toFixed(3),
    latest_get_tuple_ms: +m((r) => median(r.getMs)).toFixed(3),
    stored_bytes: stored,
    raw_message_bytes: rawBytes,
    stored_per_raw: +(stored / rawBytes).toFixed(2),
  };
}

function compare(convo, langgraph) {
  const fewerBytes = langgraph.stored_bytes / convo.stored_bytes;
  const putRatio = convo.puts_per_sec / langgraph.puts_per_sec;
  const getRatio = langgraph.latest_get_tuple_ms / convo.latest_get_tuple_ms;
  return {
    backend: convo.backend,
    fewer_bytes: +fewerBytes.toFixed(1),
    put_rate_ratio: +putRatio.toFixed(2),
    convo_late_vs_early: convo.late_vs_early,
    get_tuple_speedup: +getRatio.toFixed(2),
    targets: {
      'fewer bytes >= 80x': fewerBytes >= 80,
      'put rate >= 5x': putRatio >= 5,
      [`turn ${TURNS} rate within 20% of turn ${EARLY}`]: convo.late_vs_early >= 0.8,
      'latest getTuple no slower': getRatio >= 1,
    },
  };
}

const specs = runnable('langgraph-bench', SAVERS, opts.only);
const perSaver = new Map(specs.map((spec) => [spec, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const spec of inTurn(specs, round)) {
      try {
        console.error(`langgraph-bench: round ${round + 1}/${ROUNDS}: ${spec.name}, ${TURNS} turns...`);
        perSaver.get(spec).push(await runOne(spec));
      } finally {
        await spec.cleanup?.();
      }
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const results = specs.map((spec) => summarize(spec, perSaver.get(spec)));

const comparisons = [];
for (const backend of ['sqlite', 'postgres']) {
  const c = results.find((r) => r.saver === `convo-${backend}`);
  const l = results.find((r) => r.saver === `langgraph-${backend}`);
  if (c && l) comparisons.push(compare(c, l));
}

if (opts.json) {
  for (const r of [...results, ...comparisons]) console.log(JSON.stringify(r));
} else {
  const fmt = (n) => n.toLocaleString('en-US');
  console.log(`${TURNS} turns, one ${PAYLOAD}-byte message per turn, ${fmt(rawBytes)} raw message bytes; ` +
    `median of ${ROUNDS} round(s)`);
  console.log('| saver | put/s | put/s at turn ' + EARLY + ' | put/s at turn ' + TURNS +
    ' | latest getTuple ms | bytes stored | bytes / raw |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(`| ${r.saver} | ${fmt(r.puts_per_sec)} | ${fmt(r[`puts_per_sec_at_turn_${EARLY}`])} | ` +
      `${fmt(r[`puts_per_sec_at_turn_${TURNS}`])} | ${r.latest_get_tuple_ms} | ${fmt(r.stored_bytes)} | ` +
      `${r.stored_per_raw} |`);
  }
  for (const c of comparisons) {
    const met = Object.entries(c.targets).map(([k, v]) => `${k}: ${v ? 'met' : 'NOT met'}`).join('; ');
    console.log(`${c.backend}: ${c.fewer_bytes}x fewer bytes, ${c.put_rate_ratio}x the put rate, ` +
      `late/early ${c.convo_late_vs_early}, getTuple ${c.get_tuple_speedup}x as fast — ${met}`);
  }
}
