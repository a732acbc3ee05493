'use strict';
// lib/values.js's decode: what a stored document keeps of the message it came in.

const test = require('node:test');
const assert = require('node:assert/strict');
const BSON = require('bson');
const V = require('../lib/values');

test('decoded binary data and ObjectIds keep neither their message nor a shared pool', () => {
  const bytes = Buffer.from('a message of a thread');
  const oid = new BSON.ObjectId('65a1b2c3d4e5f60718293a4b');
  const doc = { g: oid, m: [{ r: 'user', b: new BSON.Binary(bytes, 0) }], pad: 'x'.repeat(100000) };
  const wire = Buffer.concat([Buffer.alloc(16), BSON.serialize(doc)]); // as if after a header
  const body = wire.subarray(16);
  const out = V.decode(body);
  const b = out.m[0].b;
  assert.equal(b.sub_type, 0);
  assert.deepEqual(Buffer.from(b.buffer), bytes);
  assert.ok(b.buffer.buffer.byteLength < 100000,
    `the bytes live in a buffer of ${b.buffer.buffer.byteLength} bytes, the message's size`);
  assert.equal(out.g.toHexString(), oid.toHexString());
  // not in Node's 8 KB pool either, where Buffer.concat builds the replies
  const pooled = Buffer.allocUnsafe(16).buffer;
  assert.notEqual(out.g.buffer.buffer, pooled, 'the ObjectId is in the shared pool');
  assert.notEqual(b.buffer.buffer, pooled, 'the binary is in the shared pool');
  // and the copy is the decoded value's own: changing the message leaves it alone
  wire.fill(0);
  assert.deepEqual(Buffer.from(b.buffer), bytes);
  assert.equal(V.bsonSize(out), BSON.calculateObjectSize(doc));
});
