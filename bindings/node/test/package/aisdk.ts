// aisdk.ts — a user's AI SDK program on convo/ai-sdk (test/package.test.mjs), in a project
// with ai and zod: streamText on the SDK's MockLanguageModelV4, toUIMessageStream with
// originalMessages and onEnd saving the chat, two turns of one chat in a SQLite file, then
// the chat read back, its meta, and the user's chats listed.
import { Store } from 'convo';
import { loadChat, saveChat, loadChatMeta, listChats } from 'convo/ai-sdk';
import type { ChatInfo, SaveChatResult } from 'convo/ai-sdk';
import { streamText, toUIMessageStream, createUIMessageStreamResponse, convertToModelMessages } from 'ai';
import type { UIMessage } from 'ai';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV4({
  doStream: async ({ prompt }) => ({ stream: convertArrayToReadableStream([
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: `reply ${prompt.length}` },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
  ]) }),
});

async function main(): Promise<void> {
  const store = await Store.open('sqlite:aisdk.db');
  let n = (await loadChat(store, 'chat')).length;
  for (const text of ['hi', 'bye']) {
    const messages: UIMessage[] = [...await loadChat(store, 'chat'),
      { id: `u${++n}`, role: 'user', parts: [{ type: 'text', text }] }];
    const result = streamText({ model, messages: await convertToModelMessages(messages) });
    let saved: SaveChatResult | null = null;
    const response = createUIMessageStreamResponse({ stream: toUIMessageStream({
      stream: result.stream, originalMessages: messages, generateMessageId: () => `a${++n}`,
      onEnd: async ({ messages: chat }) => {
        saved = await saveChat(store, { chatId: 'chat', messages: chat, meta: { userId: 'u1', title: 'demo' } });
      },
    }) });
    await response.text();
    console.log(`saved ${saved!.appended} of ${saved!.length}`);
  }
  const chat: UIMessage[] = await loadChat(store, 'chat');
  console.log(`chat ${chat.length}: ${chat.map((m) => m.role).join(',')}`);
  const meta = await loadChatMeta(store, 'chat');
  console.log(`meta ${meta.title} ${meta.activeStreamId}`);
  const { chats }: { chats: ChatInfo[] } = await listChats(store, { where: { userId: 'u1' } });
  console.log(`chats ${chats.map((c) => `${c.chatId}:${c.preview}`).join(',')}`);
  await store.close();
}

void main();
