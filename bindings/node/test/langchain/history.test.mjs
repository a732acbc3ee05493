// ConvoChatMessageHistory (convo/langchain) through LangChain's own runtime
// (RunnableWithMessageHistory, fake chat models): the history after every turn equal to the
// same script on InMemoryChatMessageHistory, across a restart (a new Store on the same
// URL); getMessages reading only what is new (store.loadLog spied on), a tail rewritten by
// another writer noticed, addMessages one atomic append, clear keeping the extra, and
// every message kind restored as the same class with the same fields. On every driver.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryChatMessageHistory } from '@langchain/core/chat_history';
import {
  AIMessage, AIMessageChunk, ChatMessage, FunctionMessage, HumanMessage, HumanMessageChunk, RemoveMessage,
  SystemMessage, ToolMessage, ToolMessageChunk,
} from '@langchain/core/messages';
import { Store, InvalidError, TooLargeError } from 'convo';
import { ConvoChatMessageHistory } from 'convo/langchain';
import { chain, runTurns } from './history-script.mjs';
import { drivers, freshUrl } from '../support.mjs';

// The messages as LangChain would compare them: class and every field.
function shape(messages) {
  return messages.map((m) => ({ cls: m.constructor.name, ...m }));
}

// The same, but for the ids the runtime gives the model's answers (run-<uuid>: a new one
// in each run), for comparing two runs of the script.
function runShape(messages) {
  return messages.map((m) => ({ cls: m.constructor.name,
    ...JSON.parse(JSON.stringify(m).replace(/"run-[0-9a-f-]{36}"/g, '"run-*"')) }));
}

// Counts what the history reads (store.loadLog): [{ fromSeq, rows }] per call.
function spyLoads(store) {
  const calls = [];
  const loadLog = store.loadLog.bind(store);
  store.loadLog = async (thread, opts) => {
    const log = await loadLog(thread, opts);
    calls.push({ fromSeq: opts?.fromSeq ?? 0, rows: log.texts.length });
    return log;
  };
  return calls;
}

for (const [name, base] of drivers()) {
  const persistent = name !== 'memory';

  test(`${name}: RunnableWithMessageHistory keeps the same history as InMemoryChatMessageHistory` +
      `${persistent ? ', across a restart' : ''}`, async () => {
    const url = freshUrl(base);
    const sessions = ['alice', 'bob'];
    const memory = new Map(sessions.map((s) => [s, new InMemoryChatMessageHistory()]));
    const ref = { model: null };
    const refChain = chain((s) => memory.get(s), ref);
    const added = new Map(sessions.map((s) => [s, []]));

    // One history per session and process, as an app keeps them (see docs/frameworks.md).
    // (memory: cannot outlive its Store: there a restart is new histories on the same one)
    const open = async (kept) => {
      const store = kept ?? await Store.open(url);
      const histories = new Map();
      const get = (s) => {
        if (!histories.has(s)) {
          const h = new ConvoChatMessageHistory({ store, sessionId: s });
          const addMessages = h.addMessages.bind(h);
          h.addMessages = (ms) => { added.get(s).push(...ms); return addMessages(ms); };
          histories.set(s, h);
        }
        return histories.get(s);
      };
      return { store, get };
    };
    const cur = { model: null };
    let proc = await open();
    const check = async (s) => {
      assert.deepEqual(runShape(await proc.get(s).getMessages()), runShape(await memory.get(s).getMessages()));
    };
    for (const [from, to] of [[0, 12], [12, 25]]) {
      const convoChain = chain(proc.get, cur);
      for (let i = from; i < to; i++) {
        for (const s of sessions) {
          await runTurns(refChain, ref, s, i, i + 1);
          await runTurns(convoChain, cur, s, i, i + 1, () => check(s));
        }
      }
      // the restart: everything read again by a new Store on the same URL
      if (persistent) await proc.store.close();
      proc = await open(persistent ? undefined : proc.store);
    }
    for (const s of sessions) {
      const fresh = new ConvoChatMessageHistory({ url: persistent ? url : 'memory:', sessionId: s });
      if (persistent) {
        // restored exactly: the messages handed to addMessages, class by class, field by field
        const back = await fresh.getMessages();
        assert.equal(back.length, 25 * 2);
        assert.deepEqual(shape(back), shape(added.get(s)));
        back.forEach((m, i) => assert.equal(m.constructor, added.get(s)[i].constructor));
      }
      await fresh.close();
    }
    // what `convo load` shows: each message role-tagged, with its text
    const log = await proc.store.load('alice');
    const roles = log.messages.map((m) => JSON.parse(m.json).role);
    assert.deepEqual(roles.slice(0, 6), ['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
    assert.equal(JSON.parse(log.messages[1].json).content, 'alice: answer 0');
    await proc.store.close();
  });

  // Another writer: a second Store on the same URL, as another process has (memory:
  // cannot be shared: there, histories on the same Store, which share what they read).
  const second = async (url, store) => (persistent ? Store.open(url) : store);

  test(`${name}: getMessages reads only the messages past those it has read`, async () => {
    const url = freshUrl(base);
    const store = await Store.open(url);
    const loads = spyLoads(store);
    const cur = { model: null };
    // a new history per turn, as LangChain's examples make them: those of one Store share
    // what they have read
    const c = chain((sessionId) => new ConvoChatMessageHistory({ store, sessionId }), cur);
    await runTurns(c, cur, 's', 0, 60, async (i) => {
      // each read of a turn: the last message already read and what is new (2 a turn)
      for (const l of loads) assert.ok(l.rows <= 3, `a read of turn ${i} loaded ${l.rows} rows`);
      loads.length = 0;
    });
    const h = new ConvoChatMessageHistory({ store, sessionId: 's' });
    const messages = await h.getMessages();
    assert.equal(messages.length, 120);
    assert.deepEqual(loads, [{ fromSeq: 119, rows: 1 }]);
    // another writer's append: read from where this process stopped
    loads.length = 0;
    await store.append('s', [{ role: 'user', content: 'from elsewhere' }, { role: 'assistant', content: 'noted' }]);
    await h.addMessages([new HumanMessage('mine')]);
    assert.deepEqual(loads, [], 'an append reads nothing');
    const after = await h.getMessages();
    assert.deepEqual(loads, [{ fromSeq: 119, rows: 4 }]);
    assert.deepEqual(after.slice(-3).map((m) => m.content), ['from elsewhere', 'noted', 'mine']);
    // what a process that never read the session reads
    const fresh = await second(url, store);
    assert.deepEqual(shape(after), shape(await new ConvoChatMessageHistory({ store: fresh, sessionId: 's' })
      .getMessages()));
    if (fresh !== store) await fresh.close();
    await store.close();
  });

  test(`${name}: the histories of a Store remember at most 64 sessions`, async () => {
    const store = await Store.open(freshUrl(base));
    for (let i = 0; i < 66; i++) {
      const h = new ConvoChatMessageHistory({ store, sessionId: `s${i}` });
      await h.addMessages([new HumanMessage(`q${i}`), new AIMessage(`a${i}`)]);
      await h.getMessages();
    }
    const loads = spyLoads(store);
    await new ConvoChatMessageHistory({ store, sessionId: 's65' }).getMessages();
    await new ConvoChatMessageHistory({ store, sessionId: 's2' }).getMessages();
    await new ConvoChatMessageHistory({ store, sessionId: 's0' }).getMessages();
    assert.deepEqual(loads, [{ fromSeq: 1, rows: 1 }, { fromSeq: 1, rows: 1 }, { fromSeq: 0, rows: 2 }],
      's0 and s1 forgotten, s2 remembered');
    await store.close();
  });

  if (name === 'memory') {
    test('memory: the histories of a Store remember at most 100,000 messages', async () => {
      const store = await Store.open('memory:');
      const fill = async (id, n) => {
        for (let i = 0; i < n; i += 10000) {
          await store.append(id, Array.from({ length: 10000 }, () => '{"role":"user","content":"x"}'));
        }
      };
      await fill('a', 60000);
      await fill('b', 50000);
      assert.equal((await new ConvoChatMessageHistory({ store, sessionId: 'a' }).getMessages()).length, 60000);
      assert.equal((await new ConvoChatMessageHistory({ store, sessionId: 'b' }).getMessages()).length, 50000);
      const loads = spyLoads(store);
      await new ConvoChatMessageHistory({ store, sessionId: 'b' }).getMessages(); // 110,000: a forgotten
      await new ConvoChatMessageHistory({ store, sessionId: 'a' }).getMessages();
      assert.deepEqual(loads, [{ fromSeq: 49999, rows: 1 }, { fromSeq: 0, rows: 60000 }]);
      await store.close();
    });
  }

  test(`${name}: a tail rewritten by another writer is noticed and read again`, async () => {
    const url = freshUrl(base);
    const store = await Store.open(url);
    const h = new ConvoChatMessageHistory({ store, sessionId: 's' });
    const ms = [0, 1, 2, 3, 4, 5].map((i) => (i % 2 ? new AIMessage(`a${i}`) : new HumanMessage(`h${i}`)));
    await h.addMessages(ms);
    assert.equal((await h.getMessages()).length, 6);
    // message 4 replaced, the last one the same text at the same length: only the
    // generation tells
    const tail = (await store.load('s', { fromSeq: 5 })).messages[0].json;
    const loads = spyLoads(store);
    await store.replaceTail('s', { keep: 4, messages: [JSON.stringify({ role: 'user', content: 'changed' }), tail] });
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['h0', 'a1', 'h2', 'a3', 'changed', 'a5']);
    assert.deepEqual(loads.map((l) => l.fromSeq), [5, 0], 'one read past the last, then the whole thread');
    // a rewrite to fewer messages by another process's history (clear) and new ones after it
    const store2 = await second(url, store);
    const other = new ConvoChatMessageHistory({ store: store2, sessionId: 's' });
    await other.clear();
    await other.addMessages([new HumanMessage('new start')]);
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['new start']);
    // the thread deleted, then written again with more messages than h has read
    await h.addMessages([new AIMessage('x')]);
    await store.delete('s');
    assert.deepEqual(await h.getMessages(), []);
    await store.append('s', ['p', 'q', 'r'].map((c) => ({ role: 'user', content: c })));
    await other.getMessages();
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['p', 'q', 'r']);
    // a thread deleted and written again to as many messages (generation 0 again): the
    // text at the last seq read tells
    await store.delete('s');
    await store.append('s', ['p', 'q', 'R'].map((c) => ({ role: 'user', content: c })));
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['p', 'q', 'R']);
    // ... unless that text is the same too
    await store.delete('s');
    await store.append('s', ['P', 'Q', 'R'].map((c) => ({ role: 'user', content: c })));
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['p', 'q', 'R'],
      'the same length, generation and last message: nothing to notice (documented)');
    if (store2 !== store) await store2.close();
    await store.close();
  });

  test(`${name}: two processes' histories appending to one session at once`, async () => {
    const url = freshUrl(base);
    const store = await Store.open(url);
    const store2 = await second(url, store);
    const a = new ConvoChatMessageHistory({ store, sessionId: 's' });
    const b = new ConvoChatMessageHistory({ store: store2, sessionId: 's' });
    const batch = (who, i) => [new HumanMessage(`${who}${i} q`), new AIMessage(`${who}${i} a`)];
    await Promise.all([a, b].map(async (h, k) => {
      for (let i = 0; i < 15; i++) {
        await h.addMessages(batch('ab'[k], i));
        if (i % 4 === 0) await h.getMessages();
      }
    }));
    const all = (await store.load('s')).messages.map((m) => JSON.parse(m.json).content);
    assert.equal(all.length, 60);
    for (let i = 0; i < 60; i += 2) assert.equal(all[i + 1], all[i].replace(/ q$/, ' a'), 'a batch is never split');
    assert.deepEqual((await a.getMessages()).map((m) => m.content), all);
    assert.deepEqual((await b.getMessages()).map((m) => m.content), all);
    if (store2 !== store) await store2.close();
    await store.close();
  });

  test(`${name}: addMessages is one atomic append`, async () => {
    const store = await Store.open(freshUrl(base));
    let appends = 0;
    const append = store.append.bind(store);
    store.append = (...args) => { appends++; return append(...args); };
    const h = new ConvoChatMessageHistory({ store, sessionId: 's' });
    await h.addMessages([new HumanMessage('q'), new AIMessage('a'), new HumanMessage('q2')]);
    assert.equal(appends, 1);
    await h.addMessages([]);
    await h.addUserMessage('u');
    await h.addAIMessage('v');
    assert.equal(appends, 3);
    // a batch the store refuses (a message over its 1 MiB limit) stores nothing
    await assert.rejects(h.addMessages([new HumanMessage('kept out'), new AIMessage('x'.repeat(1 << 20))]),
      TooLargeError);
    await assert.rejects(h.addMessages([new HumanMessage('kept out'), { role: 'user', content: 'plain' }]),
      InvalidError);
    await assert.rejects(h.addMessages(new HumanMessage('not an array')), InvalidError);
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['q', 'a', 'q2', 'u', 'v']);
    assert.equal((await store.load('s')).length, 5);
    await store.close();
  });

  test(`${name}: clear keeps the session's extra and creation, and others see it empty`, async () => {
    const url = freshUrl(base);
    const store = await Store.open(url);
    const store2 = await second(url, store);
    const h = new ConvoChatMessageHistory({ store, sessionId: 's' });
    const other = new ConvoChatMessageHistory({ store: store2, sessionId: 's' });
    await h.clear(); // an unknown session: nothing written
    await assert.rejects(store.load('s'), (e) => e.constructor.name === 'NotFoundError');
    await h.addMessages([new HumanMessage('q'), new AIMessage('a')]);
    await h.saveExtra({ userId: 'u1', title: 'Parrots' });
    assert.equal((await other.getMessages()).length, 2);
    const before = (await store.load('s')).generation;
    await h.clear();
    assert.deepEqual(await h.getMessages(), []);
    assert.deepEqual(await other.getMessages(), []);
    const after = await store.load('s');
    assert.equal(after.generation, before + 1);
    assert.deepEqual(after.extra, { userId: 'u1', title: 'Parrots' });
    assert.deepEqual(await other.getExtra(), { userId: 'u1', title: 'Parrots' });
    await other.addMessages([new HumanMessage('again')]);
    assert.deepEqual((await h.getMessages()).map((m) => m.content), ['again']);
    assert.deepEqual(await new ConvoChatMessageHistory({ store, sessionId: 'none' }).getExtra(), {});
    if (store2 !== store) await store2.close();
    await store.close();
  });

  test(`${name}: list a user's sessions by extra, most recently active first`, async () => {
    const store = await Store.open(freshUrl(base));
    const say = async (sessionId, text, extra) => {
      const h = new ConvoChatMessageHistory({ store, sessionId });
      if (extra) await h.saveExtra(extra);
      if (text) await h.addMessages([new HumanMessage(text), new AIMessage({ content: `re: ${text}`, id: `a-${text}` })]);
    };
    await say('c1', 'first', { userId: 'u1', title: 'One' });
    await say('c2', 'second', { userId: 'u2' });
    await say('c3', 'third', { userId: 'u1', title: 'Three' });
    await say('c4', null, { userId: 'u1', title: 'Empty' });
    await say('c1', 'later'); // c1 is now the most recent
    const page = await ConvoChatMessageHistory.list(store, { where: { userId: 'u1' } });
    assert.deepEqual(page.sessions.map((s) => [s.sessionId, s.extra.title, s.length]),
      [['c1', 'One', 4], ['c4', 'Empty', 0], ['c3', 'Three', 2]]);
    assert.equal(page.next, null);
    assert.ok(page.sessions.every((s) => s.updatedAt >= s.createdAt && typeof s.cursor === 'string'));
    // pages, the last message as a LangChain message, other orders
    const first = await ConvoChatMessageHistory.list(store, { where: { userId: 'u1' }, limit: 2, withLastMessage: true });
    assert.deepEqual(first.sessions.map((s) => s.sessionId), ['c1', 'c4']);
    assert.deepEqual(shape([first.sessions[0].lastMessage]), shape([new AIMessage({ content: 're: later', id: 'a-later' })]));
    assert.equal(first.sessions[1].lastMessage, null);
    const rest = await ConvoChatMessageHistory.list(store, { where: { userId: 'u1' }, limit: 2, after: first.next });
    assert.deepEqual(rest.sessions.map((s) => s.sessionId), ['c3']);
    assert.deepEqual((await ConvoChatMessageHistory.list(store, { order: 'id', withExtra: false })).sessions
      .map((s) => [s.sessionId, s.extra]), [['c1', undefined], ['c2', undefined], ['c3', undefined], ['c4', undefined]]);
    // clear keeps a session in the list, with its extra
    await new ConvoChatMessageHistory({ store, sessionId: 'c3' }).clear();
    assert.deepEqual((await ConvoChatMessageHistory.list(store, { where: { userId: 'u1' } })).sessions
      .map((s) => [s.sessionId, s.extra.title, s.length]), [['c3', 'Three', 0], ['c1', 'One', 4], ['c4', 'Empty', 0]]);
    await assert.rejects(ConvoChatMessageHistory.list(store, { limit: 0 }), InvalidError);
    await assert.rejects(ConvoChatMessageHistory.list(store, { userId: 'u1' }), InvalidError);
    await assert.rejects(ConvoChatMessageHistory.list('memory:'), InvalidError);
    await store.close();
  });

  test(`${name}: every message kind comes back as the same class with the same fields`, async () => {
    const url = freshUrl(base);
    const store = await Store.open(url);
    const messages = [
      new SystemMessage({ content: 'You are terse.', id: 'sys' }),
      new HumanMessage({ content: 'hi', id: 'h1', name: 'ann', additional_kwargs: { lang: 'en' } }),
      new HumanMessage({ content: [{ type: 'text', text: 'look' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }),
      new AIMessage({
        content: '', id: 'a1', tool_calls: [{ id: 'c1', name: 'search', args: { q: 'parrots', n: 2 }, type: 'tool_call' }],
        invalid_tool_calls: [{ id: 'c2', name: 'bad', args: '{oops', error: 'not JSON', type: 'invalid_tool_call' }],
        response_metadata: { model_name: 'fake', finish_reason: 'tool_calls' },
        usage_metadata: { input_tokens: 10, output_tokens: 3, total_tokens: 13 },
        additional_kwargs: { refusal: null },
      }),
      new ToolMessage({ content: '[1,2]', tool_call_id: 'c1', name: 'search', id: 't1', artifact: { rows: [1, 2] },
        status: 'success' }),
      new ToolMessage({ content: 'failed', tool_call_id: 'c2', status: 'error' }),
      new AIMessage({ content: 'A long enough answer to be stored once: '.repeat(3), id: 'a2' }),
      new AIMessageChunk({ content: 'partial', id: 'k1' }),
      new ChatMessage({ content: 'a note', role: 'critic' }),
      new HumanMessage('quotes " \\ and 🦜 and \u2028'),
      new ToolMessageChunk({ content: 'part', tool_call_id: 'c1' }),
      new HumanMessageChunk({ content: 'typing' }),
      new FunctionMessage({ content: '{}', name: 'legacy' }),
      new RemoveMessage({ id: 'h1' }),
      // revived by load(): a LangChain object inside, a dict of the caller's with an "lc" key
      new AIMessage({ content: 'quoting', additional_kwargs: { quoted: new HumanMessage('inner') } }),
      new AIMessage({ content: 'odd keys', additional_kwargs: { lc: 1, type: 'constructor', id: ['x'] } }),
      // the content's first copy in the value is not kwargs.content: cut out there instead
      new ToolMessage({ tool_call_id: 'c3', artifact: { content: 'a content cut out elsewhere' },
        content: 'a content cut out elsewhere' }),
    ];
    const h = new ConvoChatMessageHistory({ store, sessionId: 'kinds' });
    await h.addMessages(messages);
    const cut = JSON.parse((await store.load('kinds', { tail: 1 })).messages[0].json);
    assert.deepEqual([cut.serde, cut.value.kwargs.artifact.content], ['json/c', 0]);
    if (persistent) await store.close();
    const back = persistent ? new ConvoChatMessageHistory({ url, sessionId: 'kinds' }) :
      new ConvoChatMessageHistory({ store, sessionId: 'kinds' });
    const restored = await back.getMessages();
    assert.deepEqual(shape(restored), shape(messages));
    restored.forEach((m, i) => assert.equal(m.constructor, messages[i].constructor, `message ${i}`));
    await back.close();
    await store.close();
  });

  test(`${name}: messages stored by another writer as plain role-tagged JSON`, async () => {
    const store = await Store.open(freshUrl(base));
    await store.append('plain', [
      { role: 'system', content: 'sys' }, { role: 'user', content: 'q', id: 'u1' },
      { role: 'assistant', content: 'a', name: 'bot' }, { role: 'tool', content: '1', tool_call_id: 'c' },
      { role: 'critic', content: { score: 3 } }, { role: 'user' },
      // a message the LangGraph saver wrote with a serializer this module does not have
      { role: 'user', content: 'bin', serde: 'msgpack', base64: 'AAAA' },
    ]);
    const got = await new ConvoChatMessageHistory({ store, sessionId: 'plain' }).getMessages();
    assert.deepEqual(shape(got), shape([
      new SystemMessage('sys'), new HumanMessage({ content: 'q', id: 'u1' }), new AIMessage({ content: 'a', name: 'bot' }),
      new ToolMessage({ content: '1', tool_call_id: 'c' }), new ChatMessage({ content: '{"score":3}', role: 'critic' }),
      new HumanMessage(''), new HumanMessage('bin'),
    ]));
    await store.close();
  });

  test(`${name}: options, store ownership and close`, async () => {
    const url = persistent ? freshUrl(base) : 'memory:';
    const store = await Store.open(url);
    assert.throws(() => new ConvoChatMessageHistory({ sessionId: 's' }), InvalidError);
    assert.throws(() => new ConvoChatMessageHistory({ url, store, sessionId: 's' }), InvalidError);
    assert.throws(() => new ConvoChatMessageHistory({ store, sessionId: 7 }), /sessionId must be a string/);
    assert.throws(() => new ConvoChatMessageHistory({ store: {}, sessionId: 's' }), /convo Store/);
    assert.throws(() => new ConvoChatMessageHistory('s'), InvalidError);
    // given a Store: left open
    const lent = new ConvoChatMessageHistory({ store, sessionId: 's' });
    await lent.addMessage(new HumanMessage('q'));
    await lent.close();
    await lent.close();
    await assert.rejects(lent.getMessages(), /closed/);
    assert.equal((await store.load('s')).length, 1);
    // given a URL: its own Store, closed by close() (after the calls under way)
    const own = new ConvoChatMessageHistory({ url, sessionId: 's' });
    const pending = own.addMessage(new AIMessage('a'));
    const opened = await own.store();
    assert.notEqual(opened, store);
    await own.close();
    await pending;
    await assert.rejects(opened.load('s'), /closed/);
    await assert.rejects(own.addMessage(new AIMessage('b')), /closed/);
    if (persistent) assert.equal((await store.load('s')).length, 2);
    // a URL that does not open: the first call says why
    const bad = new ConvoChatMessageHistory({ url: 'nosuch://x', sessionId: 's' });
    await assert.rejects(bad.getMessages(), InvalidError);
    await bad.close();
    await store.close();
  });
}
