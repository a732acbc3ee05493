// agents-script.mjs — an OpenAI Agents SDK agent on a scripted model (no network): its
// answers depend only on the input it is given, so the same turns give the same history on
// any session. Run as a program, it plays turns on a ConvoSession in a process of its own:
//   node agents-script.mjs URL SESSION_ID TURN...     (prints each turn's final output)
//   node agents-script.mjs --resume URL SESSION_ID    (a RunState stopped for approval, as
//                                                      state.toString(), on stdin: approved)
import { Agent, Runner, RunState, tool, setTracingDisabled, Usage } from '@openai/agents';
import { z } from 'zod';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

setTracingDisabled(true);

function message(n, text) {
  return { type: 'message', role: 'assistant', status: 'completed', id: `msg_${n}`,
    content: [{ type: 'output_text', text, annotations: [] }], providerData: { model: 'scripted', n } };
}

function call(n, i, name, args) {
  return { type: 'function_call', id: `fc_${n}_${i}`, callId: `call_${n}_${i}`, name,
    arguments: JSON.stringify(args), status: 'completed' };
}

function textOf(item) {
  if (typeof item.content === 'string') return item.content;
  if (Array.isArray(item.content)) return item.content.map((c) => c.text ?? '').join('');
  if (item.output && typeof item.output === 'object') return item.output.text ?? JSON.stringify(item.output);
  return String(item.output ?? '');
}

// The model's answer to an input: a tool call for "weather CITY", "add A B" and "both CITY"
// (two calls at once), a compaction item for "compact", else an echo that counts the input.
// An answer to a user message starting "bad " starts "BAD " (what the guardrail blocks).
function reply(input) {
  const n = input.length;
  const last = input[n - 1];
  const user = input.findLast((i) => i.role === 'user');
  const bad = textOf(user).startsWith('bad ') ? 'BAD ' : '';
  if (last.type === 'function_call_result') {
    const results = [];
    for (let i = n - 1; i >= 0 && input[i].type === 'function_call_result'; i--) results.unshift(input[i]);
    return [message(n, bad + results.map((r) => `${r.name} said ${textOf(r)}`).join('; '))];
  }
  const said = textOf(last).replace(/^bad /, '');
  let m;
  if ((m = said.match(/^weather (\w+)$/))) {
    return [{ type: 'reasoning', id: `rs_${n}`, content: [{ type: 'input_text', text: `look up ${m[1]}` }] },
      call(n, 0, 'weather', { city: m[1] })];
  }
  if ((m = said.match(/^pay (\d+)$/))) return [call(n, 0, 'pay', { amount: Number(m[1]) })];
  if ((m = said.match(/^add (\d+) (\d+)$/))) return [call(n, 0, 'add', { a: Number(m[1]), b: Number(m[2]) })];
  if ((m = said.match(/^both (\w+)$/))) {
    return [call(n, 0, 'weather', { city: m[1] }), call(n, 1, 'add', { a: n, b: 1 })];
  }
  if (said === 'compact') {
    return [{ type: 'compaction', id: `cmp_${n}`, encrypted_content: `summary of ${n} items` },
      message(n, `compacted ${n} items`)];
  }
  return [message(n, `${bad}you said "${said}" (${n} items in)`)];
}

/** A Model of the SDK answering by reply(); with failAfterTool set, its next call that
 * follows a tool's result throws (once). */
export function scriptedModel() {
  return {
    failAfterTool: false,
    async getResponse(request) {
      const input = typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input;
      if (this.failAfterTool && input[input.length - 1].type === 'function_call_result') {
        this.failAfterTool = false;
        throw new Error('scripted model failure');
      }
      return { usage: new Usage(), output: reply(input), responseId: `resp_${input.length}` };
    },
    // eslint-disable-next-line require-yield
    async *getStreamedResponse() {
      throw new Error('the scripted model does not stream');
    },
  };
}

/** { agent, model, guard }: guard.trip makes the output guardrail trip on outputs starting "BAD". */
export function scriptedAgent() {
  const model = scriptedModel();
  const guard = { trip: true };
  const weather = tool({ name: 'weather', description: 'The weather in a city', parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `sunny in ${city}` });
  const add = tool({ name: 'add', description: 'a + b', parameters: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => String(a + b) });
  // a tool that needs approval: the run stops, its RunState is serialized and resumed
  const pay = tool({ name: 'pay', description: 'Pays an amount', parameters: z.object({ amount: z.number() }),
    needsApproval: true, execute: async ({ amount }) => `paid ${amount}` });
  const agent = new Agent({ name: 'scripted', instructions: 'Answer as scripted.', model, tools: [weather, add, pay],
    outputGuardrails: [{ name: 'no-bad', execute: async ({ agentOutput }) =>
      ({ tripwireTriggered: guard.trip && String(agentOutput).startsWith('BAD'), outputInfo: { agentOutput } }) }] });
  return { agent, model, guard };
}

export const runner = new Runner();

/** A serialized RunState stopped for approval, restored with its tool calls approved. */
export async function resumeState(agent, text) {
  const state = await RunState.fromString(agent, text);
  for (const interruption of state.getInterruptions()) state.approve(interruption);
  return state;
}

async function main(args) {
  const { ConvoSession } = await import('convo/openai-agents');
  const resume = args[0] === '--resume';
  if (resume) args.shift();
  const [url, sessionId, ...turns] = args;
  const session = new ConvoSession({ url, sessionId });
  const { agent, guard } = scriptedAgent();
  // CONVO_AGENTS_WAIT=1: say "ready" once loaded and play on the first line of stdin (so that
  // processes started together play at once); CONVO_AGENTS_WAIT=step: play each turn on a line
  // of its own (so that a test can make two processes play their turns at once, turn by turn,
  // however a loaded machine schedules them)
  const wait = process.env.CONVO_AGENTS_WAIT;
  if (wait === '1') {
    console.log('"ready"');
    for await (const line of createInterface({ input: process.stdin })) if (line) break;
  }
  const lines = wait === 'step' ? createInterface({ input: process.stdin })[Symbol.asyncIterator]() : null;
  const go = async () => {
    for (let r = await lines.next(); !r.done; r = await lines.next()) if (r.value) return;
  };
  if (wait === 'step') console.log('"ready"');
  try {
    if (resume) {
      let text = '';
      for await (const chunk of process.stdin) text += chunk;
      const state = await resumeState(agent, text);
      console.log(JSON.stringify((await runner.run(agent, state, { session })).finalOutput));
    }
    for (const turn of turns) {
      if (wait === 'step') await go();
      console.log(JSON.stringify((await runner.run(agent, turn, { session })).finalOutput));
    }
  } finally {
    await session.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(process.argv.slice(2));
