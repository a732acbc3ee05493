// aisdk_chat.ts — what aisdk.ts and aisdk6.ts (test/package.test.mjs) share, whatever the AI
// SDK's version: the stream the mock model answers with, and two turns of one chat in a SQLite
// file, each saved with saveChat from the SDK's own callback. Each program passes the call that
// streams a turn's answer (its SDK's way) and hands the chat to `save` when it ends.
import { Store } from 'convo';
import { loadChat, saveChat } from 'convo/ai-sdk';
import type { SaveChatResult } from 'convo/ai-sdk';
import type { UIMessage } from 'ai';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 } } as const;

// The model's stream parts for a prompt of n messages: the text `reply N`.
export function replyParts(n: number) {
  return [
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: `reply ${n}` },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
  ] as const;
}

export type Respond = (messages: UIMessage[], generateMessageId: () => string,
  save: (chat: UIMessage[]) => Promise<void>) => Promise<Response>;

// Two turns ('hi', 'bye') of chat 'chat' in the SQLite file `file`; prints what each save did.
export async function twoTurns(file: string, respond: Respond): Promise<Store> {
  const store = await Store.open(`sqlite:${file}`);
  let n = (await loadChat(store, 'chat')).length;
  for (const text of ['hi', 'bye']) {
    const messages: UIMessage[] = [...await loadChat(store, 'chat'),
      { id: `u${++n}`, role: 'user', parts: [{ type: 'text', text }] }];
    let saved: SaveChatResult | null = null;
    const response = await respond(messages, () => `a${++n}`, async (chat) => {
      saved = await saveChat(store, { chatId: 'chat', messages: chat, meta: { userId: 'u1', title: 'demo' } });
    });
    await response.text();
    console.log(`saved ${saved!.appended} of ${saved!.length}`);
  }
  return store;
}
