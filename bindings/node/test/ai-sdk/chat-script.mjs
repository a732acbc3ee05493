// chat-script.mjs — a scripted chat through the AI SDK's real runtime (streamText on its
// MockLanguageModelV4, toUIMessageStream with originalMessages and onEnd, the response
// read to the end as a client would): plain text turns, a client-side tool call whose
// answer the client adds to the same assistant message (the turn then goes on under the
// same id, with more parts), and a server-side tool (execute) in one turn.
import { streamText, toUIMessageStream, createUIMessageStreamResponse, convertToModelMessages, tool } from 'ai';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';
import { z } from 'zod';

const usage = { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 } };
const finish = (unified) => ({ type: 'finish', finishReason: { unified, raw: unified }, usage });

export function textReply(text) {
  return { stream: convertArrayToReadableStream([
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    ...text.split(/(?<= )/).map((delta) => ({ type: 'text-delta', id: 't', delta })),
    { type: 'text-end', id: 't' },
    finish('stop'),
  ]) };
}

export function toolReply(toolCallId, toolName, input) {
  return { stream: convertArrayToReadableStream([
    { type: 'stream-start', warnings: [] },
    { type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input) },
    finish('tool-calls'),
  ]) };
}

export const tools = {
  // no execute: the client answers (useChat's addToolOutput), then sends the chat again
  confirm: tool({ description: 'Ask the user to confirm', inputSchema: z.object({ question: z.string() }) }),
  weather: tool({ description: 'The weather in a city', inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, sky: 'sunny' }) }),
};

/** The model's answers, in the order the turns below ask for them. */
export function scriptedModel() {
  return new MockLanguageModelV4({ doStream: [
    textReply('Hello! How can I help?'),
    toolReply('call-1', 'confirm', { question: 'Delete the file?' }),
    textReply('Deleted it.'),
    toolReply('call-2', 'weather', { city: 'Paris' }),
    textReply('Sunny in Paris.'),
    textReply('Bye!'),
  ] });
}

/** One request: the model streams its answer to `messages`; resolves to what onEnd gave
 * (the whole chat) after `onEnd` (the persistence under test) is done. */
export async function turn(model, messages, onEnd, ids) {
  let done;
  const ended = new Promise((resolve, reject) => { done = { resolve, reject }; });
  const result = streamText({ model, messages: await convertToModelMessages(messages), tools,
    stopWhen: ({ steps }) => steps.at(-1)?.finishReason !== 'tool-calls' ||
      steps.at(-1).toolResults.length === 0 });
  const response = createUIMessageStreamResponse({
    stream: toUIMessageStream({
      stream: result.stream,
      originalMessages: messages,
      generateMessageId: ids,
      onEnd: async ({ messages: all }) => {
        try {
          await onEnd(all);
          done.resolve(all);
        } catch (e) {
          done.reject(e);
        }
      },
    }),
  });
  await response.text(); // the client reads the stream to its end
  return ended;
}

const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });

// The client's answer to the confirm call: the same assistant message, its tool part done.
function answered(message) {
  const m = structuredClone(message);
  const part = m.parts.find((p) => p.type === 'tool-confirm');
  Object.assign(part, { state: 'output-available', output: { confirmed: true } });
  return m;
}

/**
 * The script: each step calls `persist(messages)` from onEnd with the whole chat and
 * `between(i)` after the step (a restart, a check); `history()` gives what the next request
 * starts from (what the client holds). Resolves to the final chat.
 */
export async function runScript({ persist, between = async () => {} }) {
  const model = scriptedModel();
  let n = 0;
  const ids = () => `msg-${++n}`; // deterministic: two runs of the script compare equal
  let chat = [];
  const steps = [
    (c) => [...c, user('u1', 'Hi there')],
    (c) => [...c, user('u2', 'Delete the old file')],
    // the client answers the tool call: the last assistant message comes back changed
    (c) => [...c.slice(0, -1), answered(c.at(-1))],
    (c) => [...c, user('u3', 'Weather in Paris?')],
    (c) => [...c, user('u4', 'Thanks, bye')],
  ];
  for (let i = 0; i < steps.length; i++) {
    chat = await turn(model, steps[i](chat), persist, ids);
    await between(i, chat);
  }
  return chat;
}
