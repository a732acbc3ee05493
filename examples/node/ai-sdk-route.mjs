// A Vercel AI SDK chat route whose chats live in convo: `POST(req)` is what a Next.js
// route (app/api/chat/route.js) exports. The client sends only its last message
// ({ id, message, userId? }, useChat with prepareSendMessagesRequest); the route loads the
// chat, streams the model's answer (toUIMessageStream with originalMessages) and saves the
// chat from onEnd: new messages appended, an assistant message that goes on after a
// client-side tool call replaced. `GET(req)` lists a user's chats (?userId=...), newest
// first, with their title and the last message's text.
//
// The model is a scripted one (the SDK's MockLanguageModelV4: no network, no API key):
// put `model: 'openai/gpt-4.1-mini'` in streamText to make it real. The store is
// $CONVO_URL, else sqlite:ai-sdk-chat.db. Read a chat back with:  convo --url URL load ID
import { streamText, toUIMessageStream, createUIMessageStreamResponse, convertToModelMessages, tool,
  createIdGenerator, stepCountIs } from 'ai';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';
import { z } from 'zod';
import { Store } from 'convo';
import { loadChat, saveChat, saveChatMeta, listChats } from 'convo/ai-sdk';

// one Store per process, opened on the first request (a route module lives as long as
// the server process)
let storePromise = null;
const store = () => (storePromise ??= Store.open(process.env.CONVO_URL ?? 'sqlite:ai-sdk-chat.db'));

const tools = {
  // runs on the server within the request
  weather: tool({ description: 'The weather in a city', inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, sky: 'sunny, 21 C' }) }),
  // no execute: the browser asks the user, and sends the answered assistant message back
  confirm: tool({ description: 'Ask the user to confirm an action', inputSchema: z.object({ action: z.string() }) }),
};

const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 } };
const reply = (parts, reason) => ({ stream: convertArrayToReadableStream([{ type: 'stream-start', warnings: [] },
  ...parts, { type: 'finish', finishReason: { unified: reason, raw: reason }, usage }]) });
const say = (text) => reply([{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: text },
  { type: 'text-end', id: 't' }], 'stop');
const call = (toolName, input, n) => reply([{ type: 'tool-call', toolCallId: `call-${n}`, toolName,
  input: JSON.stringify(input) }], 'tool-calls');

// The scripted model answers from the whole prompt: the chat as loaded, then the new message.
const model = new MockLanguageModelV4({
  doStream: async ({ prompt }) => {
    const last = prompt[prompt.length - 1];
    if (last.role === 'tool') {
      const out = last.content[0].output.value;
      return say(out.city ? `In ${out.city}: ${out.sky}.` : out.confirmed ? 'Done: deleted.' : 'Cancelled.');
    }
    const text = last.content.map((p) => p.text ?? '').join('');
    const users = prompt.filter((m) => m.role === 'user').length;
    const city = /weather in (\w+)/i.exec(text)?.[1];
    if (city) return call('weather', { city }, users);
    if (/delete/i.test(text)) return call('confirm', { action: text }, users);
    const name = /my name is (\w+)/i.exec(text)?.[1];
    if (name) return say(`Nice to meet you, ${name}.`);
    const told = prompt.map((m) => m.role === 'user' && /my name is (\w+)/i.exec(m.content.map((p) => p.text ?? '').join(''))?.[1])
      .filter(Boolean).at(-1);
    if (/what is my name/i.test(text)) return say(told ? `Your name is ${told}.` : 'You have not told me.');
    return say(`You said: "${text}" (message ${users} of this chat).`);
  },
});

export async function POST(req) {
  const { id, message, userId } = await req.json();
  const s = await store();
  const previous = await loadChat(s, id);
  // the answer to a client-side tool call is the last assistant message again, changed
  const messages = previous.at(-1)?.id === message.id ? [...previous.slice(0, -1), message] : [...previous, message];
  if (previous.length === 0) {
    const first = message.parts.find((p) => p.type === 'text')?.text ?? 'New chat';
    await saveChatMeta(s, id, { title: first.slice(0, 40), ...(userId ? { userId } : {}) });
  }
  const streamId = `stream-${id}-${messages.length}`;
  await saveChatMeta(s, id, { activeStreamId: streamId }); // what a resumable stream would look up

  const result = streamText({
    model,
    messages: await convertToModelMessages(messages),
    tools,
    stopWhen: stepCountIs(3),
  });
  return createUIMessageStreamResponse({
    stream: toUIMessageStream({
      stream: result.stream,
      originalMessages: messages,
      // server-side ids, stable before the messages are stored
      generateMessageId: createIdGenerator({ prefix: 'msg', size: 16 }),
      onEnd: async ({ messages: chat }) => {
        await saveChat(s, { chatId: id, messages: chat, meta: { activeStreamId: null } });
      },
    }),
  });
}

export async function GET(req) {
  const userId = new URL(req.url).searchParams.get('userId');
  const { chats } = await listChats(await store(), { where: userId ? { userId } : null, limit: 20 });
  return Response.json(chats.map(({ chatId, title, updatedAt, preview }) => ({ chatId, title, updatedAt, preview })));
}
