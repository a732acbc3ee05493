// compact.test.mjs — the compact form of a message in the log ("serde":"msg/1"): a message
// its class rebuilds exactly from role, content, id, name (tool_calls, tool_call_id) is
// stored as those fields; any other keeps the full form; both read back as the serde's
// own round trip gives them; the texts the Python saver writes revive here as the same
// class with the same fields (tests/compact-messages.json, read by the Python tests too).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import * as messages from '@langchain/core/messages';
import { toLogMessage, fromLogMessages } from '../../src/langgraph/log.js';
import { fromLogText, toLogText } from '../../src/langchain/history.js';
import { sameJson } from '../../src/internal/compact.js';

const { HumanMessage, AIMessage, AIMessageChunk, ToolMessage, SystemMessage, ChatMessage, RemoveMessage } = messages;
const serde = new JsonPlusSerializer();
const fixture = JSON.parse(readFileSync(new URL('../../../../tests/compact-messages.json', import.meta.url), 'utf8'));

async function bySerde(item) {
  const [type, bytes] = await serde.dumpsTyped(item);
  return serde.loadsTyped(type, bytes);
}
const isCompact = (t) => JSON.parse(t).serde === 'msg/1';

test('a plain message is stored as its fields and a small constant', async () => {
  const content = 'x'.repeat(200);
  const text = await toLogMessage(serde, new AIMessage({ id: 'a1', content }));
  const fields = JSON.stringify({ id: 'a1', content });
  assert.ok(text.length <= fields.length + 40, `${text.length} bytes: ${text}`);
  assert.deepEqual(JSON.parse(text), { role: 'assistant', id: 'a1', content, serde: 'msg/1' });
  const [back] = await fromLogMessages(serde, [text]);
  assert.ok(back instanceof AIMessage);
  assert.deepStrictEqual(back, await bySerde(new AIMessage({ id: 'a1', content })));
});

test('compact exactly when the class rebuilds the message: every item reads back as the serde gives it', async () => {
  const call = { id: 'c1', name: 'f', args: { q: 'é ✓ "x"' } };
  const cases = [
    [true, new HumanMessage({ content: 'hi', id: 'h1', name: 'ann' })],
    [true, new HumanMessage({ content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'x' } }] })],
    [true, new AIMessage({ content: '', id: 'a1', tool_calls: [call] })],
    [true, new AIMessage({ content: '', id: 'a2', tool_calls: [{ ...call, type: 'tool_call' }] })],
    [true, new ToolMessage({ content: 'r', tool_call_id: 'c1', name: 'f', id: 't1' })],
    [true, new SystemMessage({ content: 'be brief', id: 's1' })],
    [true, new AIMessage('a bare string')],
    [false, new AIMessage({ content: 'x', id: 'a3', additional_kwargs: { refusal: null } })],
    [false, new AIMessage({ content: 'x', id: 'a4', response_metadata: { model: 'm', finish_reason: 'stop' } })],
    [false, new AIMessage({ content: 'x', id: 'a5', usage_metadata: { input_tokens: 1, output_tokens: 2, total_tokens: 3 } })],
    [false, new AIMessage({ content: '', id: 'a6', invalid_tool_calls: [{ id: 'c2', name: 'g', args: '{', error: 'bad' }] })],
    [false, new ToolMessage({ content: 'r', tool_call_id: 'c1', artifact: { rows: [1] } })],
    [false, new ToolMessage({ content: 'r', tool_call_id: 'c1', status: 'error' })],
    [false, new AIMessageChunk({ content: 'a chunk', id: 'k1' })],
    [false, new ChatMessage({ content: 'generic', role: 'user' })],
    [false, new RemoveMessage({ id: 'h1' })],
    [false, new HumanMessage({ content: 'half an emoji \ud83d', id: 'h2' })],
  ];
  const texts = [];
  for (const [, m] of cases) texts.push(await toLogMessage(serde, m));
  assert.deepEqual(texts.map(isCompact), cases.map(([c]) => c), texts.join('\n'));
  const got = await fromLogMessages(serde, texts);
  for (let i = 0; i < cases.length; i++) {
    const want = await bySerde(cases[i][1]);
    assert.deepStrictEqual(got[i], want, `item ${i}: ${texts[i]}`);
    assert.equal(got[i].constructor, want.constructor);
  }
  // an id LangGraph's reducer gives a message (set on it and added to its constructor's
  // arguments, after the class's defaults): the same JSON but for member order, compact
  const given = new HumanMessage('Hello');
  given.id = 'given-1';
  given.lc_kwargs.id = given.id;
  const givenText = await toLogMessage(serde, given);
  assert.equal(givenText, '{"role":"user","content":"Hello","id":"given-1","serde":"msg/1"}');
  assert.deepStrictEqual((await fromLogMessages(serde, [givenText]))[0], await bySerde(given));
  assert.equal(toLogText(given), givenText);
  // the message a node changes after constructing it (an id set on the object) is what the
  // serde keeps of it (its constructor's arguments): the compact form keeps no more
  const late = new AIMessage({ content: 'late id' });
  late.id = 'set-after';
  const [back] = await fromLogMessages(serde, [await toLogMessage(serde, late)]);
  assert.deepStrictEqual(back, await bySerde(late));
});

test('sameJson: the same JSON value whatever the order of members, nothing else', () => {
  assert.ok(sameJson('{"a":1,"b":[1,{"c":2,"d":3}]}', '{"b":[1,{"d":3,"c":2}],"a":1}'));
  assert.ok(sameJson(Buffer.from('{"a":"é"}'), '{"a":"é"}'));
  assert.ok(!sameJson('{"a":1,"b":[1,2]}', '{"a":1,"b":[2,1]}'));
  assert.ok(!sameJson('{"a":1,"b":2}', '{"a":1,"c":2}'));
  assert.ok(!sameJson('{"a":"1"}', '{"a":1 }'));
});

test('another serde writes the full form (its revive is its own) and reads compact texts', async () => {
  class Other extends JsonPlusSerializer {}
  const other = new Other();
  const m = new HumanMessage({ content: 'hi', id: 'h1' });
  const text = await toLogMessage(other, m);
  assert.equal(isCompact(text), false);
  const [back] = await fromLogMessages(other, [await toLogMessage(serde, m)]);
  assert.deepStrictEqual(back, await bySerde(m));
});

test('a text that says msg/1 but is not laid out as one is refused, not misread', async () => {
  for (const t of [
    '{"role":"critic","content":"x","serde":"msg/1"}',
    '{"role":"user","content":"x","tool_calls":[],"serde":"msg/1"}',
    '{"role":"assistant","content":"x","additional_kwargs":{},"serde":"msg/1"}',
    '{"role":"user","content":7,"serde":"msg/1"}',
    '{"role":"tool","content":"x","tool_call_id":3,"serde":"msg/1"}',
    '{"role":"user","id":"x","serde":"msg/1"}',
  ]) {
    await assert.rejects(fromLogMessages(serde, [t]), /msg\/1/, t);
  }
});

test('the texts of tests/compact-messages.json: written here as in Python, revived as the same class', async () => {
  assert.ok(fixture.messages.length >= 5);
  for (const { class: name, fields, text } of fixture.messages) {
    const made = new messages[name](structuredClone(fields));
    assert.equal(await toLogMessage(serde, made), text);
    const [back] = await fromLogMessages(serde, [text]);
    assert.equal(back.constructor, messages[name]);
    assert.deepStrictEqual(back, made);
    for (const [k, v] of Object.entries(fields)) assert.deepStrictEqual(back[k], v, `${name}.${k}`);
    // ConvoChatMessageHistory writes and reads the same form
    assert.equal(toLogText(made), text);
    assert.deepStrictEqual(await fromLogText(text), made);
  }
});
