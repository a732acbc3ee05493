'use strict';
// Protocol-level tests for the stand-in, run with `node --test` (no driver:
// a tiny wire client built on the bson package).

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('net');
const path = require('path');
const { spawn } = require('child_process');
const BSON = require('bson');

const { Int32, Long, Double, Binary, ObjectId } = BSON;
const RAW = { promoteValues: false, promoteLongs: false, promoteBuffers: false };

let server;
let port;

/** Minimal wire client: one outstanding request at a time. */
class Client {
  constructor(sock) {
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    this.waiting = null;
    this.reqId = 1;
    sock.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      if (this.buf.length >= 4 && this.buf.length >= this.buf.readInt32LE(0) && this.waiting) {
        const len = this.buf.readInt32LE(0);
        const msg = this.buf.subarray(0, len);
        this.buf = this.buf.subarray(len);
        const w = this.waiting;
        this.waiting = null;
        w(msg);
      }
    });
  }

  static connect(to = port) {
    return new Promise((resolve, reject) => {
      const s = net.connect(to, '127.0.0.1', () => resolve(new Client(s)));
      s.on('error', reject);
    });
  }

  raw(buf, expectReply = true) {
    return new Promise((resolve) => {
      if (expectReply) this.waiting = resolve;
      this.sock.write(buf);
      if (!expectReply) resolve(null);
    });
  }

  /** Send OP_MSG; `seqs` = {identifier: [docs]} sent as kind-1 sections. */
  async msg(body, { seqs = {}, flags = 0, raw = false } = {}) {
    const parts = [];
    const b = BSON.serialize(body);
    parts.push(Buffer.from([0]), b);
    for (const [id, docs] of Object.entries(seqs)) {
      const payload = Buffer.concat([Buffer.from(`${id}\0`), ...docs.map((d) => BSON.serialize(d))]);
      const size = Buffer.alloc(4);
      size.writeInt32LE(4 + payload.length);
      parts.push(Buffer.from([1]), size, payload);
    }
    const fl = Buffer.alloc(4);
    fl.writeUInt32LE(flags);
    let rest = Buffer.concat([fl, ...parts]);
    if (flags & 1) rest = Buffer.concat([rest, Buffer.alloc(4)]); // dummy checksum
    const h = Buffer.alloc(16);
    h.writeInt32LE(16 + rest.length, 0);
    h.writeInt32LE(this.reqId++, 4);
    h.writeInt32LE(2013, 12);
    const reply = await this.raw(Buffer.concat([h, rest]), !(flags & 2));
    if (!reply) return null;
    assert.equal(reply.readInt32LE(12), 2013);
    return BSON.deserialize(reply.subarray(21), raw ? RAW : {});
  }

  async cmd(db, body, opts) { return this.msg({ ...body, $db: db }, opts); }

  close() { this.sock.destroy(); }
}

/** Starts a stand-in with extra arguments: {proc, port}. */
async function startServer(args = []) {
  const proc = spawn(process.execPath, [path.join(__dirname, '..', 'server.js'), '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const p = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /^listening (\d+)\n/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  return { proc, port: p };
}

test.before(async () => {
  ({ proc: server, port } = await startServer());
});

test.after(() => { server.kill('SIGTERM'); });

test('OP_QUERY isMaster handshake gets OP_REPLY', async () => {
  const c = await Client.connect();
  const q = BSON.serialize({ isMaster: 1, helloOk: true, client: { application: { name: 't' } } });
  const ns = Buffer.from('admin.$cmd\0');
  const body = Buffer.concat([Buffer.alloc(4), ns, Buffer.from([0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), q]);
  const h = Buffer.alloc(16);
  h.writeInt32LE(16 + body.length, 0);
  h.writeInt32LE(77, 4);
  h.writeInt32LE(2004, 12);
  const reply = await c.raw(Buffer.concat([h, body]));
  assert.equal(reply.readInt32LE(12), 1);
  assert.equal(reply.readInt32LE(8), 77);
  assert.equal(reply.readInt32LE(32), 1); // numberReturned
  const doc = BSON.deserialize(reply.subarray(36));
  assert.equal(doc.ismaster, true);
  assert.equal(doc.helloOk, true);
  assert.equal(doc.maxWireVersion, 9); // MongoDB 4.4
  assert.equal(doc.ok, 1);
  c.close();
});

test('hello, buildInfo, unknown command', async () => {
  const c = await Client.connect();
  const h = await c.cmd('admin', { hello: 1 });
  assert.equal(h.isWritablePrimary, true);
  assert.equal(h.maxBsonObjectSize, 16777216);
  assert.equal(h.logicalSessionTimeoutMinutes, 30);
  assert.ok(h.localTime instanceof Date);
  const b = await c.cmd('admin', { buildInfo: 1, lsid: { id: new Binary(Buffer.alloc(16), 4) } });
  assert.equal(b.version, '4.4.0-convo-standin');
  const u = await c.cmd('admin', { frobnicate: 1 });
  assert.deepEqual([u.ok, u.code, u.codeName, u.errmsg], [0, 59, 'CommandNotFound', "no such command: 'frobnicate'"]);
  c.close();
});

test('insert via document sequence, checksum flag, moreToCome', async () => {
  const c = await Client.connect();
  const r = await c.cmd('t1', { insert: 'c', ordered: true }, { seqs: { documents: [{ _id: 1 }, { _id: 2 }] }, flags: 1 });
  assert.equal(r.n, 2);
  await c.cmd('t1', { insert: 'c', writeConcern: { w: 0 } }, { seqs: { documents: [{ _id: 3 }] }, flags: 2 });
  const cnt = await c.cmd('t1', { count: 'c' });
  assert.equal(cnt.n, 3);
  c.close();
});

test('ordered vs unordered insert with duplicate _id', async () => {
  const c = await Client.connect();
  const docs = [{ _id: 1 }, { _id: 1 }, { _id: 2 }];
  const o = await c.cmd('t2', { insert: 'o', documents: docs });
  assert.equal(o.n, 1);
  assert.equal(o.writeErrors.length, 1);
  assert.equal(o.writeErrors[0].index, 1);
  assert.equal(o.writeErrors[0].code, 11000);
  assert.match(o.writeErrors[0].errmsg, /^E11000 duplicate key error collection: t2\.o index: _id_ dup key: \{ _id: 1 \}$/);
  const u = await c.cmd('t2', { insert: 'u', documents: docs, ordered: false });
  assert.equal(u.n, 2);
  assert.equal(u.writeErrors.length, 1);
  c.close();
});

test('types round-trip exactly, including through aggregate', async () => {
  const c = await Client.connect();
  const doc = {
    _id: 'x', i: new Int32(1), l: Long.fromNumber(2), d: new Double(3), b: new Binary(Buffer.from([1, 2]), 0),
    arr: [new Int32(1), Long.fromNumber(1), new Double(1)], sub: { '2': 'two', a: 'a', '1': 'one' },
  };
  await c.cmd('t3', { insert: 'c', documents: [doc] });
  const f = await c.cmd('t3', { find: 'c', filter: { l: 2 } }, { raw: true });
  const got = f.cursor.firstBatch[0];
  assert.equal(got.i._bsontype, 'Int32');
  assert.equal(got.l._bsontype, 'Long');
  assert.equal(got.d._bsontype, 'Double');
  assert.equal(got.b._bsontype, 'Binary');
  assert.deepEqual(got.arr.map((x) => x._bsontype), ['Int32', 'Long', 'Double']);
  const a = await c.cmd('t3', { aggregate: 'c', pipeline: [{ $match: { i: 1 } }, { $addFields: { extra: 5 } }], cursor: {} }, { raw: true });
  const ag = a.cursor.firstBatch[0];
  assert.equal(ag.l._bsontype, 'Long');
  assert.equal(ag.d._bsontype, 'Double');
  // key order of the sub-document survives (raw bytes: "2", "a", "1")
  const rawReply = BSON.serialize(ag);
  assert.ok(rawReply.indexOf(Buffer.from('\u00022\u0000')) < rawReply.indexOf(Buffer.from('\u0002a\u0000')));
  c.close();
});

test('update operators, upsert from query, nModified', async () => {
  const c = await Client.connect();
  await c.cmd('t4', { insert: 'c', documents: [{ _id: 1, n: new Int32(5), tags: ['a', 'b'], lo: new Int32(10) }] });
  const r = await c.cmd('t4', {
    update: 'c',
    updates: [
      { q: { _id: 1 }, u: { $inc: { n: new Double(0.5) }, $push: { tags: { $each: ['c', 'd'], $slice: -3 } }, $min: { lo: new Int32(3) }, $max: { hi: new Int32(9) }, $set: { 'x.y': 1 }, $unset: { nothing: '' } } },
      { q: { _id: 1 }, u: { $pull: { tags: 'c' } } },
      { q: { _id: 1 }, u: { $addToSet: { tags: 'b' } } },
      { q: { 'k.a': 'v', z: { $gt: 1 } }, u: { $set: { w: 1 }, $setOnInsert: { created: true } }, upsert: true },
      { q: { _id: 1 }, u: { $set: { lo: new Int32(3) } } },
    ],
  });
  assert.equal(r.n, 5, JSON.stringify(r));
  assert.equal(r.nModified, 2);
  assert.equal(r.upserted[0].index, 3);
  const f = await c.cmd('t4', { find: 'c', sort: { _id: 1 } }, { raw: true });
  const [one, up] = f.cursor.firstBatch;
  assert.equal(one.n._bsontype, 'Double');
  assert.equal(one.n.value, 5.5);
  assert.deepEqual(one.tags, ['b', 'd']);
  assert.equal(one.lo.value, 3);
  assert.equal(one.hi.value, 9);
  assert.equal(one.x.y.value, 1);
  assert.deepEqual(Object.keys(up), ['_id', 'k', 'w', 'created']);
  assert.equal(up.k.a, 'v');
  // replacement keeps _id; changing _id is refused
  const rep = await c.cmd('t4', { update: 'c', updates: [{ q: { _id: 1 }, u: { only: 1 } }, { q: { _id: 1 }, u: { $set: { _id: 2 } } }] });
  assert.equal(rep.nModified, 1);
  assert.equal(rep.writeErrors[0].code, 66);
  const bad = await c.cmd('t4', { update: 'c', updates: [{ q: { _id: 1 }, u: { $inc: { only: 'x' } } }] });
  assert.equal(bad.writeErrors[0].code, 14);
  c.close();
});

test('unique indexes: compound, multikey, sparse, upsert and findAndModify', async () => {
  const c = await Client.connect();
  let r = await c.cmd('t5', { createIndexes: 'c', indexes: [{ key: { a: 1, b: -1 }, name: 'ab', unique: true }, { key: { tags: 1 }, name: 'tags_1', unique: true }, { key: { s: 1 }, name: 's_1', unique: true, sparse: true }] });
  assert.equal(r.ok, 1);
  assert.equal(r.numIndexesAfter, 4);
  r = await c.cmd('t5', { insert: 'c', documents: [{ _id: 1, a: 1, b: 1, tags: ['x', 'y'] }, { _id: 2, a: 1, b: 2, tags: ['z'] }, { _id: 3, a: 1, b: new Double(1) }], ordered: false });
  assert.equal(r.n, 2);
  assert.match(r.writeErrors[0].errmsg, /index: ab dup key: \{ a: 1, b: 1\.0 \}/);
  assert.deepEqual(r.writeErrors[0].keyValue, { a: 1, b: 1 });
  r = await c.cmd('t5', { insert: 'c', documents: [{ _id: 4, a: 2, tags: ['q', 'y'] }] });
  assert.equal(r.writeErrors[0].code, 11000);
  assert.match(r.writeErrors[0].errmsg, /index: tags_1 dup key: \{ tags: "y" \}/);
  // sparse: many docs without s are fine
  r = await c.cmd('t5', { insert: 'c', documents: [{ _id: 5, a: 5, tags: 5 }, { _id: 6, a: 6, tags: 6 }] });
  assert.equal(r.n, 2);
  // upsert colliding on a unique key
  r = await c.cmd('t5', { update: 'c', updates: [{ q: { a: 1, b: 2, x: 1 }, u: { $set: { y: 1 } }, upsert: true }] });
  assert.equal(r.writeErrors[0].code, 11000);
  // findAndModify: top-level error
  r = await c.cmd('t5', { findAndModify: 'c', query: { _id: 2 }, update: { $set: { b: 1 } } });
  assert.deepEqual([r.ok, r.code, r.codeName], [0, 11000, 'DuplicateKey']);
  // a document may keep its own key
  r = await c.cmd('t5', { findAndModify: 'c', query: { _id: 2 }, update: { $set: { b: 2, other: 1 } }, new: true, fields: { other: 1 } });
  assert.equal(r.ok, 1);
  assert.deepEqual(r.value, { _id: 2, other: 1 });
  // creating a unique index over existing duplicates fails
  r = await c.cmd('t5', { createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1', unique: true }] });
  assert.equal(r.code, 11000);
  r = await c.cmd('t5', { listIndexes: 'c' });
  assert.deepEqual(r.cursor.firstBatch.map((i) => i.name), ['_id_', 'ab', 'tags_1', 's_1']);
  // index name conflict
  r = await c.cmd('t5', { createIndexes: 'c', indexes: [{ key: { zz: 1 }, name: 'ab' }] });
  assert.equal(r.code, 86);
  r = await c.cmd('t5', { dropIndexes: 'c', index: 'ab' });
  assert.equal(r.ok, 1);
  r = await c.cmd('t5', { insert: 'c', documents: [{ _id: 7, a: 1, b: 1, tags: 7 }] });
  assert.equal(r.n, 1);
  r = await c.cmd('t5', { dropIndexes: 'c', index: '_id_' });
  assert.equal(r.code, 72);
  c.close();
});

test('findAndModify remove, sort and replacement upsert', async () => {
  const c = await Client.connect();
  await c.cmd('t6', { insert: 'c', documents: [{ _id: 1, p: 3 }, { _id: 2, p: 9 }, { _id: 3, p: 5 }] });
  let r = await c.cmd('t6', { findAndModify: 'c', query: {}, sort: { p: -1 }, remove: true });
  assert.deepEqual(r.value, { _id: 2, p: 9 });
  assert.equal(r.lastErrorObject.n, 1);
  r = await c.cmd('t6', { findAndModify: 'c', query: { _id: 10 }, update: { v: 1 }, upsert: true, new: true });
  assert.deepEqual(r.value, { _id: 10, v: 1 });
  assert.equal(r.lastErrorObject.updatedExisting, false);
  assert.equal(r.lastErrorObject.upserted, 10);
  r = await c.cmd('t6', { findAndModify: 'c', query: { _id: 99 }, update: { $set: { v: 1 } } });
  assert.equal(r.value, null);
  assert.equal(r.lastErrorObject.n, 0);
  c.close();
});

test('cursors: getMore, killCursors, singleBatch, skip', async () => {
  const c = await Client.connect();
  const docs = Array.from({ length: 10 }, (_, i) => ({ _id: i }));
  await c.cmd('t7', { insert: 'c', documents: docs });
  let r = await c.cmd('t7', { find: 'c', batchSize: 4, skip: 1 });
  assert.equal(r.cursor.firstBatch.length, 4);
  const id = r.cursor.id;
  assert.ok(id > 0);
  r = await c.cmd('t7', { getMore: Long.fromNumber(id), collection: 'c', batchSize: 3 });
  assert.deepEqual(r.cursor.nextBatch.map((d) => d._id), [5, 6, 7]);
  r = await c.cmd('t7', { killCursors: 'c', cursors: [Long.fromNumber(id)] });
  assert.equal(r.cursorsKilled.length, 1);
  r = await c.cmd('t7', { getMore: Long.fromNumber(id), collection: 'c' });
  assert.equal(r.code, 43);
  r = await c.cmd('t7', { find: 'c', batchSize: 2, singleBatch: true });
  assert.equal(r.cursor.id, 0);
  r = await c.cmd('t7', { find: 'c', filter: { _id: { $in: [3, 4] } }, projection: { _id: 0, missing: 1 } });
  assert.deepEqual(r.cursor.firstBatch, [{}, {}]);
  r = await c.cmd('t7', { delete: 'c', deletes: [{ q: { _id: { $lt: 5 } }, limit: 1 }, { q: { _id: { $gte: 8 } }, limit: 0 }] });
  assert.equal(r.n, 3);
  c.close();
});

test('databases and collections', async () => {
  const c = await Client.connect();
  let r = await c.cmd('t8', { create: 'made' });
  assert.equal(r.ok, 1);
  r = await c.cmd('t8', { create: 'made' });
  assert.equal(r.code, 48);
  r = await c.cmd('t8', { listCollections: 1, filter: { name: 'made' }, nameOnly: true });
  assert.deepEqual(r.cursor.firstBatch, [{ name: 'made', type: 'collection' }]);
  r = await c.cmd('admin', { listDatabases: 1, nameOnly: true });
  assert.ok(r.databases.some((d) => d.name === 't8'));
  r = await c.cmd('t8', { drop: 'made' });
  assert.equal(r.ok, 1);
  r = await c.cmd('t8', { drop: 'made' });
  assert.equal(r.code, 26);
  r = await c.cmd('t8', { dropDatabase: 1 });
  assert.equal(r.ok, 1);
  c.close();
});

test('aggregate: countDocuments shape, $lookup, $out', async () => {
  const c = await Client.connect();
  await c.cmd('t9', { insert: 'a', documents: [{ _id: 1, k: 'x' }, { _id: 2, k: 'y' }, { _id: 3, k: 'x' }] });
  await c.cmd('t9', { insert: 'b', documents: [{ _id: 'x', label: 'X' }] });
  let r = await c.cmd('t9', { aggregate: 'a', pipeline: [{ $match: { k: 'x' } }, { $group: { _id: 1, n: { $sum: 1 } } }], cursor: {} });
  assert.deepEqual(r.cursor.firstBatch, [{ _id: 1, n: 2 }]);
  r = await c.cmd('t9', { aggregate: 'a', pipeline: [{ $lookup: { from: 'b', localField: 'k', foreignField: '_id', as: 'j' } }, { $match: { 'j.0': { $exists: true } } }, { $count: 'n' }], cursor: {} });
  assert.deepEqual(r.cursor.firstBatch, [{ n: 2 }]);
  r = await c.cmd('t9', { aggregate: 'a', pipeline: [{ $match: { k: 'y' } }, { $out: 'o' }], cursor: {} });
  r = await c.cmd('t9', { find: 'o' });
  assert.deepEqual(r.cursor.firstBatch, [{ _id: 2, k: 'y' }]);
  r = await c.cmd('t9', { aggregate: 'a', pipeline: [{ $bogus: 1 }], cursor: {} });
  assert.equal(r.ok, 0);
  c.close();
});

test('TTL monitor removes expired documents', async () => {
  const c = await Client.connect();
  await c.cmd('t10', { createIndexes: 'c', indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 0 }] });
  await c.cmd('t10', { insert: 'c', documents: [{ _id: 1, at: new Date(Date.now() - 1000) }, { _id: 2, at: 'not a date' }, { _id: 3 }] });
  await new Promise((res) => setTimeout(res, 1300));
  const r = await c.cmd('t10', { count: 'c' });
  assert.equal(r.n, 2);
  c.close();
});

test('binary equality is exact and $natural sort', async () => {
  const c = await Client.connect();
  await c.cmd('t11', { insert: 'c', documents: [{ _id: 1, b: new Binary(Buffer.from([0xff]), 0) }, { _id: 2, b: new Binary(Buffer.from([0xfe]), 0) }] });
  let r = await c.cmd('t11', { find: 'c', filter: { b: new Binary(Buffer.from([0xfe]), 0) } }, { raw: true });
  assert.equal(r.cursor.firstBatch.length, 1);
  assert.equal(r.cursor.firstBatch[0]._id.value, 2);
  assert.equal(r.cursor.firstBatch[0].b._bsontype, 'Binary');
  r = await c.cmd('t11', { aggregate: 'c', pipeline: [{ $match: { b: { $in: [new Binary(Buffer.from([0xff]), 0)] } } }, { $project: { b: 1 } }], cursor: {} }, { raw: true });
  assert.equal(r.cursor.firstBatch.length, 1);
  assert.equal(r.cursor.firstBatch[0].b._bsontype, 'Binary');
  r = await c.cmd('t11', { find: 'c', sort: { $natural: -1 } });
  assert.deepEqual(r.cursor.firstBatch.map((d) => d._id), [2, 1]);
  c.close();
});

test('more update forms: pipeline, $rename, $mul, $currentDate, $position, $pop', async () => {
  const c = await Client.connect();
  await c.cmd('t12', { insert: 'c', documents: [{ _id: 1, a: Long.fromNumber(3), arr: [1, 2], old: 'x' }] });
  let r = await c.cmd('t12', {
    update: 'c',
    updates: [
      { q: { _id: 1 }, u: { $mul: { a: new Int32(2) }, $rename: { old: 'renamed' }, $currentDate: { at: true }, $push: { arr: { $each: [0], $position: 0 } } } },
      { q: { _id: 1 }, u: { $pop: { arr: 1 } } },
      { q: { _id: 1 }, u: [{ $set: { sum: { $add: ['$a', 1] } } }] },
    ],
  });
  assert.equal(r.nModified, 3, JSON.stringify(r));
  r = await c.cmd('t12', { find: 'c' }, { raw: true });
  const d = r.cursor.firstBatch[0];
  assert.equal(d.a._bsontype, 'Long');
  assert.equal(d.a.toNumber(), 6);
  assert.equal(d.renamed, 'x');
  assert.equal(d.old, undefined);
  assert.ok(d.at instanceof Date);
  assert.deepEqual(d.arr.map((x) => x.value), [0, 1]);
  assert.equal(d.sum.value, 7);
  c.close();
});

test('index-assisted lookups return the same results as full scans', async () => {
  const c = await Client.connect();
  let seed = 42;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const val = () => {
    switch (rnd(7)) {
      case 0: return new Int32(rnd(5));
      case 1: return Long.fromNumber(rnd(5));
      case 2: return new Double(rnd(5));
      case 3: return `s${rnd(3)}`;
      case 4: return [new Int32(rnd(5)), `s${rnd(3)}`];
      case 5: return null;
      default: return undefined;
    }
  };
  const docs = [];
  for (let i = 0; i < 300; i++) {
    const d = { _id: i };
    const t = val();
    if (t !== undefined) d.t = t;
    const b = val();
    d.a = rnd(3) ? { b } : [{ b }, { b: val() }];
    docs.push(d);
  }
  await c.cmd('t13', { insert: 'plain', documents: docs });
  await c.cmd('t13', { insert: 'indexed', documents: docs });
  await c.cmd('t13', { createIndexes: 'indexed', indexes: [{ key: { t: 1 }, name: 't_1' }, { key: { 'a.b': 1, t: 1 }, name: 'ab_t' }] });
  const filters = [];
  for (const v of [new Int32(1), new Double(2), Long.fromNumber(3), 's1', 's2']) {
    filters.push({ t: v }, { 'a.b': v }, { t: { $eq: v } }, { t: { $in: [v, 's0'] } }, { t: v, 'a.b': { $exists: true } });
  }
  for (const f of filters) {
    const a = await c.cmd('t13', { find: 'plain', filter: f, batchSize: 1000 });
    const b = await c.cmd('t13', { find: 'indexed', filter: f, batchSize: 1000 });
    assert.deepEqual(b.cursor.firstBatch.map((d) => d._id), a.cursor.firstBatch.map((d) => d._id), JSON.stringify(f));
  }
  // updates move documents between lookup buckets
  await c.cmd('t13', { update: 'indexed', updates: [{ q: { t: 's1' }, u: { $set: { t: 'moved' } }, multi: true }] });
  const moved = await c.cmd('t13', { count: 'indexed', query: { t: 'moved' } });
  const gone = await c.cmd('t13', { count: 'indexed', query: { t: 's1' } });
  const was = await c.cmd('t13', { count: 'plain', query: { t: 's1' } });
  assert.equal(moved.n, was.n);
  assert.equal(gone.n, 0);
  c.close();
});

test('equality on every field of a unique index: the same results as a scan', async () => {
  const c = await Client.connect();
  const docs = [];
  for (let i = 0; i < 60; i++) {
    const d = { _id: i, g: i % 2 ? Long.fromNumber(i % 5) : new Int32(i % 5), k: i % 7 === 0 ? [`s${i}`, `t${i}`] : `s${i}` };
    if (i % 3) d.w = Long.fromNumber(i);
    docs.push(d);
  }
  docs.push({ _id: 100, g: new Int32(9) }); // k missing
  await c.cmd('t16', { insert: 'plain', documents: docs });
  await c.cmd('t16', { insert: 'indexed', documents: docs });
  await c.cmd('t16', { createIndexes: 'indexed', indexes: [{ key: { g: 1, k: 1 }, name: 'g_k', unique: true }] });
  const filters = [{ g: new Double(9), k: null }];
  for (let i = 0; i < 60; i += 4) {
    const g = new Double(i % 5);
    filters.push({ g, k: `s${i}` }, { g, k: `t${i}` }, { g: new Int32(i % 5), k: { $eq: `s${i}` } },
      { g, k: `s${i}`, $or: [{ w: { $exists: false } }, { w: { $lt: Long.fromNumber(30) } }] },
      { g: new Int32((i + 1) % 5), k: `s${i}` }, { g, k: `nope${i}` }, { k: `s${i}`, g, w: { $gt: 5 } });
  }
  for (const f of filters) {
    const a = await c.cmd('t16', { find: 'plain', filter: f, batchSize: 1000 });
    const b = await c.cmd('t16', { find: 'indexed', filter: f, batchSize: 1000 });
    assert.deepEqual(b.cursor.firstBatch.map((d) => d._id), a.cursor.firstBatch.map((d) => d._id), JSON.stringify(f));
  }
  // an upsert that misses its filter on w inserts, and collides on the unique key
  const r = await c.cmd('t16', { update: 'indexed', updates: [{ q: { g: new Int32(0), k: 's0', $or: [{ w: { $lt: Long.fromNumber(0) } }] }, u: { $set: { x: 1 } }, upsert: true }] });
  assert.equal(r.writeErrors[0].code, 11000);
  c.close();
});

test('collStats, $collStats and dbStats report measured sizes', async () => {
  const c = await Client.connect();
  // BSON sizes: 25, 53 and 14 bytes.
  await c.cmd('t14', { insert: 'c', documents: [{ _id: 1, s: 'abc' }, { _id: 2, s: 'de', tags: ['x', 'y'] }, { _id: 3 }] });
  await c.cmd('t14', { createIndexes: 'c', indexes: [{ key: { s: 1 }, name: 's_1' }, { key: { tags: 1 }, name: 'tags_1', sparse: true }] });
  // An index entry is 5 bytes of key document + its values under empty names + 16.
  // _id_: 3 x (5 + 6 + 16); s_1: 'abc' 31, 'de' 30, missing (null) 23;
  // tags_1: sparse, so only document 2, once per array element: 2 x 29.
  let r = await c.cmd('t14', { collStats: 'c' });
  assert.equal(r.ok, 1);
  assert.equal(r.ns, 't14.c');
  assert.equal(r.count, 3);
  assert.equal(r.size, 92);
  assert.equal(r.avgObjSize, 30);
  assert.equal(r.storageSize, 92);
  assert.equal(r.nindexes, 3);
  assert.deepEqual(r.indexSizes, { _id_: 81, s_1: 84, tags_1: 58 });
  assert.equal(r.totalIndexSize, 223);
  assert.equal(r.totalSize, 315);
  assert.equal(r.scaleFactor, 1);
  const scaled = await c.cmd('t14', { collStats: 'c', scale: 10 });
  assert.deepEqual([scaled.size, scaled.storageSize, scaled.totalIndexSize, scaled.avgObjSize], [9, 9, 22, 30]);
  assert.deepEqual(scaled.indexSizes, { _id_: 8, s_1: 8, tags_1: 5 });
  // $collStats: the same figures under storageStats, int32 while they fit (as mongod sends them).
  r = await c.cmd('t14', { aggregate: 'c', pipeline: [{ $collStats: { storageStats: {}, count: {} } }], cursor: {} }, { raw: true });
  const st = r.cursor.firstBatch[0].storageStats;
  assert.ok(st.size instanceof Int32, 'size is an int32');
  assert.equal(st.size.value, 92);
  assert.equal(st.storageSize.value, 92);
  assert.equal(st.totalIndexSize.value, 223);
  assert.equal(r.cursor.firstBatch[0].count.value, 3);
  r = await c.cmd('t14', { dbStats: 1 });
  assert.deepEqual([r.collections, r.objects, r.dataSize, r.storageSize, r.indexes, r.indexSize, r.totalSize], [1, 3, 92, 92, 3, 223, 315]);
  // sizes follow writes: an update that grows a document, a delete
  await c.cmd('t14', { update: 'c', updates: [{ q: { _id: 3 }, u: { $set: { s: 'abcdef' } } }] });
  await c.cmd('t14', { delete: 'c', deletes: [{ q: { _id: 2 }, limit: 1 }] });
  r = await c.cmd('t14', { collStats: 'c' });
  assert.equal(r.size, 25 + 28);
  assert.deepEqual(r.indexSizes, { _id_: 54, s_1: 31 + 34, tags_1: 0 });
  r = await c.cmd('t14', { collStats: 'missing' });
  assert.equal(r.code, 26);
  r = await c.cmd('t14', { aggregate: 'missing', pipeline: [{ $collStats: { storageStats: {} } }], cursor: {} });
  assert.equal(r.code, 26);
  r = await c.cmd('t14', { collStats: 'c', scale: 0 });
  assert.equal(r.ok, 0);
  c.close();
});

test('sort with a small limit, and $lookup joined by let and $expr with a pipeline', async () => {
  const c = await Client.connect();
  let seed = 7;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return Math.floor(seed / 65536) % n; };
  const docs = [];
  for (let i = 0; i < 200; i++) {
    const d = { _id: i, g: `g${rnd(4)}`, h: `h${rnd(2)}`, s: Long.fromNumber(rnd(50)) };
    if (rnd(5) === 0) d.s = [new Int32(rnd(50)), new Int32(rnd(50))];
    if (rnd(7) === 0) delete d.s;
    docs.push(d);
  }
  await c.cmd('t15', { insert: 'b', documents: docs });
  await c.cmd('t15', { createIndexes: 'b', indexes: [{ key: { g: 1, s: 1 }, name: 'g_s' }, { key: { h: 1, g: 1, s: 1 }, name: 'h_g_s' }] });
  // updated documents move within their index groups
  await c.cmd('t15', { update: 'b', updates: [{ q: { _id: { $lt: 20 } }, u: { $set: { s: Long.fromNumber(25) } }, multi: true }] });
  docs.filter((d) => d._id < 20).forEach((d) => { d.s = Long.fromNumber(25); });
  // selecting the first few equals sorting everything and cutting
  for (const sort of [{ s: -1 }, { s: 1 }, { s: -1, _id: 1 }, { g: 1, s: -1 }]) {
    for (const limit of [1, 3, 10]) {
      for (const filter of [{ g: 'g1' }, {}, { h: 'h0', g: 'g2' }, { g: 'g3', _id: { $gt: 50 } }, { g: 'nothing' }]) {
        const all = await c.cmd('t15', { find: 'b', filter, sort, batchSize: 1000 });
        const top = await c.cmd('t15', { find: 'b', filter, sort, limit, batchSize: 1000 });
        assert.deepEqual(top.cursor.firstBatch.map((d) => d._id), all.cursor.firstBatch.slice(0, limit).map((d) => d._id),
          JSON.stringify({ sort, limit, filter }));
      }
    }
  }
  // $lookup with let and a pipeline joined by an $expr equality: only the joined documents
  await c.cmd('t15', { insert: 't', documents: [{ _id: 'a', g: 'g1' }, { _id: 'b', g: 'g2' }, { _id: 'c', g: 'none' }, { _id: 'd' }] });
  const r = await c.cmd('t15', {
    aggregate: 't',
    pipeline: [
      { $match: { _id: { $in: ['a', 'b', 'c', 'd'] } } },
      { $lookup: { from: 'b', let: { g: '$g' }, pipeline: [{ $match: { $expr: { $eq: ['$g', '$$g'] }, s: { $exists: true } } }, { $sort: { s: -1 } }, { $limit: 1 }, { $project: { g: 0 } }], as: 'top' } },
      { $lookup: { from: 'b', localField: 'g', foreignField: 'g', as: 'all' } },
      { $project: { top: 1, n: { $size: '$all' } } },
      { $sort: { _id: 1 } },
    ],
    cursor: {},
  }, { raw: true });
  const out = r.cursor.firstBatch;
  for (const [i, g] of [[0, 'g1'], [1, 'g2']]) {
    const want = await c.cmd('t15', { find: 'b', filter: { g, s: { $exists: true } }, sort: { s: -1 }, limit: 1 }, { raw: true });
    const orig = docs.find((d) => d._id === want.cursor.firstBatch[0]._id.value);
    assert.equal(out[i].n.value, docs.filter((d) => d.g === g).length);
    assert.equal(out[i].top.length, 1);
    assert.equal(out[i].top[0]._id.value, orig._id);
    assert.deepEqual(out[i].top[0].s, orig.s, 'joined numbers keep their BSON type');
    assert.equal(out[i].top[0].g, undefined);
  }
  assert.deepEqual([out[2].top, out[2].n.value], [[], 0]);
  assert.deepEqual([out[3].top, out[3].n.value], [[], 0]); // missing g joins documents without g: none here
  c.close();
});

test('$lookup forms MongoDB 4.4 refuses, and newer stages and operators', async () => {
  const c = await Client.connect();
  await c.cmd('t16', { insert: 'b', documents: [{ _id: 1, g: 'x' }] });
  const refused = async (pipeline, code, errmsg) => {
    const r = await c.cmd('t16', { aggregate: 'b', pipeline, cursor: {} });
    assert.deepEqual([r.ok, r.code, r.errmsg], [0, code, errmsg], JSON.stringify(pipeline));
  };
  // MongoDB 5.0's join on fields followed by a pipeline: FailedToParse on 4.4
  const both = "$lookup with 'pipeline' may not specify 'localField' or 'foreignField'";
  await refused([{ $lookup: { from: 'b', localField: 'g', foreignField: 'g', pipeline: [], as: 'j' } }], 9, both);
  await refused([{ $lookup: { from: 'b', localField: 'g', pipeline: [{ $limit: 1 }], as: 'j' } }], 9, both);
  await refused([{ $lookup: { from: 'b', foreignField: 'g', pipeline: [], as: 'j' } }], 9, both);
  await refused([{ $facet: { f: [{ $lookup: { from: 'b', localField: 'g', foreignField: 'g', pipeline: [], as: 'j' } }] } }], 9, both);
  await refused([{ $lookup: { from: 'b', let: { g: '$g' }, pipeline: [{ $lookup: { from: 'b', localField: 'g', foreignField: 'g', pipeline: [], as: 'k' } }], as: 'j' } }], 9, both);
  await refused([{ $lookup: { from: 'b', localField: 'g', as: 'j' } }], 9, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified");
  await refused([{ $lookup: { localField: 'g', foreignField: 'g', as: 'j' } }], 9, "must specify 'from' field for a $lookup");
  await refused([{ $setWindowFields: { sortBy: { _id: 1 }, output: { n: { $documentNumber: {} } } } }], 40324, "Unrecognized pipeline stage name: '$setWindowFields'");
  await refused([{ $project: { v: { $getField: 'g' } } }], 168, "Unrecognized expression '$getField'");
  await refused([{ $lookup: { from: 'b', let: { g: '$g' }, pipeline: [{ $match: { $expr: { $eq: [{ $dateTrunc: { date: '$$NOW', unit: 'day' } }, '$$g'] } } }], as: 'j' } }], 168, "Unrecognized expression '$dateTrunc'");
  // the 4.4 forms are accepted
  const ok = await c.cmd('t16', { aggregate: 'b', pipeline: [{ $lookup: { from: 'b', localField: 'g', foreignField: 'g', as: 'j' } }, { $lookup: { from: 'b', let: { g: '$g' }, pipeline: [{ $match: { $expr: { $eq: ['$g', '$$g'] } } }], as: 'k' } }], cursor: {} });
  assert.equal(ok.ok, 1);
  assert.deepEqual([ok.cursor.firstBatch[0].j.length, ok.cursor.firstBatch[0].k.length], [1, 1]);
  c.close();
});

test('$lookup joined by $expr: aggregation equality, not query equality', async () => {
  const c = await Client.connect();
  const b = [{ _id: 1, g: 'a', s: 1 }, { _id: 2, s: 2 }, { _id: 3, g: null, s: 3 }, { _id: 4, g: ['a'], s: 4 }, { _id: 5, g: new Int32(7), s: 5 }, { _id: 6, g: 'a', s: 6 }];
  await c.cmd('t17', { insert: 'b', documents: b });
  await c.cmd('t17', { createIndexes: 'b', indexes: [{ key: { g: 1, s: 1 }, name: 'g_s' }] });
  await c.cmd('t17', { insert: 'l', documents: [{ _id: 'a', g: 'a' }, { _id: 'b' }, { _id: 'c', g: null }, { _id: 'd', g: new Double(7) }, { _id: 'e', g: ['a'] }] });
  for (const tail of [[], [{ $sort: { s: -1 } }, { $limit: 1 }]]) {
    const r = await c.cmd('t17', {
      aggregate: 'l',
      pipeline: [{ $lookup: { from: 'b', let: { v: '$g' }, pipeline: [{ $match: { $expr: { $eq: ['$$v', '$g'] } } }, ...tail, { $project: { _id: 1 } }], as: 'j' } }, { $sort: { _id: 1 } }],
      cursor: {},
    });
    const got = r.cursor.firstBatch.map((d) => d.j.map((x) => x._id));
    const want = tail.length ? [[6], [2], [3], [5], [4]] : [[1, 6], [2], [3], [5], [4]];
    assert.deepEqual(got, want, JSON.stringify(tail));
  }
  c.close();
});

test('--partial-indexes and --sparse-indexes: servers without those index options', async () => {
  const partialKey = { key: { g: 1, k: 1 }, name: 'gk', unique: true, partialFilterExpression: { k: { $type: 'string' } } };
  const sparseKey = { key: { s: 1 }, name: 's_1', unique: true, sparse: true };
  const docs = [{ _id: 1, g: 1 }, { _id: 2, g: 1 }]; // neither has k nor s
  // by default, as mongod: both documents are left out of both indexes
  let c = await Client.connect();
  let r = await c.cmd('t_modes', { createIndexes: 'c', indexes: [partialKey, sparseKey] });
  assert.equal(r.ok, 1);
  r = await c.cmd('t_modes', { insert: 'c', documents: docs });
  assert.equal(r.n, 2);
  c.close();
  // ignore: accepted, listed without the option, and unique over every document
  const plain = await startServer(['--partial-indexes=ignore', '--sparse-indexes=ignore']);
  try {
    c = await Client.connect(plain.port);
    r = await c.cmd('t_modes', { createIndexes: 'c', indexes: [partialKey, sparseKey] });
    assert.equal(r.ok, 1);
    r = await c.cmd('t_modes', { listIndexes: 'c' });
    for (const ix of r.cursor.firstBatch) {
      assert.equal(ix.partialFilterExpression, undefined);
      assert.equal(ix.sparse, undefined);
    }
    r = await c.cmd('t_modes', { insert: 'c', documents: docs, ordered: false });
    assert.equal(r.n, 1);
    assert.equal(r.writeErrors.length, 1);
    assert.equal(r.writeErrors[0].code, 11000);
    c.close();
  } finally {
    plain.proc.kill('SIGTERM');
  }
  // refuse: createIndexes fails with 67 CannotCreateIndex; a sparse index is still made
  const strict = await startServer(['--partial-indexes=refuse']);
  try {
    c = await Client.connect(strict.port);
    r = await c.cmd('t_modes', { createIndexes: 'c', indexes: [partialKey] });
    assert.deepEqual([r.ok, r.code, r.codeName], [0, 67, 'CannotCreateIndex']);
    r = await c.cmd('t_modes', { createIndexes: 'c', indexes: [sparseKey] });
    assert.equal(r.ok, 1);
    r = await c.cmd('t_modes', { listIndexes: 'c' });
    assert.deepEqual(r.cursor.firstBatch.map((i) => [i.name, !!i.sparse]), [['_id_', false], ['s_1', true]]);
    c.close();
  } finally {
    strict.proc.kill('SIGTERM');
  }
});

test('index scans: bounds, descending compound indexes, hint; the profiler counts what they read', async () => {
  const c = await Client.connect();
  const docs = [];
  for (let i = 0; i < 300; i++) {
    const d = { _id: `t${String(i).padStart(3, '0')}`, x: { u: `u${i % 7}` }, ua: Long.fromNumber(1000 + ((i * 37) % 101)) };
    if (i % 11 === 0) delete d.ua; // a placeholder: no time
    docs.push(d);
  }
  await c.cmd('t20', { insert: 'th', documents: docs });
  await c.cmd('t20', { createIndexes: 'th', indexes: [{ key: { ua: -1, _id: -1 }, name: 'recent' }, { key: { 'x.u': 1, ua: -1, _id: -1 }, name: 'x_recent' }] });
  await c.cmd('t20', { profile: 2 });
  const cases = [
    [{ ua: { $gte: 0 } }, { ua: -1, _id: -1 }, 'recent'],
    [{ ua: { $gte: 0 } }, { ua: 1, _id: 1 }, 'recent'],
    [{ ua: { $lte: Long.fromNumber(1050) }, $or: [{ ua: { $lt: Long.fromNumber(1050) } }, { _id: { $lt: 't150' } }] }, { ua: -1, _id: -1 }, 'recent'],
    [{ 'x.u': 'u3', ua: { $gte: 0 } }, { ua: -1, _id: -1 }, 'x_recent'],
    [{ 'x.u': 'u3', ua: { $gt: Long.fromNumber(1020), $lt: Long.fromNumber(1080) } }, { ua: 1, _id: 1 }, 'x_recent'],
    [{ 'x.u': 'u3' }, { _id: 1 }, 'x_recent'], // hinted, the sort not on the index: sorted after
  ];
  for (const [filter, sort, hint] of cases) {
    const all = await c.cmd('t20', { find: 'th', filter, sort, batchSize: 1000 });
    const want = all.cursor.firstBatch.map((d) => d._id);
    const hinted = await c.cmd('t20', { find: 'th', filter, sort, hint, limit: 5 });
    assert.deepEqual(hinted.cursor.firstBatch.map((d) => d._id), want.slice(0, 5), JSON.stringify({ filter, sort }));
    const agg = await c.cmd('t20', { aggregate: 'th', pipeline: [{ $match: filter }, { $sort: sort }, { $limit: 5 }], hint, cursor: {} });
    assert.deepEqual(agg.cursor.firstBatch.map((d) => d._id), want.slice(0, 5));
  }
  const prof = await c.cmd('t20', { find: 'system.profile', filter: { 'command.hint': 'x_recent', 'command.find': 'th' }, batchSize: 100 });
  const first = prof.cursor.firstBatch[0];
  assert.equal(first.op, 'query');
  assert.equal(first.planSummary, 'IXSCAN { x.u: 1, ua: -1, _id: -1 }');
  assert.equal(first.docsExamined, 5, 'an index scan stops at the limit when it gives the sort');
  await c.cmd('t20', { find: 'th', filter: { y: 1 } }); // no index on y: every document
  const scan = await c.cmd('t20', { find: 'system.profile', filter: { 'command.filter.y': 1 } });
  assert.equal(scan.cursor.firstBatch[0].planSummary, 'COLLSCAN');
  assert.equal(scan.cursor.firstBatch[0].docsExamined, 300);
  const bad = await c.cmd('t20', { find: 'th', filter: {}, hint: 'nope' });
  assert.equal(bad.code, 2);
  assert.match(bad.errmsg, /hint provided does not correspond to an existing index/);
  assert.deepEqual((await c.cmd('t20', { profile: 0 })).was, 2);
  c.close();
});

test('an upsert on {g, s: {$gte: P}} stores a document only above every one of g (how convo stores a batch), read off the {g, s} index', async () => {
  const c = await Client.connect();
  await c.cmd('t21', { createIndexes: 'b', indexes: [{ key: { g: 1, s: 1 }, name: 'chain', unique: true }, { key: { g: 1, k: 1 }, name: 'key', unique: true }] });
  const g = new ObjectId();
  const docs = [];
  for (let i = 0; i < 100; i++) docs.push({ g, s: Long.fromNumber(i), k: Long.fromNumber(i) });
  docs.push({ g, s: Long.fromNumber(102), k: Long.fromNumber(102) }); // slot 101 taken, then collected
  await c.cmd('t21', { insert: 'b', documents: docs });
  await c.cmd('t21', { profile: 2 });
  const store = (p, k = p) => c.cmd('t21', { update: 'b', updates: [{ q: { g, s: { $gte: Long.fromNumber(p) } }, u: { $setOnInsert: { s: Long.fromNumber(p), k: Long.fromNumber(k), m: [] } }, upsert: true }] });
  const below = await store(101); // a writer that read slot 100 as the top: nothing stored
  assert.equal(below.n, 1);
  assert.equal(below.nModified, 0);
  assert.equal(below.upserted, undefined);
  assert.equal((await c.cmd('t21', { count: 'b', query: { g, s: Long.fromNumber(101) } })).n, 0);
  const top = await store(103);
  assert.equal(top.upserted.length, 1);
  const f = await c.cmd('t21', { find: 'b', filter: { g, s: Long.fromNumber(103) } });
  assert.deepEqual(Object.keys(f.cursor.firstBatch[0]), ['_id', 'g', 's', 'k', 'm']);
  const key = await store(104, 5); // its key taken: 11000, nothing stored
  assert.equal(key.writeErrors[0].code, 11000);
  assert.equal((await c.cmd('t21', { count: 'b', query: { g } })).n, 102);
  const prof = await c.cmd('t21', { find: 'system.profile', filter: { op: 'update' }, batchSize: 100 });
  for (const e of prof.cursor.firstBatch) {
    assert.equal(e.planSummary, 'IXSCAN { g: 1, s: 1 }');
    assert.ok(e.docsExamined <= 1, `examined ${e.docsExamined}: not every document of g`);
  }
  assert.equal(prof.cursor.firstBatch.length, 3);
  await c.cmd('t21', { profile: 0 });
  c.close();
});

test('a range of ObjectIds on an index\'s first field, with $nin (how convo looks for a deleted thread\'s leftovers), is read off the index between its bounds', async () => {
  const c = await Client.connect();
  await c.cmd('t22', { createIndexes: 'b', indexes: [{ key: { g: 1, s: 1 }, name: 'chain', unique: true }] });
  const gens = [];
  for (let i = 0; i < 30; i++) gens.push(new ObjectId(`${(i * 8).toString(16).padStart(2, '0')}${'0'.repeat(22)}`));
  const docs = [];
  gens.forEach((g, i) => { for (let s = 0; s < 10; s++) docs.push({ g, s: Long.fromNumber(s), i }); });
  docs.push({ g: 'a string', s: Long.fromNumber(0) }, { s: Long.fromNumber(1) }); // other types, no g
  await c.cmd('t22', { insert: 'b', documents: docs });
  await c.cmd('t22', { profile: 2 });
  const ids = (r) => r.cursor.firstBatch.map((d) => `${d.g}/${d.s}`).sort();
  const cases = [
    { $gte: gens[10], $lte: gens[12], $nin: [] },
    { $gte: gens[10], $lte: gens[12], $nin: [gens[11]] },
    { $gt: gens[10], $lt: gens[12] },
    { $gt: gens[27] },
    { $lte: gens[1], $ne: gens[0] },
  ];
  for (const cond of cases) {
    const scanned = await c.cmd('t22', { find: 'b', filter: { g: cond }, hint: { $natural: 1 }, batchSize: 1000 });
    const read = await c.cmd('t22', { find: 'b', filter: { g: cond }, batchSize: 1000 });
    assert.deepEqual(ids(read), ids(scanned), JSON.stringify(cond));
  }
  const want = await c.cmd('t22', { find: 'b', filter: { g: cases[1] }, batchSize: 1000 });
  assert.equal(want.cursor.firstBatch.length, 20, 'the $nin applies to what the bounds read');
  const prof = await c.cmd('t22', { find: 'system.profile', filter: { op: 'query', 'command.hint': { $exists: false } }, batchSize: 100 });
  assert.equal(prof.cursor.firstBatch.length, cases.length + 1);
  const inRange = [30, 30, 10, 20, 20]; // entries between each case's bounds
  prof.cursor.firstBatch.slice(0, cases.length).forEach((e, k) => {
    assert.equal(e.planSummary, 'IXSCAN { g: 1, s: 1 }');
    assert.equal(e.docsExamined, inRange[k], `case ${k}: the entries between the bounds, not every document`);
  });
  await c.cmd('t22', { profile: 0 });
  c.close();
});
