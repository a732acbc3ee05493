// history-script.mjs — a scripted conversation for ConvoChatMessageHistory's tests:
// RunnableWithMessageHistory (the real runtime) over a model that is, at each turn, a fake
// chat model of @langchain/core/utils/testing: a FakeListChatModel for a text answer, a
// FakeStreamingChatModel for tool calls; the inputs are human messages and tool results.
import { RunnableLambda, RunnableWithMessageHistory } from '@langchain/core/runnables';
import { HumanMessage, ToolMessage, AIMessage } from '@langchain/core/messages';
import { FakeListChatModel, FakeStreamingChatModel } from '@langchain/core/utils/testing';

/** Turn i of a session: { input, model } (deterministic in i and the session). */
export function turn(session, i) {
  if (i % 5 === 1) {
    return {
      input: new HumanMessage({ content: `${session}: add ${i} and ${i + 1}, please`, id: `${session}-h${i}` }),
      model: new FakeStreamingChatModel({
        responses: [new AIMessage('')],
        chunks: [{ content: '', tool_calls: [{ id: `${session}-call${i}`, name: 'add', args: { a: i, b: i + 1 } }] }],
      }),
    };
  }
  if (i % 5 === 2) {
    return {
      input: new ToolMessage({ content: String(2 * i - 1), tool_call_id: `${session}-call${i - 1}`, name: 'add',
        id: `${session}-t${i}`, artifact: { exact: true } }),
      model: new FakeListChatModel({ responses: [`${session}: it is ${2 * i - 1} ✓`] }),
    };
  }
  return {
    input: new HumanMessage({
      content: i % 3 ? `${session} says hello #${i} — ünïcødé 🦜` : [{ type: 'text', text: `${session} part ${i}` }],
      id: `${session}-h${i}`, additional_kwargs: { turn: i },
    }),
    model: new FakeListChatModel({ responses: [`${session}: answer ${i}`] }),
  };
}

/** A RunnableWithMessageHistory whose model is the one of the turn `current.model`. */
export function chain(getMessageHistory, current) {
  const model = RunnableLambda.from((messages, config) => current.model.invoke(messages, config));
  return new RunnableWithMessageHistory({ runnable: model, getMessageHistory });
}

/** Runs turns [from, to) of `session` through `runnable`; calls after(i) after each. */
export async function runTurns(runnable, current, session, from, to, after = async () => {}) {
  for (let i = from; i < to; i++) {
    const t = turn(session, i);
    current.model = t.model;
    await runnable.invoke(t.input, { configurable: { sessionId: session } });
    await after(i);
  }
}
