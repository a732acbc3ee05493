// chat.js — Vercel AI SDK chats (UIMessage arrays) in convo threads: one role-tagged JSON
// message per UIMessage; saveChat writes only what changed since the stored chat (new ids
// appended, a changed last message's tail replaced), conditional on what it read.
// Imports nothing of the SDK: a UIMessage is plain JSON.
import { Store } from '../store.js';
import { NotFoundError, ConflictError, InvalidError, codes } from '../errors.js';
import { text, int, list, known } from '../internal/args.js';

const SAVE_ATTEMPTS = 5;
const PREVIEW_CHARS = 160;

function invalid(message) {
  return new InvalidError(codes.EINVAL, message);
}

function storeOf(store, what) {
  if (!(store instanceof Store)) throw invalid(`${what} takes a convo Store (await Store.open(url))`);
  return store;
}

/** The log text of a UIMessage: its role first (what `convo load` shows at the start of
 * each line), then its other fields as they are. */
export function toLogText(message) {
  const { role, ...rest } = message;
  return JSON.stringify({ role, ...rest });
}

function checkMessage(message, i) {
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    throw invalid(`messages[${i}] must be a UIMessage object`);
  }
  if (typeof message.role !== 'string' || message.role === '') throw invalid(`messages[${i}].role must be a non-empty string`);
  // "" is the id toUIMessageStream gives every answer without generateMessageId: answers
  // that cannot be told apart cannot be saved by id
  if (typeof message.id !== 'string' || message.id === '') {
    throw invalid(`messages[${i}].id must be a non-empty string (give toUIMessageStream a generateMessageId)`);
  }
}

/** The UIMessage a log text stores; a message some other writer stored as plain role-tagged
 * JSON ({ role, content }: `convo append`, another adapter) as a UIMessage of one text part,
 * its id `seq-N` when it has none. */
export function fromLogText(t, seq) {
  const m = JSON.parse(t);
  if (Array.isArray(m.parts) && typeof m.id === 'string') return m;
  const content = m.content;
  const txt = typeof content === 'string' ? content : content === undefined || content === null ? ''
    : JSON.stringify(content);
  return { id: typeof m.id === 'string' ? m.id : `seq-${seq}`, role: String(m.role ?? 'user'),
    parts: [{ type: 'text', text: txt }] };
}

// Deep equality of JSON values, whatever the order of their keys (a message that came back
// through a client may list a part's fields in another order).
function sameJson(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  const ka = Object.keys(a).filter((k) => a[k] !== undefined);
  const kb = Object.keys(b).filter((k) => b[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
}

// The log of a chat from seq `from`; an unknown chat is an empty one at generation 0.
async function readLog(store, chatId, from, limit = 0) {
  try {
    return await store.loadLog(chatId, { fromSeq: from, limit });
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    return { texts: [], length: 0, generation: 0 };
  }
}

/**
 * The chat's messages and the state they were read at: { messages, length, generation }
 * (length and generation: what saveChat's expectedLength / expectedGeneration take).
 */
export async function loadChatState(store, chatId) {
  storeOf(store, 'loadChatState');
  const log = await readLog(store, text(chatId, 'chatId'), 0);
  return { messages: log.texts.map(fromLogText), length: log.length, generation: log.generation };
}

/** The chat's messages (UIMessage[], oldest first; [] for an unknown chat). */
export async function loadChat(store, chatId) {
  return (await loadChatState(store, chatId)).messages;
}

function conflict(message, state) {
  return Object.assign(new ConflictError(codes.ECONFLICT, message),
    { length: state.length, generation: state.generation });
}

// What to write to make the stored chat `messages`, from the stored state (length,
// generation, the last two stored texts) — { keep, add } (add: the messages from seq keep on;
// keep === length: an append) or null when nothing is to be written. The usual save (the
// SDK's onEnd: the chat as stored plus new messages, the last stored one possibly with more
// parts) needs only the last two stored messages; any other reads the stored ids.
async function plan(store, chatId, messages, state, caller) {
  const { length } = state;
  if (length === 0) return messages.length ? { keep: 0, add: messages } : null;
  // the two messages compared by id below (the others are checked when written)
  for (let i = Math.max(0, length - 2); i < Math.min(length, messages.length); i++) checkMessage(messages[i], i);
  const last = fromLogText(state.lastText, length - 1);
  const before = state.prevText === null ? null : fromLogText(state.prevText, length - 2);
  const same = messages[length - 1];
  // the last two stored messages at their places: the array goes on from the stored chat
  if (same && same.id === last.id && (!before || messages[length - 2].id === before.id)) {
    if (!sameJson(same, last)) return { keep: length - 1, add: messages.slice(length - 1) };
    return messages.length > length ? { keep: length, add: messages.slice(length) } : null;
  }
  const log = await readLog(store, chatId, 0, length);
  if (log.length !== length || log.generation !== state.generation) return 'moved';
  const stored = log.texts.map(fromLogText);
  let keep = 0;
  while (keep < stored.length && keep < messages.length && sameJson(stored[keep], messages[keep])) keep++;
  if (keep === stored.length && keep === messages.length) return null;
  // A stored message the new array lacks is dropped only when the caller said which state
  // its array came from: otherwise it may be one that a concurrent save added.
  const ids = new Set(messages.slice(keep).map((m) => m?.id));
  const lost = stored.slice(keep).filter((m) => !ids.has(m.id));
  if (lost.length && !caller) {
    throw conflict(`saveChat would remove ${lost.length} stored message(s) that messages lacks ` +
      `(${lost.slice(0, 3).map((m) => JSON.stringify(m.id)).join(', ')}${lost.length > 3 ? ', ...' : ''}): ` +
      'another save added them, or this chat was cut on purpose (pass expectedLength / ' +
      'expectedGeneration from loadChatState to allow it); nothing written', state);
  }
  return { keep, add: messages.slice(keep) };
}

// The chat's length, generation and its last two stored texts.
async function readState(store, chatId) {
  let h;
  try {
    h = await store.load(chatId, { tail: 2, withExtra: false });
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    return { length: 0, generation: 0, lastText: null, prevText: null };
  }
  const n = h.messages.length;
  return { length: h.length, generation: h.generation, lastText: n ? h.messages[n - 1].json : null,
    prevText: n > 1 ? h.messages[n - 2].json : null };
}

const SAVE_NAMES = ['chatId', 'messages', 'expectedLength', 'expectedGeneration', 'meta'];

/**
 * Stores `messages` (the whole chat, as the SDK's onEnd gives it) so that loadChat returns
 * it, writing only the difference: messages with new ids appended; when the last stored
 * message comes back changed (same id, more parts: a tool call continuing the turn) the
 * tail from it replaced. Every write is conditional on the (length, generation) read just
 * before; a write that loses a race reads again and retries, and a save that would remove
 * stored messages its array lacks (another save's) is a ConflictError, nothing written.
 * Options: expectedLength / expectedGeneration (the state the array was read at, e.g. by
 * loadChatState: ConflictError unless the chat is still there; allows removing messages,
 * as a regenerate does; no retry); meta: an extra patch saved after the messages
 * (title, activeStreamId, userId, ...). Resolves to { length, generation, appended, replaced }.
 */
export async function saveChat(store, opts) {
  storeOf(store, 'saveChat');
  const { chatId, messages, expectedLength, expectedGeneration, meta } = known(opts, SAVE_NAMES, 'saveChat options');
  text(chatId, 'chatId');
  list(messages, 'messages');
  const caller = expectedLength !== undefined || expectedGeneration !== undefined;
  if (expectedLength !== undefined) int(expectedLength, 'expectedLength', 0);
  if (expectedGeneration !== undefined) int(expectedGeneration, 'expectedGeneration', 0);
  if (meta !== undefined) checkMeta(meta);
  let result = null;
  for (let attempt = 0; attempt < SAVE_ATTEMPTS && !result; attempt++) {
    const state = await readState(store, chatId);
    if ((expectedLength !== undefined && state.length !== expectedLength) ||
        (expectedGeneration !== undefined && state.generation !== expectedGeneration)) {
      throw conflict(`chat ${JSON.stringify(chatId)} has ${state.length} messages at generation ` +
        `${state.generation}, not the expected ${expectedLength ?? 'any'} at ${expectedGeneration ?? 'any'}: ` +
        'nothing written', state);
    }
    const p = await plan(store, chatId, messages, state, caller);
    if (p === 'moved') continue;
    result = await write(store, chatId, p, state, caller);
  }
  if (!result) {
    throw new ConflictError(codes.ECONFLICT,
      `chat ${JSON.stringify(chatId)} changed under each of ${SAVE_ATTEMPTS} attempts to save it: nothing written`);
  }
  if (meta !== undefined) await store.saveExtra(chatId, meta);
  return result;
}

// Writes the plan on the state read: { length, generation, appended, replaced }, or
// undefined when another writer got there first and the caller named no state (retry).
async function write(store, chatId, p, state, caller) {
  const cond = { expectedLength: state.length, expectedGeneration: state.generation };
  if (!p) return { length: state.length, generation: state.generation, appended: 0, replaced: 0 };
  // checked and stringified only when written: a save at turn 1,000 touches what it writes
  const add = p.add.map((m, i) => {
    checkMessage(m, p.keep + i);
    return toLogText(m);
  });
  try {
    if (p.keep === state.length) {
      await store.append(chatId, add, cond);
      return { length: state.length + add.length, generation: state.generation, appended: add.length, replaced: 0 };
    }
    const r = await store.replaceTail(chatId, { keep: p.keep, messages: add, ...cond });
    return { length: p.keep + add.length, generation: r.generation, appended: 0, replaced: r.removed };
  } catch (e) {
    // retried only when the chat moved (not for a conflict of another kind: a LangGraph
    // checkpoint past the messages kept)
    const moved = e.length !== undefined && (e.length !== state.length || e.generation !== state.generation);
    if (e instanceof ConflictError && moved && !caller) return undefined;
    throw e;
  }
}

const META_NAMES = ['title', 'activeStreamId'];

function checkMeta(meta) {
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) throw invalid('meta must be an object');
  for (const k of META_NAMES) {
    if (meta[k] !== undefined && meta[k] !== null && typeof meta[k] !== 'string') {
      throw invalid(`meta.${k} must be a string or null`);
    }
  }
  return meta;
}

/** Merges `meta` into the chat's extra (each key replaced): title, activeStreamId (null:
 * no stream under way), and any other key (userId, for listChats' where). */
export async function saveChatMeta(store, chatId, meta) {
  storeOf(store, 'saveChatMeta');
  await store.saveExtra(text(chatId, 'chatId'), checkMeta(meta));
}

/** The chat's extra with title and activeStreamId (null when not set); {title: null,
 * activeStreamId: null} for an unknown chat. */
export async function loadChatMeta(store, chatId) {
  storeOf(store, 'loadChatMeta');
  let extra = {};
  try {
    extra = (await store.load(text(chatId, 'chatId'), { fromSeq: Number.MAX_SAFE_INTEGER })).extra ?? {};
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  return { ...extra, title: extra.title ?? null, activeStreamId: extra.activeStreamId ?? null };
}

/** The text of a UIMessage's text parts, joined by a space and cut at `max` characters. */
export function previewOf(message, max = PREVIEW_CHARS) {
  const t = (message?.parts ?? []).filter((p) => p && p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text).join(' ').replace(/\s+/g, ' ').trim();
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

const LIST_NAMES = ['where', 'order', 'reverse', 'after', 'limit'];

/**
 * One page of a store's chats, most recently active first (order 'recent'; 'created' and
 * 'id' as store.listThreads): those whose extra contains `where` (e.g. { userId }).
 * Resolves to { chats: [{ chatId, title, createdAt, updatedAt, length, extra, lastMessage,
 * preview, cursor }], next } (times in microseconds; lastMessage a UIMessage or null;
 * preview its text, up to 160 characters; next: the `after` of the next page, null on the last).
 */
export async function listChats(store, opts) {
  storeOf(store, 'listChats');
  const o = known(opts, LIST_NAMES, 'listChats options');
  const page = await store.listThreads({ ...o, withExtra: true, withLastMessage: true });
  const chats = page.threads.map((t) => {
    const lastMessage = t.lastMessage === null ? null : fromLogText(t.lastMessage, t.length - 1);
    return { chatId: t.id, title: t.extra?.title ?? null, createdAt: t.createdAt, updatedAt: t.updatedAt,
      length: t.length, extra: t.extra ?? {}, lastMessage, preview: lastMessage ? previewOf(lastMessage) : '',
      cursor: t.cursor };
  });
  return { chats, next: page.next };
}
