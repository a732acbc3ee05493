// Types of convo/langchain (src/langchain/index.js).
import type { BaseListChatMessageHistory } from '@langchain/core/chat_history';
import type { BaseMessage } from '@langchain/core/messages';
import type { Store } from '../index.js';

export interface ConvoChatMessageHistoryOptions {
  /** A store URL: the history opens its own Store, and close() closes it. */
  url?: string;
  /** An open Store, left open by close(). Exactly one of url and store. */
  store?: Store;
  /** The thread the messages are kept in. */
  sessionId: string;
}

export interface ConvoChatSessionListOptions {
  /** Sessions whose extra contains this object (e.g. { userId: 'u1' }); none = all. */
  where?: Record<string, unknown>;
  /** 'recent' (default: last write, newest first), 'created' (newest first) or 'id'. */
  order?: 'recent' | 'created' | 'id';
  reverse?: boolean;
  /** The `next` (or a row's `cursor`) of a page of the same order and direction. */
  after?: string | null;
  /** Rows per page, 1..10,000 (default 100). */
  limit?: number;
  /** Each row carries the session's extra (default true). */
  withExtra?: boolean;
  /** Each row carries the session's last message as a LangChain message. */
  withLastMessage?: boolean;
}

export interface ConvoChatSession {
  sessionId: string;
  createdAt: number;
  updatedAt: number;
  length: number;
  extra?: Record<string, unknown>;
  /** The session's last message (null when it has none), with withLastMessage. */
  lastMessage?: BaseMessage | null;
  cursor: string;
}

export declare class ConvoChatMessageHistory extends BaseListChatMessageHistory {
  constructor(options: ConvoChatMessageHistoryOptions);
  lc_namespace: string[];
  readonly sessionId: string;
  /** One page of a store's sessions (those whose extra contains `where`), most recently active first. */
  static list(store: Store, options?: ConvoChatSessionListOptions):
    Promise<{ sessions: ConvoChatSession[]; next: string | null }>;
  /** The Store under this history (opened by the constructor when given a URL). */
  store(): Promise<Store>;
  getMessages(): Promise<BaseMessage[]>;
  addMessage(message: BaseMessage): Promise<void>;
  /** One atomic append of all the messages. */
  addMessages(messages: BaseMessage[]): Promise<void>;
  /** A tail rewrite to zero messages: the session keeps its extra and creation time. */
  clear(): Promise<void>;
  saveExtra(patch: Record<string, unknown>): Promise<void>;
  getExtra(): Promise<Record<string, unknown>>;
  /** Closes the Store when the history opened it; idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
