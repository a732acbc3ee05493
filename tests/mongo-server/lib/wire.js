'use strict';
// MongoDB wire protocol framing: OP_MSG (2013), legacy OP_QUERY (2004) and
// the OP_REPLY (1) answer to it.  All integers are little-endian.

const V = require('./values');

const OP_REPLY = 1;
const OP_QUERY = 2004;
const OP_MSG = 2013;

const FLAG_CHECKSUM_PRESENT = 1 << 0;
const FLAG_MORE_TO_COME = 1 << 1;

function header(buf) {
  return {
    length: buf.readInt32LE(0),
    requestID: buf.readInt32LE(4),
    responseTo: buf.readInt32LE(8),
    opCode: buf.readInt32LE(12),
  };
}

function readCString(buf, pos) {
  const end = buf.indexOf(0, pos);
  if (end < 0) throw new Error('unterminated cstring');
  return { str: buf.toString('utf8', pos, end), next: end + 1 };
}

function readDoc(buf, pos) {
  const len = buf.readInt32LE(pos);
  if (len < 5 || pos + len > buf.length) throw new Error('invalid BSON document length');
  return { doc: V.decode(buf.subarray(pos, pos + len)), next: pos + len };
}

/**
 * Parse an OP_MSG.  Kind 1 document sequences (used by drivers for insert,
 * update and delete batches) are folded into the body under their identifier.
 */
function parseOpMsg(buf) {
  const flags = buf.readUInt32LE(16);
  const end = buf.length - (flags & FLAG_CHECKSUM_PRESENT ? 4 : 0); // CRC-32C is not verified
  let pos = 20;
  let body = null;
  const sequences = [];
  while (pos < end) {
    const kind = buf[pos++];
    if (kind === 0) {
      const r = readDoc(buf, pos);
      body = r.doc;
      pos = r.next;
    } else if (kind === 1) {
      const size = buf.readInt32LE(pos);
      const secEnd = pos + size;
      const id = readCString(buf, pos + 4);
      const docs = [];
      let p = id.next;
      while (p < secEnd) {
        const r = readDoc(buf, p);
        docs.push(r.doc);
        p = r.next;
      }
      sequences.push([id.str, docs]);
      pos = secEnd;
    } else {
      throw new Error(`unknown OP_MSG section kind ${kind}`);
    }
  }
  if (!body) throw new Error('OP_MSG without a body section');
  for (const [id, docs] of sequences) V.setKey(body, id, docs);
  return { flags, moreToCome: !!(flags & FLAG_MORE_TO_COME), body };
}

/** Parse a legacy OP_QUERY (only used for commands on <db>.$cmd). */
function parseOpQuery(buf) {
  const flags = buf.readInt32LE(16);
  const ns = readCString(buf, 20);
  let pos = ns.next + 8; // numberToSkip, numberToReturn
  const q = readDoc(buf, pos);
  pos = q.next;
  let query = q.doc;
  // Commands may be wrapped as {$query: {...}, $readPreference: ...}.
  if (V.isPlainDoc(query.$query)) query = query.$query;
  const dot = ns.str.indexOf('.');
  return {
    flags,
    fullCollectionName: ns.str,
    db: dot < 0 ? ns.str : ns.str.slice(0, dot),
    collection: dot < 0 ? '' : ns.str.slice(dot + 1),
    query,
  };
}

function makeHeader(length, requestID, responseTo, opCode) {
  const h = Buffer.alloc(16);
  h.writeInt32LE(length, 0);
  h.writeInt32LE(requestID, 4);
  h.writeInt32LE(responseTo, 8);
  h.writeInt32LE(opCode, 12);
  return h;
}

function encodeOpMsg(requestID, responseTo, doc) {
  const body = V.encode(doc);
  const pre = Buffer.alloc(5); // flagBits (0) + section kind 0
  return Buffer.concat([makeHeader(16 + 5 + body.length, requestID, responseTo, OP_MSG), pre, body]);
}

function encodeOpReply(requestID, responseTo, doc) {
  const body = V.encode(doc);
  const fields = Buffer.alloc(20); // responseFlags, cursorID (int64), startingFrom, numberReturned
  fields.writeInt32LE(1, 16);
  return Buffer.concat([makeHeader(16 + 20 + body.length, requestID, responseTo, OP_REPLY), fields, body]);
}

module.exports = {
  OP_REPLY, OP_QUERY, OP_MSG, header, parseOpMsg, parseOpQuery, encodeOpMsg, encodeOpReply,
};
