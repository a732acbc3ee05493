// compact.js — the compact form of a LangChain message in a thread's log ("serde":"msg/1",
// docs/checkpoints.md): a message that its class rebuilds exactly from a few plain fields is
// stored as those fields, and revived by constructing the class. Imports @langchain/core:
// only the langchain/ and langgraph/ subpaths import it.
import { isDeepStrictEqual } from 'node:util';
import { HumanMessage, AIMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import { compactText, compactMembers } from './logtext.js';

// role -> the class and the fields the compact form may hold (the same in bindings/python)
const FORMS = {
  user: { cls: HumanMessage, fields: ['content', 'id', 'name'] },
  assistant: { cls: AIMessage, fields: ['content', 'id', 'name', 'tool_calls'] },
  system: { cls: SystemMessage, fields: ['content', 'id', 'name'] },
  tool: { cls: ToolMessage, fields: ['content', 'id', 'name', 'tool_call_id'] },
};

const isText = (v) => typeof v === 'string';
const CHECKS = {
  content: (v) => typeof v === 'string' || Array.isArray(v),
  id: isText,
  name: isText,
  tool_calls: Array.isArray,
  tool_call_id: isText,
};

/** The compact candidate of a message of one of the four roles: { text, rebuilt } — its
 * compact text and the message a reader makes of that text — or null when JSON cannot carry
 * its fields. The fields are those the class's constructor was given (lc_kwargs, what
 * LangChain serializes), in that order. Whether the candidate loses nothing is the caller's
 * to decide: the rebuilt message must serialize as the original, which also tells another
 * class (a chunk, a subclass: their serialized id path differs) from the one of the role.
 * (Not `instanceof`: an app may load another copy of @langchain/core than this package.) */
export function compactCandidate(role, message) {
  const form = FORMS[role];
  const kwargs = message?.lc_kwargs;
  if (!form || !kwargs || typeof kwargs !== 'object') return null;
  const fields = {};
  for (const k of Object.keys(kwargs)) {
    const v = kwargs[k];
    if (v === undefined || !form.fields.includes(k)) continue;
    if (!CHECKS[k](v)) return null;
    if (k !== 'tool_calls' || v.length > 0) fields[k] = v;
  }
  if (!('content' in fields)) return null;
  try {
    const text = compactText(role, fields);
    return text === null ? null : { text, rebuilt: compactMessage(text) };
  } catch {
    return null; // a field JSON cannot carry (a BigInt, a cycle)
  }
}

/** The message a compact text stores, or undefined when `t` is not one; throws when it
 * says it is one but is not laid out as one. */
export function compactMessage(t) {
  const m = compactMembers(t);
  if (m === null) return undefined;
  const form = FORMS[m.role];
  if (!form) throw new Error(`convo: a "msg/1" log message of role ${JSON.stringify(m.role)}, not user, assistant, system or tool`);
  const fields = {};
  for (const [k, v] of Object.entries(m)) {
    if (k === 'role' || k === 'serde') continue;
    if (!form.fields.includes(k) || !CHECKS[k](v)) {
      throw new Error(`convo: a "msg/1" log message of role ${m.role} with a field ${JSON.stringify(k)} it cannot hold`);
    }
    fields[k] = v;
  }
  if (!('content' in fields)) throw new Error('convo: a "msg/1" log message without content');
  return new form.cls(fields);
}

const utf8 = (b) => (typeof b === 'string' ? b : Buffer.from(b).toString('utf8'));

/** Whether two JSON texts (strings or UTF-8 bytes) are the same JSON value: equal bytes, or
 * equal but for the order of an object's members, which JSON does not give a meaning and
 * LangChain.js's serialization follows from how a message was made (LangGraph's reducer
 * adds an id to a message's constructor arguments after the class's defaults). */
export function sameJson(a, b) {
  const x = utf8(a);
  const y = utf8(b);
  return x === y || (x.length === y.length && isDeepStrictEqual(JSON.parse(x), JSON.parse(y)));
}
