// log.js — how an item of a message channel is kept in the thread's log: a role-tagged
// JSON message (readable by `convo load`, restored exactly through the saver's serde). The
// channel's value, a record pointing into the log, is in ../internal/records.js.
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { load } from '@langchain/core/load';
import { isMessage, roleOf, contentOf } from '../internal/roles.js';

// Items that LangGraph treats as immutable (message objects) are serialized once.
// One cache per serde (a text is the serde's output): serde -> item -> { text, content,
// id }; an entry is used only while the item's content and id are the ones it was
// serialized with (a message changed in place is serialized again; a change deeper
// inside, e.g. to additional_kwargs, is not seen: put a new message object for that).
const caches = new WeakMap();

function cacheOf(serde) {
  let c = caches.get(serde);
  if (!c) caches.set(serde, (c = new WeakMap()));
  return c;
}

// Whether a message still has the content and id that an entry (of the cache above, or
// of the saver's owners) was made from.
function unchanged(entry, item) {
  return entry.content === item.content && entry.id === item.id;
}

/** The log message of an item already serialized by this serde, else undefined (no await:
 * a put compares the whole list with the log, a thousand items at turn 1,000), as a
 * function of the item: the serde's cache is looked up once per put, not per item. */
export function logMessageCache(serde) {
  const cache = cacheOf(serde);
  return (item) => {
    if (item === null || typeof item !== 'object') return undefined;
    const e = cache.get(item);
    return e && unchanged(e, item) ? e.text : undefined;
  };
}

/** What the saver keeps of an item it appended, to know the item again by identity: the
 * message object with the content and id its text was made from (undefined for other
 * items, which are compared by their text). */
export function ownerOf(item) {
  return isMessage(item) ? { item, content: item.content, id: item.id } : undefined;
}

/** Whether an item is the one an owner entry was made from, unchanged as the cache sees it. */
export function isOwner(owner, item) {
  return owner !== undefined && owner.item === item && unchanged(owner, item);
}

/** The log message (a JSON string) that stores one item of a message channel. */
export async function toLogMessage(serde, item) {
  if (isMessage(item)) {
    const e = cacheOf(serde).get(item);
    if (e && unchanged(e, item)) return e.text;
  }
  const [type, bytes] = await serde.dumpsTyped(item);
  const head = { role: roleOf(item) };
  const content = contentOf(item);
  if (content !== undefined) head.content = content;
  let text = JSON.stringify(head).slice(0, -1);
  if (type === 'json') {
    const value = Buffer.from(bytes).toString('utf8');
    // The content is in the value too (kwargs.content of a LangChain message): stored
    // once, the value's copy of its JSON text replaced by 0 at offset `at`.
    const ctext = content === undefined ? '' : JSON.stringify(content);
    const k = ctext.length > 16 ? value.indexOf(`"content":${ctext}`) : -1;
    if (k >= 0) {
      const at = k + 10;
      text += `,"serde":"json/c","at":${at},"value":${value.slice(0, at)}0${value.slice(at + ctext.length)}}`;
    } else {
      text += `,"serde":"json","value":${value}}`;
    }
  } else {
    text += `,"serde":${JSON.stringify(type)},"base64":"${Buffer.from(bytes).toString('base64')}"}`;
  }
  // JSON.stringify writes a lone surrogate (half an emoji cut by a stream) as \udXXX,
  // which the library refuses as invalid JSON: such an item keeps its serde bytes in
  // base64 and no content (a \\ud... text only costs the same fallback).
  if (/\\ud[89a-f]/i.test(text)) {
    text = `${JSON.stringify({ role: head.role }).slice(0, -1)},"serde":${JSON.stringify(type)},` +
      `"base64":"${Buffer.from(bytes).toString('base64')}"}`;
  }
  if (isMessage(item)) cacheOf(serde).set(item, { text, content: item.content, id: item.id });
  return text;
}

// The end of the JSON string starting at t[i] (a '"'), or -1.
function skipString(t, i) {
  if (t[i] !== '"') return -1;
  for (let j = i + 1; ;) {
    const q = t.indexOf('"', j);
    if (q < 0) return -1;
    let b = q - 1;
    while (t[b] === '\\') b--;
    if ((q - 1 - b) % 2 === 0) return q + 1;
    j = q + 1;
  }
}

// The end of the compact JSON value (as JSON.stringify writes it) starting at t[i], or -1.
function skipValue(t, i) {
  if (t[i] === '"') return skipString(t, i);
  let depth = 0;
  for (let j = i; j < t.length;) {
    const c = t[j];
    if (c === '"') {
      j = skipString(t, j);
      if (j < 0) return -1;
      continue;
    }
    if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    j++;
    if (depth === 0) return j;
    if (depth < 0) return -1;
  }
  return -1;
}

const VALUE_MARK = ',"serde":"json","value":';
const CUT_MARK = ',"serde":"json/c","at":';
const LC_HEAD = '{"lc":1,"type":"constructor","id":[';

// The JSON text of the serde value of a log message as toLogMessage writes it with a
// JSON serde ("json", or "json/c": the content's text put back at `at`), or null.
// Found without parsing the message: its head is {"role":S[,"content":V].
function valueText(t) {
  if (!t.startsWith('{"role":') || t[t.length - 1] !== '}') return null;
  let i = skipString(t, 8);
  if (i < 0) return null;
  let cs = -1, ce = -1;
  if (t.startsWith(',"content":', i)) {
    cs = i + 11;
    ce = i = skipValue(t, cs);
    if (i < 0) return null;
  }
  if (t.startsWith(VALUE_MARK, i)) return t.slice(i + VALUE_MARK.length, -1);
  if (cs < 0 || !t.startsWith(CUT_MARK, i)) return null;
  i += CUT_MARK.length;
  let j = i;
  while (t[j] >= '0' && t[j] <= '9') j++;
  if (j === i || j - i > 15 || !t.startsWith(',"value":', j)) return null;
  const at = Number(t.slice(i, j));
  const v = t.slice(j + 9, -1);
  if (v[at] !== '0') return null;
  return v.slice(0, at) + t.slice(cs, ce) + v.slice(at + 1);
}

// The value text of a log message toLogMessage wrote with a JSON serde, when that value
// is one LangChain object with nothing else to revive inside (no other "lc" key: no
// nested LangChain object, no lc:2 record of JsonPlusSerializer, no escaped object);
// else null.
export function plainLangChainValue(t) {
  const v = valueText(t);
  if (v === null || !v.startsWith(LC_HEAD) || v.indexOf('"lc":', LC_HEAD.length) !== -1) return null;
  return v;
}

/** The items log messages store, in order: the JSON ones revived by one serde call. */
export async function fromLogMessages(serde, texts) {
  const items = new Array(texts.length);
  const jsonAt = [];
  const jsonValues = [];
  const direct = [];
  const slow = [];
  // JsonPlusSerializer revives a LangChain object with nothing else inside as
  // load(JSON.stringify(value)) (after a pass that changes nothing): the value's own
  // text gives the same object without parsing the message and the value twice. A
  // text that is not one JSON value (a message not written by toLogMessage) fails to
  // load and takes the general path below.
  const fast = serde?.constructor === JsonPlusSerializer;
  for (let i = 0; i < texts.length; i++) {
    const v = fast ? plainLangChainValue(texts[i]) : null;
    if (v !== null) {
      direct.push(load(v).then((x) => { items[i] = x; }, () => { slow.push(i); }));
      continue;
    }
    await parseOne(serde, texts, i, items, jsonAt, jsonValues);
  }
  await Promise.all(direct);
  slow.sort((a, b) => a - b);
  for (const i of slow) await parseOne(serde, texts, i, items, jsonAt, jsonValues);
  if (jsonAt.length) {
    const revived = await serde.loadsTyped('json', JSON.stringify(jsonValues));
    for (let k = 0; k < jsonAt.length; k++) items[jsonAt[k]] = revived[k];
  }
  return items;
}

async function parseOne(serde, texts, i, items, jsonAt, jsonValues) {
  const m = JSON.parse(texts[i]);
  if (typeof m.serde !== 'string') throw new Error('convo: a log message without "serde" in a message channel');
  if (m.serde === 'json' && 'value' in m) {
    jsonAt.push(i);
    jsonValues.push(m.value);
  } else if (m.serde === 'json/c') {
    const v = valueText(texts[i]);
    if (v === null) throw new Error('convo: a "json/c" log message not laid out as the saver writes it');
    jsonAt.push(i);
    jsonValues.push(JSON.parse(v));
  } else if ('base64' in m) {
    items[i] = await serde.loadsTyped(m.serde, new Uint8Array(Buffer.from(m.base64, 'base64')));
  } else {
    items[i] = await serde.loadsTyped(m.serde, JSON.stringify(m.value));
  }
}
