// Types of convo/openai-agents: ConvoSession, a Session of the OpenAI Agents SDK
// (@openai/agents, an optional peer dependency of convo) kept in a convo thread.
import type {
  AgentInputItem, SessionHistoryTransactionArgs, SessionHistoryTransactionAwareSession,
} from '@openai/agents';
import type { Store } from '../index.js';

export interface ConvoSessionOptions {
  /** A convo URL: the session opens its own Store (on first use) and close() closes it. */
  url?: string;
  /** A Store the caller opened: left open by close(). */
  store?: Store;
  /** The thread's id (default: a random UUID). */
  sessionId?: string;
  /** Merged into the thread's extra object at this instance's first write: e.g.
   * { userId, title }, what ConvoSession.list filters on. */
  extra?: Record<string, unknown>;
  /** getItems() returns new objects the caller may change, a deep copy of every item at
   * every call (a cost that grows with the history). Default false: deep-frozen items,
   * shared between calls (a change throws a TypeError in strict code). */
  mutableItems?: boolean;
}

export interface ConvoSessionSummary {
  sessionId: string;
  /** Microseconds since the epoch. */
  createdAt: number;
  /** Microseconds since the epoch: the thread's last write. */
  updatedAt: number;
  /** Items in the session. */
  length: number;
  extra: Record<string, unknown>;
  /** With withLastItem: the session's last item (null when it has none). */
  lastItem?: AgentInputItem | null;
}

export interface ConvoSessionListOptions {
  /** Extra-containment filter: { userId: 'u1' } lists the sessions whose extra has userId 'u1'. */
  where?: Record<string, unknown> | null;
  /** Sessions per page (default 100). */
  limit?: number;
  /** The `next` of the previous page. */
  after?: string | null;
  /** 'recent' (default: newest activity first), 'created' or 'id'. */
  order?: 'recent' | 'created' | 'id';
  reverse?: boolean;
  /** Read each session's last item too. */
  withLastItem?: boolean;
}

export declare class ConvoSession implements SessionHistoryTransactionAwareSession {
  constructor(options: ConvoSessionOptions);
  getSessionId(): Promise<string>;
  /** The last `limit` items, oldest first (all without a limit): deep-frozen, the same
   * objects at every call (new, changeable copies with mutableItems). */
  getItems(limit?: number): Promise<AgentInputItem[]>;
  /** Appends the items in one atomic write. */
  addItems(items: AgentInputItem[]): Promise<void>;
  /** Removes the last item and resolves to it. */
  popItem(): Promise<AgentInputItem | undefined>;
  /** Removes every item; the thread keeps its extra, creation time and index entry. */
  clearSession(): Promise<void>;
  /** The history becomes `items` in one atomic step. */
  replaceHistoryWithCompaction(items: AgentInputItem[]): Promise<void>;
  /** Atomic and idempotent on operationId; ConflictError (nothing changed) when the
   * operationId was used for another transaction or the suffix is no longer the history's. */
  applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void>;
  /** Merges patch into the thread's extra object. */
  saveExtra(patch: Record<string, unknown>): Promise<void>;
  /** The thread's extra object (null when the thread does not exist). */
  getExtra(): Promise<Record<string, unknown> | null>;
  /** Closes the Store the session opened (not one it was given); idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
  /** One page of a store's sessions, newest activity first. */
  static list(store: Store, options?: ConvoSessionListOptions):
    Promise<{ sessions: ConvoSessionSummary[]; next: string | null }>;
}
