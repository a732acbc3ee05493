// agents.ts — a user's OpenAI Agents SDK program on ConvoSession (test/package.test.mjs), in
// a project with @openai/agents and zod: the real Runner over a scripted Model (no network),
// two turns of one session in a SQLite file (one with a tool call), then the session read
// back, listed by its user, and what `convo load` would show of it.
import { Store } from 'convo';
import { ConvoSession } from 'convo/openai-agents';
import { Agent, Runner, Usage, tool, setTracingDisabled } from '@openai/agents';
import type { AgentInputItem, Model, ModelRequest, ModelResponse, StreamEvent } from '@openai/agents';
import { z } from 'zod';

setTracingDisabled(true);

class ScriptedModel implements Model {
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const input: AgentInputItem[] = typeof request.input === 'string'
      ? [{ role: 'user', content: request.input }] : request.input;
    const last = input[input.length - 1];
    const n = input.length;
    if (last && last.type === 'function_call_result') {
      return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', id: `msg_${n}`,
        content: [{ type: 'output_text', text: `it is ${JSON.stringify(last.output)}` }] }] };
    }
    if (last && 'role' in last && last.role === 'user' && last.content === 'weather?') {
      return { usage: new Usage(), output: [{ type: 'function_call', callId: `call_${n}`, name: 'weather',
        arguments: '{"city":"Paris"}', status: 'completed' }] };
    }
    return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', id: `msg_${n}`,
      content: [{ type: 'output_text', text: `${n} items in` }] }] };
  }

  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('not streamed');
  }
}

async function main(): Promise<void> {
  const weather = tool({ name: 'weather', description: 'The weather', parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `sunny in ${city}` });
  const agent = new Agent({ name: 'demo', instructions: 'Be brief.', model: new ScriptedModel(), tools: [weather] });
  const runner = new Runner();
  // a session given a URL opens its own store, and closes it
  const session = new ConvoSession({ url: 'sqlite:agents.db', sessionId: 'chat', extra: { userId: 'u1' } });
  for (const text of ['hello', 'weather?']) {
    const result = await runner.run(agent, text, { session });
    console.log(String(result.finalOutput));
  }
  await session.close();

  const store = await Store.open('sqlite:agents.db');
  const again = new ConvoSession({ store, sessionId: 'chat' });
  const items: AgentInputItem[] = await again.getItems();
  console.log(`items ${items.length}: ${items.map((i) => ('role' in i ? i.role : i.type)).join(',')}`);
  const log = await store.load('chat');
  console.log(`log: ${log.messages.map((m) => m.role).join(',')}`);
  console.log(`extra ${JSON.stringify(await again.getExtra())}`);
  await again.close(); // leaves the store it was given open
  await store.close();
}

void main();
