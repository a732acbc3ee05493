// roles.js — the role a message is stored under in a thread's log, and its content, for
// LangChain message objects (human -> user, ai -> assistant, ...) and plain role-tagged
// objects: shared by the framework adapters, so it imports no framework.

export const ROLES = { human: 'user', ai: 'assistant', system: 'system', tool: 'tool',
  developer: 'developer', function: 'function', remove: 'remove' };

export function isMessage(x) {
  return x !== null && typeof x === 'object' &&
    (typeof x.getType === 'function' || typeof x._getType === 'function');
}

export function validRole(r) {
  return typeof r === 'string' && r.length > 0 && Buffer.byteLength(r) <= 64 ? r : null;
}

export function roleOf(item) {
  if (typeof item === 'string') return 'user';
  if (isMessage(item)) {
    const t = typeof item.getType === 'function' ? item.getType() : item._getType();
    if (t === 'generic') return validRole(item.role) ?? 'generic';
    return ROLES[t] ?? validRole(t) ?? 'value';
  }
  if (item && typeof item === 'object' && !Array.isArray(item)) {
    if (validRole(item.role)) return item.role;
    if (typeof item.type === 'string' && ROLES[item.type]) return ROLES[item.type];
  }
  return 'value';
}

export function contentOf(item) {
  if (typeof item === 'string') return item;
  if (item && typeof item === 'object' && 'content' in item &&
      (typeof item.content === 'string' || Array.isArray(item.content))) return item.content;
  return undefined;
}
