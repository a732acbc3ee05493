// log.js — how an item of a message channel is kept in the thread's log: a role-tagged
// JSON message (readable by `convo load`, restored exactly through the saver's serde; its
// layout is ../internal/logtext.js). libconvo keeps the lists of such items (log references).
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { load } from '@langchain/core/load';
import { isMessage, roleOf, contentOf } from '../internal/roles.js';
import { logText, valueText, plainLangChainValue } from '../internal/logtext.js';
import { compactCandidate, compactMessage, sameJson } from '../internal/compact.js';
import { drive } from '../internal/drive.js';

export { plainLangChainValue };

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

/** Whether a message still has the content and id that an entry (of the cache above, or of
 * the saver's seq hints) was made from. */
export function unchanged(entry, item) {
  return entry.content === item.content && entry.id === item.id;
}

/** serde.dumpsTyped(value), given at once (not as a promise) when the serde is LangGraph's
 * JsonPlusSerializer with its own dumpsTyped, which is its `_dumps` and nothing that waits
 * (test/langgraph/sync.test.mjs compares the two): a put then needs no turn of the event loop. */
export function dumpsTyped(serde, value) {
  if (serde?.dumpsTyped === JsonPlusSerializer.prototype.dumpsTyped && typeof serde._dumps === 'function') {
    return value instanceof Uint8Array ? ['bytes', value] : ['json', serde._dumps(value)];
  }
  return serde.dumpsTyped(value);
}

/** The log message (a JSON string) that stores one item of a message channel: the text, or
 * a promise of it when the serde's is one. */
export function toLogMessage(serde, item) {
  return drive(logMessageSteps(serde, item));
}

/** toLogMessage's steps, for a caller that runs its own (../internal/drive.js). */
export function* logMessageSteps(serde, item) {
  if (isMessage(item)) {
    const e = cacheOf(serde).get(item);
    if (e && unchanged(e, item)) return e.text;
  }
  const [type, bytes] = yield dumpsTyped(serde, item);
  const text = (yield* compactLogText(serde, item, type, bytes)) ??
    logText(roleOf(item), contentOf(item), type, bytes);
  if (isMessage(item)) cacheOf(serde).set(item, { text, content: item.content, id: item.id });
  return text;
}

// The compact text ("msg/1") of a message, when the serde is LangGraph's own (which revives
// such a message by its class's constructor) and the message its class makes of the compact
// fields serializes to the same JSON as the original: else null (the full form).
function* compactLogText(serde, item, type, bytes) {
  if (serde?.constructor !== JsonPlusSerializer || type !== 'json' || !isMessage(item)) return null;
  const c = compactCandidate(roleOf(item), item);
  if (c === null) return null;
  const [type2, bytes2] = yield dumpsTyped(serde, c.rebuilt);
  return type2 === type && sameJson(bytes2, bytes) ? c.text : null;
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
    const m = compactMessage(texts[i]);
    if (m !== undefined) {
      items[i] = m;
      continue;
    }
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
