// history.js — ConvoChatMessageHistory, a LangChain.js BaseListChatMessageHistory over one
// convo thread: addMessages is one atomic append; getMessages reads only what this instance
// has not read yet, and reads the whole thread again when another writer rewrote its tail.
import { BaseListChatMessageHistory } from '@langchain/core/chat_history';
import { load } from '@langchain/core/load';
import * as messages from '@langchain/core/messages';
import { Store } from '../store.js';
import { NotFoundError, InvalidError, codes } from '../errors.js';
import { text, options } from '../internal/args.js';
import { roleOf, contentOf, isMessage } from '../internal/roles.js';
import { logText, valueText, plainLangChainValue } from '../internal/logtext.js';
import { compactCandidate, compactMessage, sameJson } from '../internal/compact.js';

/** The log message that stores a LangChain message (the layout of ConvoSaver's message
 * channels): its compact form when its class rebuilds it exactly from it, else its role and
 * content, then the message as LangChain serializes it. */
export function toLogText(message) {
  if (!isMessage(message)) {
    throw new InvalidError(codes.EINVAL, 'addMessages takes LangChain messages (BaseMessage objects)');
  }
  const json = JSON.stringify(message);
  const compact = compactCandidate(roleOf(message), message);
  if (compact !== null && sameJson(JSON.stringify(compact.rebuilt), json)) return compact.text;
  return logText(roleOf(message), contentOf(message), 'json', json);
}

// A message some other writer stored as plain role-tagged JSON (`convo append`, another
// framework): the LangChain class of its role, its content as text when it is not one.
function fromPlain(m) {
  const content = typeof m.content === 'string' || Array.isArray(m.content) ? m.content :
    m.content === undefined || m.content === null ? '' : JSON.stringify(m.content);
  const fields = { content };
  if (typeof m.id === 'string') fields.id = m.id;
  if (typeof m.name === 'string') fields.name = m.name;
  switch (m.role) {
    case 'user': case 'human': return new messages.HumanMessage(fields);
    case 'assistant': case 'ai': return new messages.AIMessage(fields);
    case 'system': return new messages.SystemMessage(fields);
    case 'tool': return new messages.ToolMessage({ ...fields,
      tool_call_id: typeof m.tool_call_id === 'string' ? m.tool_call_id : '' });
    default: return new messages.ChatMessage({ ...fields, role: String(m.role) });
  }
}

async function revive(valueJson) {
  const m = await load(valueJson);
  if (!isMessage(m)) throw new Error('not a message');
  return m;
}

// The message class a serialized value names, when it is one of @langchain/core's.
function messageClass(v) {
  const id = v?.lc === 1 && v.type === 'constructor' ? v.id : null;
  if (!Array.isArray(id) || id.length !== 3 || id[0] !== 'langchain_core' || id[1] !== 'messages' ||
      !Object.hasOwn(messages, id[2])) return null;
  const cls = messages[id[2]];
  // (not `instanceof BaseMessage`: a chunk class's BaseMessage is not the one exported)
  return typeof cls === 'function' && typeof cls.prototype?.getType === 'function' ? cls : null;
}

// The message a log message stores when it is one of @langchain/core's message classes
// with nothing inside to revive (no other "lc" key in the text: no nested LangChain
// object, no escaped dict), else null: its class's constructor on the stored fields, as
// load() calls it, without load()'s walk of every field (an await per key: 7x slower on a
// thousand messages). The text is parsed once: in a "json/c" message the value's content
// is the number 0 exactly where the content was cut out (a message's content is never 0,
// and one cut elsewhere leaves kwargs.content whole: then load() below).
function quickMessage(t) {
  const k = t.indexOf('"lc":');
  if (k < 0 || t.indexOf('"lc":', k + 5) !== -1) return null;
  const m = JSON.parse(t);
  const v = m?.value;
  if (m?.serde === 'json/c') {
    if (v?.kwargs?.content !== 0 || m.content === undefined) return null;
    v.kwargs.content = m.content;
  } else if (m?.serde !== 'json') {
    return null;
  }
  const cls = messageClass(v);
  return cls && v.kwargs && typeof v.kwargs === 'object' ? new cls(v.kwargs) : null;
}

// The message of a log text when it needs no load(), else undefined: one of
// @langchain/core's message classes with nothing inside to revive (quickMessage), or a text
// without any LangChain object in it (a plain role-tagged message).
function messageNow(t) {
  let compact;
  try {
    compact = compactMessage(t);
  } catch {
    // "msg/1" on a text not laid out as one (another writer's): read as below
  }
  if (compact !== undefined) return compact;
  const quick = quickMessage(t);
  if (quick) return quick;
  if (t.includes('"lc":')) return undefined;
  const m = JSON.parse(t);
  return typeof m.base64 === 'string' ? undefined : fromPlain(m);
}

/** The LangChain message a log message stores. */
export async function fromLogText(t) {
  const now = messageNow(t);
  if (now) return now;
  const v = plainLangChainValue(t);
  if (v !== null) {
    try {
      return await revive(v);
    } catch {
      // not one LangChain message after all: read as below
    }
  }
  const m = JSON.parse(t);
  try {
    if (m.serde === 'json' && 'value' in m) return await revive(JSON.stringify(m.value));
    if (m.serde === 'json/c') {
      const vt = valueText(t);
      if (vt !== null) return await revive(vt);
    }
    if (m.serde === 'json' && typeof m.base64 === 'string') {
      return await revive(Buffer.from(m.base64, 'base64').toString('utf8'));
    }
  } catch {
    // a value LangChain cannot revive: its role and content below
  }
  return fromPlain(m);
}

// The messages of log message texts, in order: those that need no load() without an await.
async function fromLogTexts(texts) {
  const out = new Array(texts.length);
  const slow = [];
  for (let i = 0; i < texts.length; i++) {
    const m = messageNow(texts[i]);
    if (m) out[i] = m;
    else slow.push(fromLogText(texts[i]).then((x) => { out[i] = x; }));
  }
  if (slow.length) await Promise.all(slow);
  return out;
}

// The log of a thread from seq `from` ({ texts, length, generation }); an unknown thread is
// an empty one at generation 0.
async function loadLog(store, id, from) {
  try {
    return await store.loadLog(id, { fromSeq: from });
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    return { texts: [], length: 0, generation: 0 };
  }
}

// What this process has read of a session, shared by the histories of one Store (an app
// that makes a history per request, as LangChain's examples do, reads only what is new):
// the thread's first messages.length messages at generation `generation` (-1: unknown),
// the last one's stored text `lastText`. Its calls run one at a time: a read and an append
// in flight together would each extend what it has read.
class Session {
  messages = [];
  generation = -1;
  lastText = null;
  #queue = Promise.resolve();

  constructor(id) {
    this.id = id;
  }

  serial(fn) {
    const p = this.#queue.then(fn);
    this.#queue = p.catch(() => {});
    return p;
  }

  idle() {
    return this.#queue;
  }

  reset(messages, generation, lastText = null) {
    this.messages = messages;
    this.generation = generation;
    this.lastText = lastText;
  }

  // Reads the messages past those already read, from the last one read: it must still be
  // there, unchanged, at the same generation; else (another writer rewrote the tail or
  // deleted the thread) the whole thread is read again.
  async catchUp(store) {
    const n = this.messages.length;
    const from = n > 0 ? n - 1 : 0;
    const log = await loadLog(store, this.id, from);
    if (n > 0 && !(log.generation === this.generation && log.length >= n && log.texts[0] === this.lastText)) {
      return this.#readAll(store);
    }
    const fresh = n > 0 ? log.texts.slice(1) : log.texts;
    const decoded = await fromLogTexts(fresh);
    if (n === 0) this.messages = decoded;
    else for (const m of decoded) this.messages.push(m);
    this.generation = log.generation;
    if (fresh.length) this.lastText = fresh[fresh.length - 1];
  }

  async #readAll(store) {
    const log = await loadLog(store, this.id, 0);
    this.reset(await fromLogTexts(log.texts), log.generation, log.texts.length ? log.texts.at(-1) : null);
  }

  // After an append of `texts` (the messages `added`) that landed at firstSeq: right after
  // what was read, they are read too. A rewrite by another writer since the last read is
  // seen by the next read (generation, last text).
  appended(firstSeq, added, texts) {
    if (firstSeq !== this.messages.length) return;
    for (const m of added) this.messages.push(m);
    this.lastText = texts[texts.length - 1];
  }
}

// Store -> Map(sessionId -> Session), least recently used first; at most MAX_SESSIONS
// sessions and MAX_MESSAGES messages remembered per Store.
const MAX_SESSIONS = 64;
const MAX_MESSAGES = 100000;
const sessionsByStore = new WeakMap();

function sessionOf(store, id) {
  let sessions = sessionsByStore.get(store);
  if (!sessions) sessionsByStore.set(store, (sessions = new Map()));
  let s = sessions.get(id);
  if (s) sessions.delete(id);
  else s = new Session(id);
  sessions.set(id, s);
  let total = 0;
  for (const x of sessions.values()) total += x.messages.length;
  for (const [k, x] of sessions) {
    if (x === s || (sessions.size <= MAX_SESSIONS && total <= MAX_MESSAGES)) break;
    total -= x.messages.length;
    sessions.delete(k);
  }
  return s;
}

/**
 * The messages of one convo thread (the session) as a LangChain chat message history.
 * Options: { url | store, sessionId }; given a URL it opens its own Store and close()
 * closes it, given a Store it leaves it open. The histories of one Store share what they
 * have read of a session: a new one per request reads only the messages past it.
 */
export class ConvoChatMessageHistory extends BaseListChatMessageHistory {
  lc_namespace = ['langchain', 'stores', 'message', 'convo'];

  #store;
  #owned;
  #closed = false;
  #last = null; // the Session of the last call, for close() to wait for

  constructor(opts) {
    const { url, store, sessionId } = options(opts, 'ConvoChatMessageHistory options');
    super({ sessionId });
    this.sessionId = text(sessionId, 'sessionId');
    if ((url === undefined) === (store === undefined)) {
      throw new InvalidError(codes.EINVAL, 'ConvoChatMessageHistory takes one of url and store');
    }
    if (store !== undefined && !(store instanceof Store)) {
      throw new InvalidError(codes.EINVAL, 'store must be a convo Store (await Store.open(url))');
    }
    this.#owned = url !== undefined;
    this.#store = this.#owned ? Store.open(text(url, 'url')) : Promise.resolve(store);
    this.#store.catch(() => {}); // reported by the first call that needs the store
  }

  /**
   * One page of the sessions of a store, most recently active first: those whose extra
   * contains `where` (e.g. { userId }). Options as store.listThreads (where, order,
   * reverse, after, limit, withExtra: default true here, withLastMessage); resolves to
   * { sessions: [{ sessionId, createdAt, updatedAt, length, extra, lastMessage?, cursor }],
   * next } (next: the `after` of the next page, null on the last). lastMessage is a
   * LangChain message (null for a session without messages).
   */
  static async list(store, opts) {
    if (!(store instanceof Store)) {
      throw new InvalidError(codes.EINVAL, 'ConvoChatMessageHistory.list takes a convo Store');
    }
    const page = await store.listThreads({ withExtra: true, ...options(opts, 'list options') });
    const sessions = await Promise.all(page.threads.map(async ({ id, lastMessage, ...row }) => {
      const s = { sessionId: id, ...row };
      if (lastMessage !== undefined) s.lastMessage = lastMessage === null ? null : await fromLogText(lastMessage);
      return s;
    }));
    return { sessions, next: page.next };
  }

  /** The Store under this history (opened by the constructor when given a URL). */
  async store() {
    return this.#live();
  }

  async #live() {
    if (this.#closed) throw new InvalidError(codes.EINVAL, 'the chat message history is closed');
    return this.#store;
  }

  // Runs fn(store, session) after the session's calls under way.
  async #run(fn) {
    const store = await this.#live();
    const session = sessionOf(store, this.sessionId);
    this.#last = session;
    return session.serial(async () => fn(await this.#live(), session));
  }

  /** The session's messages, oldest first (a new array; the messages are shared). */
  getMessages() {
    return this.#run(async (store, session) => {
      await session.catchUp(store);
      return session.messages.slice();
    });
  }

  addMessage(message) {
    return this.addMessages([message]);
  }

  /** Appends the messages in one atomic write: all of them or none. */
  async addMessages(messages) {
    if (!Array.isArray(messages)) {
      throw new InvalidError(codes.EINVAL, 'addMessages takes an array of messages');
    }
    const added = messages.slice();
    return this.#run(async (store, session) => {
      if (added.length === 0) return;
      const texts = added.map(toLogText);
      const r = await store.append(this.sessionId, texts);
      session.appended(r.firstSeq, added, texts);
    });
  }

  /**
   * Removes every message: a tail rewrite to zero messages, so the thread keeps its extra
   * (title, userId), its creation time and its place in the thread index; its generation
   * goes up, so other processes read it again. Nothing is written for an unknown session.
   */
  clear() {
    return this.#run(async (store, session) => {
      try {
        const r = await store.replaceTail(this.sessionId, { keep: 0 });
        session.reset([], r.generation);
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
        session.reset([], 0);
      }
    });
  }

  /** Merges `patch` into the thread's extra (shallow: each key replaced), e.g. { userId, title }. */
  async saveExtra(patch) {
    return (await this.#live()).saveExtra(this.sessionId, patch);
  }

  /** The thread's extra object ({} for an unknown session). */
  async getExtra() {
    const store = await this.#live();
    try {
      return (await store.load(this.sessionId, { fromSeq: Number.MAX_SAFE_INTEGER })).extra;
    } catch (e) {
      if (e instanceof NotFoundError) return {};
      throw e;
    }
  }

  /** Ends this history: closes the Store when it opened it (after the calls under way);
   * idempotent. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    await this.#last?.idle();
    if (this.#owned) await (await this.#store.catch(() => null))?.close();
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(ConvoChatMessageHistory.prototype, Symbol.asyncDispose, {
    value() { return this.close(); }, writable: true, configurable: true,
  });
}
