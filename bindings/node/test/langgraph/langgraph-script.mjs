// The LangGraph runtime script of langgraph.test.mjs: a chat graph over
// MessagesAnnotation with a deterministic fake model (no network), a tool node and an
// interrupt(), and a list of steps run against any checkpointer. Each step returns
// the thread's state in a form that does not depend on the saver (no checkpoint ids,
// no timestamps), so a run on ConvoSaver can be compared with one on MemorySaver.
import {
  StateGraph, MessagesAnnotation, START, END, Command, interrupt,
} from '@langchain/langgraph';
import {
  AIMessage, HumanMessage, SystemMessage, ToolMessage, RemoveMessage,
} from '@langchain/core/messages';

// With `plain`, the nodes and the steps write messages as plain role-tagged objects
// ({ role, content, id, ... }), which MessagesAnnotation's reducer makes LangChain messages.
let plainMessages = false;
function message(Class, role, fields) {
  return plainMessages ? { role, ...fields } : new Class(fields);
}

// The fake model answers from what it sees, so a wrong history gives another answer.
// Ids are derived from the last human message, so they never collide after a
// RemoveMessage or a branch.
function fakeModel(state) {
  const messages = state.messages;
  let lastHuman = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].getType() === 'human') { lastHuman = i; break; }
  }
  const human = messages[lastHuman];
  const after = messages.length - lastHuman - 1;
  const id = `ai-${human.id}-${after}`;
  const text = typeof human.content === 'string' ? human.content : JSON.stringify(human.content);
  const last = messages[messages.length - 1];
  if (text.includes('weather') && last.getType() === 'human') {
    return {
      messages: [message(AIMessage, 'assistant', {
        id, content: '',
        tool_calls: [{ id: `call-${human.id}`, name: 'weather', args: { city: 'Lyon' }, type: 'tool_call' }],
      })],
    };
  }
  const humans = messages.filter((m) => m.getType() === 'human').length;
  const content = last.getType() === 'tool'
    ? `The weather service says: ${last.content}`
    : `Reply to "${text}" (${messages.length} messages, ${humans} from you) ✓`;
  return {
    messages: [message(AIMessage, 'assistant', {
      id, content,
      response_metadata: { model: 'fake', turn: humans },
      usage_metadata: { input_tokens: messages.length, output_tokens: 7, total_tokens: messages.length + 7 },
    })],
  };
}

function weatherTool(state) {
  const call = state.messages[state.messages.length - 1].tool_calls[0];
  return {
    messages: [message(ToolMessage, 'tool', {
      id: `tool-${call.id}`, tool_call_id: call.id, name: call.name,
      content: JSON.stringify({ city: call.args.city, sky: 'clear', celsius: 21 }),
    })],
  };
}

// Asks the human before it answers a message that ends with "approve?".
function approval(state) {
  const human = [...state.messages].reverse().find((m) => m.getType() === 'human');
  const answer = interrupt({ question: `May I answer "${human.content}"?` });
  return { messages: [message(AIMessage, 'assistant', { id: `approved-${human.id}`, content: `You said: ${answer}` })] };
}

function route(state) {
  const last = state.messages[state.messages.length - 1];
  if (last.getType() === 'human' && String(last.content).endsWith('approve?')) return 'approval';
  return 'model';
}

function afterModel(state) {
  const last = state.messages[state.messages.length - 1];
  return last.tool_calls && last.tool_calls.length ? 'tools' : END;
}

/** The chat graph on a checkpointer; plain: messages as plain objects (see `message`);
 * state: another state schema (e.g. one with LangGraph's MessagesDeltaValue). */
export function buildGraph(checkpointer, { plain = false, state = MessagesAnnotation } = {}) {
  plainMessages = plain;
  return new StateGraph(state)
    .addNode('model', fakeModel)
    .addNode('tools', weatherTool)
    .addNode('approval', approval)
    .addConditionalEdges(START, route, ['model', 'approval'])
    .addConditionalEdges('model', afterModel, ['tools', END])
    .addEdge('tools', 'model')
    .addEdge('approval', END)
    .compile({ checkpointer });
}

// A turn's text; every fifth asks for the weather (a tool round trip).
function turnText(i) {
  if (i % 5 === 3) return `What is the weather today, turn ${i}?`;
  return `Message number ${i}: ${'lorem ipsum '.repeat(i % 7)}done`;
}

function turns(from, to) {
  const out = [];
  for (let i = from; i < to; i++) out.push({ kind: 'turn', id: `h${i}`, text: turnText(i) });
  return out;
}

// The steps, in segments: each segment runs in a process of its own on a saver that
// persists, so the interrupt of segment 0 is resumed by another process.
export const SEGMENTS = [
  [
    { kind: 'turn', id: 'h0', text: 'Hello!', system: 'You are a terse assistant.' },
    ...turns(1, 30),
    { kind: 'turn', id: 'h30', text: 'Shall I send the report? approve?' },
  ],
  [
    { kind: 'resume', value: 'yes, send it' },
    ...turns(31, 45),
    { kind: 'history' },
    // time travel: edit an old AI message by id on the checkpoint after turn 10, then
    // go on from there
    { kind: 'updateOld', turn: 10, replace: 'ai-h10-0', content: 'An edited answer' },
    { kind: 'turn', id: 'b1', text: 'On the branch now' },
    { kind: 'turn', id: 'b2', text: 'And the weather on the branch?' },
  ],
  [
    { kind: 'remove', ids: ['h2', 'ai-h2-0'] },
    { kind: 'turn', id: 'r1', text: 'After the removal' },
    { kind: 'turn', id: 'r2', text: 'A plain reply please approve?' },
    { kind: 'resume', value: { ok: true, note: 'structured resume' } },
    ...turns(46, 52),
    { kind: 'history' },
  ],
];

const plain = (value) => JSON.parse(JSON.stringify(value));

function normalizeSnapshot(s) {
  return {
    values: plain(s.values),
    next: [...s.next],
    metadata: plain(s.metadata ?? null),
    tasks: s.tasks.map((t) => ({
      name: t.name,
      interrupts: (t.interrupts ?? []).map((i) => plain(i.value)),
    })),
    hasParent: Boolean(s.parentConfig),
    classes: (s.values.messages ?? []).map((m) => m.constructor.name),
  };
}

async function history(graph, config) {
  const all = [];
  for await (const s of graph.getStateHistory(config)) all.push(s);
  const index = new Map(all.map((s, i) => [s.config.configurable.checkpoint_id, i]));
  return all.map((s) => ({
    ...normalizeSnapshot(s),
    parent: s.parentConfig ? index.get(s.parentConfig.configurable.checkpoint_id) ?? 'missing' : null,
  }));
}

// The checkpoint right after the given turn completed: its newest message is the
// model's answer to that turn.
async function checkpointAfterTurn(graph, config, turn) {
  for await (const s of graph.getStateHistory(config)) {
    const msgs = s.values.messages ?? [];
    const last = msgs[msgs.length - 1];
    if (s.next.length === 0 && last && last.id === `ai-h${turn}-0`) return s.config;
  }
  throw new Error(`no checkpoint after turn ${turn}`);
}

// Runs one step; returns what the test compares.
export async function runStep(graph, threadId, step) {
  const config = { configurable: { thread_id: threadId } };
  let result;
  switch (step.kind) {
    case 'turn': {
      const messages = [];
      if (step.system) messages.push(message(SystemMessage, 'system', { id: 'sys', content: step.system }));
      messages.push(message(HumanMessage, 'user', { id: step.id, content: step.text }));
      await graph.invoke({ messages }, config);
      break;
    }
    case 'resume':
      await graph.invoke(new Command({ resume: step.value }), config);
      break;
    case 'history':
      result = await history(graph, config);
      break;
    case 'updateOld': {
      const old = await checkpointAfterTurn(graph, config, step.turn);
      const oldState = await graph.getState(old);
      const target = oldState.values.messages.find((m) => m.id === step.replace);
      if (!target) throw new Error(`message ${step.replace} not in the old checkpoint`);
      const edited = message(AIMessage, 'assistant', { id: step.replace, content: step.content });
      const branch = await graph.updateState(old, { messages: [edited] }, 'model');
      result = normalizeSnapshot(await graph.getState(branch));
      break;
    }
    case 'remove':
      await graph.updateState(config, { messages: step.ids.map((id) => new RemoveMessage({ id })) }, 'model');
      break;
    default:
      throw new Error(`unknown step ${step.kind}`);
  }
  return { kind: step.kind, result: result ?? null, state: normalizeSnapshot(await graph.getState(config)) };
}
