// history.ts — a user's LangChain.js program on ConvoChatMessageHistory (test/package.test.mjs),
// in a project with @langchain/core alone: RunnableWithMessageHistory over a fake chat model,
// three turns of one session in a SQLite file, then the session read back and listed.
import { Store } from 'convo';
import { ConvoChatMessageHistory } from 'convo/langchain';
import { RunnableWithMessageHistory } from '@langchain/core/runnables';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import type { BaseMessage } from '@langchain/core/messages';

async function main(): Promise<void> {
  const store = await Store.open('sqlite:history.db');
  const histories = new Map<string, ConvoChatMessageHistory>();
  const chain = new RunnableWithMessageHistory({
    runnable: new FakeListChatModel({ responses: ['hello', 'fine', 'bye'] }),
    getMessageHistory: (sessionId: string) => {
      let h = histories.get(sessionId);
      if (!h) histories.set(sessionId, (h = new ConvoChatMessageHistory({ store, sessionId })));
      return h;
    },
  });
  for (const text of ['hi', 'how are you', 'see you']) {
    const answer = await chain.invoke(text, { configurable: { sessionId: 'chat' } });
    console.log(String(answer.content));
  }
  const history = histories.get('chat')!;
  await history.saveExtra({ userId: 'u1' });
  // a history given a URL opens its own store, and closes it
  const again = new ConvoChatMessageHistory({ url: 'sqlite:history.db', sessionId: 'chat' });
  const messages: BaseMessage[] = await again.getMessages();
  console.log(`log ${messages.length}: ${messages.map((m) => m.getType()).join(',')}`);
  console.log(`extra ${JSON.stringify(await again.getExtra())}`);
  await again.close();
  await history.close(); // leaves the store it was given open
  await store.close();
}

void main();
