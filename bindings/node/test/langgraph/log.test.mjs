// log.test.mjs — the items of a message channel read back from their log messages equal
// what the saver's serde gives for them, on the fast path (one LangChain object with
// nothing else inside: loaded from the value's own text) and on the general one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import {
  HumanMessage, AIMessage, ToolMessage, SystemMessage, ChatMessage, RemoveMessage,
} from '@langchain/core/messages';
import { toLogMessage, fromLogMessages, plainLangChainValue } from '../../src/langgraph/log.js';

const serde = new JsonPlusSerializer();

// What the serde itself gives back for an item (its own round trip, no log).
async function bySerde(item) {
  const [type, bytes] = await serde.dumpsTyped(item);
  return serde.loadsTyped(type, bytes);
}

const tricky = 'quotes " and \\ and ,"serde":"json","value":{"lc":1} and é ✓ \u2028';
const items = [
  new HumanMessage({ id: 'h1', content: 'hi' }),
  new HumanMessage({ id: 'h2', content: tricky }),
  new HumanMessage({ id: 'h3', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'x' } }] }),
  new HumanMessage({ id: 'h4', content: [{ type: 'text', text: tricky, lc: 1 }] }), // user data with an lc key
  new AIMessage({ id: 'a1', content: '', tool_calls: [{ id: 'c1', name: 'f', args: { q: tricky }, type: 'tool_call' }],
    usage_metadata: { input_tokens: 1, output_tokens: 2, total_tokens: 3 }, response_metadata: { model: 'm' } }),
  new AIMessage({ id: 'a2', content: 'bytes', additional_kwargs: { raw: new Uint8Array([1, 2, 3]) } }), // LangChain's toJSON makes it an object
  new AIMessage({ id: 'a3', content: 'set', additional_kwargs: { s: new Set([1, 2]), u: undefined } }), // lc:2 inside
  new ToolMessage({ id: 't1', content: 'found', tool_call_id: 'c1', artifact: { rows: [1, 2] }, name: 'f' }),
  new SystemMessage({ id: 's1', content: 'be brief' }),
  new ChatMessage({ id: 'g1', content: 'generic', role: 'critic' }),
  new RemoveMessage({ id: 'h1' }),
  'a plain string', 42, null, { role: 'user', content: 'a dict' }, [1, 'two'],
  new Uint8Array([7, 8]),
];

test('items read back from the log equal the serde\'s result, fast path or not', async () => {
  const texts = [];
  for (const item of items) texts.push(await toLogMessage(serde, item));
  const got = await fromLogMessages(serde, texts);
  assert.equal(got.length, items.length);
  for (let i = 0; i < items.length; i++) {
    assert.deepStrictEqual(got[i], await bySerde(items[i]), `item ${i}: ${texts[i]}`);
  }
  // the messages their class rebuilds from role, content, id, name (tool_calls,
  // tool_call_id) are compact; of the others, those with nothing to revive inside take the
  // fast path
  const compact = texts.map((t) => JSON.parse(t).serde === 'msg/1');
  assert.deepEqual(compact, [true, true, true, true, false, false, false, false, true, false, false,
    false, false, false, false, false, false]);
  const fast = texts.map((t) => plainLangChainValue(t) !== null);
  assert.deepEqual(fast, [false, false, false, false, true, true, false, true, false, true, true,
    false, false, false, false, false, false]);
  assert.ok(got[0] instanceof HumanMessage && got[4] instanceof AIMessage && got[7] instanceof ToolMessage);
});

test('a log message the saver did not write that way takes the general path', async () => {
  const value = JSON.parse(JSON.stringify(new HumanMessage({ id: 'x', content: 'v' })));
  const texts = [
    // another member after the value: its text is not one JSON value
    `{"role":"user","content":"v","serde":"json","value":${JSON.stringify(value)},"more":1}`,
    // members in another order
    `{"serde":"json","value":${JSON.stringify(value)},"role":"user"}`,
    // whitespace
    `{"role": "user", "serde": "json", "value": ${JSON.stringify(value)}}`,
  ];
  assert.notEqual(plainLangChainValue(texts[0]), null); // looks fast, fails to load, falls back
  const got = await fromLogMessages(serde, texts);
  const want = await bySerde(new HumanMessage({ id: 'x', content: 'v' }));
  for (let i = 0; i < texts.length; i++) assert.deepStrictEqual(got[i], want);
});

test('a long content is stored once: the value holds 0 in its place', async () => {
  const content = 'a content long enough to be stored once, with "quotes" and é';
  const item = new AIMessage({ id: 'c1', content, response_metadata: { content } });
  const text = await toLogMessage(serde, item);
  const m = JSON.parse(text);
  assert.equal(m.serde, 'json/c');
  assert.equal(m.content, content);
  assert.equal(text.split(JSON.stringify(content)).length, 3); // head and response_metadata only
  assert.deepStrictEqual((await fromLogMessages(serde, [text]))[0], await bySerde(item));
  // the general path (another serde class) reads it too
  class Other extends JsonPlusSerializer {}
  assert.deepStrictEqual((await fromLogMessages(new Other(), [text]))[0], await bySerde(item));
  // a json/c message whose offset does not point at the 0 is refused, not misread
  const bad = text.replace(`"at":${m.at},`, `"at":${m.at + 1},`);
  await assert.rejects(fromLogMessages(serde, [bad]), /json\/c/);
});

test('another serde never takes the fast path', async () => {
  class Tagging extends JsonPlusSerializer {
    async loadsTyped(type, data) {
      const v = await super.loadsTyped(type, data);
      return Array.isArray(v) ? v.map((x) => ({ tagged: x })) : { tagged: v };
    }
  }
  const s = new Tagging();
  const text = await toLogMessage(s, new HumanMessage({ id: 'y', content: 'w' }));
  const [got] = await fromLogMessages(s, [text]);
  assert.ok(got.tagged instanceof HumanMessage);
});
