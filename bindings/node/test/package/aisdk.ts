// aisdk.ts — a user's AI SDK program on convo/ai-sdk (test/package.test.mjs), in a project
// with ai and zod: streamText on the SDK's MockLanguageModelV4, toUIMessageStream with
// originalMessages and onEnd saving the chat, two turns of one chat in a SQLite file
// (aisdk_chat.ts), then the chat read back, its meta, and the user's chats listed.
import { loadChat, loadChatMeta, listChats } from 'convo/ai-sdk';
import type { ChatInfo } from 'convo/ai-sdk';
import { streamText, toUIMessageStream, createUIMessageStreamResponse, convertToModelMessages } from 'ai';
import type { UIMessage } from 'ai';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';
import { replyParts, twoTurns } from './aisdk_chat.js';

const model = new MockLanguageModelV4({
  doStream: async ({ prompt }) => ({ stream: convertArrayToReadableStream([...replyParts(prompt.length)]) }),
});

async function main(): Promise<void> {
  const store = await twoTurns('aisdk.db', async (messages, generateMessageId, save) => {
    const result = streamText({ model, messages: await convertToModelMessages(messages) });
    return createUIMessageStreamResponse({ stream: toUIMessageStream({
      stream: result.stream, originalMessages: messages, generateMessageId,
      onEnd: async ({ messages: chat }) => save(chat),
    }) });
  });
  const chat: UIMessage[] = await loadChat(store, 'chat');
  console.log(`chat ${chat.length}: ${chat.map((m) => m.role).join(',')}`);
  const meta = await loadChatMeta(store, 'chat');
  console.log(`meta ${meta.title} ${meta.activeStreamId}`);
  const { chats }: { chats: ChatInfo[] } = await listChats(store, { where: { userId: 'u1' } });
  console.log(`chats ${chats.map((c) => `${c.chatId}:${c.preview}`).join(',')}`);
  await store.close();
}

void main();
