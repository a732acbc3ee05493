// logtext.js — the text of a log message that keeps one framework value: a role-tagged
// head ({"role":R,"content":C}, what `convo load` shows) then the value as its serializer
// wrote it. ConvoSaver's message channels and ConvoChatMessageHistory share this layout;
// imports no framework.

/** The log message text for a value of role `role` and content `content` (undefined:
 * none) whose serializer wrote `bytes` (a Uint8Array or string) of type `type`. A JSON
 * value ('json') is kept as JSON, its copy of the content's text cut out ("json/c");
 * another type, or a text JSON cannot carry, in base64. */
export function logText(role, content, type, bytes) {
  const head = { role };
  if (content !== undefined) head.content = content;
  let text = JSON.stringify(head).slice(0, -1);
  if (type === 'json') {
    const value = typeof bytes === 'string' ? bytes : Buffer.from(bytes).toString('utf8');
    // The content is in the value too (kwargs.content of a LangChain message): stored
    // once, the value's copy of its JSON text replaced by 0 at offset `at`.
    const ctext = content === undefined ? '' : JSON.stringify(content);
    const k = ctext.length > 16 ? value.indexOf(`"content":${ctext}`) : -1;
    if (k >= 0) {
      const at = k + 10;
      text += `,"serde":"json/c","at":${at},"value":${value.slice(0, at)}0${value.slice(at + ctext.length)}}`;
    } else {
      text += `,"serde":"json","value":${value}}`;
    }
  } else {
    text += `,"serde":${JSON.stringify(type)},"base64":"${Buffer.from(bytes).toString('base64')}"}`;
  }
  // JSON.stringify writes a lone surrogate (half an emoji cut by a stream) as \udXXX,
  // which the library refuses as invalid JSON: such a value keeps its serializer's bytes
  // in base64 and no content (a \\ud... text only costs the same fallback).
  if (/\\ud[89a-f]/i.test(text)) {
    text = `${JSON.stringify({ role }).slice(0, -1)},"serde":${JSON.stringify(type)},` +
      `"base64":"${Buffer.from(bytes).toString('base64')}"}`;
  }
  return text;
}

/** The marker of the compact form (docs/checkpoints.md): a message that is exactly what its
 * class (named by the role) makes of the few fields beside the role. */
export const COMPACT = 'msg/1';
const COMPACT_END = `,"serde":"${COMPACT}"}`;

/** The compact text of a message of role `role` with `fields` (an object, in the order
 * its class's constructor was given them), or null when JSON cannot carry one of them
 * (a lone surrogate: that message keeps its serializer's bytes). */
export function compactText(role, fields) {
  const text = `${JSON.stringify({ role, ...fields }).slice(0, -1)}${COMPACT_END}`;
  return /\\ud[89a-f]/i.test(text) ? null : text;
}

/** The members of a compact text (role, the fields, serde), or null for any other text. */
export function compactMembers(t) {
  return t.endsWith(COMPACT_END) && t.startsWith('{"role":') ? JSON.parse(t) : null;
}

// The end of the JSON string starting at t[i] (a '"'), or -1.
function skipString(t, i) {
  if (t[i] !== '"') return -1;
  for (let j = i + 1; ;) {
    const q = t.indexOf('"', j);
    if (q < 0) return -1;
    let b = q - 1;
    while (t[b] === '\\') b--;
    if ((q - 1 - b) % 2 === 0) return q + 1;
    j = q + 1;
  }
}

// The end of the compact JSON value (as JSON.stringify writes it) starting at t[i], or -1.
function skipValue(t, i) {
  if (t[i] === '"') return skipString(t, i);
  let depth = 0;
  for (let j = i; j < t.length;) {
    const c = t[j];
    if (c === '"') {
      j = skipString(t, j);
      if (j < 0) return -1;
      continue;
    }
    if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
    j++;
    if (depth === 0) return j;
    if (depth < 0) return -1;
  }
  return -1;
}

const VALUE_MARK = ',"serde":"json","value":';
const CUT_MARK = ',"serde":"json/c","at":';
const LC_HEAD = '{"lc":1,"type":"constructor","id":[';

/** The JSON text of the value of a log message as logText writes it with type 'json'
 * ("json", or "json/c": the content's text put back at `at`), or null. Found without
 * parsing the message: its head is {"role":S[,"content":V]. */
export function valueText(t) {
  if (!t.startsWith('{"role":') || t[t.length - 1] !== '}') return null;
  let i = skipString(t, 8);
  if (i < 0) return null;
  let cs = -1, ce = -1;
  if (t.startsWith(',"content":', i)) {
    cs = i + 11;
    ce = i = skipValue(t, cs);
    if (i < 0) return null;
  }
  if (t.startsWith(VALUE_MARK, i)) return t.slice(i + VALUE_MARK.length, -1);
  if (cs < 0 || !t.startsWith(CUT_MARK, i)) return null;
  i += CUT_MARK.length;
  let j = i;
  while (t[j] >= '0' && t[j] <= '9') j++;
  if (j === i || j - i > 15 || !t.startsWith(',"value":', j)) return null;
  const at = Number(t.slice(i, j));
  const v = t.slice(j + 9, -1);
  if (v[at] !== '0') return null;
  return v.slice(0, at) + t.slice(cs, ce) + v.slice(at + 1);
}

/** The value text of a log message logText wrote with type 'json', when that value is
 * one LangChain object with nothing else to revive inside (no other "lc" key: no nested
 * LangChain object, no lc:2 record of JsonPlusSerializer, no escaped object); else null. */
export function plainLangChainValue(t) {
  const v = valueText(t);
  if (v === null || !v.startsWith(LC_HEAD) || v.indexOf('"lc":', LC_HEAD.length) !== -1) return null;
  return v;
}
