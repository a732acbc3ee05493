// graph.ts — a user's LangGraph.js program on ConvoSaver (test/package.test.mjs): a
// StateGraph over MessagesAnnotation with a scripted node, three turns on one thread of a
// SQLite file, then the thread read through the Store.
import { Store } from 'convo';
import { ConvoSaver } from 'convo/langgraph';
import { StateGraph, MessagesAnnotation, START, END } from '@langchain/langgraph';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';

function bot(messages: BaseMessage[]): AIMessage {
  const last = messages[messages.length - 1];
  return new AIMessage(`bot#${messages.length}: ${String(last?.content)}`);
}

async function main(): Promise<void> {
  const store = await Store.open('sqlite:graph.db');
  const checkpointer = new ConvoSaver(store);
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('bot', (state) => ({ messages: [bot(state.messages)] }))
    .addEdge(START, 'bot')
    .addEdge('bot', END)
    .compile({ checkpointer });
  const config = { configurable: { thread_id: 'chat' } };
  for (const text of ['hello', 'how are you', 'bye']) {
    const state = await graph.invoke({ messages: [{ role: 'user', content: text }] }, config);
    console.log(state.messages.length, String(state.messages.at(-1)?.content));
  }
  await store.saveExtra('chat', { title: 'demo' });
  const history = await store.load('chat');
  console.log(`log ${history.length}: ${history.messages.map((m) => m.role).join(',')}`);
  console.log(`extra ${JSON.stringify(history.extra)}`);
  await checkpointer.close(); // leaves the store it was given open
  await store.close();
}

void main();
