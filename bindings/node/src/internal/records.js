// records.js — a channel value kept in the thread's log: a small record of seq ranges
// [start, end) into the log and an inline tail, and the range arithmetic over it.

export const RECORD_TYPE = 'convo-log/1';

/** A channel value in the log: seq ranges [start, end) then an inline tail. */
export function encodeRecord(ranges, tail) {
  const r = { ranges };
  if (tail) r.tail = { type: tail[0], base64: Buffer.from(tail[1]).toString('base64') };
  return { type: RECORD_TYPE, bytes: Buffer.from(JSON.stringify(r)) };
}

export function decodeRecord(blob) {
  const r = JSON.parse(Buffer.from(blob.bytes).toString('utf8'));
  return {
    ranges: r.ranges,
    tail: r.tail ? [r.tail.type, new Uint8Array(Buffer.from(r.tail.base64, 'base64'))] : null,
  };
}

export function seqsOf(ranges) {
  const out = [];
  for (const [s, e] of ranges) for (let i = s; i < e; i++) out.push(i);
  return out;
}

// Ranges covering the first m seqs of a range list.
export function prefixRanges(ranges, m) {
  const out = [];
  for (const [s, e] of ranges) {
    if (m <= 0) break;
    const n = Math.min(e - s, m);
    out.push([s, s + n]);
    m -= n;
  }
  return out;
}

export function addRange(ranges, s, e) {
  if (e <= s) return ranges;
  const out = ranges.slice();
  const last = out[out.length - 1];
  if (last && last[1] === s) out[out.length - 1] = [last[0], e];
  else out.push([s, e]);
  return out;
}

export function rangesEnd(ranges) {
  return ranges.reduce((m, r) => Math.max(m, r[1]), 0);
}
