#!/usr/bin/env node
// delay-proxy.js LISTEN_PORT TARGET_PORT DELAY_MS — a TCP proxy on 127.0.0.1 that
// holds every chunk DELAY_MS in each direction (order kept, Nagle off on both
// sides): a server "on another host" for measuring round trips, e.g.
//   node scripts/delay-proxy.js 39999 "$CONVO_TEST_MONGO_PORT" 1 &
//   convo --url 'mongodb://127.0.0.1:39999/?database=b' bench --scenario conversation --put-log
'use strict';
const net = require('net');
const [listen, target, delay] = process.argv.slice(2).map(Number);
if (!listen || !target || !(delay >= 0)) {
  console.error('usage: delay-proxy.js LISTEN_PORT TARGET_PORT DELAY_MS');
  process.exit(2);
}
net.createServer((client) => {
  const server = net.connect(target, '127.0.0.1');
  client.setNoDelay(true);
  server.setNoDelay(true);
  client.on('data', (b) => setTimeout(() => server.write(b), delay));
  server.on('data', (b) => setTimeout(() => client.write(b), delay));
  client.on('close', () => server.destroy());
  server.on('close', () => client.destroy());
  client.on('error', () => {});
  server.on('error', () => {});
}).listen(listen, '127.0.0.1', () => console.log(`listening ${listen}`));
