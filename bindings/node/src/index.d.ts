// Types of the convo package's root (src/index.js): no framework's types, and no Node types
// either. Bytes read back are Buffers at run time, declared as Uint8Array (Buffer's base
// class), so that a program type-checks without @types/node.

declare global {
  // Symbol.asyncDispose as @types/node declares it, for a program whose lib predates
  // esnext.disposable (TypeScript's default lib without a tsconfig): Store declares it.
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol;
  }
}

export declare const codes: {
  ERROR: -1; EINVAL: -2; ENOTFOUND: -3; ECONFLICT: -4; ETOOLARGE: -5;
  EIO: -6; ETIMEOUT: -7; ENOMEM: -8; ENOTSUP: -9; ECORRUPT: -10;
};
/** Every error of a convo call: code is a negative CONVO_E* value. */
export declare class ConvoError extends Error {
  code: number;
  /** "CONVO_EINVAL", ... */
  codeName: string;
  /** The backend's own code (SQLSTATE, SQLite result code, ...) or "". */
  backendCode: string;
}
export declare class InvalidError extends ConvoError {}
export declare class NotFoundError extends ConvoError {}
export declare class ConflictError extends ConvoError {
  /** After append, replaceTail or pop: the thread's length read just after the conflict
   * (undefined when that read failed, and after other calls). */
  length?: number;
  /** Likewise its generation: how many tail rewrites it has had. */
  generation?: number;
}
export declare class TooLargeError extends ConvoError {}
export declare class BackendError extends ConvoError {}
export declare class TimeoutError extends ConvoError {}
export declare class NoMemoryError extends ConvoError {}
export declare class NotSupportedError extends ConvoError {}
export declare class CorruptError extends ConvoError {}

export type Bytes = Uint8Array | string;
export interface Blob { type: string; bytes: Bytes }
export interface StoredBlob { type: string; bytes: Uint8Array }
/** A message to append: a JSON string (stored byte for byte), bytes, or an object (JSON.stringify'd). */
export type MessageIn = string | Uint8Array | { role: string; [k: string]: unknown };

export interface LoadedMessage {
  seq: number;
  role: string;
  /** Microseconds since the epoch. */
  createdAt: number;
  /** The message exactly as appended. */
  json: string;
}
export interface History {
  messages: LoadedMessage[];
  /** Messages in the whole thread, whatever was asked for. */
  length: number;
  /** How many tail rewrites the thread has had: messages below length do not change while it stays. */
  generation: number;
  extra: Record<string, unknown> | null;
}

export interface ReplaceTailOptions {
  /** Messages [0, keep) stay; the new messages take seq keep, keep + 1, ... */
  keep: number;
  /** The new messages (none: everything from keep on is removed). */
  messages?: MessageIn[];
  /** ConflictError (nothing written) unless the thread has exactly this many messages. */
  expectedLength?: number;
  /** ConflictError unless the thread is at this generation. */
  expectedGeneration?: number;
  /** The messages [keep, length) as the caller saw them: loaded messages (compared by their
   * exact json), JSON strings or objects (JSON.stringify'd); [] = nothing after keep. */
  expectedSuffix?: (LoadedMessage | MessageIn)[] | null;
  /** A retry with the same key applies once and resolves to the first call's result. */
  idempotencyKey?: string | null;
  /** Remove the checkpoints whose logLength is above keep in the same step (default: ConflictError naming one). */
  dropCheckpoints?: boolean;
}
export interface ReplaceTailResult {
  /** keep: the seq of the first new message. */
  firstSeq: number;
  count: number;
  /** Messages removed (0 on a replay). */
  removed: number;
  /** The thread's generation after the call. */
  generation: number;
  replayed: boolean;
}
export interface PopOptions {
  /** How many (default 1); fewer are removed when the thread has fewer. */
  count?: number;
  /** ConflictError unless the thread has exactly this many messages; no retry on a race. */
  expectedLength?: number;
  dropCheckpoints?: boolean;
}

/**
 * A list of items kept in the thread's log (log references, docs/checkpoints.md): each item
 * a message's JSON text (with a non-empty string "role"), or null when its seq is given.
 */
export interface ItemsIn {
  items: (string | Uint8Array | null)[];
  /** Per item: the log seq it is (from a get's or an earlier put's seqs), or -1. */
  seqs?: number[] | null;
  /** The value is an object whose member `key` is the list and whose other members are `rest`. */
  key?: string | null;
  rest?: Blob | null;
  /** A conversation (a message channel): its fresh items enter the log with the put that
   * extends its parent's list. Default false (an input, a write: kept inline until then). */
  log?: boolean;
}
/** A resolved list of items: texts[i] is log seq seqs[i], or kept inline when seqs[i] is -1. */
export interface StoredItems {
  /** null for an item below the knownLength a read was given (the caller holds its text). */
  texts: (string | null)[];
  seqs: number[];
  key: string | null;
  rest: StoredBlob | null;
}
export interface CheckpointIn {
  threadId: string;
  ns?: string;
  id: string;
  parentId?: string | null;
  metadata?: Record<string, unknown> | string;
  body?: Blob | null;
  /** A channel's value is `value` (a blob), or `items` (a list kept in the log), or neither. */
  /** logPrefix: k > 0 says the channel's list is the log's messages [0, k) followed by `items`
   * (seqsOut then covers those items only); k past the log is a ConflictError. */
  channels?: { channel: string; version: string | number; value?: Blob | null; items?: ItemsIn | null;
    logPrefix?: number }[];
  logLength?: number;
  /** Appended to the thread's log in the same atomic write, at seq expectedLength. */
  messages?: MessageIn[];
  expectedLength?: number;
  /** With messages: ConflictError unless the thread is at this generation. */
  expectedGeneration?: number;
}
export interface StoredCheckpoint {
  threadId: string;
  ns: string;
  id: string;
  parentId: string | null;
  metadata: Record<string, unknown>;
  logLength: number;
  createdAt: number;
  /** The thread's generation its items were resolved at (-1 when it has no reference). */
  generation: number;
  /** The created_at of the thread's message 0 as read then (-1 when not read). */
  origin: number;
  body: StoredBlob | null;
  /** value: the stored blob (a list of items is type "convo/items", a reference); items: that
   * list resolved (null for a plain value). */
  channels: { channel: string; version: string; value: StoredBlob | null; items: StoredItems | null }[];
  writes: { taskId: string; taskPath: string; idx: number; channel: string; value: StoredBlob | null;
    items: StoredItems | null }[];
}
/** What a reader holds of a thread's log, for checkpointGet / checkpointList. */
export interface KnownLog {
  knownGeneration?: number;
  knownLength?: number;
  knownOrigin?: number;
}
export interface DumpStats {
  threads: number; messages: number; checkpoints: number; writes: number; bytes: number; skipped: number;
}

export interface OpenOptions {
  /** Top-level extra keys the thread index keeps an index for (listThreads with a `where` on
   * them reads only matching threads). Recorded in the store by the first opener naming them;
   * an opener naming others is an InvalidError; omitted = whatever the store recorded. */
  indexedKeys?: string[] | null;
  /** true: each call runs libconvo on the calling thread (its promise is settled when the
   * call returns; the event loop waits meanwhile): for memory: and sqlite:, whose calls take
   * microseconds. Default false: calls run on libuv's thread pool. The open itself always
   * runs on the pool. */
  sync?: boolean;
}

export type ThreadOrder = 'recent' | 'created' | 'id';
export interface ListThreadsOptions {
  /** Threads whose extra contains this object (objects by key, arrays by element, scalars
   * equal); null or {} = every thread. */
  where?: Record<string, unknown> | null;
  /** 'recent': last activity, newest first (default); 'created': newest first; 'id': byte order. */
  order?: ThreadOrder;
  /** The other direction (oldest first; ids descending). */
  reverse?: boolean;
  /** A cursor (a row's `cursor` or a page's `next`) of the same order and direction. */
  after?: string | null;
  /** Rows per page, 1..10,000 (default 100). */
  limit?: number;
  /** Each row carries the thread's extra object. */
  withExtra?: boolean;
  /** Each row carries the thread's last message (its JSON text; null for an empty thread). */
  withLastMessage?: boolean;
}
export interface ThreadInfo {
  id: string;
  /** Microseconds since the epoch: the thread's first write. */
  createdAt: number;
  /** Microseconds since the epoch: its last append, saveExtra, tail rewrite or checkpoint put. */
  updatedAt: number;
  /** Messages in the thread. */
  length: number;
  /** With withExtra. */
  extra?: Record<string, unknown>;
  /** With withLastMessage: the last message exactly as appended, null when there is none. */
  lastMessage?: string | null;
  /** The `after` that continues after this row. */
  cursor: string;
}
export interface ThreadPage {
  threads: ThreadInfo[];
  /** The `after` of the next page; null on the last page. */
  next: string | null;
}

export declare class Store {
  /** memory:, sqlite:PATH, redis://..., postgres://..., mongodb://... */
  static open(url: string, opts?: OpenOptions): Promise<Store>;
  static readonly version: string;
  readonly driver: string;
  /** Whether calls run on the calling thread (OpenOptions.sync). */
  readonly sync: boolean;
  /** Closes once the calls under way are done. */
  close(): Promise<void>;
  /** close(), for `await using store = await Store.open(url)` (where the runtime has
   * Symbol.asyncDispose: Node 18.18+, 20.4+). */
  [Symbol.asyncDispose](): Promise<void>;
  append(threadId: string, messages: MessageIn[],
    opts?: { idempotencyKey?: string | null; expectedLength?: number; expectedGeneration?: number }):
    Promise<{ firstSeq: number; count: number; replayed: boolean }>;
  load(threadId: string, opts?: { fromSeq?: number; limit?: number; tail?: number; withExtra?: boolean }):
    Promise<History>;
  /** The texts of the messages from fromSeq (seqs are dense: texts[i] is seq fromSeq + i), with
   * the thread's length and generation: load without each message's seq, role and time. */
  loadLog(threadId: string, opts?: { fromSeq?: number; limit?: number }):
    Promise<{ texts: string[]; length: number; generation: number }>;
  /** Keeps [0, keep) and stores messages after them, atomically; the generation goes up by one. */
  replaceTail(threadId: string, opts: ReplaceTailOptions): Promise<ReplaceTailResult>;
  /** Removes the last messages and resolves to them, oldest first ([] for an empty thread). */
  pop(threadId: string, opts?: PopOptions): Promise<LoadedMessage[]>;
  saveExtra(threadId: string, patch: Record<string, unknown> | string): Promise<void>;
  /** One page of the thread index. */
  listThreads(opts?: ListThreadsOptions): Promise<ThreadPage>;
  /** Every thread listThreads(opts) gives, page after page (limit: the page size). */
  threads(opts?: ListThreadsOptions): AsyncIterableIterator<ThreadInfo>;
  /** One page of thread ids in byte order (convo_thread_list, every driver). */
  threadIds(opts?: { after?: string | null; limit?: number }): Promise<{ ids: string[]; next: string | null }>;
  delete(threadId: string): Promise<void>;
  fork(src: string, dst: string, upto?: number,
    opts?: { expectedGeneration?: number; withCheckpoints?: boolean }): Promise<void>;
  /** seqsOut: per channel given with items, the log seq of each item (-1: kept inline). */
  checkpointPut(cp: CheckpointIn): Promise<{ seqsOut: Record<string, number[]> }>;
  checkpointPutWrites(threadId: string, ns: string, checkpointId: string, taskId: string,
    taskPath: string, writes: ({ idx: number; channel: string; value: Blob } |
      { idx: number; channel: string; items: ItemsIn })[]): Promise<void>;
  /** known: the caller holds messages [0, knownLength) of the thread at that generation and
   * origin (a StoredCheckpoint's); items below knownLength then come back with a null text. */
  checkpointGet(threadId: string, ns?: string, id?: string | null, known?: KnownLog): Promise<StoredCheckpoint>;
  /** withoutChannelItems: channel lists come back with their key and rest but no items (the
   * log is not read for them); writes, metadata and plain values as without it. onlyChannel:
   * each checkpoint with that channel alone (a list without items) and its writes to it, no
   * body, metadata {}. */
  checkpointList(opts?: { threadId?: string | null; ns?: string | null; before?: string | null;
    beforeThreadId?: string | null; beforeNs?: string | null; limit?: number;
    filter?: Record<string, unknown> | string | null; withoutChannelItems?: boolean;
    onlyChannel?: string | null } & KnownLog):
    Promise<StoredCheckpoint[]>;
  checkpointPrune(threadId: string, keepLast: number): Promise<void>;
  checkpointDelete(opts: { threadId?: string | null; ns?: string | null; before?: string | null;
    beforeThreadId?: string | null; beforeNs?: string | null; limit?: number;
    filter?: Record<string, unknown> | string | null }): Promise<number>;
  export(threadIds?: string[]): Promise<Uint8Array>;
  import(dump: Uint8Array): Promise<DumpStats>;
  sweep(): Promise<number>;
  bytes(): Promise<number>;
}
