'use strict';
// The database profiler, as mongod's: {profile: 2} makes every later command
// on the database leave a document in its system.profile collection, capped
// at 1 MiB (oldest first out), with the keys and documents it examined and
// its plan (scan.js counts them). Level 1 keeps only commands slower than
// slowms (100 ms), level 0 none; {profile: -1} only reads the level.

const V = require('./values');
const { CommandError } = require('./errors');
const Scan = require('./scan');

const CAP_BYTES = 1024 * 1024;
const OPS = { find: 'query', getmore: 'getmore', insert: 'insert', update: 'update', delete: 'remove' };

function cmdProfile(cmd, ctx) {
  const level = V.numberOf(cmd.profile);
  const was = ctx.db.profileLevel || 0;
  const slowms = ctx.db.profileSlowMs || 100;
  if (![-1, 0, 1, 2].includes(level)) throw new CommandError(2, `Invalid profiling level: ${level}`, 'BadValue');
  if (level !== -1) ctx.db.profileLevel = level;
  if (cmd.slowms !== undefined) ctx.db.profileSlowMs = V.numberOf(cmd.slowms);
  return { was, slowms, sampleRate: 1.0, ok: 1 };
}

/** The collection a command works on, for its ns. */
function target(name, cmd) {
  const v = name === 'getmore' ? cmd.collection : cmd[V.keysOf(cmd)[0]];
  return typeof v === 'string' ? v : '$cmd';
}

/** Records a command that ran on ctx.db, if the profiler is on and it qualifies. */
function record(ctx, cmd, reply, millis, Collection) {
  const db = ctx.db;
  const level = db.profileLevel || 0;
  const name = V.keysOf(cmd)[0].toLowerCase();
  if (level === 0 || name === 'profile' || (level === 1 && millis < (db.profileSlowMs || 100))) return;
  const coll = target(name, cmd);
  if (coll === 'system.profile') return;
  const batch = reply && reply.cursor ? reply.cursor.firstBatch || reply.cursor.nextBatch : null;
  const entry = {
    op: OPS[name] || 'command',
    ns: `${db.name}.${coll}`,
    command: cmd,
    keysExamined: new V.Int32(Scan.stats.keysExamined),
    docsExamined: new V.Int32(Scan.stats.docsExamined),
    ...(batch ? { nreturned: new V.Int32(batch.length) } : {}),
    ...(Scan.stats.planSummary ? { planSummary: Scan.stats.planSummary } : {}),
    ok: reply && reply.ok,
    millis: new V.Int32(millis),
    ts: new Date(),
    client: (ctx.conn && ctx.conn.remote) || '127.0.0.1',
  };
  let prof = db.collections.get('system.profile');
  if (!prof) {
    prof = new Collection(db, 'system.profile');
    db.collections.set('system.profile', prof);
  }
  prof.insert(entry);
  prof.profileBytes = (prof.profileBytes || 0) + V.bsonSize(entry);
  for (const rec of prof.records.values()) {
    if (prof.profileBytes <= CAP_BYTES) break;
    prof.profileBytes -= V.bsonSize(rec.doc);
    prof.remove(rec);
  }
}

module.exports = { cmdProfile, record };
