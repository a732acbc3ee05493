"""convo.Store: a blocking handle on a convo store (libconvo's convo_store),
safe to share between threads. Messages and extra objects go in as dicts (or
as JSON text, stored byte for byte) and come back as fresh dicts."""

import collections
import collections.abc
import contextlib
import ctypes
import json
import threading

from . import _lib
from ._args import _text, _json_bytes, _int, _items, _batch
from .checkpoint import CheckpointCalls
from .dump import DumpCalls
from .errors import ConflictError, NotFoundError, CorruptError, from_struct, invalid
from .rewrite import RewriteCalls, RewriteResult
from .threads import ThreadCalls, ThreadInfo, ThreadPage

lib = _lib.lib

AppendResult = collections.namedtuple("AppendResult", "first_seq count replayed")
AppendResult.__doc__ = """What an append stored: the seq of its first message, the
number of messages, and replayed=True when an idempotency key matched an earlier
batch (nothing new was written)."""

class Message(collections.namedtuple("Message", "seq created_at role raw")):
    """One stored message: seq (0-based), created_at (microseconds since the
    epoch), role, and raw (the bytes exactly as appended)."""
    __slots__ = ()

    def json(self):
        """The message decoded into a new dict."""
        return json.loads(self.raw)

History = collections.namedtuple("History", "messages length extra generation")
History.__doc__ = """The result of Store.load_history: messages (a list of Message),
length (messages in the whole thread, whatever was asked for), extra (a dict) and
generation (how many tail rewrites the thread has had: messages below length do
not change while it stays; pass it as expected_generation)."""

def _decode(raw, what):
    try:
        return json.loads(raw)
    except ValueError as e:
        raise CorruptError(_lib.ECORRUPT, "%s is not valid JSON: %s" % (what, e)) from None


def _decode_all(raws):
    """Decodes stored messages into new dicts with one json.loads call: each is
    a JSON object (the library validated it), so they join into one array."""
    try:
        messages = json.loads(b"[" + b",".join(raws) + b"]")
        if len(messages) == len(raws) and all(type(m) is dict for m in messages):
            return messages
    except ValueError:
        pass
    return [_decode(raw, "stored message %d" % i) for i, raw in enumerate(raws)]


class Store(CheckpointCalls, DumpCalls, RewriteCalls, ThreadCalls):
    """A connection to a convo store, opened by URL: "memory:", "sqlite:PATH",
    "redis://...", "postgres://...", "mongodb://..." (see README.md).

    Limits default to the library's (message 1 MiB, batch 10,000 messages,
    extra 1 MiB); 0 keeps the default. roles, when given, is the list of
    allowed roles. indexed_keys, when given, names the top-level extra keys
    the thread index keeps an index for (list_threads with a `where` on them
    reads only matching threads): recorded in the store by the first opener
    naming them; an opener without them keeps them; one naming others is an
    InvalidError. Every failure raises a subclass of convo.ConvoError.
    A Store may be used from many threads at once; close() waits for calls
    in progress, and it is also a context manager.

    keep_gil: True makes each call keep the GIL except while libconvo waits
    (for a connection of the store's pool, SQLite's lock held by another
    connection or process), so that a thread coming back from a call does
    not wait for another thread to give the GIL up; the default for memory:
    and sqlite: (calls that do not wait on a server). False releases the GIL
    for the whole of every call; the only choice for the other drivers,
    whose calls wait on the network (docs/python.md, threads and the GIL)."""

    def __init__(self, url, *, max_message_bytes=0, max_batch_messages=0, max_extra_bytes=0,
                 max_checkpoint_bytes=0, roles=None, indexed_keys=None, keep_gil=None):
        self._handle = None
        self._lib = lib
        self._cond = threading.Condition()
        self._busy = 0
        opts = _lib.StoreOpts.init()
        opts.max_message_bytes = _int(max_message_bytes, "max_message_bytes", 0)
        opts.max_batch_messages = _int(max_batch_messages, "max_batch_messages", 0)
        opts.max_extra_bytes = _int(max_extra_bytes, "max_extra_bytes", 0)
        opts.max_checkpoint_bytes = _int(max_checkpoint_bytes, "max_checkpoint_bytes", 0)
        if roles is not None:
            if isinstance(roles, (str, bytes)):
                raise invalid("roles must be a list of strings")
            encoded = [_text(r, "role") for r in roles]
            opts.roles = (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
        if indexed_keys is not None:
            if isinstance(indexed_keys, (str, bytes)):
                raise invalid("indexed_keys must be a list of strings")
            keys = [_text(k, "indexed key") for k in indexed_keys]
            opts.indexed_keys = (ctypes.c_char_p * (len(keys) + 1))(*keys, None)
        url_b = _text(url, "url")
        local = url_b == b"memory:" or url_b.startswith(b"sqlite:")
        if keep_gil is None:
            keep_gil = local
        elif not isinstance(keep_gil, bool):
            raise invalid("keep_gil must be True, False or None")
        elif keep_gil and not local:
            raise invalid("keep_gil=True is for memory: and sqlite: stores only: the other "
                          "drivers' calls wait on the network")
        if keep_gil:
            opts.wait_enter, opts.wait_leave = _lib.GIL_WAIT_HOOKS
        else:
            opts.version = 2  # no hooks: also what a libconvo older than the binding reads
        handle = ctypes.c_void_p()
        err = _lib.Error()
        # convo_open_ex waits too (the switch to WAL, a migration's lock): with the hooks
        call = _lib.kept if keep_gil else lib
        rc = call.convo_open_ex(ctypes.byref(handle), url_b, ctypes.byref(opts),
                                ctypes.byref(err))
        if rc == _lib.EINVAL and keep_gil and b"convo_store_opts version" in err.message:
            # a libconvo without the hooks: every call releases the GIL, as before them
            opts.version, opts.wait_enter, opts.wait_leave, keep_gil = 2, None, None, False
            rc = lib.convo_open_ex(ctypes.byref(handle), url_b, ctypes.byref(opts),
                                   ctypes.byref(err))
        if rc != 0:
            raise from_struct(rc, err)
        self._handle = handle
        self._lib = _lib.kept if keep_gil else lib
        self.keep_gil = keep_gil
        self.driver = lib.convo_store_driver(handle).decode("ascii")

    # ---- lifetime ----

    def close(self):
        """Closes the store once every call in progress has returned. Idempotent."""
        with self._cond:
            handle, self._handle = self._handle, None
            while self._busy:
                self._cond.wait()
        if handle is not None:
            self._lib.convo_close(handle)  # with the GIL when the hooks may run

    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_handle", None) is not None:
                self.close()
        except Exception:  # the interpreter may be shutting down
            pass

    def __repr__(self):
        state = "closed" if self.closed else self.driver
        return "<convo.Store %s>" % state

    @contextlib.contextmanager
    def _using(self):
        """The handle, counted as in use so that close() cannot free it."""
        with self._cond:
            handle = self._handle
            if handle is None:
                raise invalid("the store is closed")
            self._busy += 1
        try:
            yield handle
        finally:
            with self._cond:
                self._busy -= 1
                if not self._busy:
                    self._cond.notify_all()

    def _call(self, fn, *args):
        """Calls fn(handle, *args, &err); raises the ConvoError of a failure."""
        with self._using() as handle:
            err = _lib.Error()
            rc = fn(handle, *args, ctypes.byref(err))
        if rc != 0:
            raise from_struct(rc, err)

    # ---- messages ----

    def append(self, thread_id, messages, idempotency_key=None, expected_length=None, *,
               expected_generation=None):
        """Appends a batch of messages (all or nothing) and returns an
        AppendResult(first_seq, count, replayed). Each message is a dict
        (serialized as compact JSON) or JSON text as str/bytes (stored byte
        for byte); a single message may be passed without a list.
        idempotency_key: a retry with the same key stores nothing and returns
        the original range. expected_length: store only if the thread has
        exactly that many messages, else ConflictError. expected_generation:
        store only if the thread's generation (load_history(...).generation; 0
        for a thread never rewritten or not yet created) is this, else
        ConflictError. A ConflictError has .length and .generation, the
        thread's state just after the conflict."""
        arr, lens, n = _batch(messages, "message")
        opts = _lib.AppendOpts.init()
        if idempotency_key is not None:
            opts.idempotency_key = _text(idempotency_key, "idempotency_key")
        if expected_length is not None:
            opts.expected_length = _int(expected_length, "expected_length", 0)
        if expected_generation is not None:
            opts.expected_generation = _int(expected_generation, "expected_generation", 0)
        res = _lib.AppendResult()
        tid = _text(thread_id, "thread_id")
        try:
            self._call(self._lib.convo_append, tid, arr, lens, n, ctypes.byref(opts),
                       ctypes.byref(res))
        except ConflictError as e:
            self._explain_conflict(e, tid)
            raise
        return AppendResult(res.first_seq, res.count, bool(res.replayed))

    def _history(self, thread_id, from_seq, limit, tail, with_extra, read):
        """Runs convo_load and hands the history to read(h) before freeing it;
        returns None for an unknown thread."""
        opts = _lib.LoadOpts.init()
        opts.from_seq = _int(from_seq, "from_seq", 0)
        opts.limit = _int(limit, "limit", 0)
        opts.tail = _int(tail, "tail", 0)
        opts.with_extra = 1 if with_extra else 0
        h = ctypes.c_void_p()
        try:
            self._call(self._lib.convo_load, _text(thread_id, "thread_id"), ctypes.byref(opts),
                       ctypes.byref(h))
        except NotFoundError:
            return None
        try:
            return read(h)
        finally:
            lib.convo_history_free(h)

    @staticmethod
    def _raws(h):
        """The exact bytes of every message of a history."""
        size = ctypes.c_size_t()
        size_ref, message = ctypes.byref(size), lib.convo_history_message
        out = []
        for i in range(lib.convo_history_count(h)):
            ptr = message(h, i, size_ref)
            out.append(ctypes.string_at(ptr, size.value))
        return out

    def load(self, thread_id, from_seq=0, limit=0, tail=0):
        """Returns (messages, extra): the messages as a list of new dicts in
        seq order and the merged extra object as a dict; None for an unknown
        thread (an existing, empty thread gives ([], extra)).
        tail=N keeps only the last N messages (applied before from_seq);
        limit=N returns at most N; 0 means no limit."""
        def read(h):
            messages = _decode_all(self._raws(h))
            return messages, _decode(lib.convo_history_extra(h), "the stored extra")
        return self._history(thread_id, from_seq, limit, tail, True, read)

    def load_history(self, thread_id, from_seq=0, limit=0, tail=0, with_extra=True):
        """Like load, with each message's seq, time and exact bytes: returns a
        History(messages=[Message(seq, created_at, role, raw)], length, extra)
        or None for an unknown thread."""
        def read(h):
            messages = []
            for i, raw in enumerate(self._raws(h)):
                role = lib.convo_history_role(h, i).decode("utf-8")
                messages.append(Message(lib.convo_history_seq(h, i),
                                        lib.convo_history_created_at(h, i), role, raw))
            extra = _decode(lib.convo_history_extra(h), "the stored extra")
            return History(messages, lib.convo_history_length(h), extra,
                           lib.convo_history_generation(h))
        return self._history(thread_id, from_seq, limit, tail, with_extra, read)

    # ---- extra and threads ----

    def save_extra(self, thread_id, extra):
        """Shallow merge into the thread's extra object: each top-level key of
        extra (a dict, or a JSON object as str/bytes) replaces that key; None
        is stored as null. Creates the thread when it does not exist."""
        data = _json_bytes(extra, "extra")
        if b"\0" in data:
            raise invalid("extra contains a NUL character")
        self._call(self._lib.convo_save_extra, _text(thread_id, "thread_id"), data)

    def delete(self, thread_id):
        """Removes the thread entirely; NotFoundError when it does not exist."""
        self._call(self._lib.convo_thread_delete, _text(thread_id, "thread_id"))

    def fork(self, src, dst, upto=None, *, expected_generation=None, with_checkpoints=False):
        """Copies messages [0, upto) (all when upto is None) and the extra
        object of src into the new thread dst, which starts at src's
        generation. with_checkpoints=True copies the checkpoints too
        (LangGraph's copy_thread): every checkpoint of every namespace whose
        log_length is within the messages copied, with its ids, parent,
        metadata, body, channel values and pending writes, in the same listing
        order. NotFoundError when src is unknown, ConflictError when dst
        exists or src is not at expected_generation (when given), InvalidError
        when upto is past the end; nothing is written then."""
        upto = -1 if upto is None else _int(upto, "upto", 0)
        opts = _lib.ForkOpts.init()
        if expected_generation is not None:
            opts.expected_generation = _int(expected_generation, "expected_generation", 0)
        if not isinstance(with_checkpoints, bool):
            raise invalid("with_checkpoints must be True or False")
        opts.with_checkpoints = 1 if with_checkpoints else 0
        self._call(self._lib.convo_thread_fork_ex, _text(src, "src"), _text(dst, "dst"), upto,
                   ctypes.byref(opts))

    def _page(self, after, size):
        """One page of thread ids strictly after `after`: (ids, next)."""
        page = ctypes.c_void_p()
        after_b = None if after is None else _text(after, "after")
        self._call(self._lib.convo_thread_list, after_b, size, ctypes.byref(page))
        try:
            ids = [lib.convo_thread_page_id(page, i).decode("utf-8")
                   for i in range(lib.convo_thread_page_count(page))]
            nxt = lib.convo_thread_page_next(page)
            return ids, None if nxt is None else nxt.decode("utf-8")
        finally:
            lib.convo_thread_page_free(page)

    def iter_threads(self, after=None, page_size=1000):
        """Yields every thread id in byte order, strictly after `after`,
        fetching page_size ids (1..10000) per call."""
        _int(page_size, "page_size", 1)
        while True:
            ids, after = self._page(after, page_size)
            yield from ids
            if after is None:
                return

    def thread_ids(self, after=None, limit=None):
        """Thread ids in byte order strictly after `after`, as a list: all of
        them when limit is None (every page is fetched), else at most limit
        (convo_thread_list: every driver, also one without the thread index)."""
        if limit is None:
            return list(self.iter_threads(after))
        out = []
        remaining = _int(limit, "limit", 0)
        while remaining > 0:
            ids, after = self._page(after, min(remaining, 10000))
            out += ids
            remaining -= len(ids)
            if after is None:
                break
        return out

    # ---- maintenance and measuring ----

    def sweep(self):
        """Removes the threads whose ttl (the URL's ttl=S) has passed and
        returns their number (0 where the server expires data itself)."""
        removed = ctypes.c_uint64()
        self._call(self._lib.convo_sweep, ctypes.byref(removed))
        return removed.value

    def stored_bytes(self):
        """Bytes the backend uses for this store's data (docs/performance.md)."""
        size = ctypes.c_int64()
        self._call(self._lib.convo_store_bytes, ctypes.byref(size))
        return size.value

    def bench_raw(self, payload, n):
        """Runs the backend's own raw write primitive n times on payload
        (bytes) and returns the seconds taken (convo bench's baseline);
        NotSupportedError where no raw primitive applies (memory:)."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise invalid("payload must be bytes, not %s" % type(payload).__name__)
        payload = bytes(payload)
        seconds = ctypes.c_double()
        self._call(self._lib.convo_bench_raw, payload, len(payload), _int(n, "n", 0),
                   ctypes.byref(seconds))
        return seconds.value


__all__ = ["Store", "AppendResult", "Message", "History", "RewriteResult", "ThreadInfo", "ThreadPage"]
