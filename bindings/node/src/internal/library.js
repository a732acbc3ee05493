// library.js — libconvo loaded with koffi on first use (not at import: importing the package
// never fails for want of the library), the C declarations of include/convo.h, and a promise
// wrapper that runs a call on libuv's thread pool (koffi's async calls). No framework here.
import koffi from 'koffi';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SONAME = 'libconvo.so.0';
// configure's default prefix: where `make install` puts the library unless told otherwise
const DEFAULT_LIBDIR = '/usr/local/lib';

// The libdir that `make install` wrote into convo.pc, when pkg-config finds it (a prefix
// outside pkg-config's path needs PKG_CONFIG_PATH, as for a C program); else null.
function pkgConfigLibdir(env) {
  const r = spawnSync('pkg-config', ['--variable=libdir', 'convo'], { encoding: 'utf8', timeout: 5000, env });
  const dir = r.status === 0 ? r.stdout.trim() : '';
  return dir || null;
}

/** The paths libconvo is looked for at, in order (lazily: pkg-config runs only when the
 * paths before it did not load): $CONVO_LIBRARY alone when set; else the build tree this
 * package sits in (bindings/node of a built source tree), the libdir `make install` wrote
 * into convo.pc, configure's default libdir, and last the soname, which the dynamic loader
 * looks up (LD_LIBRARY_PATH, ldconfig's cache). */
export function* candidates(env = process.env) {
  if (env.CONVO_LIBRARY) {
    yield env.CONVO_LIBRARY;
    return;
  }
  const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  if (path.basename(pkg) === 'node' && path.basename(path.dirname(pkg)) === 'bindings') {
    yield path.resolve(pkg, '..', '..', '.libs', 'libconvo.so');
  }
  const dir = pkgConfigLibdir(env);
  if (dir && dir !== DEFAULT_LIBDIR) yield path.join(dir, SONAME);
  yield path.join(DEFAULT_LIBDIR, SONAME);
  yield SONAME;
}

/** The C functions, filled by loadLibrary(). */
export const C = {};
let loadedPath = null;

/** Loads libconvo once (the first Store.open or Store.version); returns its path. Throws an
 * Error naming every path tried, and CONVO_LIBRARY, when none loads. */
export function loadLibrary() {
  if (loadedPath) return loadedPath;
  const tried = [];
  for (const p of candidates()) {
    // a path that is not there is not handed to dlopen: its error would not name it
    if (p.includes('/') && !fs.existsSync(p)) {
      tried.push(`${p} (no such file)`);
      continue;
    }
    let lib;
    try {
      lib = koffi.load(p);
    } catch (e) {
      tried.push(`${p} (${e.message})`);
      continue;
    }
    for (const d of decls) C[d.match(/(convo_\w+)\(/)[1]] = lib.func(d);
    loadedPath = p;
    return p;
  }
  throw new Error(`convo: cannot load libconvo. Tried: ${tried.join('; ')}. Set CONVO_LIBRARY ` +
    'to the path of libconvo.so, or install libconvo (`make install`; a --prefix other than ' +
    '/usr/local is found through its convo.pc on PKG_CONFIG_PATH, or add its lib to LD_LIBRARY_PATH)');
}

export const ConvoErrorStruct = koffi.struct('convo_error', {
  code: 'int',
  backend_code: koffi.array('char', 16, 'String'),
  message: koffi.array('char', 256, 'String'),
});
koffi.opaque('convo_store');
koffi.opaque('convo_history');
koffi.opaque('convo_thread_page');
koffi.opaque('convo_checkpoint');
koffi.opaque('convo_checkpoint_set');
koffi.struct('convo_append_opts', {
  version: 'unsigned int', idempotency_key: 'const char *', expected_length: 'int64_t',
  expected_generation: 'int64_t', // version 2
});
koffi.struct('convo_rewrite_opts', {
  version: 'unsigned int',
  idempotency_key: 'const char *',
  expected_length: 'int64_t',
  expected_generation: 'int64_t',
  expected_suffix: 'const char **',
  expected_suffix_lengths: 'size_t *',
  nexpected_suffix: 'size_t',
  drop_checkpoints: 'int',
});
koffi.struct('convo_rewrite_result', {
  first_seq: 'int64_t', count: 'size_t', removed: 'int64_t', generation: 'int64_t', replayed: 'int',
});
koffi.struct('convo_store_opts', {
  version: 'unsigned int', max_message_bytes: 'size_t', max_batch_messages: 'size_t',
  max_extra_bytes: 'size_t', max_checkpoint_bytes: 'size_t', roles: 'const char **',
  indexed_keys: 'const char **', // version 2
});
koffi.struct('convo_thread_list_opts', {
  version: 'unsigned int', where_json: 'const char *', order: 'int', reverse: 'int',
  after: 'const char *', limit: 'size_t', with_extra: 'int', with_last_message: 'int',
});
koffi.struct('convo_fork_opts', {
  version: 'unsigned int', expected_generation: 'int64_t', with_checkpoints: 'int', // version 2
});
koffi.struct('convo_append_result', { first_seq: 'int64_t', count: 'size_t', replayed: 'int' });
koffi.struct('convo_load_opts', {
  version: 'unsigned int', from_seq: 'int64_t', limit: 'int64_t', tail: 'int64_t', with_extra: 'int',
});
export const Blob = koffi.struct('convo_blob', {
  type: 'const char *', bytes: 'const uint8_t *', len: 'size_t',
});
koffi.struct('convo_channel_in', {
  channel: 'const char *', version: 'const char *', value: 'convo_blob *',
});
// A list of items kept in the thread's log (log references, include/convo.h). seqs_out is
// memory the caller allocates (koffi.alloc) and reads back after the call.
export const ItemsIn = koffi.struct('convo_items_in', {
  items: 'const char **',
  lengths: 'size_t *',
  seqs: 'int64_t *',
  n: 'size_t',
  key: 'const char *',
  rest: 'convo_blob',
  seqs_out: 'void *',
  log: 'int',
});
// A resolved list: the pointers are decoded by the Store (valid while the checkpoint is).
export const Items = koffi.struct('convo_items', {
  n: 'size_t',
  items: 'void *',
  lengths: 'void *',
  seqs: 'void *',
  key: 'const char *',
  rest: 'convo_blob',
});
koffi.struct('convo_checkpoint_in', {
  version: 'unsigned int',
  thread_id: 'const char *',
  checkpoint_ns: 'const char *',
  checkpoint_id: 'const char *',
  parent_id: 'const char *',
  metadata_json: 'const char *',
  body: 'convo_blob',
  channels: 'convo_channel_in *',
  nchannels: 'size_t',
  log_length: 'int64_t',
  messages: 'const char **',
  message_lengths: 'size_t *',
  nmessages: 'size_t',
  expected_length: 'int64_t',
  expected_generation: 'int64_t', // version 3
  channel_items: 'convo_items_in **', // version 4: null entries for plain channels
  channel_log_prefix: 'int64_t *', // version 5: a list that starts with the log's first k
});
koffi.struct('convo_write_in', { idx: 'int64_t', channel: 'const char *', value: 'convo_blob' });
koffi.struct('convo_writes_in', {
  version: 'unsigned int',
  thread_id: 'const char *',
  checkpoint_ns: 'const char *',
  checkpoint_id: 'const char *',
  task_id: 'const char *',
  task_path: 'const char *',
  writes: 'convo_write_in *',
  n: 'size_t',
  items: 'convo_items_in **',
});
koffi.struct('convo_checkpoint_list_opts', {
  version: 'unsigned int',
  thread_id: 'const char *',
  checkpoint_ns: 'const char *',
  before: 'const char *',
  limit: 'size_t',
  filter_json: 'const char *',
  before_thread_id: 'const char *',
  before_ns: 'const char *',
  known_generation: 'int64_t', // version 3: what the caller holds of thread_id's log
  known_length: 'int64_t',
  known_origin: 'int64_t',
  without_channel_items: 'int', // version 4: channel lists without their items
  only_channel: 'const char *', // version 5: one channel and its writes, no body nor metadata
});
koffi.struct('convo_checkpoint_get_opts', {
  version: 'unsigned int',
  thread_id: 'const char *',
  checkpoint_ns: 'const char *',
  checkpoint_id: 'const char *',
  known_generation: 'int64_t',
  known_length: 'int64_t',
  known_origin: 'int64_t',
});
koffi.struct('convo_dump_stats', {
  threads: 'uint64_t', messages: 'uint64_t', checkpoints: 'uint64_t', writes: 'uint64_t',
  bytes: 'uint64_t', skipped: 'uint64_t',
});
export const WriteFn = koffi.proto('int convo_write_fn(void *ctx, const uint8_t *buf, size_t len)');
export const ReadFn = koffi.proto('long convo_read_fn(void *ctx, void *buf, size_t len)');

const decls = [
  'const char *convo_strerror(int code)',
  'const char *convo_version(void)',
  'int convo_open(_Out_ convo_store **out, const char *url, _Out_ convo_error *err)',
  'int convo_open_ex(_Out_ convo_store **out, const char *url, const convo_store_opts *opts, _Out_ convo_error *err)',
  'void convo_close(convo_store *s)',
  'const char *convo_store_driver(const convo_store *s)',
  'int convo_append(convo_store *s, const char *thread_id, const char **messages, const size_t *lengths, size_t n, const convo_append_opts *opts, _Out_ convo_append_result *res, _Out_ convo_error *err)',
  'int convo_replace_tail(convo_store *s, const char *thread_id, int64_t keep, const char **messages, const size_t *lengths, size_t n, const convo_rewrite_opts *opts, _Out_ convo_rewrite_result *res, _Out_ convo_error *err)',
  'int convo_load(convo_store *s, const char *thread_id, const convo_load_opts *opts, _Out_ convo_history **out, _Out_ convo_error *err)',
  'void convo_history_free(convo_history *h)',
  'size_t convo_history_count(const convo_history *h)',
  'int64_t convo_history_length(const convo_history *h)',
  'const uint8_t *convo_history_message(const convo_history *h, size_t i, _Out_ size_t *len)',
  'const char *convo_history_role(const convo_history *h, size_t i)',
  'int64_t convo_history_seq(const convo_history *h, size_t i)',
  'int64_t convo_history_created_at(const convo_history *h, size_t i)',
  'const char *convo_history_extra(const convo_history *h)',
  'int64_t convo_history_generation(const convo_history *h)',
  'int convo_save_extra(convo_store *s, const char *thread_id, const char *patch_json, _Out_ convo_error *err)',
  'int convo_thread_delete(convo_store *s, const char *thread_id, _Out_ convo_error *err)',
  'int convo_thread_list(convo_store *s, const char *after, size_t limit, _Out_ convo_thread_page **out, _Out_ convo_error *err)',
  'size_t convo_thread_page_count(const convo_thread_page *p)',
  'const char *convo_thread_page_id(const convo_thread_page *p, size_t i)',
  'const char *convo_thread_page_next(const convo_thread_page *p)',
  'void convo_thread_page_free(convo_thread_page *p)',
  'int convo_thread_list_ex(convo_store *s, const convo_thread_list_opts *opts, _Out_ convo_thread_page **out, _Out_ convo_error *err)',
  'int64_t convo_thread_page_created_at(const convo_thread_page *p, size_t i)',
  'int64_t convo_thread_page_updated_at(const convo_thread_page *p, size_t i)',
  'int64_t convo_thread_page_length(const convo_thread_page *p, size_t i)',
  'const char *convo_thread_page_extra(const convo_thread_page *p, size_t i)',
  'const uint8_t *convo_thread_page_last_message(const convo_thread_page *p, size_t i, _Out_ size_t *len)',
  'const char *convo_thread_page_cursor(const convo_thread_page *p, size_t i)',
  'int convo_thread_fork(convo_store *s, const char *src, const char *dst, int64_t upto, _Out_ convo_error *err)',
  'int convo_thread_fork_ex(convo_store *s, const char *src, const char *dst, int64_t upto, const convo_fork_opts *opts, _Out_ convo_error *err)',
  'int convo_checkpoint_put(convo_store *s, const convo_checkpoint_in *cp, _Out_ convo_error *err)',
  'int convo_checkpoint_put_writes(convo_store *s, const char *thread_id, const char *checkpoint_ns, const char *checkpoint_id, const char *task_id, const char *task_path, const convo_write_in *writes, size_t n, _Out_ convo_error *err)',
  'int convo_checkpoint_put_writes_ex(convo_store *s, const convo_writes_in *w, _Out_ convo_error *err)',
  'int convo_checkpoint_get(convo_store *s, const char *thread_id, const char *checkpoint_ns, const char *checkpoint_id, _Out_ convo_checkpoint **out, _Out_ convo_error *err)',
  'int convo_checkpoint_get_ex(convo_store *s, const convo_checkpoint_get_opts *opts, _Out_ convo_checkpoint **out, _Out_ convo_error *err)',
  'int convo_checkpoint_list(convo_store *s, const convo_checkpoint_list_opts *opts, _Out_ convo_checkpoint_set **out, _Out_ convo_error *err)',
  'size_t convo_checkpoint_set_count(const convo_checkpoint_set *set)',
  'const convo_checkpoint *convo_checkpoint_set_get(const convo_checkpoint_set *set, size_t i)',
  'void convo_checkpoint_set_free(convo_checkpoint_set *set)',
  'int convo_checkpoint_prune(convo_store *s, const char *thread_id, size_t keep_last, _Out_ convo_error *err)',
  'int convo_checkpoint_delete(convo_store *s, const convo_checkpoint_list_opts *opts, _Out_ uint64_t *removed, _Out_ convo_error *err)',
  'void convo_checkpoint_free(convo_checkpoint *cp)',
  'const char *convo_checkpoint_thread_id(const convo_checkpoint *cp)',
  'const char *convo_checkpoint_ns(const convo_checkpoint *cp)',
  'const char *convo_checkpoint_id(const convo_checkpoint *cp)',
  'const char *convo_checkpoint_parent_id(const convo_checkpoint *cp)',
  'const char *convo_checkpoint_metadata(const convo_checkpoint *cp)',
  'int64_t convo_checkpoint_log_length(const convo_checkpoint *cp)',
  'int64_t convo_checkpoint_generation(const convo_checkpoint *cp)',
  'int64_t convo_checkpoint_log_origin(const convo_checkpoint *cp)',
  'int64_t convo_checkpoint_created_at(const convo_checkpoint *cp)',
  'convo_blob convo_checkpoint_body(const convo_checkpoint *cp)',
  'size_t convo_checkpoint_channel_count(const convo_checkpoint *cp)',
  'const char *convo_checkpoint_channel(const convo_checkpoint *cp, size_t i, _Out_ const char **version, _Out_ convo_blob *value)',
  'size_t convo_checkpoint_write_count(const convo_checkpoint *cp)',
  'const char *convo_checkpoint_write(const convo_checkpoint *cp, size_t i, _Out_ const char **task_path, _Out_ int64_t *idx, _Out_ const char **channel, _Out_ convo_blob *value)',
  'int convo_checkpoint_channel_items(const convo_checkpoint *cp, size_t i, _Out_ convo_items *out)',
  'int convo_checkpoint_write_items(const convo_checkpoint *cp, size_t i, _Out_ convo_items *out)',
  'int convo_export(convo_store *s, const char **thread_ids, size_t n, convo_write_fn *write, void *write_ctx, void *opts, _Out_ convo_dump_stats *stats, _Out_ convo_error *err)',
  'int convo_import(convo_store *s, convo_read_fn *read, void *read_ctx, void *opts, _Out_ convo_dump_stats *stats, _Out_ convo_error *err)',
  'int convo_sweep(convo_store *s, _Out_ uint64_t *removed, _Out_ convo_error *err)',
  'int convo_store_bytes(convo_store *s, _Out_ int64_t *bytes, _Out_ convo_error *err)',
];


// Runs fn(...args) on a thread-pool thread; resolves with its return value.
export function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err, rc) => (err ? reject(err) : resolve(rc)));
  });
}

// Copies len bytes at a C pointer into a Buffer the caller owns.
export function copyBytes(ptr, len) {
  if (!ptr || len === 0) return Buffer.alloc(0);
  const n = Number(len);
  const out = Buffer.allocUnsafe(n);
  out.set(new Uint8Array(koffi.view(ptr, n)));
  return out;
}

/** The UTF-8 text of len bytes at ptr (a message: JSON, no NUL byte). */
export function copyText(ptr, len) {
  if (!ptr || len === 0) return '';
  return koffi.decode(ptr, 'char', Number(len));
}

export function newError() {
  return { code: 0, backend_code: '', message: '' };
}

export { koffi };
