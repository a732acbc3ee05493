'use strict';
// A preload for measuring what the stand-in holds (not used by the tests):
//   node --expose-gc -r ./heap-probe.js server.js --port 0
// then `kill -USR2 PID` prints, after a full garbage collection, the records
// (stored documents) held and the heap's figures on stderr:
//   MEM <time> records=N heapUsed=B external=B arrayBuffers=B rss=B perRecord=B
const path = require('path');
const S = require(path.join(path.dirname(path.resolve(process.argv[1])), 'lib', 'store.js'));

let live = 0;
const insert = S.Collection.prototype.insert;
S.Collection.prototype.insert = function countedInsert(...args) {
  const rec = insert.apply(this, args);
  live++;
  return rec;
};
const remove = S.Collection.prototype.remove;
S.Collection.prototype.remove = function countedRemove(...args) {
  live--;
  return remove.apply(this, args);
};

process.on('SIGUSR2', () => {
  if (global.gc) global.gc();
  const m = process.memoryUsage();
  process.stderr.write(`MEM ${new Date().toISOString()} records=${live} heapUsed=${m.heapUsed} `
    + `external=${m.external} arrayBuffers=${m.arrayBuffers} rss=${m.rss} `
    + `perRecord=${Math.round(m.heapUsed / Math.max(1, live))}\n`);
});
