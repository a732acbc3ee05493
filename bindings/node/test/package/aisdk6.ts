// aisdk6.ts — the program of aisdk.ts for AI SDK 6 (test/package.test.mjs), what `npm install
// ai` gives on Node 18 and 20 (ai 7 needs Node 22): ai 6 has no toUIMessageStream function and
// no MockLanguageModelV4, so the chat is saved from result.toUIMessageStreamResponse's onFinish
// (docs/frameworks.md), on the SDK's MockLanguageModelV3; two turns of one chat in a SQLite file.
import { Store } from 'convo';
import { loadChat, saveChat, loadChatMeta } from 'convo/ai-sdk';
import type { SaveChatResult } from 'convo/ai-sdk';
import { streamText, convertToModelMessages } from 'ai';
import type { UIMessage } from 'ai';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => ({ stream: convertArrayToReadableStream([
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: `reply ${prompt.length}` },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
  ]) }),
});

async function main(): Promise<void> {
  const store = await Store.open('sqlite:aisdk6.db');
  let n = (await loadChat(store, 'chat')).length;
  for (const text of ['hi', 'bye']) {
    const messages: UIMessage[] = [...await loadChat(store, 'chat'),
      { id: `u${++n}`, role: 'user', parts: [{ type: 'text', text }] }];
    const result = streamText({ model, messages: await convertToModelMessages(messages) });
    let saved: SaveChatResult | null = null;
    const response = result.toUIMessageStreamResponse({
      originalMessages: messages, generateMessageId: () => `a${++n}`,
      onFinish: async ({ messages: chat }) => {
        saved = await saveChat(store, { chatId: 'chat', messages: chat, meta: { userId: 'u1', title: 'demo' } });
      },
    });
    await response.text();
    console.log(`saved ${saved!.appended} of ${saved!.length}`);
  }
  const chat: UIMessage[] = await loadChat(store, 'chat');
  console.log(`chat ${chat.length}: ${chat.map((m) => m.role).join(',')} ` +
    `${chat.map((m) => m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')).join('|')}`);
  const meta = await loadChatMeta(store, 'chat');
  console.log(`meta ${meta.title} ${meta.activeStreamId}`);
  await store.close();
}

void main();
