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
  // generation token -> channel -> the last list put under it: { list, seqs, contents, ids }.
  // The next put's list starts with the same objects (LangGraph's reducer copies the array, not the
  // messages): those are matched by identity, without a lookup each.
  #last = new WeakMap();

  /** The seq of item in the log of thread at generation, else -1. */
  seqOf(item, thread, generation) {
    if (item === null || typeof item !== 'object') return -1;
    const h = this.#map.get(item);
    return h && h.thread === thread && h.generation === generation && unchanged(h, item) ? h.seq : -1;
  }

  /** The seqs (-1: unknown) of list's items (channel's) in the log of thread at generation. */
  seqsOf(list, thread, generation, channel) {
    const seqs = new Array(list.length);
    const last = generation === null ? undefined : this.#last.get(generation)?.get(channel);
    let i = 0;
    if (last) {
      const end = Math.min(list.length, last.list.length);
      for (; i < end; i++) {
        const item = list[i];
        if (item !== last.list[i] || item === null || typeof item !== 'object' ||
          item.content !== last.contents[i] || item.id !== last.ids[i] || last.seqs[i] < 0) break;
        seqs[i] = last.seqs[i];
      }
    }
    for (; i < list.length; i++) seqs[i] = generation === null ? -1 : this.seqOf(list[i], thread, generation);
    return seqs;
  }

  /** Records that items[i] is log seq seqs[i] (when >= 0) of thread at generation; known[i]:
   * the seq it was put with (>= 0: already recorded). */
  learn(items, seqs, thread, generation, known = null) {
    if (generation === null || !seqs) return;
    for (let i = 0; i < items.length; i++) {
      const item = items[i];
      if (seqs[i] < 0 || item === null || typeof item !== 'object' || (known && known[i] >= 0)) continue;
      // most items of a read were hinted already: no new entry for them
      if (!known && this.seqOf(item, thread, generation) === seqs[i]) continue;
      this.#map.set(item, { thread, generation, seq: seqs[i], content: item.content, id: item.id });
    }
  }

  /** Learns a put's list of channel (items with the seqs the put gave them; known: the seqs
   * they were given with) and keeps it as the token's last list of that channel. */
  learnPut(items, seqs, thread, generation, known, channel) {
    if (generation === null || !seqs) return;
    this.learn(items, seqs, thread, generation, known);
    const n = items.length;
    const contents = new Array(n);
    const ids = new Array(n);
    for (let i = 0; i < n; i++) {
      const item = items[i];
      if (item !== null && typeof item === 'object') {
        contents[i] = item.content;
        ids[i] = item.id;
      }
    }
    let lists = this.#last.get(generation);
    if (!lists) this.#last.set(generation, (lists = new Map()));
    lists.set(channel, { list: items.slice(), seqs, contents, ids });
  }
}

/** A list of values as the Store's items ({ items, seqs, log }): a hinted item goes as its
 * seq alone, any other as its log message text. hinted: whether a seq was given (the put
 * must then be conditional on that generation). */
export async function listIn(serde, hints, list, thread, generation, log, channel) {
  const items = new Array(list.length);
  const seqs = hints.seqsOf(list, thread, generation, channel);
  let hinted = false;
  for (let i = 0; i < list.length; i++) {
    if (seqs[i] >= 0) {
      items[i] = null;
      hinted = true;
    } else {
      items[i] = await toLogMessage(serde, list[i]);
    }
  }
  return { items: { items, seqs: hinted ? seqs : null, log }, hinted, seqs };
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
