// legacy.js — reading checkpoints that the saver stored before libconvo kept log references
// (docs/checkpoints.md, "The saver's earlier format"): a message channel's value was a record
// of type 'convo-log/1' (seq ranges of the log and an inline tail), or, for a list that was
// the log's first N messages, no value and `"__convo_log__": {channel: N}` in the body.
// Nothing is written in this format any more.

export const RECORD_TYPE = 'convo-log/1';
export const PREFIX_KEY = '__convo_log__';

/** A 'convo-log/1' record: { ranges: [[start, end), ...], tail: [type, bytes] | null }. */
export function decodeRecord(blob) {
  const r = JSON.parse(Buffer.from(blob.bytes).toString('utf8'));
  return {
    ranges: r.ranges,
    tail: r.tail ? [r.tail.type, new Uint8Array(Buffer.from(r.tail.base64, 'base64'))] : null,
  };
}

/** The record of a list that was the log's first n messages. */
export function prefixRecord(n) {
  return { ranges: n > 0 ? [[0, n]] : [], tail: null };
}

export function seqsOf(ranges) {
  const out = [];
  for (const [s, e] of ranges) for (let i = s; i < e; i++) out.push(i);
  return out;
}

/** The body without PREFIX_KEY, and that key's value (null when absent). A checkpoint with
 * a field of its own of that name was stored as [prefixes, field]: the field is put back. */
export function takePrefixes(body) {
  if (!body || typeof body !== 'object' || !Object.hasOwn(body, PREFIX_KEY)) return [body, null];
  const prefixes = body[PREFIX_KEY];
  if (Array.isArray(prefixes)) {
    body[PREFIX_KEY] = prefixes[1];
    return [body, prefixes[0]];
  }
  delete body[PREFIX_KEY];
  return [body, prefixes];
}

/** The body to store for a checkpoint that has a field named PREFIX_KEY of its own: wrapped
 * so that takePrefixes gives it back (a body without one is stored as it is). */
export function wrapOwnField(rest) {
  return Object.hasOwn(rest, PREFIX_KEY) ? { ...rest, [PREFIX_KEY]: [{}, rest[PREFIX_KEY]] } : rest;
}

/** The legacy records of a stored checkpoint's channels ([channel, record]), given its body's
 * prefixes (from takePrefixes). */
export function legacyRecords(channels, prefixes) {
  const records = [];
  for (const ch of channels) {
    if (ch.items) continue;
    if (ch.value?.type === RECORD_TYPE) records.push([ch.channel, decodeRecord(ch.value)]);
    else if (!ch.value && prefixes && Object.hasOwn(prefixes, ch.channel)) {
      records.push([ch.channel, prefixRecord(prefixes[ch.channel])]);
    }
  }
  return records;
}

/** The smallest seq range [from, to) covering the records' ranges (to 0: none). */
export function recordsSpan(records) {
  let from = Infinity, to = 0;
  for (const [, r] of records) {
    for (const [s, e] of r.ranges) if (e > s) { from = Math.min(from, s); to = Math.max(to, e); }
  }
  return to > 0 ? [from, to] : [0, 0];
}
