// Types of convo/ai-sdk (src/ai-sdk/index.js).
import type { UIMessage } from 'ai';
import type { Store, ThreadOrder } from '../index.js';

export interface ChatState<M extends UIMessage = UIMessage> {
  messages: M[];
  /** Messages stored: saveChat's expectedLength. */
  length: number;
  /** Tail rewrites the chat has had: saveChat's expectedGeneration. */
  generation: number;
}

export interface ChatMeta {
  /** null: none set. */
  title?: string | null;
  /** The resumable stream under way (null: none). */
  activeStreamId?: string | null;
  /** Any other key (userId, ...), kept in the chat's extra. */
  [key: string]: unknown;
}

export interface SaveChatOptions<M extends UIMessage = UIMessage> {
  chatId: string;
  /** The whole chat, as toUIMessageStream's onEnd gives it. */
  messages: M[];
  /** The length the array was read at (loadChatState): ConflictError unless the chat still
   * has it; with it, messages the array lacks may be removed (a regenerate). */
  expectedLength?: number;
  /** Likewise the generation. */
  expectedGeneration?: number;
  /** An extra patch (title, activeStreamId, userId, ...) saved after the messages. */
  meta?: ChatMeta;
}

export interface SaveChatResult {
  /** Messages stored after the save. */
  length: number;
  generation: number;
  /** Messages appended (0 when the tail was replaced). */
  appended: number;
  /** Stored messages replaced (the tail from the first changed one). */
  replaced: number;
}

export interface ListChatsOptions {
  /** Chats whose extra contains this object (e.g. { userId: 'u1' }); none = all. */
  where?: Record<string, unknown> | null;
  /** 'recent' (default: last write, newest first), 'created' (newest first) or 'id'. */
  order?: ThreadOrder;
  reverse?: boolean;
  /** A page's `next` (or a row's `cursor`) of the same order and direction. */
  after?: string | null;
  /** Rows per page, 1..10,000 (default 100). */
  limit?: number;
}

export interface ChatInfo<M extends UIMessage = UIMessage> {
  chatId: string;
  title: string | null;
  /** Microseconds since the epoch. */
  createdAt: number;
  updatedAt: number;
  /** Messages in the chat. */
  length: number;
  extra: Record<string, unknown>;
  /** The chat's last message (null when it has none). */
  lastMessage: M | null;
  /** The text of its text parts, up to 160 characters. */
  preview: string;
  cursor: string;
}

/** The chat's messages, oldest first ([] for an unknown chat). */
export declare function loadChat<M extends UIMessage = UIMessage>(store: Store, chatId: string): Promise<M[]>;
/** The chat's messages with the length and generation they were read at. */
export declare function loadChatState<M extends UIMessage = UIMessage>(store: Store, chatId: string):
  Promise<ChatState<M>>;
/** Stores the whole chat, writing only the difference (new ids appended; the tail replaced
 * from a changed message), conditional on what it read. */
export declare function saveChat<M extends UIMessage = UIMessage>(store: Store, options: SaveChatOptions<M>):
  Promise<SaveChatResult>;
/** Merges meta into the chat's extra. */
export declare function saveChatMeta(store: Store, chatId: string, meta: ChatMeta): Promise<void>;
/** The chat's extra, title and activeStreamId null when not set. */
export declare function loadChatMeta(store: Store, chatId: string):
  Promise<ChatMeta & { title: string | null; activeStreamId: string | null }>;
/** One page of a store's chats (those whose extra contains `where`), newest activity first. */
export declare function listChats<M extends UIMessage = UIMessage>(store: Store, options?: ListChatsOptions):
  Promise<{ chats: ChatInfo<M>[]; next: string | null }>;
/** The text of a message's text parts, joined and cut at max characters (default 160). */
export declare function previewOf(message: UIMessage, max?: number): string;
