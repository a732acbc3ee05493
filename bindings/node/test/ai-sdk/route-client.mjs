// route-client.mjs — a browser's side of examples/node/ai-sdk-route.mjs in one process: the
// SDK's DefaultChatTransport (sending only the last message, as the persistence guide
// shows) whose fetch calls the route's POST with a Request, and readUIMessageStream
// building the assistant message from the response, as useChat does.
//   node route-client.mjs ROUTE CHAT_ID USER_ID STEP...
// A STEP is a user message's text, or "/yes": the answer to the pending confirm tool call
// (the last assistant message again, its tool part given its output). The client's copy of
// the chat starts from GET-less nothing and is built from the responses; it prints one
// line per step: the assistant's text, or [confirm ...] for a call waiting for the user.
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { pathToFileURL } from 'node:url';

const [route, chatId, userId, ...steps] = process.argv.slice(2);
const { POST, GET } = await import(pathToFileURL(route).href);

const transport = new DefaultChatTransport({
  api: 'http://localhost/api/chat',
  fetch: async (url, init) => POST(new Request(url, init)),
  prepareSendMessagesRequest: ({ id, messages }) => ({ body: { id, message: messages.at(-1), userId } }),
});

let messages = [];
let n = 0;
for (const step of steps) {
  if (step === '/yes') {
    const last = structuredClone(messages.at(-1));
    const part = last.parts.find((p) => p.type === 'tool-confirm' && p.state === 'input-available');
    Object.assign(part, { state: 'output-available', output: { confirmed: true } });
    messages = [...messages.slice(0, -1), last];
  } else {
    messages = [...messages, { id: `${chatId}-u${++n}`, role: 'user', parts: [{ type: 'text', text: step }] }];
  }
  const stream = await transport.sendMessages({ chatId, messages, trigger: 'submit-message',
    messageId: undefined, abortSignal: undefined });
  const continuing = messages.at(-1).role === 'assistant' ? messages.at(-1) : undefined;
  let answer;
  for await (const m of readUIMessageStream({ message: continuing ? structuredClone(continuing) : undefined, stream })) answer = m;
  messages = continuing ? [...messages.slice(0, -1), answer] : [...messages, answer];
  const texts = answer.parts.filter((p) => p.type === 'text').map((p) => p.text);
  const waiting = answer.parts.find((p) => p.type === 'tool-confirm' && p.state === 'input-available');
  console.log(waiting && texts.length === 0 ? `[confirm ${waiting.input.action}]` : texts.at(-1));
}
console.log(JSON.stringify({ messages }));
console.log(JSON.stringify(await (await GET(new Request(`http://localhost/api/chats?userId=${userId}`))).json()));
