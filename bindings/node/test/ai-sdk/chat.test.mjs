// chat.test.mjs — convo/ai-sdk on every driver: a chat driven by the AI SDK's runtime
// (chat-script.mjs) saved with saveChat from onEnd, compared with the same script kept the
// naive way (the whole array, JSON round-tripped, as the SDK's file-based example does);
// across a restart; what each save wrote; concurrent saves; meta; listChats.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Store, ConflictError, InvalidError, NotFoundError, NotSupportedError } from 'convo';
import { loadChat, loadChatState, saveChat, saveChatMeta, loadChatMeta, listChats, previewOf } from 'convo/ai-sdk';
import { streamText, convertToModelMessages } from 'ai';
import { drivers, freshUrl } from '../support.mjs';
import { runScript, textReply, turn } from './chat-script.mjs';
import { MockLanguageModelV4 } from 'ai/test';

const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });
const bot = (id, text) => ({ id, role: 'assistant', parts: [{ type: 'text', text, state: 'done' }] });

async function withStore(base, fn) {
  const store = await Store.open(freshUrl(base));
  try {
    await fn(store);
  } finally {
    await store.close();
  }
}

async function naiveRun() {
  let stored = '[]';
  const chat = await runScript({ persist: async (messages) => { stored = JSON.stringify(messages); } });
  return { chat, stored: JSON.parse(stored) };
}

for (const [name, base] of drivers()) {
  describe(`convo/ai-sdk on ${name}`, () => {
    test('the scripted chat: loadChat equals the naive array after every turn and a restart', async () => {
      const naive = await naiveRun();
      const url = freshUrl(base);
      let store = await Store.open(url);
      const results = [];
      const gens = [];
      try {
        const chat = await runScript({
          persist: async (messages) => { results.push(await saveChat(store, { chatId: 'c1', messages })); },
          between: async (i, c) => {
            assert.deepEqual(await loadChat(store, 'c1'), JSON.parse(JSON.stringify(c)), `after step ${i}`);
            gens.push((await loadChatState(store, 'c1')).generation);
            if (name !== 'memory') { // a new process: a new Store on the same store
              await store.close();
              store = await Store.open(url);
            }
          },
        });
        assert.deepEqual(chat, naive.chat, 'the model saw the same history');
        const loaded = await loadChat(store, 'c1');
        assert.deepEqual(loaded, naive.stored);
        // the tool call answered by the client goes on in the same assistant message
        assert.equal(loaded.length, 8);
        assert.equal(loaded[3].role, 'assistant');
        assert.deepEqual(loaded[3].parts.map((p) => p.type), ['step-start', 'tool-confirm', 'step-start', 'text']);
        assert.equal(loaded[3].parts[1].state, 'output-available');
        // appends but for the continued turn: one message replaced, the generation up by one
        assert.deepEqual(results.map((r) => [r.appended, r.replaced]),
          [[2, 0], [2, 0], [0, 1], [2, 0], [2, 0]]);
        assert.deepEqual(gens.map((g) => g - gens[0]), [0, 0, 1, 1, 1]);
        // one role-tagged message per UIMessage, role first
        const log = await store.load('c1');
        assert.deepEqual(log.messages.map((m) => m.role), loaded.map((m) => m.role));
        for (const m of log.messages) assert.ok(m.json.startsWith(`{"role":"${m.role}","id":"`), m.json);
        // saving the same chat again writes nothing
        const again = await saveChat(store, { chatId: 'c1', messages: chat });
        assert.deepEqual([again.appended, again.replaced, again.length], [0, 0, 8]);
        assert.equal((await store.load('c1')).generation, gens.at(-1));
      } finally {
        await store.close();
      }
    });

    test('the "send only the last message" route: loadChat + the new message, saved from onEnd', () => withStore(base, async (store) => {
      const model = new MockLanguageModelV4({ doStream: [textReply('one'), textReply('two')] });
      let n = 0;
      const ids = () => `a${++n}`;
      for (const [id, text] of [['u1', 'first'], ['u2', 'second']]) {
        const previous = await loadChat(store, 'c2');
        await turn(model, [...previous, user(id, text)], (messages) => saveChat(store, { chatId: 'c2', messages }), ids);
      }
      const chat = await loadChat(store, 'c2');
      assert.deepEqual(chat.map((m) => m.id), ['u1', 'a1', 'u2', 'a2']);
      assert.deepEqual(chat.map((m) => previewOf(m)), ['first', 'one', 'second', 'two']);
      // the deprecated form: result.toUIMessageStreamResponse({ originalMessages, onFinish })
      const messages = [...chat, user('u3', 'third')];
      const result = streamText({ model: new MockLanguageModelV4({ doStream: [textReply('three')] }),
        messages: await convertToModelMessages(messages) });
      let saved = null;
      const response = result.toUIMessageStreamResponse({ originalMessages: messages, generateMessageId: () => 'a3',
        onFinish: async ({ messages: all }) => { saved = await saveChat(store, { chatId: 'c2', messages: all }); } });
      await response.text();
      assert.deepEqual([saved.appended, saved.length], [2, 6]);
      assert.deepEqual((await loadChat(store, 'c2')).map((m) => previewOf(m)), ['first', 'one', 'second', 'two', 'third', 'three']);
    }));

    test('a save that would drop another save\'s messages is a ConflictError; nothing lost', () => withStore(base, async (store) => {
      const base2 = [user('u1', 'hi'), bot('a1', 'hello')];
      await saveChat(store, { chatId: 'c', messages: base2 });
      // two requests from the same stored chat: one saves first
      await saveChat(store, { chatId: 'c', messages: [...base2, user('u2', 'tab A'), bot('a2', 'A')] });
      await assert.rejects(saveChat(store, { chatId: 'c', messages: [...base2, user('u3', 'tab B'), bot('a3', 'B')] }),
        (e) => e instanceof ConflictError && /"u2", "a2"/.test(e.message) && e.length === 4);
      assert.deepEqual((await loadChat(store, 'c')).map((m) => m.id), ['u1', 'a1', 'u2', 'a2']);
      // another request's answer under the same id as the stored one (its user message
      // differs): not taken for a continued turn
      await assert.rejects(saveChat(store, { chatId: 'c', messages: [...base2, user('u3', 'tab B'), bot('a2', 'B')] }),
        (e) => e instanceof ConflictError && /"u2"/.test(e.message));
      // a stale save of an older, shorter array too
      await assert.rejects(saveChat(store, { chatId: 'c', messages: base2 }), ConflictError);
      // both at once: one wins, the other re-reads and fails, or both append in turn when
      // one is a prefix of the other
      const longer = [...(await loadChat(store, 'c')), user('u4', 'x'), bot('a4', 'y')];
      const outcome = await Promise.allSettled([
        saveChat(store, { chatId: 'c', messages: [...longer.slice(0, 4), user('u5', 'z')] }),
        saveChat(store, { chatId: 'c', messages: longer }),
      ]);
      const ok = outcome.filter((o) => o.status === 'fulfilled').length;
      assert.equal(ok, 1, JSON.stringify(outcome.map((o) => o.reason?.message)));
      for (const o of outcome) if (o.status === 'rejected') assert.ok(o.reason instanceof ConflictError, o.reason);
      const ids = (await loadChat(store, 'c')).map((m) => m.id);
      assert.ok(ids.join() === 'u1,a1,u2,a2,u4,a4' || ids.join() === 'u1,a1,u2,a2,u5', ids.join());
      // the same array saved twice at once: stored once
      const same = [...(await loadChat(store, 'c')), user('u6', 'again')];
      await Promise.all([saveChat(store, { chatId: 'c', messages: same }), saveChat(store, { chatId: 'c', messages: same })]);
      assert.deepEqual(await loadChat(store, 'c'), same);
    }));

    test('a conflict that is no race (a checkpoint past the messages kept) is thrown, not retried', () => withStore(base, async (store) => {
      await saveChat(store, { chatId: 'k', messages: [user('u1', 'hi'), bot('a1', 'hello')] });
      await store.checkpointPut({ threadId: 'k', id: 'cp1', logLength: 2 });
      await assert.rejects(saveChat(store, { chatId: 'k', messages: [user('u1', 'hi'), bot('a1', 'hello again')] }),
        (e) => e instanceof ConflictError && !/attempts/.test(e.message));
      assert.deepEqual(await loadChat(store, 'k'), [user('u1', 'hi'), bot('a1', 'hello')]);
    }));

    test('regenerate: dropping the last answer takes the state the array came from', () => withStore(base, async (store) => {
      await saveChat(store, { chatId: 'r', messages: [user('u1', 'hi'), bot('a1', 'hello')] });
      const state = await loadChatState(store, 'r');
      const regenerated = [...state.messages.slice(0, 1), bot('a1b', 'hi!')];
      await assert.rejects(saveChat(store, { chatId: 'r', messages: regenerated }), /"a1"/);
      const r = await saveChat(store, { chatId: 'r', messages: regenerated,
        expectedLength: state.length, expectedGeneration: state.generation });
      assert.deepEqual([r.appended, r.replaced, r.length, r.generation], [0, 1, 2, state.generation + 1]);
      assert.deepEqual(await loadChat(store, 'r'), regenerated);
      // a second use of the same (now old) state is a conflict, nothing written
      await assert.rejects(saveChat(store, { chatId: 'r', messages: state.messages,
        expectedLength: state.length, expectedGeneration: state.generation }),
      (e) => e instanceof ConflictError && e.generation === state.generation + 1);
      assert.deepEqual(await loadChat(store, 'r'), regenerated);
      // an edit of the first message (same id, other text) rewrites from it, kept ids or not
      const edited = [user('u1', 'hey'), bot('a2', 'hey yourself')];
      await assert.rejects(saveChat(store, { chatId: 'r', messages: edited }), ConflictError);
      const st = await loadChatState(store, 'r');
      const e = await saveChat(store, { chatId: 'r', messages: edited, expectedLength: st.length });
      assert.deepEqual([e.replaced, e.length], [2, 2]);
      assert.deepEqual(await loadChat(store, 'r'), edited);
    }));

    test('title and activeStreamId in the extra; listChats: a user\'s chats newest first', () => withStore(base, async (store) => {
      assert.deepEqual(await loadChatMeta(store, 'none'), { title: null, activeStreamId: null });
      for (const [id, who, text] of [['k1', 'ann', 'first chat'], ['k2', 'bob', 'bob chat'], ['k3', 'ann', 'second chat']]) {
        await saveChat(store, { chatId: id, messages: [user(`${id}u`, text), bot(`${id}a`, `re: ${text}`)],
          meta: { userId: who, title: `${who}: ${text}` } });
        await new Promise((r) => setTimeout(r, 3)); // distinct update times
      }
      await saveChatMeta(store, 'k1', { activeStreamId: 'stream-9' });
      assert.deepEqual(await loadChatMeta(store, 'k1'),
        { userId: 'ann', title: 'ann: first chat', activeStreamId: 'stream-9' });
      await saveChatMeta(store, 'k1', { activeStreamId: null });
      assert.equal((await loadChatMeta(store, 'k1')).activeStreamId, null);
      // a driver without a thread index yet (mongo, as of this test) says so
      const indexed = await store.listThreads({ limit: 1 }).then(() => true, (e) => {
        if (e instanceof NotSupportedError) return false;
        throw e;
      });
      if (!indexed) {
        await assert.rejects(listChats(store, { where: { userId: 'ann' } }), NotSupportedError);
        return;
      }
      // k1 was written last (its meta): newest first
      const page = await listChats(store, { where: { userId: 'ann' } });
      assert.deepEqual(page.chats.map((c) => [c.chatId, c.title, c.preview, c.length]),
        [['k1', 'ann: first chat', 're: first chat', 2], ['k3', 'ann: second chat', 're: second chat', 2]]);
      assert.deepEqual(page.chats[0].lastMessage, bot('k1a', 're: first chat'));
      assert.equal(page.next, null);
      const one = await listChats(store, { where: { userId: 'ann' }, limit: 1 });
      assert.deepEqual(one.chats.map((c) => c.chatId), ['k1']);
      const two = await listChats(store, { where: { userId: 'ann' }, limit: 1, after: one.next });
      assert.deepEqual(two.chats.map((c) => c.chatId), ['k3']);
      assert.deepEqual((await listChats(store, { order: 'id' })).chats.map((c) => c.chatId), ['k1', 'k2', 'k3']);
      await assert.rejects(listChats(store, { withExtra: false }), InvalidError);
    }));

    test('messages of other writers (plain role-tagged JSON) read as UIMessages', () => withStore(base, async (store) => {
      await store.append('p', [{ role: 'user', content: 'typed in the CLI' }, { role: 'assistant', content: { a: 1 }, id: 'x' }]);
      const chat = await loadChat(store, 'p');
      assert.deepEqual(chat, [{ id: 'seq-0', role: 'user', parts: [{ type: 'text', text: 'typed in the CLI' }] },
        { id: 'x', role: 'assistant', parts: [{ type: 'text', text: '{"a":1}' }] }]);
      // and the chat goes on from them: the model reads them, the answer is appended
      const model = new MockLanguageModelV4({ doStream: [textReply('ok')] });
      const r = streamText({ model, messages: await convertToModelMessages([...chat, user('u9', 'more')]) });
      assert.equal(await r.text, 'ok');
      const s = await saveChat(store, { chatId: 'p', messages: [...chat, user('u9', 'more')] });
      assert.deepEqual([s.appended, s.length], [1, 3]);
    }));

    test('arguments are checked before anything is written', () => withStore(base, async (store) => {
      await assert.rejects(loadChat({}, 'x'), InvalidError);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: 'no' }), InvalidError);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [{ role: 'user', parts: [] }] }), /messages\[0\]\.id/);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [{ id: 'a', parts: [] }] }), /messages\[0\]\.role/);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [user('u', 'a'), { ...bot('', 'b') }] }),
        /messages\[1\]\.id must be a non-empty string \(give toUIMessageStream a generateMessageId\)/);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [], chatid: 'y' }), /unknown option "chatid"/);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [], meta: { title: 3 } }), /meta\.title/);
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [], expectedLength: -1 }), InvalidError);
      await assert.rejects(saveChatMeta(store, 'x', { activeStreamId: 5 }), InvalidError);
      // a lone surrogate (half an emoji) has no JSON the library takes: refused, as documented
      await assert.rejects(saveChat(store, { chatId: 'x', messages: [user('u', 'cut \ud83d')] }), InvalidError);
      await assert.rejects(store.load('x'), NotFoundError);
    }));
  });
}

test('the scripted model is deterministic (the naive run twice gives the same chat)', async () => {
  const a = await naiveRun();
  const b = await naiveRun();
  assert.deepEqual(a.stored, b.stored);
});
