// items.js — ConvoSaver's mapping between LangGraph values and the Store's lists of items
// (log references, docs/checkpoints.md): a message channel's list, the `__start__` input's
// message list (with `key`), a pending write to a message channel; and the seq hints that
// make a put cost O(new items): an item read from, or put into, a thread's log is known by
// identity afterwards and passed as its seq, without its text.
import { randomUUID } from 'node:crypto';
import { coerceMessageLikeToMessage } from '@langchain/core/messages';
import { toLogMessage, unchanged } from './log.js';
import { isMessage, validRole } from '../internal/roles.js';

/** LangGraph's input channel: its value is the graph's input ({ messages: [...], ... }). */
export const INPUT = '__start__';

/** Seq hints: item object -> { thread, generation, seq, content, id }, valid while the item
 * keeps the content and id it had (a message changed in place is compared by its text).
 * `generation` is the saver's token for the thread's generation and origin (its revived log,
 * revived.js; compared by identity). */
export class Hints {
  #map = new WeakMap();

  /** The seq of item in the log of thread at generation, else -1. */
  seqOf(item, thread, generation) {
    if (item === null || typeof item !== 'object') return -1;
    const h = this.#map.get(item);
    return h && h.thread === thread && h.generation === generation && unchanged(h, item) ? h.seq : -1;
  }

  /** Records that items[i] is log seq seqs[i] (when >= 0) of thread at generation. */
  learn(items, seqs, thread, generation) {
    if (generation === null || !seqs) return;
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (seqs[i] < 0 || item === null || typeof item !== 'object') continue;
      // most items of a put were hinted already: no new entry for them
      if (this.seqOf(item, thread, generation) === seqs[i]) continue;
      this.#map.set(item, { thread, generation, seq: seqs[i], content: item.content, id: item.id });
    }
  }
}

/** A list of values as the Store's items ({ items, seqs, log }): a hinted item goes as its
 * seq alone, any other as its log message text. hinted: whether a seq was given (the put
 * must then be conditional on that generation). */
export async function listIn(serde, hints, list, thread, generation, log) {
  const items = new Array(list.length);
  const seqs = new Array(list.length);
  let hinted = false;
  for (let i = 0; i < list.length; i++) {
    const q = generation === null ? -1 : hints.seqOf(list[i], thread, generation);
    seqs[i] = q;
    if (q >= 0) {
      items[i] = null;
      hinted = true;
    } else {
      items[i] = await toLogMessage(serde, list[i]);
    }
  }
  return { items: { items, seqs: hinted ? seqs : null, log }, hinted };
}

/** An item of an input or of a pending write to a message channel, as LangGraph's
 * add_messages will commit it, so that the put committing it finds the same text and turns
 * the input and the write into references: a message without an id gets one now (the
 * reducer would give it a random one after the write was stored; it keeps an id it finds),
 * and a plain role-tagged object ({ role, content, id }) becomes the LangChain message the
 * reducer makes of it. Anything else is left as it is. */
export function asCommitted(item) {
  if (isMessage(item)) {
    if (item.id === undefined || item.id === null) {
      item.id = randomUUID();
      if (item.lc_kwargs) item.lc_kwargs.id = item.id;
    }
    return item;
  }
  if (item === null || typeof item !== 'object' || Array.isArray(item) || !validRole(item.role)) return item;
  // the id first: the reducer coerces the object as it then is
  const hadId = item.id !== undefined && item.id !== null;
  if (!hadId) item.id = randomUUID();
  let message;
  try {
    message = coerceMessageLikeToMessage(item);
  } catch {
    if (!hadId) delete item.id;
    return item; // a role add_messages does not know: it is not a message to it either
  }
  return message;
}

/** The key of a message channel under which an input value (a plain object) holds a list,
 * else null: such an input is stored as that list's items plus the rest of the object. */
export function inputKey(value, messageChannels) {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return null;
  return messageChannels.find((k) => Array.isArray(value[k])) ?? null;
}
