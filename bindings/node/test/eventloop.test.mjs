// eventloop.test.mjs — a call that waits on a stalled server runs off the event loop:
// timers keep firing while a Redis call waits on a listener that never answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Store, TimeoutError } from '../src/index.js';

test('the event loop runs while a call waits on a server that never answers', async () => {
  const sockets = [];
  const server = net.createServer((sock) => sockets.push(sock)); // accepts, never replies
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    const started = ticks;
    // opening a Redis store pings the server: the call waits for its timeout
    await assert.rejects(Store.open(`redis://127.0.0.1:${port}?timeout=1000&connect_timeout=1000`),
      TimeoutError);
    // 1 s of waiting at 10 ms a tick: a blocked loop would show 0 or 1
    assert.ok(ticks - started >= 20, `only ${ticks - started} timer ticks ran during the call`);
    assert.ok(sockets.length >= 1, 'the call reached the listener');
  } finally {
    clearInterval(timer);
    for (const sock of sockets) sock.destroy();
    server.close();
  }
});
