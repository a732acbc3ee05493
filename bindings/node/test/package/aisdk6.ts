// aisdk6.ts — the program of aisdk.ts for AI SDK 6 (test/package.test.mjs), what `npm install
// ai` gives on Node 18 and 20 (ai 7 needs Node 22): ai 6 has no toUIMessageStream function and
// no MockLanguageModelV4, so the chat is saved from result.toUIMessageStreamResponse's onFinish
// (docs/frameworks.md), on the SDK's MockLanguageModelV3; two turns of one chat in a SQLite file
// (aisdk_chat.ts).
import { loadChat, loadChatMeta } from 'convo/ai-sdk';
import { streamText, convertToModelMessages } from 'ai';
import type { UIMessage } from 'ai';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { replyParts, twoTurns } from './aisdk_chat.js';

const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => ({ stream: convertArrayToReadableStream([...replyParts(prompt.length)]) }),
});

async function main(): Promise<void> {
  const store = await twoTurns('aisdk6.db', async (messages, generateMessageId, save) => {
    const result = streamText({ model, messages: await convertToModelMessages(messages) });
    return result.toUIMessageStreamResponse({
      originalMessages: messages, generateMessageId,
      onFinish: async ({ messages: chat }) => save(chat),
    });
  });
  const chat: UIMessage[] = await loadChat(store, 'chat');
  console.log(`chat ${chat.length}: ${chat.map((m) => m.role).join(',')} ` +
    `${chat.map((m) => m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')).join('|')}`);
  const meta = await loadChatMeta(store, 'chat');
  console.log(`meta ${meta.title} ${meta.activeStreamId}`);
  await store.close();
}

void main();
