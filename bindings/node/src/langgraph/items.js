// items.js — ConvoSaver's mapping between LangGraph values and the Store's lists of items
// (log references, docs/checkpoints.md): a message channel's list, the `__start__` input's
// message list (with `key`), a pending write to a message channel; and the seq hints that
// make a put cost O(new items): an item read from, or put into, a thread's log is known by
// identity afterwards and passed as its seq, without its text.
import { randomUUID } from 'node:crypto';
import { coerceMessageLikeToMessage } from '@langchain/core/messages';
import { logMessageSteps, unchanged } from './log.js';
import { drive } from '../internal/drive.js';
import { isMessage, validRole } from '../internal/roles.js';

/** LangGraph's input channel: its value is the graph's input ({ messages: [...], ... }). */
export const INPUT = '__start__';

/** Seq hints: item object -> { thread, generation, seq, content, id }, valid while the item
 * keeps the content and id it had (a message changed in place is compared by its text).
 * `generation` is the saver's token for the thread's generation and origin (its revived log,
 * revived.js; compared by identity). Per token also the log as this saver last knew it, seq
 * by seq (the object it read or put there): a list that starts with those objects goes to
 * the Store as their count (`logPrefix`), so a put hands over, and afterwards learns, only
 * what follows them. */
export class Hints {
  #map = new WeakMap();
  // generation token -> { items, length, noId }: the log's object at each seq as last read
  // or put under the token ([0, length) all set), and the seqs of those that had no id
  #logs = new WeakMap();

  /** The seq of item in the log of thread at generation, else -1. */
  seqOf(item, thread, generation) {
    if (item === null || typeof item !== 'object') return -1;
    const h = this.#map.get(item);
    return h && h.thread === thread && h.generation === generation && unchanged(h, item) ? h.seq : -1;
  }

  /** How many of list's first items are the log's messages 0, 1, ... of the token's thread:
   * the same objects (one identity comparison per item; what is inside them is not looked
   * at, as LangGraph's reducers never change a message in place: a node replaces one by
   * id), except that one stored without an id that has one now ends the prefix
   * (add_messages gives ids in place). */
  prefixOf(list, generation) {
    const log = generation === null ? undefined : this.#logs.get(generation);
    if (!log) return 0;
    const { items } = log;
    const end = Math.min(list.length, log.length);
    let k = 0;
    while (k < end && list[k] === items[k]) k++;
    for (const q of log.noId) {
      if (q < k && list[q].id !== undefined && list[q].id !== null) k = q;
    }
    return k;
  }

  /** The seqs (-1: unknown) of list's items from `from` on in the log of thread at generation. */
  seqsOf(list, thread, generation, from = 0) {
    const seqs = new Array(list.length - from);
    for (let i = from; i < list.length; i++) {
      seqs[i - from] = generation === null ? -1 : this.seqOf(list[i], thread, generation);
    }
    return seqs;
  }

  /** Records that items[i] is log seq seqs[i] (when >= 0) of thread at generation (a token:
   * null records nothing). */
  learn(items, seqs, thread, generation) {
    if (generation === null || !seqs) return;
    let log = this.#logs.get(generation);
    if (!log) this.#logs.set(generation, (log = { items: [], length: 0, noId: new Set() }));
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      const q = seqs[i];
      if (q < 0 || item === null || typeof item !== 'object') continue;
      if (this.seqOf(item, thread, generation) !== q) {
        this.#map.set(item, { thread, generation, seq: q, content: item.content, id: item.id });
      }
      log.items[q] = item;
      if (item.id === undefined || item.id === null) log.noId.add(q);
      else log.noId.delete(q);
    }
    while (log.items[log.length] !== undefined) log.length++;
  }
}

/** A list of values as the Store's items ({ items, seqs, log }) and the count of its first
 * items that are the log's first messages (`prefix`, passed as the channel's logPrefix; the
 * items and seqs are those of the rest): a hinted item goes as its seq alone, any other as its
 * log message text. A prefix or a seq given makes the put conditional on that generation.
 * The result, or a promise of it when the serde's dumps are promises (listInSteps: its steps). */
export function listIn(serde, hints, list, thread, generation, log) {
  return drive(listInSteps(serde, hints, list, thread, generation, log));
}

export function* listInSteps(serde, hints, list, thread, generation, log) {
  const prefix = hints.prefixOf(list, generation);
  const seqs = hints.seqsOf(list, thread, generation, prefix);
  const items = new Array(seqs.length);
  let hinted = false;
  for (let i = 0; i < seqs.length; i++) {
    if (seqs[i] >= 0) {
      items[i] = null;
      hinted = true;
    } else {
      items[i] = yield* logMessageSteps(serde, list[prefix + i]);
    }
  }
  return { items: { items, seqs: hinted ? seqs : null, log }, prefix, seqs };
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
