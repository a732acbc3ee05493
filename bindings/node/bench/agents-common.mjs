// The OpenAI Agents SDK conversation both agents benches play (agents-bench.mjs, whole runs;
// agents-interleaved.mjs, two history lengths in the same minutes): what the user says, the
// scripted model's answers, the items the Runner stores for each turn, and a session whose
// method calls are timed.
import { Agent, Usage, tool } from '@openai/agents';
import { z } from 'zod';
import { words, since } from './common.mjs';

// what the user says (every 10th turn asks for a lookup) and the model answers, turn by turn
export function conversation(turns, payload) {
  return {
    said: Array.from({ length: turns }, (_, t) => (t % 10 === 9 ? `lookup ${t}` : words(payload))),
    answers: Array.from({ length: turns }, () => words(payload)),
    payload,
  };
}

const toolOutput = (talk, q) => `found ${q}: ${'x'.repeat(talk.payload / 2)}`;

// An agent whose model calls the lookup tool on a lookup turn, else answers; it plays the
// conversation from turn `first` on.
export function scriptedAgent(talk, first = 0) {
  const { said, answers } = talk;
  let turn = first;
  const model = {
    async getResponse({ input }) {
      const last = input[input.length - 1];
      const n = input.length;
      if (last.type !== 'function_call_result' && said[turn].startsWith('lookup')) {
        return { usage: new Usage(), output: [{ type: 'function_call', id: `fc_${n}`, callId: `call_${n}`,
          name: 'lookup', arguments: JSON.stringify({ q: said[turn] }), status: 'completed' }] };
      }
      return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', id: `msg_${n}`,
        content: [{ type: 'output_text', text: answers[turn++], annotations: [] }] }] };
    },
    async *getStreamedResponse() {
      throw new Error('not streamed');
    },
  };
  const lookup = tool({ name: 'lookup', description: 'Looks a thing up', parameters: z.object({ q: z.string() }),
    execute: async ({ q }) => toolOutput(talk, q) });
  return new Agent({ name: 'bench', instructions: 'Answer.', model, tools: [lookup] });
}

// The items of each of the first `turns` turns, as the Runner adds them with this agent (what
// it gave MemorySession in a run of it; built here, as a run of the Runner costs minutes at
// 1,000 turns).
export function turnItems(talk, turns) {
  const { said, answers } = talk;
  const all = [];
  let n = 0;
  for (let t = 0; t < turns; t++) {
    const items = [{ type: 'message', role: 'user', content: said[t] }];
    n++;
    if (said[t].startsWith('lookup')) {
      items.push({ type: 'function_call', callId: `call_${n}`, name: 'lookup', status: 'completed',
        arguments: JSON.stringify({ q: said[t] }) });
      items.push({ type: 'function_call_result', name: 'lookup', callId: `call_${n}`, status: 'completed',
        output: { type: 'text', text: toolOutput(talk, said[t]) } });
      n += 2;
    }
    items.push({ type: 'message', role: 'assistant', status: 'completed', id: `msg_${n}`,
      content: [{ type: 'output_text', text: answers[t], annotations: [] }] });
    n++;
    all.push(items);
  }
  return all;
}

// The session with every method call timed to its promise settling: the adapter's own share of
// a Runner turn adds to spent.ms, and spent.calls (when given) counts the calls by name. (The
// methods are called on the session itself: ConvoSession's private fields need it.)
export function timedSession(session, spent) {
  return new Proxy(session, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function' || prop === 'constructor') return value;
      return async (...args) => {
        const start = process.hrtime.bigint();
        try {
          return await value.apply(target, args);
        } finally {
          spent.ms += since(start);
          if (spent.calls) spent.calls[prop] = (spent.calls[prop] ?? 0) + 1;
        }
      };
    },
  });
}
