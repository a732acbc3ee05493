// A LangGraph chatbot whose conversation lives in convo: stop it, start it again, and it
// picks the thread up where it was. The "model" is a small deterministic fake (no
// network, no API key), so the example runs anywhere; swap in a real chat model node.
//
//   node chatbot.mjs [--url URL] [--thread ID] [MESSAGE ...]
//
// With MESSAGE arguments it sends each in turn and exits; without, it reads one message
// per line from stdin. URL defaults to $CONVO_URL, else sqlite:chatbot.db. Read the
// thread back with the convo tool:  convo --url URL load ID
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { StateGraph, MessagesAnnotation, START, END } from '@langchain/langgraph';
import { AIMessage, HumanMessage, SystemMessage } from '@langchain/core/messages';
import { ConvoSaver } from 'convo/langgraph';

const { values: opts, positionals } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.CONVO_URL ?? 'sqlite:chatbot.db' },
    thread: { type: 'string', default: 'demo' },
  },
  allowPositionals: true,
});

// The fake model remembers what it was told: it answers from the whole history, which
// is what the checkpointer gives back after a restart.
function fakeModel({ messages }) {
  const said = messages.filter((m) => m.getType() === 'human').map((m) => String(m.content));
  const last = said[said.length - 1] ?? '';
  const named = [...said].reverse().map((s) => /my name is (\w+)/i.exec(s)).find(Boolean);
  let reply;
  if (/what is my name/i.test(last)) {
    reply = named ? `Your name is ${named[1]}.` : 'You have not told me your name.';
  } else if (/how many/i.test(last)) {
    reply = `You have sent me ${said.length} messages in this thread.`;
  } else if (named && last === named[0]) {
    reply = `Nice to meet you, ${named[1]}.`;
  } else {
    reply = `You said: "${last}".`;
  }
  return { messages: [new AIMessage(reply)] };
}

const saver = new ConvoSaver(opts.url);
const graph = new StateGraph(MessagesAnnotation)
  .addNode('model', fakeModel)
  .addEdge(START, 'model')
  .addEdge('model', END)
  .compile({ checkpointer: saver });
const config = { configurable: { thread_id: opts.thread } };

async function send(text) {
  const state = await graph.getState(config);
  const input = [];
  if (!state.values.messages?.length) {
    input.push(new SystemMessage('You are a small deterministic demo bot.'));
  }
  input.push(new HumanMessage(text));
  const out = await graph.invoke({ messages: input }, config);
  console.log(`bot: ${out.messages[out.messages.length - 1].content}`);
}

try {
  const earlier = (await graph.getState(config)).values.messages ?? [];
  console.log(earlier.length
    ? `(thread ${opts.thread}: picking up ${earlier.length} earlier messages)`
    : `(thread ${opts.thread}: a new conversation)`);
  if (positionals.length) {
    for (const text of positionals) await send(text);
  } else {
    for await (const line of createInterface({ input: process.stdin })) {
      if (line.trim()) await send(line.trim());
    }
  }
} finally {
  await saver.close();
}
