#!/usr/bin/env node
'use strict';
// convo's MongoDB stand-in: a small in-memory server speaking enough of the
// MongoDB wire protocol for libmongoc-based tests.
//
//   node tests/mongo-server/server.js --port N [--host 127.0.0.1] [--verbose]
//        [--partial-indexes=ignore|refuse] [--sparse-indexes=ignore]
//
// --partial-indexes / --sparse-indexes (or CONVO_MONGO_STANDIN_PARTIAL /
// CONVO_MONGO_STANDIN_SPARSE) make it behave like servers that speak the
// protocol without those index options: `ignore` builds the index over every
// document as if the option had not been given (so a partial unique index is
// unique over all documents), `refuse` fails createIndexes with 67
// CannotCreateIndex.  See README.md.
// Prints "listening PORT" on stdout once ready (port 0 picks a free port) and
// serves until SIGTERM / SIGINT.  See README.md for what is supported.

const net = require('net');
const wire = require('./lib/wire');
const { Store } = require('./lib/store');
const { runCommand, Cursors } = require('./lib/commands');

const MAX_MESSAGE = 48000000;

function parseArgs(argv) {
  const opts = {
    port: 27017,
    host: '127.0.0.1',
    verbose: !!process.env.CONVO_MONGO_STANDIN_VERBOSE,
    partial: process.env.CONVO_MONGO_STANDIN_PARTIAL || 'keep',
    sparse: process.env.CONVO_MONGO_STANDIN_SPARSE || 'keep',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') opts.port = Number(argv[++i]);
    else if (a.startsWith('--port=')) opts.port = Number(a.slice(7));
    else if (a === '--host') opts.host = argv[++i];
    else if (a.startsWith('--host=')) opts.host = a.slice(7);
    else if (a === '--verbose' || a === '-v') opts.verbose = true;
    else if (a.startsWith('--partial-indexes=')) opts.partial = a.slice(18);
    else if (a.startsWith('--sparse-indexes=')) opts.sparse = a.slice(17);
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: node server.js --port N [--host 127.0.0.1] [--verbose]\n'
        + '         [--partial-indexes=keep|ignore|refuse] [--sparse-indexes=keep|ignore]\n');
      process.exit(0);
    } else {
      process.stderr.write(`unknown argument: ${a}\n`);
      process.exit(2);
    }
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    process.stderr.write('--port must be an integer in 0..65535\n');
    process.exit(2);
  }
  if (!['keep', 'ignore', 'refuse'].includes(opts.partial)) {
    process.stderr.write('--partial-indexes must be keep, ignore or refuse\n');
    process.exit(2);
  }
  if (!['keep', 'ignore'].includes(opts.sparse)) {
    process.stderr.write('--sparse-indexes must be keep or ignore\n');
    process.exit(2);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const log = (msg) => process.stderr.write(`[mongo-standin] ${msg}\n`);
const store = new Store({ partial: opts.partial, sparse: opts.sparse });
const cursors = new Cursors();
const sockets = new Set();
let nextConnId = 1;
let nextRequestId = 1;

/** Encode a reply, falling back to an error reply if it cannot be serialised. */
function encodeReply(encode, responseTo, reply) {
  try {
    return encode(nextRequestId++, responseTo, reply);
  } catch (e) {
    log(`cannot encode reply: ${e.message}`);
    return encode(nextRequestId++, responseTo, { ok: 0, errmsg: `cannot encode reply: ${e.message}`, code: 1, codeName: 'InternalError' });
  }
}

/** Handle one complete wire message; returns the reply buffer or null. */
function handleMessage(msg, conn) {
  const h = wire.header(msg);
  const ctx = { store, cursors, conn, log };
  if (h.opCode === wire.OP_MSG) {
    const { body, moreToCome } = wire.parseOpMsg(msg);
    const dbName = typeof body.$db === 'string' ? body.$db : 'admin';
    if (opts.verbose) log(`conn${conn.id} OP_MSG ${dbName} ${Object.keys(body)[0]}`);
    const reply = runCommand(body, dbName, ctx);
    if (opts.verbose && reply.ok !== 1) log(`  -> error ${reply.code} ${reply.errmsg}`);
    if (moreToCome) return null; // fire-and-forget (w:0) request
    return encodeReply(wire.encodeOpMsg, h.requestID, reply);
  }
  if (h.opCode === wire.OP_QUERY) {
    const q = wire.parseOpQuery(msg);
    if (opts.verbose) log(`conn${conn.id} OP_QUERY ${q.fullCollectionName} ${Object.keys(q.query)[0]}`);
    const reply = q.collection === '$cmd'
      ? runCommand(q.query, q.db, ctx)
      : { ok: 0, errmsg: 'legacy OP_QUERY is only supported for commands', code: 352, codeName: 'UnsupportedOpQueryCommand' };
    return encodeReply(wire.encodeOpReply, h.requestID, reply);
  }
  throw new Error(`unsupported opcode ${h.opCode}`);
}

const server = net.createServer((socket) => {
  const conn = { id: nextConnId++, remote: `${socket.remoteAddress}:${socket.remotePort}` };
  sockets.add(socket);
  socket.setNoDelay(true);
  // Incoming bytes are kept as a list of chunks and only joined once a whole
  // message has arrived, so large messages do not cause quadratic copying.
  let chunks = [];
  let buffered = 0;
  socket.on('data', (chunk) => {
    chunks.push(chunk);
    buffered += chunk.length;
    try {
      while (buffered >= 4) {
        if (chunks[0].length < 4) chunks = [Buffer.concat(chunks)];
        const len = chunks[0].readInt32LE(0);
        if (len < 16 || len > MAX_MESSAGE) throw new Error(`invalid message length ${len}`);
        if (buffered < len) break;
        const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
        const msg = all.subarray(0, len);
        const rest = all.subarray(len);
        chunks = rest.length ? [rest] : [];
        buffered = rest.length;
        const reply = handleMessage(msg, conn);
        if (reply) socket.write(reply);
      }
    } catch (e) {
      log(`conn${conn.id}: closing after protocol error: ${e.message}`);
      socket.destroy();
    }
  });
  socket.on('error', () => {});
  socket.on('close', () => sockets.delete(socket));
});

// TTL monitor: like mongod's, but every second.
const ttlTimer = setInterval(() => {
  const n = store.sweepTTL();
  if (n && opts.verbose) log(`TTL monitor removed ${n} document(s)`);
  cursors.sweep(Date.now());
}, 1000);

function shutdown() {
  clearInterval(ttlTimer);
  for (const s of sockets) s.destroy();
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 500).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

server.on('error', (e) => {
  log(`server error: ${e.message}`);
  process.exit(1);
});
server.listen(opts.port, opts.host, () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
