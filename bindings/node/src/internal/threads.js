// threads.js — the thread index (convo_thread_list_ex) for Store.listThreads: its options
// checked and turned into the C struct, and a page's rows read into plain objects.
import { C, copyText } from './library.js';
import { InvalidError, codes } from '../errors.js';
import { optText, int, known, bool } from './args.js';

const ORDERS = { recent: 0, created: 1, id: 2 };
const MAX_LIMIT = 10000; // rows per page (lib/threads.c)
const NAMES = ['where', 'order', 'reverse', 'after', 'limit', 'withExtra', 'withLastMessage'];

function upTo(v, max, what) {
  if (v > max) throw new InvalidError(codes.EINVAL, `${what} must be at most ${max}, not ${v}`);
  return v;
}

/** listThreads' options -> convo_thread_list_opts (and what to read back per row). */
export function listOptions(opts) {
  const { where = null, order = 'recent', reverse = false, after = null, limit = 100,
    withExtra = false, withLastMessage = false } = known(opts, NAMES, 'listThreads options');
  if (where !== null && (typeof where !== 'object' || Array.isArray(where) || Buffer.isBuffer(where))) {
    throw new InvalidError(codes.EINVAL, `where must be an object (what the extra contains), not ${
      Array.isArray(where) ? 'an array' : typeof where === 'string' ? 'a string' : `a ${typeof where}`}`);
  }
  if (typeof order !== 'string' || !Object.hasOwn(ORDERS, order)) {
    throw new InvalidError(codes.EINVAL, `order must be 'recent', 'created' or 'id', not ${
      typeof order === 'string' ? JSON.stringify(order) : typeof order}`);
  }
  let whereJson = null;
  if (where !== null) {
    try {
      whereJson = JSON.stringify(where);
    } catch (e) {
      throw new InvalidError(codes.EINVAL, `where: ${e.message}`);
    }
  }
  return {
    version: 1, where_json: whereJson, order: ORDERS[order], reverse: bool(reverse, 'reverse') ? 1 : 0,
    after: optText(after, 'after'), limit: upTo(int(limit, 'limit', 1), MAX_LIMIT, 'limit'),
    with_extra: bool(withExtra, 'withExtra') ? 1 : 0,
    with_last_message: bool(withLastMessage, 'withLastMessage') ? 1 : 0,
  };
}

/** The rows of a page of convo_thread_list_ex: { threads, next }. */
export function readPage(p, o) {
  const n = Number(C.convo_thread_page_count(p));
  const threads = new Array(n);
  const len = [0];
  for (let i = 0; i < n; i++) {
    const t = {
      id: C.convo_thread_page_id(p, i),
      createdAt: Number(C.convo_thread_page_created_at(p, i)),
      updatedAt: Number(C.convo_thread_page_updated_at(p, i)),
      length: Number(C.convo_thread_page_length(p, i)),
    };
    if (o.with_extra) t.extra = JSON.parse(C.convo_thread_page_extra(p, i));
    if (o.with_last_message) {
      const m = C.convo_thread_page_last_message(p, i, len);
      t.lastMessage = m ? copyText(m, len[0]) : null;
    }
    t.cursor = C.convo_thread_page_cursor(p, i);
    threads[i] = t;
  }
  return { threads, next: C.convo_thread_page_next(p) };
}
