// Types of convo/langgraph (src/langgraph/index.js).
import type { BaseCheckpointSaver, Checkpoint, CheckpointListOptions, CheckpointMetadata,
  CheckpointTuple, ChannelVersions, PendingWrite, SerializerProtocol } from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import type { Store } from '../index.js';

export interface ConvoSaverOptions {
  /** Channels kept in the thread's log instead of as blobs (default ["messages"]). */
  messageChannels?: string[];
  serde?: SerializerProtocol;
  /** How long putWrites on a checkpoint not stored yet waits for this saver's put of it (ms, default 60000). */
  writesWaitMs?: number;
  /**
   * Default true: plain role-tagged objects in the input or a write of a message channel are
   * stored as the LangChain messages add_messages makes of them, and a message without an id
   * gets one at once, so the checkpoint committing them stores each once. Set false for a
   * message channel whose reducer keeps plain objects.
   */
  coerceMessages?: boolean;
  /**
   * The messages revived from threads' logs, kept per (thread, generation, seq) so that a
   * getTuple or list revives and reads only the messages it has not revived before (default
   * { threads: 64, items: 100000 }: at most that many threads, least recently read dropped
   * first, and items in all); false keeps none. The same message objects are handed out again:
   * treat them as immutable (a change of content or id is seen and the message read again).
   */
  cache?: { threads?: number; items?: number } | false;
  /**
   * Only with a URL (a Store passed in keeps how it was opened): the Store's calls run on the
   * main thread (Store.open's `sync`), so each put and putWrites is done when it returns and
   * is settled before LangGraph's next step runs. Default true for memory: and sqlite: (their
   * calls take microseconds; a write waiting for another process's lock holds the event loop
   * up to the store's busy_timeout), false for the network drivers (calls on libuv's pool).
   */
  sync?: boolean;
}

/**
 * Channel versions are strings at run time (getNextVersion in saver.js: a zero-padded count
 * and a random part, so that a time-travel branch never reuses its sibling's version), but the
 * class is declared over the default BaseCheckpointSaver<number>, because that is the type
 * StateGraph.compile({ checkpointer }) accepts: with <string> that one line would not
 * type-check. LangGraph compares versions only through the saver and maxChannelVersion, which
 * take either kind.
 */
export declare class ConvoSaver extends BaseCheckpointSaver {
  constructor(urlOrStore: string | Store, options?: ConvoSaverOptions);
  readonly messageChannels: string[];
  readonly coerceMessages: boolean;
  /** The Store under the saver (opened by the constructor when given a URL). */
  store(): Promise<Store>;
  /** Closes the store when the saver opened it. */
  close(): Promise<void>;
  getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined>;
  list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple>;
  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
    newVersions: ChannelVersions): Promise<RunnableConfig>;
  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void>;
  deleteThread(threadId: string): Promise<void>;
}
