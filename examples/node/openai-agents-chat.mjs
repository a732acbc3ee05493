// An OpenAI Agents SDK chat whose session lives in convo: stop it, start it again, and the
// agent has the whole conversation, tool calls included. The model is a small scripted
// one (no network, no API key), so the example runs anywhere; put `model: 'gpt-4.1-mini'`
// (and OPENAI_API_KEY) in the Agent to make it real.
//
//   node openai-agents-chat.mjs [--url URL] [--session ID] [--user NAME] [MESSAGE ...]
//
// With MESSAGE arguments it sends each in turn and exits; without, it reads one message per
// line from stdin. "/undo" removes the last exchange (popItem), "/clear" empties the
// session but keeps its title and owner (clearSession), "/sessions" lists the user's
// sessions, the most recently active first (ConvoSession.list). URL defaults to $CONVO_URL, else
// sqlite:agents-chat.db. Read the session back with:  convo --url URL load ID
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { Agent, Runner, Usage, tool, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { Store } from 'convo';
import { ConvoSession } from 'convo/openai-agents';

setTracingDisabled(true); // tracing would send the run to OpenAI

const { values: opts, positionals } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.CONVO_URL ?? 'sqlite:agents-chat.db' },
    session: { type: 'string', default: 'demo' },
    user: { type: 'string', default: 'ada' },
  },
  allowPositionals: true,
});

const textOf = (item) => (typeof item.content === 'string' ? item.content
  : (item.content ?? []).map((c) => c.text ?? '').join(''));
const answer = (text) => ({ usage: new Usage(), output: [{ type: 'message', role: 'assistant',
  status: 'completed', content: [{ type: 'output_text', text }] }] });

// The scripted model (the SDK's Model interface) answers from the whole input the Runner
// gives it: the session's history, then the new message.
const scriptedModel = {
  async getResponse({ input }) {
    const last = input[input.length - 1];
    if (last.type === 'function_call_result') {
      const weather = JSON.parse(last.output.text); // what get_weather returned
      return answer(`In ${weather.city}: ${weather.sky}.`);
    }
    const said = input.filter((i) => i.role === 'user').map(textOf);
    const text = said[said.length - 1];
    const city = /weather in (\w+)/i.exec(text);
    if (city) {
      return { usage: new Usage(), output: [{ type: 'function_call', callId: `call_${input.length}`,
        name: 'get_weather', arguments: JSON.stringify({ city: city[1] }), status: 'completed' }] };
    }
    const named = said.map((s) => /my name is (\w+)/i.exec(s)).filter(Boolean).pop();
    if (/what is my name/i.test(text)) return answer(named ? `Your name is ${named[1]}.` : 'You have not told me your name.');
    if (named && text === named[0]) return answer(`Nice to meet you, ${named[1]}.`);
    return answer(`You said: "${text}" (${said.length} messages so far).`);
  },
  async *getStreamedResponse() {
    throw new Error('the scripted model does not stream');
  },
};

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => JSON.stringify({ city, sky: 'sunny, 21 C' }),
});
const agent = new Agent({ name: 'demo', instructions: 'You are a small scripted demo agent.',
  model: scriptedModel, tools: [getWeather] });
const runner = new Runner();
// the one line that makes the conversation durable (given a url instead of a store, the
// session opens its own); extra is what ConvoSession.list finds
const store = await Store.open(opts.url);
const session = new ConvoSession({ store, sessionId: opts.session,
  extra: { userId: opts.user, title: `${opts.user}'s chat` } });

async function send(text) {
  if (text === '/undo') {
    // pop items back to (and with) the last user message
    let item;
    do item = await session.popItem(); while (item && item.role !== 'user');
    console.log(item ? `(removed the exchange that began "${textOf(item)}")` : '(nothing to undo)');
  } else if (text === '/sessions') {
    const { sessions } = await ConvoSession.list(store, { where: { userId: opts.user } });
    for (const s of sessions) console.log(`(${s.sessionId}: ${s.length} items, "${s.extra.title}")`);
  } else if (text === '/clear') {
    await session.clearSession();
    console.log(`(cleared; kept ${JSON.stringify(await session.getExtra())})`);
  } else {
    const result = await runner.run(agent, text, { session });
    console.log(`agent: ${result.finalOutput}`);
  }
}

try {
  const earlier = await session.getItems();
  console.log(earlier.length
    ? `(session ${opts.session}: picking up ${earlier.length} earlier items)`
    : `(session ${opts.session}: a new conversation)`);
  if (positionals.length) {
    for (const text of positionals) await send(text);
  } else {
    for await (const line of createInterface({ input: process.stdin })) {
      if (line.trim()) await send(line.trim());
    }
  }
} finally {
  await session.close(); // leaves the store it was given open
  await store.close();
}
